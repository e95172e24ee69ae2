/* attn_bf16_cases — checks of the bf16 attention products shared by
 * test_attn_bf16.c (native VDPBF16PS) and emu_attn.c (the same source
 * compiled against SIMDe): a set of ops against the plain-loop twins
 * (attn_dp_ref, attn_bf16_rows_ref, attn_bf16_zip_ref, bf16_model.h's
 * lanes) bit for bit, and whole attention runs whose bits must not depend
 * on which set of ops ran the products. */
#ifndef DLM_ATTN_BF16_CASES_H
#define DLM_ATTN_BF16_CASES_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kern/kern.h"
#include "kern/kern_impl.h"
#include "kern_test_util.h"

static const attn_bf16_ops abc_ref_ops = {attn_dp_ref, attn_bf16_rows_ref, attn_bf16_zip_ref};

/* bf16 bits with awkward values mixed in: subnormals (DAZ), zeros of both
 * signs, large and tiny magnitudes (FTZ of results). */
static uint32_t abc_pair(trng *r)
{
    uint32_t w = 0;
    for (int h = 0; h < 2; h++) {
        float v = trng_normal(r);
        uint64_t k = trng_u64(r) % 24;
        if (k == 0) v *= 0x1p-126f;         /* subnormal once rounded */
        else if (k == 1) v = h ? -0.f : 0.f;
        else if (k == 2) v *= 0x1p-63f;
        else if (k == 3) v *= 0x1p60f;
        w |= (uint32_t)f32_to_bf16(v) << (16 * h);
    }
    return w;
}

/* The micro-kernel over shapes and strides as the units call it (rows
 * broadcast along p or along o, ncols 16..128, odd np, accumulate or not)
 * against attn_dp_ref. Returns the number of mismatching cases. */
static int abc_check_dp(const attn_bf16_ops *ops, trng *r)
{
    static const int shapes[][4] = {/* nout, ncols, np, transposed A */
                                    {64, 32, 32, 0}, {37, 32, 9, 0}, {32, 64, 32, 1}, {7, 64, 20, 1},
                                    {64, 64, 16, 1}, {13, 48, 5, 0}, {9, 16, 3, 1},  {32, 128, 64, 0},
                                    {1, 80, 1, 0},   {30, 64, 32, 0}, {8, 32, 40, 1}};
    int bad = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int nout = shapes[si][0], ncols = shapes[si][1], np = shapes[si][2], tr = shapes[si][3];
        const int64_t ldo = ncols + 16, ldb = ncols + 32, ao = tr ? 1 : np + 3, ap = tr ? nout + 5 : 1;
        size_t na = (size_t)(tr ? (np - 1) * ap + nout : (nout - 1) * ao + np) + 1;
        uint32_t *A = xmalloc(na * 4), *B = xmalloc((size_t)np * ldb * 4);
        float *o1 = xmalloc((size_t)nout * ldo * 4), *o2 = xmalloc((size_t)nout * ldo * 4);
        for (size_t i = 0; i < na; i++) A[i] = abc_pair(r);
        for (size_t i = 0; i < (size_t)np * ldb; i++) B[i] = abc_pair(r);
        for (int acc = 0; acc < 2; acc++) {
            for (size_t i = 0; i < (size_t)nout * ldo; i++) {
                float v = trng_normal(r);
                if (i % 11 == 0) v *= 0x1p-130f;    /* a subnormal accumulator (DAZ) */
                o1[i] = o2[i] = v;
            }
            ops->dp(o1, ldo, A, ao, ap, B, ldb, np, nout, ncols, acc);
            attn_dp_ref(o2, ldo, A, ao, ap, B, ldb, np, nout, ncols, acc);
            if (memcmp(o1, o2, (size_t)nout * ldo * 4)) {
                fprintf(stderr, "attn_dp mismatch: nout %d ncols %d np %d tr %d acc %d\n", nout, ncols, np, tr, acc);
                bad++;
            }
        }
        free(A); free(B); free(o1); free(o2);
    }
    return bad;
}

/* The packers against their twins on rounding ties, carries, Inf, NaN,
 * subnormals, with a multiplier, for lengths below and above a vector. */
static int abc_check_pack(const attn_bf16_ops *ops, trng *r)
{
    enum { N = 150 };
    float a[N], b[N];
    const uint32_t odd[] = {0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x7f800000u, 0xff800001u,
                            0x7fc00001u, 0x00000001u, 0x80008000u, 0x3f7fffffu, 0x00ff8000u};
    for (int i = 0; i < N; i++) {
        uint32_t u = i % 3 == 0 ? odd[(i / 3) % 10] : (uint32_t)trng_u64(r);
        memcpy(&a[i], &u, 4);
        b[i] = trng_normal(r);
    }
    static const int lens[] = {1, 2, 15, 16, 17, 31, 32, 33, 64, 65, 101, 150};
    static const float muls[] = {1.f, 0.125f, 0.1767767f};
    int bad = 0;
    for (int li = 0; li < 12; li++)
        for (int mi = 0; mi < 3; mi++) {
            const int n = lens[li];
            const float mul = muls[mi];
            uint32_t g[N + 40], w[N + 40];
            const int np = (n + 1) / 2 + (li % 3) * 5;
            memset(g, 0xab, sizeof g);
            memset(w, 0xab, sizeof w);
            ops->rows(g, a, n, np, mul);
            attn_bf16_rows_ref(w, a, n, np, mul);
            bad += memcmp(g, w, sizeof g) != 0;
            const int npad = n + (li % 2) * 16;
            ops->zip(g, a, b, n, npad, mul);
            attn_bf16_zip_ref(w, a, b, n, npad, mul);
            bad += memcmp(g, w, sizeof g) != 0;
            ops->zip(g, b, NULL, n, npad, mul);
            attn_bf16_zip_ref(w, b, NULL, n, npad, mul);
            bad += memcmp(g, w, sizeof g) != 0;
        }
    return bad;
}

/* Shapes of the whole-attention runs: partial query and key blocks, odd
 * Tq and Tk (a pair's high half empty), GQA, q_off, segments, a window,
 * HS not a multiple of 16 (and odd). */
typedef struct abc_case {
    int B, Tq, Tk, NH, KVH, HS, q_off, window, segs;   /* segs: segment length of row 0 (0: none) */
} abc_case;
static const abc_case abc_cases[] = {
    {2, 100, 100, 4, 2, 64, 0, 0, 0},
    {1, 37, 150, 6, 2, 40, 113, 0, 0},
    {2, 75, 75, 2, 1, 17, 0, 0, 23},
    {1, 130, 130, 3, 3, 32, 0, 50, 0},
    {2, 12, 12, 4, 2, 16, 0, 0, 6},
    {1, 1, 70, 4, 2, 32, 69, 0, 0},     /* a decode-sized step (the f32 forward groups it) */
};

typedef struct abc_run {
    float *out, *lse, *dq, *dk, *dv;
} abc_run;

static void abc_free(abc_run *x)
{
    free(x->out); free(x->lse); free(x->dq); free(x->dk); free(x->dv);
}

static attn_shape abc_shape(const abc_case *c, int32_t *seg)
{
    attn_shape s;
    memset(&s, 0, sizeof s);
    s.B = c->B; s.Tq = c->Tq; s.Tk = c->Tk; s.NH = c->NH; s.KVH = c->KVH; s.HS = c->HS;
    s.q_off = c->q_off;
    s.kv_bstride = (int64_t)c->Tk * c->KVH * c->HS;
    s.window = c->window;
    if (c->segs) {
        for (int b = 0; b < c->B; b++)
            for (int j = 0; j < c->Tk; j++) seg[b * c->Tk + j] = j / (c->segs + 7 * b);
        s.seg = seg;
    }
    return s;
}

/* Case c's inputs drawn from seed (q, k, v and the output gradient R):
 * abc_attn and abc_vs_model must see the same ones. */
static void abc_inputs(const abc_case *c, uint64_t seed, int32_t *seg, attn_shape *s, size_t *nq, size_t *nkv,
                       float **q, float **k, float **v, float **R)
{
    trng r = {seed};
    *s = abc_shape(c, seg);
    *nq = (size_t)s->B * s->Tq * s->NH * s->HS;
    *nkv = (size_t)s->B * s->kv_bstride;
    *q = xmalloc(*nq * 4), *k = xmalloc(*nkv * 4), *v = xmalloc(*nkv * 4), *R = xmalloc(*nq * 4);
    fill_normal(&r, *q, *nq, 1.5f);
    fill_normal(&r, *k, *nkv, 1.5f);
    fill_normal(&r, *v, *nkv, 1.f);
    fill_normal(&r, *R, *nq, 1.f);
}

/* Forward and backward of case c under kern_set_bf16 with the products on
 * ops (NULL: the back end's), from inputs drawn with seed. */
static abc_run abc_attn(const abc_case *c, const attn_bf16_ops *ops, int bf16, uint64_t seed, abc_run *in_out)
{
    int32_t seg[2 * 200];
    attn_shape s;
    size_t nq, nkv;
    float *q, *k, *v, *R;
    abc_inputs(c, seed, seg, &s, &nq, &nkv, &q, &k, &v, &R);
    abc_run x = {xmalloc(nq * 4), xmalloc((size_t)s.B * s.NH * s.Tq * 4), xmalloc(nq * 4), xmalloc(nkv * 4),
                 xmalloc(nkv * 4)};
    float *scr = xmalloc(kern_attn_bwd_scratch(&s) * 4);
    kern_set_bf16(bf16);
    kern_attn_bf16_ops = ops;
    kern_attn_fwd(x.out, x.lse, q, k, v, &s, scr);
    kern_attn_bwd(x.dq, x.dk, x.dv, R, x.out, x.lse, q, k, v, &s, scr);
    kern_attn_bf16_ops = NULL;
    kern_set_bf16(0);
    if (in_out) {   /* the f64 reference of the same inputs */
        in_out->out = xmalloc(nq * 4);
        in_out->lse = xmalloc((size_t)s.B * s.NH * s.Tq * 4);
        in_out->dq = xmalloc(nq * 4);
        in_out->dk = xmalloc(nkv * 4);
        in_out->dv = xmalloc(nkv * 4);
        kern_attn_fwd_ref(in_out->out, in_out->lse, q, k, v, &s);
        kern_attn_bwd_ref(in_out->dq, in_out->dk, in_out->dv, R, q, k, v, &s);
    }
    free(q); free(k); free(v); free(R); free(scr);
    return x;
}

static int abc_same(const abc_case *c, const abc_run *a, const abc_run *b)
{
    size_t nq = (size_t)c->B * c->Tq * c->NH * c->HS, nkv = (size_t)c->B * c->Tk * c->KVH * c->HS;
    return !memcmp(a->out, b->out, nq * 4) && !memcmp(a->lse, b->lse, (size_t)c->B * c->NH * c->Tq * 4) &&
           !memcmp(a->dq, b->dq, nq * 4) && !memcmp(a->dk, b->dk, nkv * 4) && !memcmp(a->dv, b->dv, nkv * 4);
}

/* Whole runs with ops against runs with the twins: the same bits. */
static int abc_check_attn(const attn_bf16_ops *ops)
{
    int bad = 0;
    for (size_t ci = 0; ci < sizeof abc_cases / sizeof abc_cases[0]; ci++) {
        abc_run a = abc_attn(&abc_cases[ci], ops, 1, 77 + ci, NULL);
        abc_run b = abc_attn(&abc_cases[ci], &abc_ref_ops, 1, 77 + ci, NULL);
        if (!abc_same(&abc_cases[ci], &a, &b)) {
            fprintf(stderr, "bf16 attention case %zu: ops and twins differ\n", ci);
            bad++;
        }
        abc_free(&a);
        abc_free(&b);
    }
    return bad;
}

#endif

/* ---- the rounding points, written out ------------------------------------------
 * The bf16 attention's semantics in double, independent of the kernels'
 * layout (docs/kernels.md "bf16 attention"): S = rb(q/√HS)·rb(k), P =
 * exp(S − max) rounded for P·v then divided by the row sum; backward with
 * f32-valued P = exp(S − lse), dP = rb(dO)·rb(v), dS = P(dP − D), dQ =
 * rb(dS)·rb(k)/√HS, dK = rb(dS)ᵀ·rb(q/√HS), dV = rb(P)ᵀ·rb(dO). No GQA
 * sums in a different order, no masks beyond causal+segments+window. */
static inline double abc_rb(double x) { return bf16_to_f32(f32_to_bf16((float)x)); }

static inline int abc_visible(const attn_shape *s, int b, int i, int j)
{
    int pos = s->q_off + i;
    if (j > pos) return 0;
    if (s->seg && s->seg[b * s->Tk + j] != s->seg[b * s->Tk + pos]) return 0;
    if (s->window && pos - j >= s->window) return 0;
    return 1;
}

static inline void abc_model(const attn_shape *s, const float *q, const float *k, const float *v, const float *R, double *out,
                      double *dq, double *dk, double *dv)
{
    const int HS = s->HS, NH = s->NH, KVH = s->KVH, rep = NH / KVH;
    const float scale = (float)(1.0 / sqrt((double)HS));
    double *S = calloc((size_t)s->Tk, 8), *P = calloc((size_t)s->Tk, 8), *dS = calloc((size_t)s->Tk, 8);
    memset(dk, 0, (size_t)s->B * s->kv_bstride * 8);
    memset(dv, 0, (size_t)s->B * s->kv_bstride * 8);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < s->Tq; i++) {
                const int g = h / rep;
                const float *qi = q + (((size_t)b * s->Tq + i) * NH + h) * HS;
                const float *ri = R + (((size_t)b * s->Tq + i) * NH + h) * HS;
                double *oi = out + (((size_t)b * s->Tq + i) * NH + h) * HS;
                double *dqi = dq + (((size_t)b * s->Tq + i) * NH + h) * HS;
                double mx = -INFINITY, l = 0;
                for (int j = 0; j < s->Tk; j++) {
                    const float *kj = k + (size_t)b * s->kv_bstride + ((size_t)j * KVH + g) * HS;
                    double acc = 0;
                    for (int d = 0; d < HS; d++) acc += abc_rb(qi[d] * scale) * abc_rb(kj[d]);
                    S[j] = abc_visible(s, b, i, j) ? acc : -INFINITY;
                    if (S[j] > mx) mx = S[j];
                }
                for (int j = 0; j < s->Tk; j++) {
                    P[j] = exp(S[j] - mx);
                    l += P[j];
                }
                double D = 0;
                for (int d = 0; d < HS; d++) {
                    double acc = 0;
                    for (int j = 0; j < s->Tk; j++)
                        acc += abc_rb(P[j]) * abc_rb(v[(size_t)b * s->kv_bstride + ((size_t)j * KVH + g) * HS + d]);
                    oi[d] = acc / l;
                    D += (double)ri[d] * (float)oi[d];
                }
                for (int j = 0; j < s->Tk; j++) {
                    const float *vj = v + (size_t)b * s->kv_bstride + ((size_t)j * KVH + g) * HS;
                    double dp = 0;
                    for (int d = 0; d < HS; d++) dp += abc_rb(ri[d]) * abc_rb(vj[d]);
                    P[j] /= l;
                    dS[j] = P[j] * (dp - D);
                }
                for (int d = 0; d < HS; d++) {
                    double acc = 0;
                    for (int j = 0; j < s->Tk; j++)
                        acc += abc_rb(dS[j]) * abc_rb(k[(size_t)b * s->kv_bstride + ((size_t)j * KVH + g) * HS + d]);
                    dqi[d] = acc * scale;
                }
                for (int j = 0; j < s->Tk; j++) {
                    size_t off = (size_t)b * s->kv_bstride + ((size_t)j * KVH + g) * HS;
                    for (int d = 0; d < HS; d++) {
                        dk[off + d] += abc_rb(dS[j]) * abc_rb(qi[d] * scale);
                        dv[off + d] += abc_rb(P[j]) * abc_rb(ri[d]);
                    }
                }
            }
    free(S); free(P); free(dS);
}

/* relative norm error of got against want */
static inline double abc_nerr(const float *got, const double *want, size_t n)
{
    double nd = 0, nw = 0;
    for (size_t i = 0; i < n; i++) {
        nd += (got[i] - want[i]) * (got[i] - want[i]);
        nw += want[i] * want[i];
    }
    return sqrt(nd / (nw + 1e-300));
}

/* Case c under ops against the model: relative norm errors of out, dq,
 * dk, dv into e[4]. */
static inline void abc_vs_model(const abc_case *c, const attn_bf16_ops *ops, uint64_t seed, double e[4])
{
    abc_run x = abc_attn(c, ops, 1, seed, NULL);
    int32_t seg[2 * 200];
    attn_shape s;
    size_t nq, nkv;
    float *q, *k, *v, *R;
    abc_inputs(c, seed, seg, &s, &nq, &nkv, &q, &k, &v, &R);
    double *o = xmalloc(nq * 8), *dq = xmalloc(nq * 8), *dk = xmalloc(nkv * 8), *dv = xmalloc(nkv * 8);
    abc_model(&s, q, k, v, R, o, dq, dk, dv);
    e[0] = abc_nerr(x.out, o, nq);
    e[1] = abc_nerr(x.dq, dq, nq);
    e[2] = abc_nerr(x.dk, dk, nkv);
    e[3] = abc_nerr(x.dv, dv, nkv);
    free(q); free(k); free(v); free(R); free(o); free(dq); free(dk); free(dv);
    abc_free(&x);
}
