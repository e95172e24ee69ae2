/* attn_cap — causal GQA attention with Gemma 2's soft-capped scores (or
 * PaliGemma's bidirectional prefix)
 * (Gemma2Attention: scores = cap·tanh(scale·q·kᵀ / cap) before the mask and
 * the softmax) and a query scale other than 1/√HS. Plain loops over one
 * query row at a time: the capped score is a function of the raw score, so
 * the tiled kernels' online softmax would need a tanh per tile element in
 * every ISA variant; gemma2 is the one architecture that asks for it.
 *
 * The same masks as kern_attn_fwd (causal from q_off, segments, sliding
 * window), plus attn_shape.prefix. Determinism: the forward and dq take one unit per (b, head) and
 * write only that head's rows; dk, dv take one unit per (b, kv head) and
 * sum over the group's query heads and the queries in a fixed order. This
 * file is its own plain-loop reference (kern_ref.c has no twin to keep). */
#include "kern/kern_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct cap_job {
    const attn_shape *s;
    float scale, cap;
    float *out, *lse, *dq, *dk, *dv;
    const float *q, *k, *v, *dout, *o_fwd, *lse_in;
} cap_job;

static const float *qrow(const attn_shape *s, const float *q, int b, int i, int h)
{
    return q + (((size_t)b * s->Tq + i) * s->NH + h) * s->HS;
}

static const float *krow(const attn_shape *s, const float *k, int b, int j, int kh)
{
    return k + (size_t)b * s->kv_bstride + ((size_t)j * s->KVH + kh) * s->HS;
}

/* The last key query position pos may see: itself, or the prefix's last
 * key while pos is inside the prefix (PaliGemma's prefix-LM). */
static int last_key(const attn_shape *s, int b, int pos)
{
    int last = pos;
    if (s->prefix && pos < s->prefix[b]) last = s->prefix[b] - 1;
    return last < s->Tk - 1 ? last : s->Tk - 1;
}

static int visible(const attn_shape *s, int b, int pos, int j)
{
    if (j > last_key(s, b, pos)) return 0;
    if (s->window && pos - j >= s->window) return 0;
    if (s->seg && s->seg[(size_t)b * s->Tk + j] != s->seg[(size_t)b * s->Tk + pos]) return 0;
    return 1;
}

/* sc[j] = capped score of query (b, i, h) against key j, for j <= its
 * last key (masked: -inf); returns the row maximum. */
static float scores(const cap_job *J, int b, int i, int h, float *sc)
{
    const attn_shape *s = J->s;
    int pos = s->q_off + i, kh = h / (s->NH / s->KVH);
    const float *q = qrow(s, J->q, b, i, h);
    float mx = -INFINITY;
    for (int j = 0, last = last_key(s, b, pos); j <= last; j++) {
        if (!visible(s, b, pos, j)) { sc[j] = -INFINITY; continue; }
        const float *k = krow(s, J->k, b, j, kh);
        float d = 0;
        for (int c = 0; c < s->HS; c++) d += q[c] * k[c];
        d *= J->scale;
        if (J->cap > 0) d = J->cap * tanhf(d / J->cap);
        sc[j] = d;
        if (d > mx) mx = d;
    }
    return mx;
}

static void fwd_units(void *ctx, int64_t u0, int64_t u1)
{
    const cap_job *J = ctx;
    const attn_shape *s = J->s;
    float *sc = malloc((size_t)s->Tk * sizeof *sc);
    if (!sc) return;
    for (int64_t u = u0; u < u1; u++) {
        int b = (int)(u / s->NH), h = (int)(u % s->NH), kh = h / (s->NH / s->KVH);
        for (int i = 0; i < s->Tq; i++) {
            int pos = s->q_off + i;
            float mx = scores(J, b, i, h, sc);
            float *o = (float *)qrow(s, J->out, b, i, h);
            memset(o, 0, (size_t)s->HS * sizeof *o);
            double l = 0;
            for (int j = 0, last = last_key(s, b, pos); j <= last; j++) {
                if (sc[j] == -INFINITY) continue;
                float p = expf(sc[j] - mx);
                l += p;
                const float *v = krow(s, J->v, b, j, kh);
                for (int c = 0; c < s->HS; c++) o[c] += p * v[c];
            }
            float inv = l > 0 ? (float)(1.0 / l) : 0.f;
            for (int c = 0; c < s->HS; c++) o[c] *= inv;
            if (J->lse) J->lse[((size_t)b * s->NH + h) * s->Tq + i] = l > 0 ? mx + (float)log(l) : -INFINITY;
        }
    }
    free(sc);
}

/* dS_raw[j] (into sc) of query (b, i, h): P∘(dO·v − D) through the cap's
 * derivative 1 − tanh², times the query scale. */
static void dscores(const cap_job *J, int b, int i, int h, float *sc)
{
    const attn_shape *s = J->s;
    int pos = s->q_off + i, kh = h / (s->NH / s->KVH);
    scores(J, b, i, h, sc);
    const float *dO = qrow(s, J->dout, b, i, h), *O = qrow(s, J->o_fwd, b, i, h);
    float D = 0, lse = J->lse_in[((size_t)b * s->NH + h) * s->Tq + i];
    for (int c = 0; c < s->HS; c++) D += dO[c] * O[c];
    for (int j = 0, last = last_key(s, b, pos); j <= last; j++) {
        if (sc[j] == -INFINITY) { sc[j] = 0; continue; }
        float p = expf(sc[j] - lse);
        const float *v = krow(s, J->v, b, j, kh);
        float dp = 0;
        for (int c = 0; c < s->HS; c++) dp += dO[c] * v[c];
        float t = J->cap > 0 ? sc[j] / J->cap : 0.f;
        sc[j] = p * (dp - D) * (1.f - t * t) * J->scale;
    }
}

static void dq_units(void *ctx, int64_t u0, int64_t u1)
{
    const cap_job *J = ctx;
    const attn_shape *s = J->s;
    float *sc = malloc((size_t)s->Tk * sizeof *sc);
    if (!sc) return;
    for (int64_t u = u0; u < u1; u++) {
        int b = (int)(u / s->NH), h = (int)(u % s->NH), kh = h / (s->NH / s->KVH);
        for (int i = 0; i < s->Tq; i++) {
            dscores(J, b, i, h, sc);
            float *dq = (float *)qrow(s, J->dq, b, i, h);
            memset(dq, 0, (size_t)s->HS * sizeof *dq);
            for (int j = 0, last = last_key(s, b, s->q_off + i); j <= last; j++) {
                if (sc[j] == 0) continue;
                const float *k = krow(s, J->k, b, j, kh);
                for (int c = 0; c < s->HS; c++) dq[c] += sc[j] * k[c];
            }
        }
    }
    free(sc);
}

static void dkv_units(void *ctx, int64_t u0, int64_t u1)
{
    const cap_job *J = ctx;
    const attn_shape *s = J->s;
    int G = s->NH / s->KVH;
    float *sc = malloc((size_t)s->Tk * sizeof *sc);
    if (!sc) return;
    for (int64_t u = u0; u < u1; u++) {
        int b = (int)(u / s->KVH), kh = (int)(u % s->KVH);
        for (int j = 0; j < s->Tk; j++) {
            memset((float *)krow(s, J->dk, b, j, kh), 0, (size_t)s->HS * sizeof(float));
            memset((float *)krow(s, J->dv, b, j, kh), 0, (size_t)s->HS * sizeof(float));
        }
        for (int h = kh * G; h < (kh + 1) * G; h++)
            for (int i = 0; i < s->Tq; i++) {
                int pos = s->q_off + i;
                float mx = scores(J, b, i, h, sc);
                (void)mx;
                float lse = J->lse_in[((size_t)b * s->NH + h) * s->Tq + i];
                const float *dO = qrow(s, J->dout, b, i, h), *q = qrow(s, J->q, b, i, h);
                int last = last_key(s, b, pos);
                for (int j = 0; j <= last; j++) {   /* dv += P·dO */
                    if (sc[j] == -INFINITY) continue;
                    float p = expf(sc[j] - lse);
                    float *dv = (float *)krow(s, J->dv, b, j, kh);
                    for (int c = 0; c < s->HS; c++) dv[c] += p * dO[c];
                }
                dscores(J, b, i, h, sc);
                for (int j = 0; j <= last; j++) {   /* dk += dS·q */
                    if (sc[j] == 0) continue;
                    float *dk = (float *)krow(s, J->dk, b, j, kh);
                    for (int c = 0; c < s->HS; c++) dk[c] += sc[j] * q[c];
                }
            }
    }
    free(sc);
}

static float cap_scale(const attn_shape *s)
{
    return s->scale > 0 ? s->scale : (float)(1.0 / sqrt((double)s->HS));
}

void kern_attn_cap_fwd(float *out, float *lse, const float *q, const float *k, const float *v, const attn_shape *s)
{
    cap_job J = {.s = s, .scale = cap_scale(s), .cap = s->softcap, .out = out, .lse = lse, .q = q, .k = k, .v = v};
    kern_ensure_init();
    kern_parallel_dyn((int64_t)s->B * s->NH, fwd_units, &J);
}

void kern_attn_cap_bwd(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                       const float *q, const float *k, const float *v, const attn_shape *s)
{
    cap_job J = {.s = s, .scale = cap_scale(s), .cap = s->softcap, .dq = dq, .dk = dk, .dv = dv, .q = q, .k = k,
                 .v = v, .dout = dout, .o_fwd = out, .lse_in = lse};
    kern_ensure_init();
    kern_parallel_dyn((int64_t)s->B * s->NH, dq_units, &J);
    kern_parallel_dyn((int64_t)s->B * s->KVH, dkv_units, &J);
}
