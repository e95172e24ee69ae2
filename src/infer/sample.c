#include "infer/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/rng.h"

void sample_defaults(sample_params *p)
{
    p->temp = 0.7f;
    p->top_k = 0;
    p->top_p = 1.0f;
    p->min_p = 0.0f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->seed = 42;
}

size_t sample_scratch_bytes(int V) { return (size_t)V * (sizeof(int32_t) + sizeof(float)); }

static int32_t argmax(const float *x, int V)
{
    int32_t best = 0;
    for (int i = 1; i < V; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Sort ids by logit descending; ties by id ascending (a total order, so the
 * result never depends on the sort algorithm). */
static int cmp_desc(const void *a, const void *b, void *keys)
{
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    const float *k = keys;
    float x = k[i], y = k[j];
    if (x > y) return -1;
    if (x < y) return 1;
    return (i > j) - (i < j);
}

int32_t sample_next(const sample_params *p, float *logits, int V, const int32_t *history, int n_hist,
                    uint64_t step, void *scratch)
{
    if (p->repeat_penalty != 1.0f && n_hist > 0) {
        int from = (p->repeat_last_n > 0 && n_hist > p->repeat_last_n) ? n_hist - p->repeat_last_n : 0;
        /* Each distinct token is penalised once, as HF does (gather/scatter). */
        for (int i = from; i < n_hist; i++) {
            int32_t t = history[i];
            if (t < 0 || t >= V) continue;
            int seen = 0;
            for (int j = from; j < i; j++)
                if (history[j] == t) { seen = 1; break; }
            if (seen) continue;
            logits[t] = logits[t] > 0 ? logits[t] / p->repeat_penalty : logits[t] * p->repeat_penalty;
        }
    }
    if (p->temp <= 0.0f) return argmax(logits, V);

    int32_t *ids = scratch;
    float *prob = (float *)(ids + V);
    for (int i = 0; i < V; i++) logits[i] /= p->temp;
    int n = V;
    for (int i = 0; i < V; i++) ids[i] = i;
    /* Partial work only when a cutoff needs order; a full sort of 150k ids
     * per token is affordable next to the forward pass. */
    qsort_r(ids, (size_t)V, sizeof *ids, cmp_desc, logits);
    if (p->top_k > 0 && p->top_k < n) n = p->top_k;
    double mx = logits[ids[0]], sum = 0;
    for (int i = 0; i < n; i++) {
        prob[i] = (float)exp((double)logits[ids[i]] - mx);
        sum += prob[i];
    }
    for (int i = 0; i < n; i++) prob[i] = (float)(prob[i] / sum);
    if (p->top_p < 1.0f) {
        double cum = 0;
        int keep = n;
        for (int i = 0; i < n; i++) {
            cum += prob[i];
            if (cum >= p->top_p) { keep = i + 1; break; }
        }
        n = keep;
    }
    if (p->min_p > 0.0f) {
        float thr = prob[0] * p->min_p;
        int keep = 1;
        while (keep < n && prob[keep] >= thr) keep++;
        n = keep;
    }
    double tot = 0;
    for (int i = 0; i < n; i++) tot += prob[i];
    double u = rng_uniform_d(p->seed, RNG_SAMPLE, step, 0) * tot, acc = 0;
    for (int i = 0; i < n; i++) {
        acc += prob[i];
        if (u < acc) return ids[i];
    }
    return ids[n - 1];
}
