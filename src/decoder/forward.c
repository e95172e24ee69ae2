/* forward — the decoder's forward pass. See decoder.h for the contract.
 *
 * Shapes (N = B·T rows, C model dim, Q = NH·HS, K = KVH·HS, F ffn dim,
 * V vocab, r LoRA rank). Per layer the forward is, as in HF's
 * LlamaDecoderLayer:
 *
 *   xn1 = rmsnorm(x) ; q,k,v = lin(xn1) ; [qk_norm: q,k = rmsnorm per head
 *   (qwen3) or over the whole projection (olmo2)] ; rope(q,k) ; att = attn(q,k,v)
 *   h   = x + lin_o(att)
 *   xn2 = rmsnorm(h) ; g,u = lin(xn2) ; act = silu(g)·u
 *   x'  = h + lin_down(act)
 *
 * post_norm (olmo2, Olmo2DecoderLayer) moves the norms onto the blocks'
 * outputs: q,k,v = lin(x) ; h = x + rmsnorm(lin_o(att)) ; g,u = lin(h) ;
 * x' = h + rmsnorm(lin_down(act)).
 *
 * Training keeps every layer's activations (or, recomputing, only the
 * layer inputs X[l]) and grad/backward.c walks the same equations in
 * reverse; inference appends k and v to the KV cache and attends over it.
 * The plain-loop twins of every kernel used here are in kern/kern_ref.c. */
#include "decoder/decoder_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"
#include "util/rng.h"
#include "vision/mrope.h"

#ifdef DECODER_PROFILE
#include <stdio.h>
#include <time.h>
#define PROF_MAX 64
static const char *prof_name[PROF_MAX];
static double prof_t[PROF_MAX];
static long prof_n[PROF_MAX];
double decoder_profile_clock(void)   /* process CPU time: robust against a loaded machine */
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
void decoder_profile_add(const char *name, double seconds)
{
    int i = 0;
    while (i < PROF_MAX - 1 && prof_name[i] && prof_name[i] != name) i++;
    prof_name[i] = name;
    prof_t[i] += seconds;
    prof_n[i]++;
}
void decoder_profile_dump(double steps)
{
    double tot = 0;
    for (int i = 0; i < PROF_MAX && prof_name[i]; i++) tot += prof_t[i];
    for (int i = 0; i < PROF_MAX && prof_name[i]; i++)
        fprintf(stderr, "PROF %-22s %8.1f ms/step %5.1f%%  (%ld calls)\n", prof_name[i],
                1e3 * prof_t[i] / steps, 100 * prof_t[i] / tot, prof_n[i]);
    fprintf(stderr, "PROF %-22s %8.1f ms/step\n", "total", 1e3 * tot / steps);
}
#endif

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

static int auto_chunk(const model_config *c, int N)
{
    /* Keep the logits tile near 16 MiB: big enough for an efficient GEMM,
     * small enough that a 150k vocabulary does not need N×V floats. */
    int rows = (int)((16u << 20) / ((size_t)c->vocab * sizeof(float)));
    if (rows < 8) rows = 8;
    if (rows > N) rows = N;
    return rows;
}

/* The attention of a training pass: B sequences attending within
 * themselves (segments confine packed rows). */
attn_shape dec_train_attn(const model_config *c, int layer, int B, int T, int K, const int32_t *seg,
                          const int32_t *prefix)
{
    return (attn_shape){.B = B, .Tq = T, .Tk = T, .NH = c->n_head, .KVH = c->n_kv_head, .HS = c->head_dim,
                        .q_off = 0, .kv_bstride = (int64_t)T * K, .seg = seg, .window = model_layer_window(c, layer),
                        .scale = c->attn_scale, .softcap = c->attn_softcap, .prefix = prefix};
}

/* The attention of an inference pass: n new rows at positions
 * n_past..n_past+n-1 attending over the whole cache. */
static attn_shape cache_attn(const model_config *c, int layer, int n, int n_past, int n_ctx, int K)
{
    return (attn_shape){.B = 1, .Tq = n, .Tk = n_past + n, .NH = c->n_head, .KVH = c->n_kv_head,
                        .HS = c->head_dim, .q_off = n_past, .kv_bstride = (int64_t)n_ctx * K, .seg = NULL,
                        .window = model_layer_window(c, layer), .scale = c->attn_scale,
                        .softcap = c->attn_softcap};
}

/* marks (optional) get the carver's offset at the end of each group:
 * [0] what the forward keeps (residual stream, layers), [1] norm and RoPE
 * working rows, [2] LM head, [3] backward buffers, [4] attention scratch;
 * LoRA/DoRA buffers follow. Inference (n_ctx > 0) carves the KV cache and
 * leaves out what only training needs (the layer stack, lse, dropout
 * masks, the loss head, the backward); the training layout is unchanged by
 * that, so its plan stays byte for byte what it was. */
static void carve_all(decoder *d, carver *cv, const model_config *c, const lora_config *lc, size_t marks[5])
{
    int N = d->N, C = d->C, Q = d->Q, K = d->K, F = d->F, r = lora_rank(lc);
    int B = d->o.B, T = d->o.T, L = c->n_layer, kv = d->o.n_ctx > 0;
    int drop = !kv && lc && lc->dropout > 0;
    d->X = CARVE_F(cv, (size_t)(kv ? 1 : L + 1) * N * C);
    if (kv) {
        size_t S = (size_t)(d->o.n_seq > 0 ? d->o.n_seq : 1);
        d->kcache = CARVE_F(cv, S * L * d->o.n_ctx * K);
        d->vcache = CARVE_F(cv, S * L * d->o.n_ctx * K);
        d->pos = (int32_t *)carve(cv, (size_t)N * sizeof(int32_t));
    }
    for (int a = 0; a < d->n_acts; a++) {
        layer_acts *A = d->acts ? &d->acts[a] : &(layer_acts){0};
        A->rstd1 = CARVE_F(cv, N);
        A->q = CARVE_F(cv, (size_t)N * Q);
        A->k = CARVE_F(cv, (size_t)N * K);
        A->v = CARVE_F(cv, (size_t)N * K);
        if (c->qk_norm) {
            A->qr = CARVE_F(cv, (size_t)N * Q);
            A->kr = CARVE_F(cv, (size_t)N * K);
            A->rq = CARVE_F(cv, (size_t)N * c->n_head);
            A->rk = CARVE_F(cv, (size_t)N * c->n_kv_head);
        }
        if (c->post_norm) {
            A->ao = CARVE_F(cv, (size_t)N * C);
            A->mo = CARVE_F(cv, (size_t)N * C);
        }
        if (c->sandwich) {
            A->rstd3 = CARVE_F(cv, N);
            A->rstd4 = CARVE_F(cv, N);
        }
        A->att = CARVE_F(cv, (size_t)N * Q);
        A->lse = kv ? NULL : CARVE_F(cv, (size_t)B * c->n_head * T);
        A->h = CARVE_F(cv, (size_t)N * C);
        A->rstd2 = CARVE_F(cv, N);
        A->g = CARVE_F(cv, dec_ffn_rows(c, N) * F);
        A->u = CARVE_F(cv, dec_ffn_rows(c, N) * F);
        if (c->n_expert) {   /* mixtral: the router's choice */
            size_t Nk = dec_ffn_rows(c, N);
            A->moe_logits = CARVE_F(cv, (size_t)N * c->n_expert);
            A->moe_sel = (int32_t *)carve(cv, Nk * sizeof(int32_t));
            A->moe_w = CARVE_F(cv, Nk);
            A->moe_idx = (int32_t *)carve(cv, Nk * sizeof(int32_t));
            A->moe_first = (int32_t *)carve(cv, (size_t)(c->n_expert + 1) * sizeof(int32_t));
        }
        for (int m = 0; m < LM_COUNT; m++) {
            int on = lc && (lc->targets >> m & 1);
            A->U[m] = on ? CARVE_F(cv, (size_t)N * r) : NULL;
            int in = 0, out = 0;
            if (on && drop) lora_module_dims(c, m, &in, &out);
            A->keep[m] = in ? (uint8_t *)carve(cv, ((size_t)N * in + 7) / 8) : NULL;
        }
    }
    if (marks) marks[0] = cv->off;
    d->rstdf = CARVE_F(cv, N);
    d->xnf = CARVE_F(cv, (size_t)N * C);
    d->xn = CARVE_F(cv, (size_t)N * C);
    d->act = CARVE_F(cv, dec_ffn_rows(c, N) * F);
    if (c->n_expert) {
        d->moe_x = CARVE_F(cv, (size_t)N * C);
        d->moe_y = CARVE_F(cv, (size_t)N * C);
        d->moe_fill = (int32_t *)carve(cv, (size_t)c->n_expert * sizeof(int32_t));
    }
    d->rope_cs = CARVE_F(cv, (size_t)N * (c->head_dim / 2));
    d->rope_sn = CARVE_F(cv, (size_t)N * (c->head_dim / 2));
    if (c->fused) {
        size_t w = (size_t)(Q + 2 * K) > 2 * (size_t)F ? (size_t)(Q + 2 * K) : 2 * (size_t)F;
        d->fuse = CARVE_F(cv, (size_t)N * w);
    }
    if (marks) marks[1] = cv->off;
    if (!kv) {
        /* LoRA / plain forward: the fused head (no logits buffer, all rows
         * at once); full mode needs the logits for the output-weight
         * gradient. */
        if (d->o.full || c->final_softcap > 0) d->logits = CARVE_F(cv, (size_t)d->chunk * d->V);
        else d->head_scratch = CARVE_F(cv, kern_head_xent_scratch(N, C));
        if (c->final_softcap > 0) d->logits_cap = CARVE_F(cv, (size_t)d->chunk * d->V);
        if (!d->o.full && d->o.head_grad) {
            /* the soft-capped head carved logits above: share them (decided
             * by the config, not by the pointer: the sizing pass's is NULL) */
            if (c->final_softcap <= 0) d->logits = CARVE_F(cv, (size_t)d->chunk * d->V);
            d->nchunk = CARVE_F(cv, d->chunk);
        }
        d->xsel = CARVE_F(cv, (size_t)d->sel * C);
        d->dsel = CARVE_F(cv, (size_t)d->sel * C);
        d->nsel = CARVE_F(cv, d->sel);
        d->rows = (int32_t *)carve(cv, (size_t)N * sizeof(int32_t));
        d->tsel = (int32_t *)carve(cv, (size_t)d->sel * sizeof(int32_t));
    }
    if (marks) marks[2] = cv->off;
    if (!kv) {
        d->dres = CARVE_F(cv, (size_t)N * C);
        d->dxn = CARVE_F(cv, (size_t)N * C);
    }
    d->tmpC = CARVE_F(cv, (size_t)N * C);
    if (!kv) {
        d->datt = CARVE_F(cv, (size_t)N * Q);
        d->dq = CARVE_F(cv, (size_t)N * Q);
        d->dk = CARVE_F(cv, (size_t)N * K);
        d->dv = CARVE_F(cv, (size_t)N * K);
        d->dact = CARVE_F(cv, dec_ffn_rows(c, N) * F);
        d->dg = CARVE_F(cv, dec_ffn_rows(c, N) * F);
        d->du = CARVE_F(cv, dec_ffn_rows(c, N) * F);
        if (c->n_expert) {
            d->moe_dy = CARVE_F(cv, (size_t)N * C);
            d->moe_dlog = CARVE_F(cv, (size_t)N * c->n_expert);
            d->moe_dw = CARVE_F(cv, dec_ffn_rows(c, N));
        }
        if (c->qk_norm) {
            d->dqr = CARVE_F(cv, (size_t)N * Q);
            d->dkr = CARVE_F(cv, (size_t)N * K);
        }
    }
    if (marks) marks[3] = cv->off;
    if (kv) {
        attn_shape as = cache_attn(c, 0, N, 0, d->o.n_ctx, K);
        as.Tk = d->o.n_ctx;
        d->attn_scratch = CARVE_F(cv, kern_attn_scratch(&as));
    } else {
        attn_shape as = dec_train_attn(c, 0, B, T, K, NULL, NULL);
        size_t sc = kern_attn_scratch(&as), sb = kern_attn_bwd_scratch(&as);
        d->attn_scratch = CARVE_F(cv, sc > sb ? sc : sb);
    }
    if (marks) marks[4] = cv->off;
    if (lc) {
        if (!kv) {
            d->tmpI = CARVE_F(cv, (size_t)N * d->maxI);
            d->xd = drop ? CARVE_F(cv, (size_t)N * d->maxI) : NULL;
            d->dU = CARVE_F(cv, (size_t)N * r);
        }
        if (lc->dora) {
            d->tmpO = CARVE_F(cv, (size_t)N * d->maxO);
            d->tmpO2 = CARVE_F(cv, (size_t)N * d->maxO);
            size_t tot = 0;
            for (int layer = 0; layer < L; layer++)
                for (int m = 0; m < LM_COUNT; m++)
                    if (lc->targets >> m & 1) {
                        int in, out;
                        lora_module_dims(c, m, &in, &out);
                        if (d->dora_off) d->dora_off[layer * LM_COUNT + m] = tot;
                        tot += (size_t)out;
                    }
            d->dora_g = CARVE_F(cv, tot);
            d->dora_norm = CARVE_F(cv, tot);
            d->dora_scratch = CARVE_F(cv, (size_t)d->maxI + (size_t)r);
        }
    }
}

static void init_dims(decoder *d, const model_config *c, const lora_config *lc, const decoder_opts *o)
{
    d->o = *o;
    d->N = o->B * o->T;
    d->C = c->d_model;
    d->F = c->n_ff;
    d->V = c->vocab;
    d->R = lora_rank(lc);
    d->Q = c->n_head * c->head_dim;
    d->K = c->n_kv_head * c->head_dim;
    int mi = d->C;
    if (d->Q > mi) mi = d->Q;
    if (c->n_ff > mi) mi = c->n_ff;
    d->maxI = d->maxO = mi;  /* inputs and outputs: C, Q, K, F — the same set */
    if (c->fused) {          /* phi3: the fused outputs Q+2K and 2F */
        if (d->Q + 2 * d->K > d->maxO) d->maxO = d->Q + 2 * d->K;
        if (2 * c->n_ff > d->maxO) d->maxO = 2 * c->n_ff;
    }
    d->n_acts = o->recompute || o->n_ctx > 0 ? 1 : c->n_layer;
    d->chunk = o->logit_rows > 0 ? (o->logit_rows < d->N ? o->logit_rows : d->N) : auto_chunk(c, d->N);
    d->sel = o->full || c->final_softcap > 0 ? d->chunk : d->N;   /* a soft cap needs the logits */
}

size_t decoder_plan_parts(const model_config *c, const lora_config *lc, const decoder_opts *o, decoder_parts *parts)
{
    decoder d;
    memset(&d, 0, sizeof d);
    init_dims(&d, c, lc, o);
    carver cv = {NULL, 0};
    size_t mk[5];
    carve_all(&d, &cv, c, lc, mk);
    size_t bytes = cv.off + 64;
    bytes += (size_t)d.n_acts * sizeof(layer_acts);
    if (lc && lc->dora) bytes += (size_t)c->n_layer * LM_COUNT * sizeof(size_t);
    if (parts) {
        parts->head = mk[2] - mk[1];
        parts->attn = mk[4] - mk[3];
        parts->bwd = (mk[1] - mk[0]) + (mk[3] - mk[2]) + (cv.off - mk[4]);
        parts->acts = bytes - parts->head - parts->attn - parts->bwd;
    }
    return bytes;
}

size_t decoder_plan_bytes(const model_config *c, const lora_config *lc, const decoder_opts *o)
{
    return decoder_plan_parts(c, lc, o, NULL);
}

int decoder_create(const model *m, const lora *l, const decoder_opts *o, decoder **out, dlm_err *e)
{
    *out = NULL;
    const model_config *c = &m->cfg;
    const lora_config *lc = l ? &l->cfg : NULL;
    if (o->B < 1 || o->T < 1) return err_set(e, "TrainError", "bad micro-batch shape %dx%d", o->B, o->T);
    if (o->n_ctx > 0 && (o->B != 1 || o->full || o->recompute))
        return err_set(e, "TrainError", "an inference decoder takes one sequence and no training options");
    if (c->n_expert && (o->full || (lc && (lc->targets >> LM_GATE & 7)))) {
        err_set(e, "TrainError", "mixtral: %s", o->full ? "full-parameter training is not supported"
                                                          : "LoRA on the experts (gate_proj, up_proj, down_proj) is not supported");
        return err_hint(e, "train a LoRA adapter on the attention: target_modules [q_proj, k_proj, v_proj, o_proj]");
    }
    if (c->vl == VL_PALI && o->full) {   /* its checkpoint's names and tower are not written back */
        err_set(e, "TrainError", "paligemma: full-parameter training is not supported");
        return err_hint(e, "train a LoRA or DoRA adapter (training.adapter: lora)");
    }
    if (c->fused && o->full) {
        err_set(e, "TrainError", "phi3: full-parameter training is not supported");
        return err_hint(e, "train a LoRA or DoRA adapter (training.adapter: lora)");
    }
    if (o->full) {
        /* Full training writes the weights: every matrix must be plain f32. */
        if (m->tok_embd.type != DT_F32 || m->output.type != DT_F32)
            return err_set(e, "TrainError", "full-parameter training needs f32 weights");
        for (int i = 0; i < c->n_layer; i++)
            for (int j = 0; j < LM_COUNT; j++)
                if (lora_base_weight(m, i, j)->type != DT_F32)
                    return err_set(e, "TrainError", "full-parameter training needs f32 weights");
    }
    decoder *d = calloc(1, sizeof *d);
    if (!d) return err_set(e, "MemoryError", "out of memory");
    d->m = m;
    d->l = l;
    init_dims(d, c, lc, o);
    d->acts = calloc((size_t)d->n_acts, sizeof *d->acts);
    if (lc && lc->dora) d->dora_off = calloc((size_t)c->n_layer * LM_COUNT, sizeof(size_t));
    carver cv = {NULL, 0};
    carve_all(d, &cv, c, lc, NULL);
    d->slab_bytes = cv.off + 64;
    d->slab = aligned_alloc(64, (d->slab_bytes + 63) & ~(size_t)63);
    if (!d->acts || !d->slab || (lc && lc->dora && !d->dora_off)) {
        size_t need = d->slab_bytes;
        decoder_free(d);
        if (o->n_ctx > 0)
            return err_set(e, "OOMError", "cannot allocate %zu MiB for a %d-token context", need >> 20, o->n_ctx);
        return err_set(e, "OOMError", "cannot allocate %zu MiB of activations", need >> 20);
    }
    /* Touch every page now, once: first-touch faults are expensive on this
     * kind of VM and must not land inside the step loop. */
    memset(d->slab, 0, d->slab_bytes);
    cv.base = d->slab;
    cv.off = 0;
    carve_all(d, &cv, c, lc, NULL);
    /* the inference adapter does not change: its DoRA scales once */
    if (o->n_ctx > 0) decoder_dora_prepare(d);
    *out = d;
    return 0;
}

void decoder_free(decoder *d)
{
    if (!d) return;
    free(d->acts);
    free(d->dora_off);
    free(d->slab);
    free(d);
}

/* ---- helpers ------------------------------------------------------------ */

/* dst[N,I] = src ⊙ mask / (1−p); the mask, a pure function of (seed, key,
 * i), is drawn once in the forward (kern_dropout_mask) and kept as bits
 * for the backward. */
void dec_dropout_apply(float *dst, const float *src, int64_t n, float p, const uint8_t *keep)
{
    kern_dropout_apply(dst, src, keep, n, 1.0f / (1.0f - p));
}

static uint64_t dkey(uint64_t micro_step, int layer, int m)
{
    return micro_step * 8192u + (uint64_t)layer * 8u + (uint64_t)m;
}

const float *dec_mod_bias(const layer_weights *w, int m)
{
    return m == LM_Q ? w->bq : m == LM_K ? w->bk : m == LM_V ? w->bv : NULL;
}

/* y[N,O] (+)= x[N,I]·Wᵀ + b, plus the adapter of (layer, m) if any; acc
 * adds onto y (a residual stream; O = C then). An inference step whose
 * rows are all decode steps (one row per sequence: one session's token, or
 * a kv pool step of several sequences) takes kern_matvec_n, which reads
 * the weight once for all rows, gives each row kern_matvec's bits (so a
 * sequence decodes the same alone or batched), and on quantized weights
 * computes with int8 activations as llama.cpp does (training never does);
 * a prompt's rows (prefill) take kern_matmul_infer, int8 the same way. */
static void lin_fwd(decoder *d, const dec_pass *p, layer_acts *A, int layer, int m, const float *x, float *y, int N,
                    int acc)
{
    const wmat *W = lora_base_weight(d->m, layer, m);
    const float *bias = dec_mod_bias(&d->m->layers[layer], m);
    const lora_mod *md = d->l ? lora_mod_at(d->l, layer, m) : NULL;
    /* one row per group: decode steps only (groups never share rows) */
    int vec = d->o.n_ctx > 0 && N == p->n_groups && N <= KERN_MATVEC_MAX_N;
    if (acc && ((md && d->l->cfg.dora) || vec)) {  /* DoRA reads the bare product back; matvec has no acc */
        lin_fwd(d, p, A, layer, m, x, d->tmpC, N, 0);
        for (size_t i = 0; i < (size_t)N * W->rows; i++) y[i] += d->tmpC[i];
        return;
    }
    /* a prompt's rows in inference: the int8 prefill where W is quantized */
    const int pre = d->o.n_ctx > 0 && !vec;
    if (d->obs) d->obs(d->obs_user, layer, m, -1, x, N, (int)W->cols);
    if (vec) kern_matvec_n(y, x, W, bias, N);
    else if (pre) PROF("fwd.matmul", kern_matmul_infer(y, x, W, bias, N, acc));
    else if (!md || d->l->cfg.dora) PROF("fwd.matmul", kern_matmul(y, x, W, bias, N, acc));
    if (!md) return;
    const lora *l = d->l;
    int r = l->cfg.rank, I = md->in, O = md->out;
    float s = l->scale;
    const float *Aw = l->w + md->off_a, *Bw = l->w + md->off_b;
    const float *xd = x;
    if (p->train && l->cfg.dropout > 0) {
        PROF("fwd.dropout", kern_dropout_mask(A->keep[m], (int64_t)N * I, l->cfg.dropout, p->seed, RNG_DROPOUT,
                                              dkey(p->micro, layer, m));
             dec_dropout_apply(d->xd, x, (int64_t)N * I, l->cfg.dropout, A->keep[m]));
        xd = d->xd;
    }
    float *U = A->U[m];
    PROF("fwd.lora_xA", kern_sgemm(0, 1, N, r, I, 1.0f, xd, I, Aw, I, 0.0f, U, r));          /* U = xd·Aᵀ */
    if (!l->cfg.dora) {
        if (vec || pre) kern_sgemm(0, 1, N, O, r, s, U, r, Bw, r, 1.0f, y, O);            /* y += s·U·Bᵀ */
        /* y (+)= x·Wᵀ + b + s·U·Bᵀ, the adapter term as one more K block */
        else PROF("fwd.matmul", kern_matmul_lora(y, x, W, bias, N, acc, U, Bw, r, s));
        return;
    }
    /* DoRA, as PEFT: y = y + ((g−1)·base + g·L·s), base = W·xd (no bias). */
    const float *g = d->dora_g + d->dora_off[layer * LM_COUNT + m];
    float *L = d->tmpO, *base = d->tmpO2;
    kern_sgemm(0, 1, N, O, r, 1.0f, U, r, Bw, r, 0.0f, L, O);           /* L = U·Bᵀ */
    if (xd != x) kern_matmul(base, xd, W, NULL, N, 0);     /* training only: dropout */
    for (int64_t n = 0; n < N; n++)
        for (int o = 0; o < O; o++) {
            size_t i = (size_t)n * O + o;
            float b0 = xd != x ? base[i] : y[i] - (bias ? bias[o] : 0.0f);
            y[i] = y[i] + ((g[o] - 1.0f) * b0 + g[o] * L[i] * s);
        }
}

void decoder_set_observer(decoder *d, decoder_obs_fn fn, void *user)
{
    d->obs = fn;
    d->obs_user = user;
}

void decoder_dora_prepare(decoder *d)
{
    const lora *l = d->l;
    if (!l || !l->cfg.dora) return;
    for (int layer = 0; layer < l->n_layer; layer++)
        for (int m = 0; m < LM_COUNT; m++) {
            const lora_mod *md = lora_mod_at(l, layer, m);
            if (!md) continue;
            size_t off = d->dora_off[layer * LM_COUNT + m];
            float *nrm = d->dora_norm + off, *g = d->dora_g + off;
            lora_dora_norm(l, d->m, layer, m, nrm, d->dora_scratch);
            const float *mag = l->w + md->off_mag;
            for (int o = 0; o < md->out; o++) g[o] = mag[o] / nrm[o];
        }
}

/* ---- forward ------------------------------------------------------------ */

/* X0[N,C]: each row's token table row, or its spliced row (embed_row[n] =
 * k >= 0: embeds row k, a frozen tower's output), then the model's scale
 * over all of them (HF scales inputs_embeds after the splice). */
static void embed(decoder *d, const int32_t *tokens, const float *embeds, const int32_t *embed_row, int N, float *X0)
{
    const wmat *E = lora_embd(d->l, d->m);   /* the adapter's modules_to_save, if any */
    for (int n = 0; n < N; n++) {
        if (embed_row && embed_row[n] >= 0) {
            memcpy(X0 + (size_t)n * d->C, embeds + (size_t)embed_row[n] * d->C, (size_t)d->C * sizeof(float));
            continue;
        }
        int t = tokens[n];
        if (t < 0 || t >= d->V) t = 0; /* ids are validated by the data layer and session_eval */
        kern_dequant_row(E->type, (const char *)E->data + (size_t)t * E->row_bytes, X0 + (size_t)n * d->C, d->C);
    }
    float sc = d->m->cfg.embd_scale;   /* gemma, gemma2: × √hidden */
    if (sc > 0)
        for (size_t i = 0; i < (size_t)N * d->C; i++) X0[i] *= sc;
}

int decoder_batch_check(const model_config *c, const token_batch *b, dlm_err *e)
{
    int N = b->B * b->T;
    if (b->prefix)
        for (int i = 0; i < b->B; i++)
            if (b->prefix[i] < 0 || b->prefix[i] > b->T)
                return err_set(e, "TrainError", "sequence %d's prefix-LM block of %d rows is outside its %d rows", i,
                               b->prefix[i], b->T);
    if (b->pos3 && !c->mrope[0] && !c->mrope[1] && !c->mrope[2])
        return err_set(e, "TrainError", "M-RoPE positions given to a model without rope_scaling.mrope_section");
    if (b->embed_row) {
        if (!b->embeds && b->n_embeds > 0) return err_set(e, "TrainError", "spliced rows without their embeddings");
        for (int n = 0; n < N; n++)
            if (b->embed_row[n] < -1 || b->embed_row[n] >= b->n_embeds)
                return err_set(e, "TrainError", "spliced row %d takes embedding %d of %d", n, b->embed_row[n],
                               b->n_embeds);
    }
    return 0;
}

/* q, k = RMSNorm of each head (qwen3) or of the whole projection (olmo2):
 * rows of n values. */
void dec_qk_norm_shape(const model_config *c, int N, int kv, int64_t *rows, int *n)
{
    int heads = kv ? c->n_kv_head : c->n_head;
    if (c->qk_norm == QK_NORM_FULL) { *rows = N; *n = heads * c->head_dim; }
    else { *rows = (int64_t)N * heads; *n = c->head_dim; }
}

void dec_attend(decoder *d, const dec_pass *p, int layer, layer_acts *A)
{
    const model_config *c = &d->m->cfg;
    int K = d->K;
    if (d->o.n_ctx > 0) {
        /* inference: each sequence's rows append their k, v to its cache
         * and attend over all of it */
        for (int gi = 0; gi < p->n_groups; gi++) {
            const dec_group *g = &p->groups[gi];
            size_t at = ((size_t)g->seq * c->n_layer + layer) * d->o.n_ctx * K;
            float *kc = d->kcache + at, *vc = d->vcache + at;
            memcpy(kc + (size_t)g->n_past * K, A->k + (size_t)g->row0 * K, (size_t)g->n * K * sizeof(float));
            memcpy(vc + (size_t)g->n_past * K, A->v + (size_t)g->row0 * K, (size_t)g->n * K * sizeof(float));
            attn_shape as = cache_attn(c, layer, g->n, g->n_past, d->o.n_ctx, K);
            if (g->prefix > 0) as.prefix = &g->prefix;   /* paligemma's prefill: image + prompt both ways */
            kern_attn_fwd(A->att + (size_t)g->row0 * d->Q, NULL, A->q + (size_t)g->row0 * d->Q, kc, vc, &as,
                          d->attn_scratch);
        }
    } else {
        attn_shape as = dec_train_attn(c, layer, p->B, p->T, K, p->seg, p->prefix);
        PROF("fwd.attn", kern_attn_fwd(A->att, A->lse, A->q, A->k, A->v, &as, d->attn_scratch));
    }
}

/* gemma2 (Gemma2DecoderLayer), RMSNorm weights held as (1 + w):
 *   xn1 = rmsnorm(x) ; q,k,v = lin(xn1) ; rope ; att = capped attn (window on even layers)
 *   h   = x + rmsnorm(lin_o(att))
 *   xn2 = rmsnorm(h) ; g,u = lin(xn2) ; act = gelu_tanh(g)·u
 *   x'  = h + rmsnorm(lin_down(act))
 * rstd1, rstd2 keep the pre norms', rstd3, rstd4 the post norms' rstd;
 * grad/backward.c's gemma2_layer_bwd walks it back. */
static void gemma2_layer_fwd(decoder *d, const dec_pass *p, int layer, layer_acts *A, const float *x, float *xout)
{
    const model_config *c = &d->m->cfg;
    const layer_weights *w = &d->m->layers[layer];
    int N = p->B * p->T, C = d->C;
    size_t NC = (size_t)N * C;
    PROF("fwd.rmsnorm", kern_rmsnorm_fwd(d->xn, A->rstd1, x, w->attn_norm, N, C, c->rms_eps));
    lin_fwd(d, p, A, layer, LM_Q, d->xn, A->q, N, 0);
    lin_fwd(d, p, A, layer, LM_K, d->xn, A->k, N, 0);
    lin_fwd(d, p, A, layer, LM_V, d->xn, A->v, N, 0);
    PROF("fwd.rope", dec_rope(d, A->q, N, c->n_head, 0); dec_rope(d, A->k, N, c->n_kv_head, 0));
    dec_attend(d, p, layer, A);
    lin_fwd(d, p, A, layer, LM_O, A->att, A->ao, N, 0);
    PROF("fwd.rmsnorm", kern_rmsnorm_fwd(d->xn, A->rstd3, A->ao, w->post_attn_norm, N, C, c->rms_eps));
    for (size_t i = 0; i < NC; i++) A->h[i] = x[i] + d->xn[i];
    PROF("fwd.rmsnorm", kern_rmsnorm_fwd(d->xn, A->rstd2, A->h, w->ffn_norm, N, C, c->rms_eps));
    lin_fwd(d, p, A, layer, LM_GATE, d->xn, A->g, N, 0);
    lin_fwd(d, p, A, layer, LM_UP, d->xn, A->u, N, 0);
    PROF("fwd.geglu", kern_geglu_fwd(d->act, A->g, A->u, (int64_t)N * d->F));
    lin_fwd(d, p, A, layer, LM_DOWN, d->act, A->mo, N, 0);
    PROF("fwd.rmsnorm", kern_rmsnorm_fwd(d->xn, A->rstd4, A->mo, w->post_ffn_norm, N, C, c->rms_eps));
    for (size_t i = 0; i < NC; i++) xout[i] = A->h[i] + d->xn[i];
}

void dec_layer_fwd(decoder *d, const dec_pass *p, int layer, layer_acts *A, const float *x, float *xout)
{
    if (d->m->cfg.sandwich) {
        gemma2_layer_fwd(d, p, layer, A, x, xout);
        return;
    }
    const model_config *c = &d->m->cfg;
    const layer_weights *w = &d->m->layers[layer];
    int N = p->B * p->T, C = d->C;
    /* the attention's input: rmsnorm(x), or x itself (post_norm) */
    const float *xa = x;
    if (!c->post_norm) {
        PROF("fwd.rmsnorm", kern_rmsnorm_fwd(d->xn, A->rstd1, x, w->attn_norm, N, C, c->rms_eps));
        xa = d->xn;
    }
    if (c->fused) {
        /* phi3: qkv_proj's rows are q, then k, then v */
        int Q = d->Q, K = d->K, W = Q + 2 * K;
        lin_fwd(d, p, A, layer, LM_Q, xa, d->fuse, N, 0);
        PROF("fwd.split", dec_cols_split(A->q, d->fuse, N, W, 0, Q); dec_cols_split(A->k, d->fuse, N, W, Q, K);
             dec_cols_split(A->v, d->fuse, N, W, Q + K, K));
    } else {
        /* qwen3 / olmo2: q and k are normalised before RoPE */
        lin_fwd(d, p, A, layer, LM_Q, xa, c->qk_norm ? A->qr : A->q, N, 0);
        lin_fwd(d, p, A, layer, LM_K, xa, c->qk_norm ? A->kr : A->k, N, 0);
        lin_fwd(d, p, A, layer, LM_V, xa, A->v, N, 0);
    }
    if (c->qk_norm) {
        int64_t rq, rk;
        int nq, nk;
        dec_qk_norm_shape(c, N, 0, &rq, &nq);
        dec_qk_norm_shape(c, N, 1, &rk, &nk);
        PROF("fwd.rmsnorm", kern_rmsnorm_fwd(A->q, A->rq, A->qr, w->q_norm, rq, nq, c->rms_eps);
             kern_rmsnorm_fwd(A->k, A->rk, A->kr, w->k_norm, rk, nk, c->rms_eps));
    }
    if (model_layer_rope(c, layer)) {   /* smollm3: no RoPE on every fourth layer */
        PROF("fwd.rope", dec_rope(d, A->q, N, c->n_head, 0); dec_rope(d, A->k, N, c->n_kv_head, 0));
    }
    dec_attend(d, p, layer, A);
    size_t NC = (size_t)N * C;
    const float *xm = d->xn;   /* the MLP's input */
    if (c->post_norm) {
        /* olmo2: h = x + rmsnorm(o(att)) ; MLP on h */
        lin_fwd(d, p, A, layer, LM_O, A->att, A->ao, N, 0);
        PROF("fwd.rmsnorm", kern_rmsnorm_fwd(d->xn, A->rstd1, A->ao, w->post_attn_norm, N, C, c->rms_eps));
        for (size_t i = 0; i < NC; i++) A->h[i] = x[i] + d->xn[i];
        xm = A->h;
    } else {
        /* h = x + o(att): the projection accumulates onto a copy of x */
        PROF("fwd.resid", memcpy(A->h, x, NC * sizeof(float)));
        lin_fwd(d, p, A, layer, LM_O, A->att, A->h, N, 1);
        PROF("fwd.rmsnorm", kern_rmsnorm_fwd(d->xn, A->rstd2, A->h, w->ffn_norm, N, C, c->rms_eps));
    }
    if (c->n_expert) {   /* mixtral: x' = h + MoE(xn2) (decoder/moe.c) */
        PROF("fwd.resid", memcpy(xout, A->h, NC * sizeof(float)));
        dec_moe_fwd(d, A, layer, xm, xout, N);
        return;
    }
    if (c->fused) {   /* phi3: gate_up_proj's rows are gate, then up */
        lin_fwd(d, p, A, layer, LM_GATE, xm, d->fuse, N, 0);
        PROF("fwd.split", dec_cols_split(A->g, d->fuse, N, 2 * d->F, 0, d->F);
             dec_cols_split(A->u, d->fuse, N, 2 * d->F, d->F, d->F));
    } else {
        lin_fwd(d, p, A, layer, LM_GATE, xm, A->g, N, 0);
        lin_fwd(d, p, A, layer, LM_UP, xm, A->u, N, 0);
    }
    if (c->act_gelu) PROF("fwd.geglu", kern_geglu_fwd(d->act, A->g, A->u, (int64_t)N * d->F));   /* gemma */
    else PROF("fwd.swiglu", kern_swiglu_fwd(d->act, A->g, A->u, (int64_t)N * d->F));
    if (c->post_norm) {
        /* x' = h + rmsnorm(down(act)) */
        lin_fwd(d, p, A, layer, LM_DOWN, d->act, A->mo, N, 0);
        PROF("fwd.rmsnorm", kern_rmsnorm_fwd(d->xn, A->rstd2, A->mo, w->post_ffn_norm, N, C, c->rms_eps));
        for (size_t i = 0; i < NC; i++) xout[i] = A->h[i] + d->xn[i];
        return;
    }
    PROF("fwd.resid", memcpy(xout, A->h, NC * sizeof(float)));
    lin_fwd(d, p, A, layer, LM_DOWN, d->act, xout, N, 1);
}

void dec_cols_split(float *dst, const float *src, int N, int W, int off, int w)
{
    for (int n = 0; n < N; n++)
        memcpy(dst + (size_t)n * w, src + (size_t)n * W + off, (size_t)w * sizeof(float));
}

void dec_cols_gather(float *dst, const float *src, int N, int W, int off, int w)
{
    for (int n = 0; n < N; n++)
        memcpy(dst + (size_t)n * W + off, src + (size_t)n * w, (size_t)w * sizeof(float));
}

void dec_rope(decoder *d, float *x, int N, int H, int bwd)
{
    const model_config *c = &d->m->cfg;
    if (bwd) kern_rope_bwd_tp(x, d->rope_cs, d->rope_sn, N, H, c->head_dim, model_rope_dim(c));
    else kern_rope_fwd_tp(x, d->rope_cs, d->rope_sn, N, H, c->head_dim, model_rope_dim(c));
}

/* The RoPE table of N positions. LongRoPE (phi3) takes the long factors
 * when the context exceeds the original one, as llama.cpp's
 * get_rope_factors decides by its context size: a training pass's
 * context is its rows' length T (transformers decides by the largest
 * position + 1, the same for unpacked rows), an inference decoder's its
 * n_ctx. cos and sin carry the attention factor, as transformers'
 * Phi3RotaryEmbedding and ggml's rope mscale apply it. */
static void rope_table(decoder *d, const int32_t *pos, const int32_t *pos3, int N, int ctx)
{
    const model *m = d->m;
    const model_config *c = &m->cfg;
    int RD = model_rope_dim(c);
    const double *inv = m->rope_inv_freq_long && ctx > c->rope_orig_ctx ? m->rope_inv_freq_long : m->rope_inv_freq;
    /* Qwen2-VL's three streams; the sections were checked at load, so the
     * table cannot fail (and equal streams give kern_rope_table's bits) */
    if (pos3) qwen2vl_mrope_table(d->rope_cs, d->rope_sn, pos3, N, RD, inv, c->mrope, NULL);
    else kern_rope_table(d->rope_cs, d->rope_sn, pos, N, RD, inv);
    if (c->rope_attn > 0)
        for (size_t i = 0; i < (size_t)N * (RD / 2); i++) {
            d->rope_cs[i] *= c->rope_attn;
            d->rope_sn[i] *= c->rope_attn;
        }
}

void dec_forward_layers(decoder *d, const dec_pass *p, const token_batch *b)
{
    const model_config *c = &d->m->cfg;
    int N = b->B * b->T;
    size_t stride = (size_t)d->N * d->C;
    PROF("fwd.embed", embed(d, b->tokens, b->embeds, b->embed_row, N, d->X));
    PROF("fwd.rope", rope_table(d, b->pos, b->pos3, N, b->T));
    for (int layer = 0; layer < c->n_layer; layer++)
        dec_layer_fwd(d, p, layer, dec_acts_for(d, layer), d->X + layer * stride, d->X + (layer + 1) * stride);
    kern_rmsnorm_fwd(d->xnf, d->rstdf, d->X + (size_t)c->n_layer * stride, d->m->out_norm, N, d->C, c->rms_eps);
}

/* LoRA mode and plain forwards take the fused kernel over all selected
 * rows; full mode needs the logits (for dWout) and goes chunk by chunk. */
double dec_head_loss(decoder *d, const token_batch *b, int want_grad, float grad_scale, float *dWout,
                     float *nll_out, int64_t *n_loss)
{
    int N = b->B * b->T, C = d->C;
    const wmat *Wo = lora_head(d->l, d->m);
    int nr = 0;
    for (int n = 0; n < N; n++)
        if (b->targets[n] >= 0) d->rows[nr++] = n;
    if (want_grad) memset(d->dxn, 0, (size_t)N * C * sizeof(float));
    if (nll_out) memset(nll_out, 0, (size_t)N * sizeof(float));
    double total = 0;
    for (int r0 = 0; r0 < nr; r0 += d->sel) {
        int cn = nr - r0 < d->sel ? nr - r0 : d->sel;
        for (int i = 0; i < cn; i++) {
            int n = d->rows[r0 + i];
            memcpy(d->xsel + (size_t)i * C, d->xnf + (size_t)n * C, (size_t)C * sizeof(float));
            d->tsel[i] = b->targets[n];
        }
        float cap = d->m->cfg.final_softcap;
        if (cap > 0) {
            /* gemma2: logits = cap·tanh(z/cap); the gradient of z is the
             * capped logits' gradient × (1 − tanh²) */
            PROF("head.matmul", kern_matmul(d->logits_cap, d->xsel, Wo, NULL, cn, 0));
            kern_softcap(d->logits_cap, (int64_t)cn * d->V, cap);
            PROF("head.xent", total += kern_xent(want_grad ? d->logits : NULL, d->nsel, d->logits_cap, d->tsel, cn,
                                                 d->V, grad_scale));
            if (want_grad) {
                kern_softcap_bwd(d->logits, d->logits_cap, (int64_t)cn * d->V, cap);
                memset(d->dsel, 0, (size_t)cn * C * sizeof(float));
                PROF("head.dx", kern_matmul_dx(d->dsel, d->logits, Wo, cn));
                if (dWout) kern_sgemm(1, 0, d->V, C, cn, 1.0f, d->logits, d->V, d->xsel, C, 1.0f, dWout, C);
            }
        } else if (!d->o.full) {
            PROF("head.fused", total += kern_head_xent(want_grad ? d->dsel : NULL, d->nsel, d->xsel, Wo, d->tsel,
                                                       cn, grad_scale, d->head_scratch));
            /* head_grad: dW += (softmax − onehot)·scale ᵀ · x, chunk by chunk,
             * the full mode's formula (the fused pass above stays the loss
             * and the input gradient, so the LoRA gradient is unchanged) */
            if (want_grad && dWout && d->o.head_grad)
                for (int c0 = 0; c0 < cn; c0 += d->chunk) {
                    int cc = cn - c0 < d->chunk ? cn - c0 : d->chunk;
                    PROF("head.matmul", kern_matmul(d->logits, d->xsel + (size_t)c0 * C, Wo, NULL, cc, 0));
                    PROF("head.xent", kern_xent(d->logits, d->nchunk, d->logits, d->tsel + c0, cc, d->V, grad_scale));
                    kern_sgemm(1, 0, d->V, C, cc, 1.0f, d->logits, d->V, d->xsel + (size_t)c0 * C, C, 1.0f, dWout, C);
                }
        } else {
            PROF("head.matmul", kern_matmul(d->logits, d->xsel, Wo, NULL, cn, 0));
            PROF("head.xent", total += kern_xent(want_grad ? d->logits : NULL, d->nsel, d->logits, d->tsel, cn,
                                                 d->V, grad_scale));
            if (want_grad) {
                memset(d->dsel, 0, (size_t)cn * C * sizeof(float));
                PROF("head.dx", kern_matmul_dx(d->dsel, d->logits, Wo, cn));
                if (dWout) kern_sgemm(1, 0, d->V, C, cn, 1.0f, d->logits, d->V, d->xsel, C, 1.0f, dWout, C);
            }
        }
        if (nll_out)
            for (int i = 0; i < cn; i++) nll_out[d->rows[r0 + i]] = d->nsel[i];
        if (want_grad)
            for (int i = 0; i < cn; i++)
                memcpy(d->dxn + (size_t)d->rows[r0 + i] * C, d->dsel + (size_t)i * C, (size_t)C * sizeof(float));
    }
    *n_loss = nr;
    return total;
}

double decoder_loss(decoder *d, const token_batch *b, float *nll, float *logits_out, int64_t *n_loss)
{
    dec_pass p = {.train = 0, .B = b->B, .T = b->T, .seg = b->seg, .prefix = b->prefix};
    decoder_dora_prepare(d);
    dec_forward_layers(d, &p, b);
    if (logits_out) {
        int N = b->B * b->T;
        for (int r0 = 0; r0 < N; r0 += d->chunk) {
            int cn = N - r0 < d->chunk ? N - r0 : d->chunk;
            kern_matmul(logits_out + (size_t)r0 * d->V, d->xnf + (size_t)r0 * d->C, lora_head(d->l, d->m), NULL, cn, 0);
        }
        if (d->m->cfg.final_softcap > 0) kern_softcap(logits_out, (int64_t)N * d->V, d->m->cfg.final_softcap);
    }
    return dec_head_loss(d, b, 0, 0.0f, NULL, nll, n_loss);
}

/* ---- inference ---------------------------------------------------------- */

void decoder_eval_splice(decoder *d, const int32_t *tokens, const dec_group *groups, int n_groups,
                         const dec_splice *sp, float *logits, int all_logits)
{
    const model *m = d->m;
    const model_config *c = &m->cfg;
    int C = d->C, N = 0;
    for (int gi = 0; gi < n_groups; gi++) {
        const dec_group *g = &groups[gi];
        for (int i = 0; i < g->n; i++) d->pos[g->row0 + i] = g->n_past + i + g->pos_off;
        if (g->row0 + g->n > N) N = g->row0 + g->n;
    }
    dec_pass p = {.train = 0, .B = 1, .T = N, .groups = groups, .n_groups = n_groups};
    embed(d, tokens, sp ? sp->embeds : NULL, sp ? sp->embed_row : NULL, N, d->X);
    rope_table(d, d->pos, sp ? sp->pos3 : NULL, N, d->o.n_ctx);
    for (int layer = 0; layer < c->n_layer; layer++) dec_layer_fwd(d, &p, layer, &d->acts[0], d->X, d->X);
    kern_rmsnorm_fwd(d->xnf, d->rstdf, d->X, m->out_norm, N, C, c->rms_eps);
    if (all_logits) {
        kern_matmul_infer(logits, d->xnf, lora_head(d->l, m), NULL, N, 0);
    } else if (n_groups == 1) {
        kern_matvec(logits, d->xnf + (size_t)(groups[0].row0 + groups[0].n - 1) * C, lora_head(d->l, m), NULL);
    } else {
        /* each sequence's last row, gathered, through one pass over the
         * head (each row as kern_matvec would give it alone) */
        for (int gi = 0; gi < n_groups; gi++)
            memcpy(d->xn + (size_t)gi * C, d->xnf + (size_t)(groups[gi].row0 + groups[gi].n - 1) * C,
                   (size_t)C * sizeof(float));
        kern_matvec_n(logits, d->xn, lora_head(d->l, m), NULL, n_groups);
    }
    if (c->final_softcap > 0)   /* gemma2 */
        kern_softcap(logits, (int64_t)(all_logits ? N : n_groups) * d->V, c->final_softcap);
}

void decoder_eval_groups(decoder *d, const int32_t *tokens, const dec_group *groups, int n_groups, float *logits,
                         int all_logits)
{
    decoder_eval_splice(d, tokens, groups, n_groups, NULL, logits, all_logits);
}

void decoder_eval(decoder *d, const int32_t *tokens, int n, int n_past, float *logits, int all_logits)
{
    dec_group g = {.row0 = 0, .n = n, .seq = 0, .n_past = n_past};
    decoder_eval_groups(d, tokens, &g, 1, logits, all_logits);
}

const float *decoder_hidden(const decoder *d) { return d->xnf; }

void decoder_cache_copy_from(decoder *dst, int dst_seq, const decoder *src, int src_seq, int n)
{
    size_t K = (size_t)dst->K, L = (size_t)dst->m->cfg.n_layer;
    for (size_t l = 0; l < L; l++) {
        size_t to = ((size_t)dst_seq * L + l) * (size_t)dst->o.n_ctx * K;
        size_t from = ((size_t)src_seq * L + l) * (size_t)src->o.n_ctx * K;
        memmove(dst->kcache + to, src->kcache + from, (size_t)n * K * sizeof(float));
        memmove(dst->vcache + to, src->vcache + from, (size_t)n * K * sizeof(float));
    }
}

void decoder_cache_copy(decoder *d, int dst_seq, int src_seq, int n)
{
    decoder_cache_copy_from(d, dst_seq, d, src_seq, n);
}
