/* Sampling: greedy, temperature, top-k, top-p, min-p, repetition penalty,
 * and the seeded draw's distribution. */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "infer/sample.h"

static int32_t pick(const sample_params *p, const float *src, int V, const int32_t *h, int nh, uint64_t step)
{
    float lg[16];
    static char scratch[16 * 8];
    memcpy(lg, src, (size_t)V * sizeof(float));
    return sample_next(p, lg, V, h, nh, step, scratch);
}

int main(void)
{
    const float L[6] = {1.0f, 3.0f, 3.0f, 0.5f, -2.0f, 2.9f};
    sample_params p;
    sample_defaults(&p);
    p.temp = 0;
    CHECK_INT(pick(&p, L, 6, NULL, 0, 0), 1);              /* argmax, first of a tie */
    p.temp = 1.0f;
    p.top_k = 1;
    for (int s = 0; s < 20; s++) CHECK_INT(pick(&p, L, 6, NULL, 0, (uint64_t)s), 1);
    p.top_k = 0;
    p.top_p = 0.1f;                                        /* nucleus of one token */
    for (int s = 0; s < 20; s++) CHECK_INT(pick(&p, L, 6, NULL, 0, (uint64_t)s), 1);
    p.top_p = 1.0f;
    p.min_p = 0.5f;                                        /* keeps p >= 0.5·p_max: ids 1, 2, 5 */
    for (int s = 0; s < 200; s++) {
        int32_t t = pick(&p, L, 6, NULL, 0, (uint64_t)s);
        CHECK(t == 1 || t == 2 || t == 5);
    }
    p.min_p = 0;
    /* repetition penalty 2 on token 1 (positive logit: divided) → 1.5 < 2.9 */
    int32_t hist[2] = {1, 1};
    p.temp = 0;
    p.repeat_penalty = 2.0f;
    CHECK_INT(pick(&p, L, 6, hist, 2, 0), 2);
    int32_t hist2[2] = {1, 2};
    CHECK_INT(pick(&p, L, 6, hist2, 2, 0), 5);
    /* a negative logit is multiplied: -2 → -4, still last */
    p.repeat_penalty = 1.0f;
    /* the seeded draw: same (seed, step) → same token; frequencies follow softmax */
    p.temp = 1.0f;
    p.seed = 7;
    CHECK_INT(pick(&p, L, 6, NULL, 0, 42), pick(&p, L, 6, NULL, 0, 42));
    int cnt[6] = {0};
    const int N = 20000;
    for (int s = 0; s < N; s++) cnt[pick(&p, L, 6, NULL, 0, (uint64_t)s)]++;
    double z = 0;
    for (int i = 0; i < 6; i++) z += exp(L[i]);
    for (int i = 0; i < 6; i++) {
        double want = exp(L[i]) / z * N;
        CHECK_MSG(fabs(cnt[i] - want) < 5 * sqrt(want) + 5, "token %d drawn %d times, expected %.0f", i, cnt[i], want);
    }
    /* temperature 0.5 sharpens: token 4 (logit -2) all but vanishes */
    p.temp = 0.5f;
    int low = 0;
    for (int s = 0; s < 2000; s++) low += pick(&p, L, 6, NULL, 0, (uint64_t)s) == 4;
    CHECK(low < 3);
    return check_done();
}
