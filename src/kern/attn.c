/* attn — causal GQA attention forward and backward, tiled (flash-attention
 * style, see isa_attn.inc): no Tq×Tk matrix exists, only BQ×BK tiles in
 * each thread's scratch.
 *
 * Units and determinism:
 *   forward and dQ: one unit per (b, head, query block) — each writes its
 *     own output rows, summing over key blocks in order;
 *   dK, dV: one unit per (b, kv head, key block) — each writes its own key
 *     rows, summing over the group's query heads and query blocks in order.
 * Units are handed out dynamically (costs differ a lot under the causal
 * mask) but no unit's result depends on which thread ran it. */
#include "kern/kern_impl.h"

#include <math.h>
#include <string.h>

size_t attn_unit_scratch_floats(int HSP)
{
    return (size_t)4 * HSP * ATTN_BK + (size_t)3 * ATTN_BQ * HSP + (size_t)2 * ATTN_BQ * ATTN_BK +
           (size_t)4 * ATTN_BQ;
}

static int round_up(int x, int m) { return (x + m - 1) / m * m; }

/* Fills J from s; returns 0 if the shape is usable. */
static int job_init(attn_job *J, const attn_shape *s)
{
    memset(J, 0, sizeof *J);
    J->s = *s;
    if (s->B <= 0 || s->Tq <= 0 || s->Tk <= 0 || s->NH <= 0 || s->KVH <= 0 || s->HS <= 0) return -1;
    if (s->NH % s->KVH || s->HS > KERN_ATTN_MAX_HS || s->q_off < 0) return -1;
    if (s->q_off + s->Tq > s->Tk) return -1;     /* a query must be able to see its own key */
    J->HSP = round_up(s->HS, 16);
    J->scale = (float)(1.0 / sqrt((double)s->HS));
    J->nqb = (s->Tq + ATTN_BQ - 1) / ATTN_BQ;
    J->nkb = (s->Tk + ATTN_BK - 1) / ATTN_BK;
    if (attn_unit_scratch_floats(J->HSP) * sizeof(float) > KERN_SCRATCH_BYTES) return -1;
    return 0;
}

size_t kern_attn_scratch(const attn_shape *s)
{
    (void)s;
    return 16;      /* the forward needs none; a non-zero size keeps callers' allocations simple */
}

/* Visible key blocks per query block (causal, before segments) and their
 * running offsets: off[qb] tiles before query block qb, off[nqb] per head.
 * Returns the tile count per head, or -1 if the table does not fit cap. */
static int64_t ds_layout(const attn_shape *s, int32_t *off, int cap)
{
    int nqb = (s->Tq + ATTN_BQ - 1) / ATTN_BQ, nkb = (s->Tk + ATTN_BK - 1) / ATTN_BK;
    if (nqb + 1 > cap) return -1;
    int64_t t = 0;
    for (int qb = 0; qb < nqb; qb++) {
        off[qb] = (int32_t)t;
        int last = s->q_off + qb * ATTN_BQ + (s->Tq - qb * ATTN_BQ < ATTN_BQ ? s->Tq - qb * ATTN_BQ : ATTN_BQ) - 1;
        if (last > s->Tk - 1) last = s->Tk - 1;
        int cnt = last / ATTN_BK + 1;
        t += cnt < nkb ? cnt : nkb;
    }
    off[nqb] = (int32_t)t;
    return t;
}

int kern_attn_ds_off, kern_attn_dec_off;

#define DS_OFF_CAP 1025     /* query blocks whose dS tiles can be kept (Tq <= 32768) */

/* Floats the dS tiles of shape s would take (1e30 when the offsets table
 * cannot hold its query blocks). Grows with B, Tq and Tk. */
static double ds_need(const attn_shape *s)
{
    if (s->B <= 0 || s->NH <= 0 || s->Tq <= 0 || s->Tk <= 0 || s->q_off < 0) return 0;
    static _Thread_local int32_t off[DS_OFF_CAP];
    int64_t per = ds_layout(s, off, DS_OFF_CAP);
    if (per < 0) return 1e30;
    return (double)s->B * s->NH * (double)per * ATTN_BQ * ATTN_BK;
}

/* Floats of the dS store used for shape s, 0 when it would exceed
 * ATTN_DS_MAX_FLOATS (the dQ pass then recomputes dS). */
static size_t ds_floats(const attn_shape *s)
{
    double f = ds_need(s);
    return f > (double)ATTN_DS_MAX_FLOATS ? 0 : (size_t)f;
}

/* Floats of the backward's packed bf16 operands (attn_job.qb ... kz),
 * kept in its scratch whatever the mode (kern_set_bf16 may be turned on
 * after the caller sized it); monotone in B, Tq and Tk. */
static size_t bf16_floats(const attn_shape *s)
{
    if (s->B <= 0 || s->NH <= 0 || s->KVH <= 0 || s->Tq <= 0 || s->Tk <= 0 || s->HS <= 0) return 0;
    size_t HSP = (size_t)round_up(s->HS, 16), B = (size_t)s->B;
    size_t q = B * s->NH * ((size_t)s->Tq * HSP / 2 + (size_t)(s->Tq + 1) / 2 * HSP);
    return 2 * q + B * s->KVH * (size_t)(s->Tk + 1) / 2 * HSP;
}

static size_t ds_capped(const attn_shape *s)
{
    double f = ds_need(s);
    return f > (double)ATTN_DS_MAX_FLOATS ? ATTN_DS_MAX_FLOATS : (size_t)f;
}

/* Callers size the scratch once for their largest shape and then run
 * smaller ones (a short last batch): a smaller shape may keep its tiles
 * where the largest could not, so the reservation is the capped need, not
 * ds_floats() — monotone in B, Tq and Tk. */
size_t kern_attn_bwd_scratch(const attn_shape *s)
{
    size_t d = (size_t)(s->B > 0 ? s->B : 0) * (size_t)(s->NH > 0 ? s->NH : 0) * (size_t)(s->Tq > 0 ? s->Tq : 0);
    return d + 16 + ds_capped(s) + (size_t)DS_OFF_CAP + bf16_floats(s) + 16;
}

const attn_bf16_ops *kern_attn_bf16_ops;

/* The bf16 products under kern_set_bf16 (VDPBF16PS where the back end is
 * avx512bf16, or amx: those CPUs have AVX512_BF16); NULL: the f32 units
 * (precision fp32, the fma back end, amx-model). */
static const attn_bf16_ops *bf16_ops(void)
{
    if (!kern_bf16_active()) return NULL;
    if (kern_attn_bf16_ops) return kern_attn_bf16_ops;
#if defined(__x86_64__)
    kern_bf16_be be = kern_bf16_backend();
    if ((be == KERN_BF16_AVX512BF16 || be == KERN_BF16_AMX) && kern_bf16_available(KERN_BF16_AVX512BF16))
        return &attn_bf16_ops_avx512bf16;
#endif
    return NULL;
}

static void run_fwd(void *ctx, int64_t b, int64_t e)
{
    for (int64_t u = b; u < e; u++) kern_isa_get()->attn_fwd_unit(ctx, u);
}

static void run_dec(void *ctx, int64_t b, int64_t e)
{
    for (int64_t u = b; u < e; u++) kern_isa_get()->attn_dec_unit(ctx, u);
}

static void run_bwd_kv(void *ctx, int64_t b, int64_t e)
{
    for (int64_t u = b; u < e; u++) kern_isa_get()->attn_bwd_kv_unit(ctx, u);
}

static void run_bwd_q(void *ctx, int64_t b, int64_t e)
{
    for (int64_t u = b; u < e; u++) kern_isa_get()->attn_bwd_q_unit(ctx, u);
}

static void run_fwd_bf16(void *ctx, int64_t b, int64_t e)
{
    for (int64_t u = b; u < e; u++) kern_isa_get()->attn_fwd_bf16_unit(ctx, u);
}

static void run_bwd_kv_bf16(void *ctx, int64_t b, int64_t e)
{
    for (int64_t u = b; u < e; u++) kern_isa_get()->attn_bwd_kv_bf16_unit(ctx, u);
}

static void run_bwd_q_bf16(void *ctx, int64_t b, int64_t e)
{
    for (int64_t u = b; u < e; u++) kern_isa_get()->attn_bwd_q_bf16_unit(ctx, u);
}

/* The backward's bf16 operands (attn_job.qb ... kz): units of two query
 * rows of one (b, h), then two key rows of one (b, kv head). */
static void pack_q_rows(void *ctx, int64_t r0, int64_t r1)
{
    const attn_job *J = ctx;
    const attn_shape *s = &J->s;
    const int HS = s->HS, HSP = J->HSP, HP2 = HSP / 2, NH = s->NH;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t bh = r / J->tq2, b = bh / NH, h = bh % NH, i = 2 * (r % J->tq2);
        const int two = i + 1 < s->Tq;
        const float *q0 = J->q + ((b * s->Tq + i) * NH + h) * HS, *o0 = J->dout + ((b * s->Tq + i) * NH + h) * HS;
        const int64_t st = (int64_t)NH * HS;
        uint32_t *qb = (uint32_t *)J->qb + (bh * s->Tq + i) * HP2, *ob = (uint32_t *)J->ob + (bh * s->Tq + i) * HP2;
        J->bf->rows(qb, q0, HS, HP2, J->scale);
        J->bf->rows(ob, o0, HS, HP2, 1.f);
        if (two) {
            J->bf->rows(qb + HP2, q0 + st, HS, HP2, J->scale);
            J->bf->rows(ob + HP2, o0 + st, HS, HP2, 1.f);
        }
        J->bf->zip((uint32_t *)J->qz + r * HSP, q0, two ? q0 + st : NULL, HS, HSP, J->scale);
        J->bf->zip((uint32_t *)J->oz + r * HSP, o0, two ? o0 + st : NULL, HS, HSP, 1.f);
    }
}

static void pack_k_rows(void *ctx, int64_t r0, int64_t r1)
{
    const attn_job *J = ctx;
    const attn_shape *s = &J->s;
    const int HS = s->HS, KVH = s->KVH;
    for (int64_t r = r0; r < r1; r++) {
        const int64_t bg = r / J->tk2, b = bg / KVH, g = bg % KVH, t = 2 * (r % J->tk2);
        const float *k0 = J->k + b * s->kv_bstride + (t * KVH + g) * HS;
        J->bf->zip((uint32_t *)J->kz + r * J->HSP, k0, t + 1 < s->Tk ? k0 + (int64_t)KVH * HS : NULL, HS, J->HSP, 1.f);
    }
}

void kern_attn_fwd(float *out, float *lse, const float *q, const float *k, const float *v,
                   const attn_shape *s, float *scratch)
{
    (void)scratch;
    attn_job J;
    if (job_init(&J, s)) {
        /* unusable shape (documented limits): zeros rather than garbage */
        if (s->B > 0 && s->Tq > 0 && s->NH > 0 && s->HS > 0)
            memset(out, 0, (size_t)s->B * s->Tq * s->NH * s->HS * sizeof(float));
        return;
    }
    if (s->softcap > 0 || s->scale > 0) {   /* gemma2 */
        kern_attn_cap_fwd(out, lse, q, k, v, s);
        return;
    }
    J.out = out;
    J.lse = lse;
    J.q = q;
    J.k = k;
    J.v = v;
    /* Decoding (a few queries per head): put the query heads of one kv head
     * side by side in the lanes of one unit instead of one lane per unit. */
    J.grouped = (int64_t)(s->NH / s->KVH) * s->Tq <= ATTN_BQ;
    kern_ensure_init();
    /* bf16 (training): the 32-query units whatever the shape, so that a
     * short sequence's forward rounds as its backward does */
    if ((J.bf = bf16_ops())) {
        kern_parallel_dyn((int64_t)s->B * s->KVH * J.nqb, run_fwd_bf16, &J);
        return;
    }
    /* a decode step (a few lanes per kv head): vectorised over keys */
    if (J.grouped && (int64_t)(s->NH / s->KVH) * s->Tq <= 8 && !kern_attn_dec_off &&
        (size_t)(s->HS * ATTN_BK + 8 * J.HSP + ATTN_BK + 8 * J.HSP) * sizeof(float) <= KERN_SCRATCH_BYTES)
        kern_parallel_dyn((int64_t)s->B * s->KVH, run_dec, &J);
    else
        kern_parallel_dyn(J.grouped ? (int64_t)s->B * s->KVH : (int64_t)s->B * s->NH * J.nqb, run_fwd, &J);
}

typedef struct dsum_job {
    float *D;
    const float *dout, *out;
    int NH, HS, Tq;
} dsum_job;

/* D[b,h,i] = Σ_d dout·out (double accumulate), rows (b,i) split. */
static void dsum_rows(void *ctx, int64_t r0, int64_t r1)
{
    const dsum_job *j = ctx;
    for (int64_t r = r0; r < r1; r++) {
        int64_t b = r / j->Tq, i = r % j->Tq;
        for (int h = 0; h < j->NH; h++) {
            const float *a = j->dout + (r * j->NH + h) * j->HS, *o = j->out + (r * j->NH + h) * j->HS;
            double acc = 0;
            for (int d = 0; d < j->HS; d++) acc += (double)a[d] * o[d];
            j->D[(b * j->NH + h) * j->Tq + i] = (float)acc;
        }
    }
}

void kern_attn_bwd(float *dq, float *dk, float *dv, const float *dout, const float *out,
                   const float *lse, const float *q, const float *k, const float *v,
                   const attn_shape *s, float *scratch)
{
    attn_job J;
    if (job_init(&J, s)) return;
    if (s->softcap > 0 || s->scale > 0) {   /* gemma2 */
        kern_attn_cap_bwd(dq, dk, dv, dout, out, lse, q, k, v, s);
        return;
    }
    kern_ensure_init();
    dsum_job dj = {scratch, dout, out, s->NH, s->HS, s->Tq};
    kern_parallel_for((int64_t)s->B * s->Tq, dsum_rows, &dj);
    J.dq = dq;
    J.dk = dk;
    J.dv = dv;
    J.dout = dout;
    J.D = scratch;
    /* after D: the dS offsets table and the tiles (when they fit) */
    size_t nd = (size_t)s->B * s->NH * s->Tq + 16, nds = ds_floats(s);
    /* bf16 tiles take half the floats: they fit the reservation
     * (ds_capped) up to twice ATTN_DS_MAX_FLOATS of f32 tiles */
    const attn_bf16_ops *bf = bf16_ops();
    const double need = ds_need(s);
    const int bf_tiles = bf && need <= 2.0 * (double)ATTN_DS_MAX_FLOATS;
    /* the tiles are laid out for the causal mask (and the caller's scratch
     * sized so): a prefix-LM block recomputes dS in the dQ pass */
    if ((nds || bf_tiles) && !kern_attn_ds_off && !s->prefix) {
        int32_t *off = (int32_t *)(scratch + nd);
        J.ds_per_head = ds_layout(s, off, DS_OFF_CAP);
        J.ds_off = off;
        J.ds_tiles = scratch + nd + DS_OFF_CAP;
    }
    J.lse = (float *)lse;
    J.q = q;
    J.k = k;
    J.v = v;
    /* bf16: the dQ pass reads the kept tiles (recomputing them stays f32) */
    if (J.ds_tiles && bf_tiles) {
        J.bf = bf;
        const int HP2 = J.HSP / 2;
        J.tq2 = (s->Tq + 1) / 2;
        J.tk2 = (s->Tk + 1) / 2;
        float *p = scratch + nd + DS_OFF_CAP + ds_capped(s);
        const size_t nrow = (size_t)s->B * s->NH * s->Tq * HP2, nzip = (size_t)s->B * s->NH * J.tq2 * J.HSP;
        J.qb = (const uint32_t *)p;
        J.ob = J.qb + nrow;
        J.qz = J.ob + nrow;
        J.oz = J.qz + nzip;
        J.kz = J.oz + nzip;
        kern_parallel_for((int64_t)s->B * s->NH * J.tq2, pack_q_rows, &J);
        kern_parallel_for((int64_t)s->B * s->KVH * J.tk2, pack_k_rows, &J);
        kern_parallel_dyn((int64_t)s->B * s->KVH * J.nkb, run_bwd_kv_bf16, &J);
        kern_parallel_dyn((int64_t)s->B * s->NH * J.nqb, run_bwd_q_bf16, &J);
        return;
    }
    kern_parallel_dyn((int64_t)s->B * s->KVH * J.nkb, run_bwd_kv, &J);
    kern_parallel_dyn((int64_t)s->B * s->NH * J.nqb, run_bwd_q, &J);
}
