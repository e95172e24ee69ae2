/* fb — training forward/backward. See fb.h for the contract.
 *
 * Shapes (N = B·T rows, C model dim, Q = NH·HS, K = KVH·HS, F ffn dim,
 * V vocab, r LoRA rank). Per layer the forward is, as in HF's LlamaDecoderLayer:
 *
 *   xn1 = rmsnorm(x) ; q,k,v = lin(xn1) ; rope(q,k) ; att = attn(q,k,v)
 *   h   = x + lin_o(att)
 *   xn2 = rmsnorm(h) ; g,u = lin(xn2) ; act = silu(g)·u
 *   x'  = h + lin_down(act)
 *
 * and the backward walks it in reverse. With recompute on, only the layer
 * inputs X[l] are kept and each layer's forward is re-run (bit-identically:
 * same kernels, same inputs, same dropout draws) just before its backward. */
#include "decoder/fb.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"
#include "util/rng.h"

/* Opt-in per-phase timing for bench/train (compile fb.c with -DFB_PROFILE;
 * fb_profile_dump prints seconds per phase). Off in every normal build. */
#ifdef FB_PROFILE
#include <stdio.h>
#include <time.h>
#define PROF_MAX 64
static double prof_clock(void)   /* process CPU time: robust against a loaded machine */
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static const char *prof_name[PROF_MAX];
static double prof_t[PROF_MAX];
static long prof_n[PROF_MAX];
static int prof_slot(const char *name)
{
    int i = 0;
    while (i < PROF_MAX && prof_name[i] && prof_name[i] != name) i++;
    if (i == PROF_MAX) return PROF_MAX - 1;
    prof_name[i] = name;
    return i;
}
#define PROF(name, stmt) do { double t_ = prof_clock(); stmt; int s_ = prof_slot(name); \
                              prof_t[s_] += prof_clock() - t_; prof_n[s_]++; } while (0)
void fb_profile_dump(double steps);
void fb_profile_dump(double steps)
{
    double tot = 0;
    for (int i = 0; i < PROF_MAX && prof_name[i]; i++) tot += prof_t[i];
    for (int i = 0; i < PROF_MAX && prof_name[i]; i++)
        fprintf(stderr, "PROF %-22s %8.1f ms/step %5.1f%%  (%ld calls)\n", prof_name[i],
                1e3 * prof_t[i] / steps, 100 * prof_t[i] / tot, prof_n[i]);
    fprintf(stderr, "PROF %-22s %8.1f ms/step\n", "total", 1e3 * tot / steps);
}
#else
#define PROF(name, stmt) stmt
#endif

/* What a layer keeps for its backward. The normalised inputs xn1, xn2 and
 * act = silu(g)·u are not kept: the backward recomputes them (same bits)
 * from x, h, the saved rstd and g, u — a cheap pass instead of 2·C + F
 * floats per token per layer. */
typedef struct layer_acts {
    float *rstd1;             /* [N] */
    float *q, *k, *v;         /* [N,Q] [N,K] [N,K]  (q, k after RoPE) */
    float *att, *lse;         /* [N,Q] [B,NH,T] */
    float *h, *rstd2;         /* [N,C] [N] */
    float *g, *u;             /* [N,F] ×2 */
    float *U[LM_COUNT];       /* [N,r] LoRA x·Aᵀ per targeted module */
    uint8_t *keep[LM_COUNT];  /* [N·I bits] LoRA dropout masks (dropout > 0) */
} layer_acts;

struct fb_ctx {
    const model *m;
    const lora *l;
    fb_opts o;
    int N, C, Q, K, F, V, R, maxI, maxO;
    float *X;                 /* [(L+1), N, C] residual stream */
    layer_acts *acts;         /* [n_acts] */
    int n_acts;
    float *rstdf, *xnf;       /* [N] [N,C] */
    float *xn, *act;          /* [N,C] [N,F]: a layer's normalised input, silu(g)·u */
    float *rope_cs, *rope_sn; /* [N, HS/2]: RoPE cos/sin of this batch's positions */
    float *logits;            /* [chunk, V] (full mode) */
    float *head_scratch;      /* kern_head_xent scratch (LoRA mode: fused head) */
    float *xsel, *dsel;       /* [sel, C] */
    int32_t *rows, *tsel;     /* [N] rows with a target, [sel] their targets */
    float *nsel;              /* [sel] */
    int chunk, sel;           /* logits rows per chunk; rows selected at once */
    /* backward */
    float *dres, *dxn, *tmpC, *datt, *dq, *dk, *dv, *dact, *dg, *du;
    float *tmpI, *tmpO, *tmpO2, *dU, *xd;
    float *attn_scratch;
    /* DoRA per (layer, module): g = mag/‖W+sBA‖ and the norm, [out] each */
    float *dora_g, *dora_norm, *dora_scratch;
    size_t *dora_off;         /* [L*LM_COUNT] */
    void *slab;
    size_t slab_bytes;
};

/* ---- buffer carving: one pass sizes, the second points ---------------- */

typedef struct carver { char *base; size_t off; } carver;

static void *carve(carver *cv, size_t bytes)
{
    size_t at = (cv->off + 63) & ~(size_t)63;
    cv->off = at + bytes;
    return cv->base ? cv->base + at : NULL;
}
#define CARVE_F(cv, n) ((float *)carve((cv), (size_t)(n) * sizeof(float)))

static int lora_rank(const lora_config *lc) { return lc ? lc->rank : 0; }

static void dims(const model_config *c, int *Q, int *K, int *maxI, int *maxO)
{
    *Q = c->n_head * c->head_dim;
    *K = c->n_kv_head * c->head_dim;
    int mi = c->d_model;
    if (*Q > mi) mi = *Q;
    if (c->n_ff > mi) mi = c->n_ff;
    *maxI = mi;
    int mo = mi; /* outputs: Q, K, C, F — same set */
    *maxO = mo;
}

static int auto_chunk(const model_config *c, int N)
{
    /* Keep the logits tile near 16 MiB: big enough for an efficient GEMM,
     * small enough that a 150k vocabulary does not need N×V floats. */
    int rows = (int)((16u << 20) / ((size_t)c->vocab * sizeof(float)));
    if (rows < 8) rows = 8;
    if (rows > N) rows = N;
    return rows;
}

/* marks (optional) get the carver's offset at the end of each group:
 * [0] what the forward keeps (residual stream, layers), [1] norm and RoPE
 * working rows, [2] LM head, [3] backward buffers, [4] attention scratch;
 * LoRA/DoRA backward buffers follow. */
static void carve_all(fb_ctx *f, carver *cv, const model_config *c, const lora_config *lc, size_t marks[5])
{
    int N = f->N, C = f->C, Q = f->Q, K = f->K, F = f->F, r = lora_rank(lc);
    int B = f->o.B, T = f->o.T, L = c->n_layer;
    attn_shape as = {B, T, T, c->n_head, c->n_kv_head, c->head_dim, 0, (int64_t)T * K, NULL};
    f->X = CARVE_F(cv, (size_t)(L + 1) * N * C);
    for (int a = 0; a < f->n_acts; a++) {
        layer_acts *A = f->acts ? &f->acts[a] : &(layer_acts){0};
        A->rstd1 = CARVE_F(cv, N);
        A->q = CARVE_F(cv, (size_t)N * Q);
        A->k = CARVE_F(cv, (size_t)N * K);
        A->v = CARVE_F(cv, (size_t)N * K);
        A->att = CARVE_F(cv, (size_t)N * Q);
        A->lse = CARVE_F(cv, (size_t)B * c->n_head * T);
        A->h = CARVE_F(cv, (size_t)N * C);
        A->rstd2 = CARVE_F(cv, N);
        A->g = CARVE_F(cv, (size_t)N * F);
        A->u = CARVE_F(cv, (size_t)N * F);
        for (int m = 0; m < LM_COUNT; m++) {
            int on = lc && (lc->targets >> m & 1);
            A->U[m] = on ? CARVE_F(cv, (size_t)N * r) : NULL;
            int in = 0, out = 0;
            if (on && lc->dropout > 0) lora_module_dims(c, m, &in, &out);
            A->keep[m] = in ? (uint8_t *)carve(cv, ((size_t)N * in + 7) / 8) : NULL;
        }
    }
    if (marks) marks[0] = cv->off;
    f->rstdf = CARVE_F(cv, N);
    f->xnf = CARVE_F(cv, (size_t)N * C);
    f->xn = CARVE_F(cv, (size_t)N * C);
    f->act = CARVE_F(cv, (size_t)N * F);
    f->rope_cs = CARVE_F(cv, (size_t)N * (c->head_dim / 2));
    f->rope_sn = CARVE_F(cv, (size_t)N * (c->head_dim / 2));
    if (marks) marks[1] = cv->off;
    /* LoRA / plain forward: the fused head (no logits buffer, all rows at
     * once); full mode needs the logits for the output-weight gradient. */
    if (f->o.full) f->logits = CARVE_F(cv, (size_t)f->chunk * f->V);
    else f->head_scratch = CARVE_F(cv, kern_head_xent_scratch(N, C));
    f->xsel = CARVE_F(cv, (size_t)f->sel * C);
    f->dsel = CARVE_F(cv, (size_t)f->sel * C);
    f->nsel = CARVE_F(cv, f->sel);
    f->rows = (int32_t *)carve(cv, (size_t)N * sizeof(int32_t));
    f->tsel = (int32_t *)carve(cv, (size_t)f->sel * sizeof(int32_t));
    if (marks) marks[2] = cv->off;
    f->dres = CARVE_F(cv, (size_t)N * C);
    f->dxn = CARVE_F(cv, (size_t)N * C);
    f->tmpC = CARVE_F(cv, (size_t)N * C);
    f->datt = CARVE_F(cv, (size_t)N * Q);
    f->dq = CARVE_F(cv, (size_t)N * Q);
    f->dk = CARVE_F(cv, (size_t)N * K);
    f->dv = CARVE_F(cv, (size_t)N * K);
    f->dact = CARVE_F(cv, (size_t)N * F);
    f->dg = CARVE_F(cv, (size_t)N * F);
    f->du = CARVE_F(cv, (size_t)N * F);
    if (marks) marks[3] = cv->off;
    size_t sc = kern_attn_scratch(&as), sb = kern_attn_bwd_scratch(&as);
    f->attn_scratch = CARVE_F(cv, sc > sb ? sc : sb);
    if (marks) marks[4] = cv->off;
    if (lc) {
        f->tmpI = CARVE_F(cv, (size_t)N * f->maxI);
        f->xd = lc->dropout > 0 ? CARVE_F(cv, (size_t)N * f->maxI) : NULL;
        f->dU = CARVE_F(cv, (size_t)N * r);
        if (lc->dora) {
            f->tmpO = CARVE_F(cv, (size_t)N * f->maxO);
            f->tmpO2 = CARVE_F(cv, (size_t)N * f->maxO);
            size_t tot = 0;
            for (int layer = 0; layer < L; layer++)
                for (int m = 0; m < LM_COUNT; m++)
                    if (lc->targets >> m & 1) {
                        int in, out;
                        lora_module_dims(c, m, &in, &out);
                        if (f->dora_off) f->dora_off[layer * LM_COUNT + m] = tot;
                        tot += (size_t)out;
                    }
            f->dora_g = CARVE_F(cv, tot);
            f->dora_norm = CARVE_F(cv, tot);
            f->dora_scratch = CARVE_F(cv, (size_t)f->maxI + (size_t)r);
        }
    }
}

static void init_dims(fb_ctx *f, const model_config *c, const lora_config *lc, const fb_opts *o)
{
    f->o = *o;
    f->N = o->B * o->T;
    f->C = c->d_model;
    f->F = c->n_ff;
    f->V = c->vocab;
    f->R = lora_rank(lc);
    dims(c, &f->Q, &f->K, &f->maxI, &f->maxO);
    f->n_acts = o->recompute ? 1 : c->n_layer;
    f->chunk = o->logit_rows > 0 ? (o->logit_rows < f->N ? o->logit_rows : f->N) : auto_chunk(c, f->N);
    f->sel = o->full ? f->chunk : f->N;
}

size_t fb_plan_parts(const model_config *c, const lora_config *lc, const fb_opts *o, fb_parts *parts)
{
    fb_ctx f;
    memset(&f, 0, sizeof f);
    init_dims(&f, c, lc, o);
    carver cv = {NULL, 0};
    size_t mk[5];
    carve_all(&f, &cv, c, lc, mk);
    size_t bytes = cv.off + 64;
    bytes += (size_t)f.n_acts * sizeof(layer_acts);
    if (lc && lc->dora) bytes += (size_t)c->n_layer * LM_COUNT * sizeof(size_t);
    if (parts) {
        parts->head = mk[2] - mk[1];
        parts->attn = mk[4] - mk[3];
        parts->bwd = (mk[1] - mk[0]) + (mk[3] - mk[2]) + (cv.off - mk[4]);
        parts->acts = bytes - parts->head - parts->attn - parts->bwd;
    }
    return bytes;
}

size_t fb_plan_bytes(const model_config *c, const lora_config *lc, const fb_opts *o)
{
    return fb_plan_parts(c, lc, o, NULL);
}

int fb_create(const model *m, const lora *l, const fb_opts *o, fb_ctx **out, dlm_err *e)
{
    *out = NULL;
    const model_config *c = &m->cfg;
    const lora_config *lc = l ? &l->cfg : NULL;
    if (o->B < 1 || o->T < 1) return err_set(e, "TrainError", "bad micro-batch shape %dx%d", o->B, o->T);
    if (o->full) {
        /* Full training writes the weights: every matrix must be plain f32. */
        if (m->tok_embd.type != DT_F32 || m->output.type != DT_F32)
            return err_set(e, "TrainError", "full-parameter training needs f32 weights");
        for (int i = 0; i < c->n_layer; i++) {
            const layer_weights *w = &m->layers[i];
            const wmat *ws[] = {&w->wq, &w->wk, &w->wv, &w->wo, &w->w_gate, &w->w_up, &w->w_down};
            for (int j = 0; j < 7; j++)
                if (ws[j]->type != DT_F32)
                    return err_set(e, "TrainError", "full-parameter training needs f32 weights");
        }
    }
    fb_ctx *f = calloc(1, sizeof *f);
    if (!f) return err_set(e, "MemoryError", "out of memory");
    f->m = m;
    f->l = l;
    init_dims(f, c, lc, o);
    f->acts = calloc((size_t)f->n_acts, sizeof *f->acts);
    if (lc && lc->dora) f->dora_off = calloc((size_t)c->n_layer * LM_COUNT, sizeof(size_t));
    carver cv = {NULL, 0};
    carve_all(f, &cv, c, lc, NULL);
    f->slab_bytes = cv.off + 64;
    f->slab = aligned_alloc(64, (f->slab_bytes + 63) & ~(size_t)63);
    if (!f->acts || !f->slab || (lc && lc->dora && !f->dora_off)) {
        size_t need = f->slab_bytes;
        fb_free(f);
        return err_set(e, "OOMError", "cannot allocate %zu MiB of activations", need >> 20);
    }
    /* Touch every page now, once: first-touch faults are expensive on this
     * kind of VM and must not land inside the step loop. */
    memset(f->slab, 0, f->slab_bytes);
    cv.base = f->slab;
    cv.off = 0;
    carve_all(f, &cv, c, lc, NULL);
    *out = f;
    return 0;
}

void fb_free(fb_ctx *f)
{
    if (!f) return;
    free(f->acts);
    free(f->dora_off);
    free(f->slab);
    free(f);
}

/* ---- full-parameter layout -------------------------------------------- */

size_t fb_full_carve(const model_config *c, float *slab, fb_full_grads *g)
{
    size_t off = 0, C = (size_t)c->d_model, V = (size_t)c->vocab, F = (size_t)c->n_ff;
    size_t Q = (size_t)c->n_head * c->head_dim, K = (size_t)c->n_kv_head * c->head_dim;
#define TAKE(dst, n) do { if (g) (dst) = slab ? slab + off : NULL; off += (n); } while (0)
    TAKE(g->tok_embd, V * C);
    for (int l = 0; l < c->n_layer; l++) {
        fb_layer_grads *lg = g ? &g->layers[l] : NULL;
        TAKE(lg->attn_norm, C);
        TAKE(lg->wq, Q * C);
        if (c->qkv_bias) TAKE(lg->bq, Q);
        TAKE(lg->wk, K * C);
        if (c->qkv_bias) TAKE(lg->bk, K);
        TAKE(lg->wv, K * C);
        if (c->qkv_bias) TAKE(lg->bv, K);
        TAKE(lg->wo, C * Q);
        TAKE(lg->ffn_norm, C);
        TAKE(lg->w_gate, F * C);
        TAKE(lg->w_up, F * C);
        TAKE(lg->w_down, C * F);
    }
    TAKE(g->out_norm, C);
    if (!c->tied) TAKE(g->output, V * C);
    else if (g) g->output = NULL;
#undef TAKE
    return off;
}

/* ---- helpers ------------------------------------------------------------ */

/* dst[N,I] = src ⊙ mask / (1−p); the mask, a pure function of (seed, key,
 * i), is drawn once in the forward (kern_dropout_mask) and kept as bits
 * for the backward. */
static void dropout_apply(float *dst, const float *src, int64_t n, float p, const uint8_t *keep)
{
    kern_dropout_apply(dst, src, keep, n, 1.0f / (1.0f - p));
}

static uint64_t dkey(uint64_t micro_step, int layer, int m)
{
    return micro_step * 8192u + (uint64_t)layer * 8u + (uint64_t)m;
}

static const float *mod_bias(const layer_weights *w, int m)
{
    return m == LM_Q ? w->bq : m == LM_K ? w->bk : m == LM_V ? w->bv : NULL;
}

typedef struct step_ctx {
    int train;              /* dropout on */
    uint64_t seed, micro;
} step_ctx;

/* y[N,O] (+)= x[N,I]·Wᵀ + b, plus the adapter of (layer, m) if any; acc
 * adds onto y (a residual stream; O = C then). */
static void lin_fwd(fb_ctx *f, const step_ctx *sc, layer_acts *A, int layer, int m,
                    const float *x, float *y, int N, int acc)
{
    const wmat *W = lora_base_weight(f->m, layer, m);
    const float *bias = mod_bias(&f->m->layers[layer], m);
    const lora_mod *md = f->l ? lora_mod_at(f->l, layer, m) : NULL;
    if (acc && md && f->l->cfg.dora) {      /* DoRA reads the bare product back: go through tmpC */
        lin_fwd(f, sc, A, layer, m, x, f->tmpC, N, 0);
        for (size_t i = 0; i < (size_t)N * W->rows; i++) y[i] += f->tmpC[i];
        return;
    }
    if (!md || f->l->cfg.dora) PROF("fwd.matmul", kern_matmul(y, x, W, bias, N, acc));
    if (!md) return;
    const lora *l = f->l;
    int r = l->cfg.rank, I = md->in, O = md->out;
    float s = l->scale;
    const float *Aw = l->w + md->off_a, *Bw = l->w + md->off_b;
    const float *xd = x;
    if (sc->train && l->cfg.dropout > 0) {
        PROF("fwd.dropout", kern_dropout_mask(A->keep[m], (int64_t)N * I, l->cfg.dropout, sc->seed, RNG_DROPOUT,
                                              dkey(sc->micro, layer, m));
             dropout_apply(f->xd, x, (int64_t)N * I, l->cfg.dropout, A->keep[m]));
        xd = f->xd;
    }
    float *U = A->U[m];
    PROF("fwd.lora_xA", kern_sgemm(0, 1, N, r, I, 1.0f, xd, I, Aw, I, 0.0f, U, r));          /* U = xd·Aᵀ */
    if (!l->cfg.dora) {     /* y (+)= x·Wᵀ + b + s·U·Bᵀ, the adapter term as one more K block */
        PROF("fwd.matmul", kern_matmul_lora(y, x, W, bias, N, acc, U, Bw, r, s));
        return;
    }
    /* DoRA, as PEFT: y = y + ((g−1)·base + g·L·s), base = W·xd (no bias). */
    const float *g = f->dora_g + f->dora_off[layer * LM_COUNT + m];
    float *L = f->tmpO, *base = f->tmpO2;
    kern_sgemm(0, 1, N, O, r, 1.0f, U, r, Bw, r, 0.0f, L, O);           /* L = U·Bᵀ */
    if (xd != x) kern_matmul(base, xd, W, NULL, N, 0);
    for (int64_t n = 0; n < N; n++)
        for (int o = 0; o < O; o++) {
            size_t i = (size_t)n * O + o;
            float b0 = xd != x ? base[i] : y[i] - (bias ? bias[o] : 0.0f);
            y[i] = y[i] + ((g[o] - 1.0f) * b0 + g[o] * L[i] * s);
        }
}

static void colsum_add(float *db, const float *dy, int64_t N, int O)
{
    for (int o = 0; o < O; o++) {
        float acc = 0;
        for (int64_t n = 0; n < N; n++) acc += dy[(size_t)n * O + o];
        db[o] += acc;
    }
}

/* dx[N,I] (+)= dy[N,O]·W (+ adapter paths); acc = 0 overwrites dx, dx =
 * NULL skips the input gradient (the first layer in LoRA mode). Parameter
 * grads: LoRA into lg, full-mode W and bias into dW/db (may be NULL). */
static void lin_bwd(fb_ctx *f, const step_ctx *sc, layer_acts *A, int layer, int m,
                    const float *x, const float *dy, float *dx, int N,
                    float *lg, float *dW, float *db, int acc)
{
    const wmat *W = lora_base_weight(f->m, layer, m);
    const lora_mod *md = f->l ? lora_mod_at(f->l, layer, m) : NULL;
    int I = (int)W->cols, O = (int)W->rows;
    if (dW) kern_sgemm(1, 0, O, I, N, 1.0f, dy, O, x, I, 1.0f, dW, I);  /* dW += dyᵀ·x */
    if (db) colsum_add(db, dy, N, O);
    if (!md) { if (dx) kern_matmul_dx_to(dx, dy, W, N, acc); return; }
    if (dx && !acc && f->l->cfg.dora) {     /* the DoRA paths below accumulate */
        memset(dx, 0, (size_t)N * I * sizeof(float));
        acc = 1;
    }
    const lora *l = f->l;
    int r = l->cfg.rank, drop = sc->train && l->cfg.dropout > 0;
    float s = l->scale;
    const float *Aw = l->w + md->off_a, *Bw = l->w + md->off_b;
    float *dA = lg + md->off_a, *dB = lg + md->off_b;
    const float *xd = x;
    if (drop) {
        PROF("bwd.dropout", dropout_apply(f->xd, x, (int64_t)N * I, l->cfg.dropout, A->keep[m]));
        xd = f->xd;
    }
    const float *U = A->U[m];
    const float *dyl = dy;
    /* without dropout the adapter's dx term joins the base product (below) */
    int fuse_dx = !l->cfg.dora && !drop;
    if (!l->cfg.dora) {
        if (dx && !fuse_dx) PROF("bwd.matmul_dx", kern_matmul_dx_to(dx, dy, W, N, acc));
    } else {
        const float *g = f->dora_g + f->dora_off[layer * LM_COUNT + m];
        const float *nrm = f->dora_norm + f->dora_off[layer * LM_COUNT + m];
        float *L = f->tmpO, *base = f->tmpO2;
        /* dmag[o] = Σ_n dy·(base + s·L) / ‖·‖ — the norm is a constant. */
        kern_sgemm(0, 1, N, O, r, 1.0f, U, r, Bw, r, 0.0f, L, O);
        kern_matmul(base, xd, W, NULL, N, 0);
        float *dmag = lg + md->off_mag;
        for (int o = 0; o < O; o++) {
            float sum = 0;
            for (int64_t n = 0; n < N; n++) {
                size_t i = (size_t)n * O + o;
                sum += dy[i] * (base[i] + s * L[i]);
            }
            dmag[o] += sum / nrm[o];
        }
        float *dyg = f->tmpO; /* L no longer needed */
        if (!drop) {
            for (int64_t n = 0; n < N; n++)
                for (int o = 0; o < O; o++) dyg[(size_t)n * O + o] = dy[(size_t)n * O + o] * g[o];
            if (dx) kern_matmul_dx(dx, dyg, W, N);  /* dy·W + (g−1)·dy·W */
        } else if (!dx) {
            for (int64_t n = 0; n < N; n++)
                for (int o = 0; o < O; o++) dyg[(size_t)n * O + o] = dy[(size_t)n * O + o] * g[o];
        } else {
            kern_matmul_dx(dx, dy, W, N);
            for (int64_t n = 0; n < N; n++)
                for (int o = 0; o < O; o++) dyg[(size_t)n * O + o] = dy[(size_t)n * O + o] * (g[o] - 1.0f);
            memset(f->tmpI, 0, (size_t)N * I * sizeof(float));
            kern_matmul_dx(f->tmpI, dyg, W, N);
            dropout_apply(f->tmpI, f->tmpI, (int64_t)N * I, l->cfg.dropout, A->keep[m]);
            for (int64_t i = 0; i < (int64_t)N * I; i++) dx[i] += f->tmpI[i];
            for (int64_t n = 0; n < N; n++)
                for (int o = 0; o < O; o++) dyg[(size_t)n * O + o] = dy[(size_t)n * O + o] * g[o];
        }
        dyl = dyg;
    }
    PROF("bwd.lora_dB", kern_sgemm(1, 0, O, r, N, s, dyl, O, U, r, 1.0f, dB, r));            /* dB += s·dylᵀ·U */
    PROF("bwd.lora_dU", kern_sgemm(0, 0, N, r, O, s, dyl, O, Bw, r, 0.0f, f->dU, r));        /* dU = s·dyl·B  */
    PROF("bwd.lora_dA", kern_sgemm(1, 0, r, I, N, 1.0f, f->dU, r, xd, I, 1.0f, dA, I));      /* dA += dUᵀ·xd */
    if (!dx) return;
    if (fuse_dx) {
        PROF("bwd.matmul_dx", kern_matmul_dx_lora(dx, dy, W, N, acc, f->dU, Aw, r));      /* dx (+)= dy·W + dU·A */
    } else if (!drop) {
        PROF("bwd.lora_dx", kern_sgemm(0, 0, N, I, r, 1.0f, f->dU, r, Aw, I, 1.0f, dx, I));  /* dx += dU·A */
    } else {
        kern_sgemm(0, 0, N, I, r, 1.0f, f->dU, r, Aw, I, 0.0f, f->tmpI, I);
        PROF("bwd.dropout", dropout_apply(f->tmpI, f->tmpI, (int64_t)N * I, l->cfg.dropout, A->keep[m]));
        for (int64_t i = 0; i < (int64_t)N * I; i++) dx[i] += f->tmpI[i];
    }
}

static void dora_prepare(fb_ctx *f)
{
    const lora *l = f->l;
    if (!l || !l->cfg.dora) return;
    for (int layer = 0; layer < l->n_layer; layer++)
        for (int m = 0; m < LM_COUNT; m++) {
            const lora_mod *md = lora_mod_at(l, layer, m);
            if (!md) continue;
            size_t off = f->dora_off[layer * LM_COUNT + m];
            float *nrm = f->dora_norm + off, *g = f->dora_g + off;
            lora_dora_norm(l, f->m, layer, m, nrm, f->dora_scratch);
            const float *mag = l->w + md->off_mag;
            for (int o = 0; o < md->out; o++) g[o] = mag[o] / nrm[o];
        }
}

/* ---- forward ------------------------------------------------------------ */

static void embed(fb_ctx *f, const token_batch *b, float *X0)
{
    const wmat *E = &f->m->tok_embd;
    int N = b->B * b->T;
    for (int n = 0; n < N; n++) {
        int t = b->tokens[n];
        if (t < 0 || t >= f->V) t = 0; /* ids are validated by the data layer */
        kern_dequant_row(E->type, (const char *)E->data + (size_t)t * E->row_bytes, X0 + (size_t)n * f->C, f->C);
    }
}

static void layer_fwd(fb_ctx *f, const step_ctx *sc, const token_batch *b, int layer, layer_acts *A,
                      const float *x, float *xout)
{
    const model_config *c = &f->m->cfg;
    const layer_weights *w = &f->m->layers[layer];
    int N = b->B * b->T, C = f->C;
    attn_shape as = {b->B, b->T, b->T, c->n_head, c->n_kv_head, c->head_dim, 0,
                     (int64_t)b->T * f->K, b->seg};
    PROF("fwd.rmsnorm", kern_rmsnorm_fwd(f->xn, A->rstd1, x, w->attn_norm, N, C, c->rms_eps));
    lin_fwd(f, sc, A, layer, LM_Q, f->xn, A->q, N, 0);
    lin_fwd(f, sc, A, layer, LM_K, f->xn, A->k, N, 0);
    lin_fwd(f, sc, A, layer, LM_V, f->xn, A->v, N, 0);
    PROF("fwd.rope", kern_rope_fwd_t(A->q, f->rope_cs, f->rope_sn, N, c->n_head, c->head_dim);
    kern_rope_fwd_t(A->k, f->rope_cs, f->rope_sn, N, c->n_kv_head, c->head_dim));
    PROF("fwd.attn", kern_attn_fwd(A->att, A->lse, A->q, A->k, A->v, &as, f->attn_scratch));
    /* h = x + o(att): the projection accumulates onto a copy of x */
    PROF("fwd.resid", memcpy(A->h, x, (size_t)N * C * sizeof(float)));
    lin_fwd(f, sc, A, layer, LM_O, A->att, A->h, N, 1);
    PROF("fwd.rmsnorm", kern_rmsnorm_fwd(f->xn, A->rstd2, A->h, w->ffn_norm, N, C, c->rms_eps));
    lin_fwd(f, sc, A, layer, LM_GATE, f->xn, A->g, N, 0);
    lin_fwd(f, sc, A, layer, LM_UP, f->xn, A->u, N, 0);
    PROF("fwd.swiglu", kern_swiglu_fwd(f->act, A->g, A->u, (int64_t)N * f->F));
    PROF("fwd.resid", memcpy(xout, A->h, (size_t)N * C * sizeof(float)));
    lin_fwd(f, sc, A, layer, LM_DOWN, f->act, xout, N, 1);
}

static layer_acts *acts_for(fb_ctx *f, int layer) { return &f->acts[f->n_acts == 1 ? 0 : layer]; }

static void forward_layers(fb_ctx *f, const step_ctx *sc, const token_batch *b)
{
    const model_config *c = &f->m->cfg;
    size_t NC = (size_t)b->B * b->T * f->C, stride = (size_t)f->N * f->C;
    PROF("fwd.embed", embed(f, b, f->X));
    PROF("fwd.rope", kern_rope_table(f->rope_cs, f->rope_sn, b->pos, (int64_t)b->B * b->T, c->head_dim,
                                     f->m->rope_inv_freq));
    for (int layer = 0; layer < c->n_layer; layer++)
        layer_fwd(f, sc, b, layer, acts_for(f, layer), f->X + layer * stride, f->X + (layer + 1) * stride);
    (void)NC;
    kern_rmsnorm_fwd(f->xnf, f->rstdf, f->X + (size_t)c->n_layer * stride, f->m->out_norm,
                     (int64_t)b->B * b->T, f->C, c->rms_eps);
}

/* LM head + cross-entropy over the rows that have a target. With
 * want_grad, writes dL/dxnf into f->dxn (zero for rows without loss) and,
 * in full mode, the output-weight gradient into dWout. LoRA mode and plain
 * forwards take the fused kernel over all selected rows; full mode needs
 * the logits (for dWout) and goes chunk by chunk. */
static double head_loss(fb_ctx *f, const token_batch *b, int want_grad, float grad_scale,
                        float *dWout, float *nll_out, int64_t *n_loss)
{
    int N = b->B * b->T, C = f->C;
    const wmat *Wo = &f->m->output;
    int nr = 0;
    for (int n = 0; n < N; n++)
        if (b->targets[n] >= 0) f->rows[nr++] = n;
    if (want_grad) memset(f->dxn, 0, (size_t)N * C * sizeof(float));
    if (nll_out) memset(nll_out, 0, (size_t)N * sizeof(float));
    double total = 0;
    for (int r0 = 0; r0 < nr; r0 += f->sel) {
        int cn = nr - r0 < f->sel ? nr - r0 : f->sel;
        for (int i = 0; i < cn; i++) {
            int n = f->rows[r0 + i];
            memcpy(f->xsel + (size_t)i * C, f->xnf + (size_t)n * C, (size_t)C * sizeof(float));
            f->tsel[i] = b->targets[n];
        }
        if (!f->o.full) {
            PROF("head.fused", total += kern_head_xent(want_grad ? f->dsel : NULL, f->nsel, f->xsel, Wo, f->tsel,
                                                       cn, grad_scale, f->head_scratch));
        } else {
            PROF("head.matmul", kern_matmul(f->logits, f->xsel, Wo, NULL, cn, 0));
            PROF("head.xent", total += kern_xent(want_grad ? f->logits : NULL, f->nsel, f->logits, f->tsel, cn,
                                                 f->V, grad_scale));
            if (want_grad) {
                memset(f->dsel, 0, (size_t)cn * C * sizeof(float));
                PROF("head.dx", kern_matmul_dx(f->dsel, f->logits, Wo, cn));
                if (dWout) kern_sgemm(1, 0, f->V, C, cn, 1.0f, f->logits, f->V, f->xsel, C, 1.0f, dWout, C);
            }
        }
        if (nll_out)
            for (int i = 0; i < cn; i++) nll_out[f->rows[r0 + i]] = f->nsel[i];
        if (want_grad)
            for (int i = 0; i < cn; i++)
                memcpy(f->dxn + (size_t)f->rows[r0 + i] * C, f->dsel + (size_t)i * C, (size_t)C * sizeof(float));
    }
    *n_loss = nr;
    return total;
}

double fb_forward(fb_ctx *f, const token_batch *b, float *nll, float *logits_out, int64_t *n_loss)
{
    step_ctx sc = {0, 0, 0};
    dora_prepare(f);
    forward_layers(f, &sc, b);
    if (logits_out) {
        int N = b->B * b->T;
        for (int r0 = 0; r0 < N; r0 += f->chunk) {
            int cn = N - r0 < f->chunk ? N - r0 : f->chunk;
            kern_matmul(logits_out + (size_t)r0 * f->V, f->xnf + (size_t)r0 * f->C, &f->m->output, NULL, cn, 0);
        }
    }
    return head_loss(f, b, 0, 0.0f, NULL, nll, n_loss);
}

/* ---- backward ----------------------------------------------------------- */

static void layer_bwd(fb_ctx *f, const step_ctx *sc, const token_batch *b, int layer, layer_acts *A,
                      const float *x, float *lg, fb_layer_grads *G)
{
    const model_config *c = &f->m->cfg;
    const layer_weights *w = &f->m->layers[layer];
    int N = b->B * b->T, C = f->C, F = f->F, K = f->K;
    attn_shape as = {b->B, b->T, b->T, c->n_head, c->n_kv_head, c->head_dim, 0, (int64_t)b->T * K, b->seg};
    float *dres = f->dres; /* in: dL/dx_out; out: dL/dx */

    /* MLP: x_out = h + down(silu(g)·u) */
    PROF("bwd.recompute", kern_swiglu_fwd(f->act, A->g, A->u, (int64_t)N * F));
    lin_bwd(f, sc, A, layer, LM_DOWN, f->act, dres, f->dact, N, lg, G ? G->w_down : NULL, NULL, 0);
    PROF("bwd.swiglu", kern_swiglu_bwd(f->dg, f->du, f->dact, A->g, A->u, (int64_t)N * F));
    PROF("bwd.recompute", kern_rmsnorm_apply(f->xn, A->h, w->ffn_norm, A->rstd2, N, C));
    lin_bwd(f, sc, A, layer, LM_GATE, f->xn, f->dg, f->dxn, N, lg, G ? G->w_gate : NULL, NULL, 0);
    lin_bwd(f, sc, A, layer, LM_UP, f->xn, f->du, f->dxn, N, lg, G ? G->w_up : NULL, NULL, 1);
    PROF("bwd.rmsnorm", kern_rmsnorm_bwd_add(dres, G ? G->ffn_norm : NULL, f->dxn, A->h, w->ffn_norm, A->rstd2,
                                             N, C));                    /* now dL/dh */

    /* attention: h = x + o(attn(rope(q), rope(k), v)) */
    lin_bwd(f, sc, A, layer, LM_O, A->att, dres, f->datt, N, lg, G ? G->wo : NULL, NULL, 0);
    PROF("bwd.attn", kern_attn_bwd(f->dq, f->dk, f->dv, f->datt, A->att, A->lse, A->q, A->k, A->v, &as, f->attn_scratch));
    PROF("bwd.rope", kern_rope_bwd_t(f->dq, f->rope_cs, f->rope_sn, N, c->n_head, c->head_dim);
    kern_rope_bwd_t(f->dk, f->rope_cs, f->rope_sn, N, c->n_kv_head, c->head_dim));
    PROF("bwd.recompute", kern_rmsnorm_apply(f->xn, x, w->attn_norm, A->rstd1, N, C));
    /* The first layer's input gradient goes nowhere unless the embedding
     * (full mode) wants it. */
    float *dxn = layer > 0 || G ? f->dxn : NULL;
    lin_bwd(f, sc, A, layer, LM_Q, f->xn, f->dq, dxn, N, lg, G ? G->wq : NULL, G ? G->bq : NULL, 0);
    lin_bwd(f, sc, A, layer, LM_K, f->xn, f->dk, dxn, N, lg, G ? G->wk : NULL, G ? G->bk : NULL, 1);
    lin_bwd(f, sc, A, layer, LM_V, f->xn, f->dv, dxn, N, lg, G ? G->wv : NULL, G ? G->bv : NULL, 1);
    if (dxn)
        PROF("bwd.rmsnorm", kern_rmsnorm_bwd_add(dres, G ? G->attn_norm : NULL, dxn, x, w->attn_norm, A->rstd1,
                                                 N, C));                /* now dL/dx */
}

double fb_step(fb_ctx *f, const token_batch *b, float *lora_grad, const fb_full_grads *fg,
               float grad_scale, uint64_t seed, uint64_t micro_step, int64_t *n_loss)
{
    const model_config *c = &f->m->cfg;
    step_ctx sc = {1, seed, micro_step};
    int N = b->B * b->T, C = f->C;
    size_t stride = (size_t)f->N * C;
    dora_prepare(f);
    forward_layers(f, &sc, b);
    double loss = head_loss(f, b, 1, grad_scale, fg ? (fg->output ? fg->output : fg->tok_embd) : NULL,
                            NULL, n_loss);
    /* final norm */
    kern_rmsnorm_bwd(f->dres, fg ? fg->out_norm : NULL, f->dxn, f->X + (size_t)c->n_layer * stride,
                     f->m->out_norm, f->rstdf, N, C);
    for (int layer = c->n_layer - 1; layer >= 0; layer--) {
        layer_acts *A = acts_for(f, layer);
        const float *x = f->X + (size_t)layer * stride;
        if (f->n_acts == 1) /* recompute: re-run this layer's forward, same inputs, same draws */
            layer_fwd(f, &sc, b, layer, A, x, f->tmpC /* output unused */);
        layer_bwd(f, &sc, b, layer, A, x, lora_grad, fg ? &fg->layers[layer] : NULL);
    }
    if (fg) { /* embedding rows: sequential scatter-add, fixed order */
        for (int n = 0; n < N; n++) {
            float *dst = fg->tok_embd + (size_t)b->tokens[n] * C;
            const float *src = f->dres + (size_t)n * C;
            for (int i = 0; i < C; i++) dst[i] += src[i];
        }
    }
    return loss;
}
