/* Sampling: greedy, temperature, top-k, top-p, min-p, repetition penalty,
 * and the seeded draw's distribution. */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "infer/sample.h"
#include "util/rng.h"

/* The draw as the spec orders it, with a comparison sort: ids by logit
 * descending, ties by id ascending; softmax over the top_k in double; walk
 * the cumulative sum to the seeded uniform. sample_next (radix sort) must
 * pick the same token. */
static const float *g_keys;
static int cmp_ref(const void *a, const void *b)
{
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    float x = g_keys[i], y = g_keys[j];
    if (x > y) return -1;
    if (x < y) return 1;
    return (i > j) - (i < j);
}

static int32_t ref_pick(const sample_params *p, const float *src, int V, uint64_t step)
{
    float *lg = malloc((size_t)V * sizeof *lg), *prob = malloc((size_t)V * sizeof *prob);
    int32_t *ids = malloc((size_t)V * sizeof *ids);
    for (int i = 0; i < V; i++) {
        lg[i] = src[i] / p->temp;
        ids[i] = i;
    }
    g_keys = lg;
    qsort(ids, (size_t)V, sizeof *ids, cmp_ref);
    int n = p->top_k > 0 && p->top_k < V ? p->top_k : V;
    if (n == V && p->top_p >= 1.0f && p->min_p <= 0.0f)    /* nothing filtered: id order, as HF's multinomial */
        for (int i = 0; i < V; i++) ids[i] = i;
    double mx = lg[ids[0]], sum = 0;
    for (int i = 0; i < n; i++) sum += prob[i] = (float)exp((double)lg[ids[i]] - mx);
    double tot = 0;
    for (int i = 0; i < n; i++) tot += prob[i] = (float)(prob[i] / sum);
    if (p->top_p < 1.0f) {   /* the nucleus: the fewest top tokens whose mass reaches top_p */
        double cum = 0;
        for (int i = 0; i < n; i++)
            if ((cum += prob[i]) >= p->top_p) { n = i + 1; break; }
    }
    if (p->min_p > 0.0f) {
        int keep = 1;
        while (keep < n && prob[keep] >= prob[0] * p->min_p) keep++;
        n = keep;
    }
    tot = 0;
    for (int i = 0; i < n; i++) tot += prob[i];
    double u = rng_uniform_d(p->seed, RNG_SAMPLE, step, 0) * tot, acc = 0;
    int32_t r = ids[n - 1];
    for (int i = 0; i < n; i++) {
        if (prob[i] <= 0.f) continue;
        r = ids[i];
        if (u < (acc += prob[i])) break;
    }
    free(lg);
    free(prob);
    free(ids);
    return r;
}

static int32_t pick(const sample_params *p, const float *src, int V, const int32_t *h, int nh, uint64_t step)
{
    float lg[16];
    static char scratch[16 * 16];   /* sample_scratch_bytes(16) */
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

    /* a vocabulary with many ties, both zeros, and flat and peaked regions:
     * the sampler's order (radix sort) is the comparison sort's */
    enum { BV = 5003 };
    float *big = malloc(BV * sizeof *big);
    char *bs = malloc(sample_scratch_bytes(BV));
    float *work = malloc(BV * sizeof *work);
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < BV; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int r = (int)(x % 1000);
        big[i] = r < 300 ? (float)(r % 7) - 3.0f : r < 320 ? (r % 2 ? -0.0f : 0.0f) : r < 330 ? -1e30f
                 : (float)((double)(x >> 11) / 9007199254740992.0 * 8.0 - 4.0);
    }
    int bad = 0;
    for (int t = 0; t < 4; t++) {   /* nothing filtered (id order), top_p, top_k, min_p (sorted) */
        sample_params q;
        sample_defaults(&q);
        q.temp = t == 0 ? 1.0f : t == 1 ? 0.3f : t == 2 ? 0.8f : 1.2f;
        q.top_k = t == 2 ? 40 : 0;
        q.top_p = t == 1 ? 0.9f : 1.0f;
        q.min_p = t == 3 ? 0.05f : 0.0f;
        q.seed = 5 + (uint64_t)t;
        for (uint64_t st = 0; st < 300; st++) {
            memcpy(work, big, BV * sizeof *work);
            bad += sample_next(&q, work, BV, NULL, 0, st, bs) != ref_pick(&q, big, BV, st);
        }
    }
    CHECK_MSG(bad == 0, "%d of 1200 draws differ from the comparison-sort reference", bad);
    free(big);
    free(bs);
    free(work);
    return check_done();
}
