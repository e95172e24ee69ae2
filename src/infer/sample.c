#include "infer/sample.h"

#include <math.h>
#include <stdio.h>
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

/* ids [V], prob [V] (the sort keys until the sort is done), and the radix
 * sort's second buffers for ids and keys [V] each */
size_t sample_scratch_bytes(int V) { return (size_t)V * 2 * (sizeof(int32_t) + sizeof(float)); }

static int32_t argmax(const float *x, int V)
{
    int32_t best = 0;
    for (int i = 1; i < V; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* A logit as an unsigned key whose ascending order is the logits'
 * descending order; -0 and +0 are one key (they compare equal). */
static uint32_t desc_key(float f)
{
    uint32_t u;
    if (f == 0.0f) f = 0.0f;
    memcpy(&u, &f, sizeof u);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);   /* ascending with f */
    return ~u;
}

/* ids[0..V) = 0..V-1 sorted by logit descending, ties by id ascending (a
 * total order, so the result never depends on the algorithm): a stable
 * LSD radix sort, 4 passes of 8 bits, over ids that start in ascending
 * order. O(V) — a comparison sort of the vocabulary per token cost as much
 * as a small model's whole decode step, once per sequence of a batch. */
static void sort_desc(int32_t *ids, uint32_t *key, int32_t *ids2, uint32_t *key2, const float *logits, int V)
{
    for (int i = 0; i < V; i++) {
        ids[i] = i;
        key[i] = desc_key(logits[i]);
    }
    for (int shift = 0; shift < 32; shift += 8) {
        size_t cnt[257] = {0};
        for (int i = 0; i < V; i++) cnt[((key[i] >> shift) & 0xFF) + 1]++;
        if (cnt[((key[0] >> shift) & 0xFF) + 1] == (size_t)V) continue;   /* one bucket: order unchanged */
        for (int b = 0; b < 256; b++) cnt[b + 1] += cnt[b];
        for (int i = 0; i < V; i++) {
            size_t at = cnt[(key[i] >> shift) & 0xFF]++;
            ids2[at] = ids[i];
            key2[at] = key[i];
        }
        memcpy(ids, ids2, (size_t)V * sizeof *ids);
        memcpy(key, key2, (size_t)V * sizeof *key);
    }
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
    if ((p->top_k <= 0 || p->top_k >= V) && p->top_p >= 1.0f && p->min_p <= 0.0f) {
        /* nothing filtered: the draw walks the vocabulary in id order (as
         * HF's multinomial does) and needs no sort — the radix sort was 8%
         * of a batched server step (bench/RESULTS.md, 2026-12-02) */
        for (int i = 0; i < V; i++) ids[i] = i;
    } else {
        sort_desc(ids, (uint32_t *)prob, ids + 2 * V, (uint32_t *)(ids + 3 * V), logits, V);
        if (p->top_k > 0 && p->top_k < n) n = p->top_k;
    }
    float top = logits[ids[0]];   /* the largest logit: ids[0] once sorted */
    for (int i = 1; i < n; i++)
        if (logits[ids[i]] > top) top = logits[ids[i]];
    double mx = top, sum = 0;
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
    int32_t last = ids[0];
    for (int i = 0; i < n; i++) {   /* a token of probability 0 is never drawn */
        if (prob[i] <= 0.f) continue;
        acc += prob[i];
        last = ids[i];
        if (u < acc) return ids[i];
    }
    return last;
}

int sample_check(const char *name, double v, char *why, size_t cap)
{
    static const struct {
        const char *name, *range;
        double lo, hi;
        int lo_open, integer;
    } K[] = {
        {"temperature", "[0, 5] (0 = greedy)", 0, SAMPLE_TEMP_MAX, 0, 0},
        {"top_p", "(0, 1] (1 = off)", 0, 1, 1, 0},
        {"top_k", "0 or more, an integer (0 = off)", 0, 1e9, 0, 1},
        {"min_p", "[0, 1] (0 = off)", 0, 1, 0, 0},
        {"repetition_penalty", "(0, 100] (1 = off)", 0, 100, 1, 0},
    };
    for (size_t i = 0; i < sizeof K / sizeof K[0]; i++) {
        if (strcmp(name, K[i].name)) continue;
        int ok = v == v && (K[i].lo_open ? v > K[i].lo : v >= K[i].lo) && v <= K[i].hi &&
                 (!K[i].integer || v == (double)(long long)v);
        if (ok) return 0;
        snprintf(why, cap, "%s must be %s%s, got %g", name, K[i].integer ? "" : "in ", K[i].range, v);
        return -1;
    }
    snprintf(why, cap, "unknown sampling parameter '%s'", name);
    return -1;
}
