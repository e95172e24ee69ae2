/* backward — the decoder's backward pass: the forward's equations
 * (decoder/forward.c) walked in reverse, for LoRA/DoRA adapters or every
 * weight (full mode). See backward.h. */
#include "grad/backward.h"

#include <stdlib.h>
#include <string.h>

#include "decoder/decoder_impl.h"
#include "grad/moe.h"
#include "kern/kern.h"

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
static void lin_bwd(decoder *d, const dec_pass *p, layer_acts *A, int layer, int m,
                    const float *x, const float *dy, float *dx, int N,
                    float *lg, float *dW, float *db, int acc)
{
    const wmat *W = lora_base_weight(d->m, layer, m);
    const lora_mod *md = d->l ? lora_mod_at(d->l, layer, m) : NULL;
    int I = (int)W->cols, O = (int)W->rows;
    if (dW) kern_sgemm(1, 0, O, I, N, 1.0f, dy, O, x, I, 1.0f, dW, I);  /* dW += dyᵀ·x */
    if (db) colsum_add(db, dy, N, O);
    if (!md) { if (dx) kern_matmul_dx_to(dx, dy, W, N, acc); return; }
    if (dx && !acc && d->l->cfg.dora) {     /* the DoRA paths below accumulate */
        memset(dx, 0, (size_t)N * I * sizeof(float));
        acc = 1;
    }
    const lora *l = d->l;
    int r = l->cfg.rank, drop = p->train && l->cfg.dropout > 0;
    float s = l->scale;
    const float *Aw = l->w + md->off_a, *Bw = l->w + md->off_b;
    float *dA = lg + md->off_a, *dB = lg + md->off_b;
    const float *xd = x;
    if (drop) {
        PROF("bwd.dropout", dec_dropout_apply(d->xd, x, (int64_t)N * I, l->cfg.dropout, A->keep[m]));
        xd = d->xd;
    }
    const float *U = A->U[m];
    const float *dyl = dy;
    /* without dropout the adapter's dx term joins the base product (below) */
    int fuse_dx = !l->cfg.dora && !drop;
    if (!l->cfg.dora) {
        if (dx && !fuse_dx) PROF("bwd.matmul_dx", kern_matmul_dx_to(dx, dy, W, N, acc));
    } else {
        const float *g = d->dora_g + d->dora_off[layer * LM_COUNT + m];
        const float *nrm = d->dora_norm + d->dora_off[layer * LM_COUNT + m];
        float *L = d->tmpO, *base = d->tmpO2;
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
        float *dyg = d->tmpO; /* L no longer needed */
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
            memset(d->tmpI, 0, (size_t)N * I * sizeof(float));
            kern_matmul_dx(d->tmpI, dyg, W, N);
            dec_dropout_apply(d->tmpI, d->tmpI, (int64_t)N * I, l->cfg.dropout, A->keep[m]);
            for (int64_t i = 0; i < (int64_t)N * I; i++) dx[i] += d->tmpI[i];
            for (int64_t n = 0; n < N; n++)
                for (int o = 0; o < O; o++) dyg[(size_t)n * O + o] = dy[(size_t)n * O + o] * g[o];
        }
        dyl = dyg;
    }
    PROF("bwd.lora_dB", kern_sgemm(1, 0, O, r, N, s, dyl, O, U, r, 1.0f, dB, r));            /* dB += s·dylᵀ·U */
    PROF("bwd.lora_dU", kern_sgemm(0, 0, N, r, O, s, dyl, O, Bw, r, 0.0f, d->dU, r));        /* dU = s·dyl·B  */
    PROF("bwd.lora_dA", kern_sgemm(1, 0, r, I, N, 1.0f, d->dU, r, xd, I, 1.0f, dA, I));      /* dA += dUᵀ·xd */
    if (!dx) return;
    if (fuse_dx) {
        PROF("bwd.matmul_dx", kern_matmul_dx_lora(dx, dy, W, N, acc, d->dU, Aw, r));      /* dx (+)= dy·W + dU·A */
    } else if (!drop) {
        PROF("bwd.lora_dx", kern_sgemm(0, 0, N, I, r, 1.0f, d->dU, r, Aw, I, 1.0f, dx, I));  /* dx += dU·A */
    } else {
        kern_sgemm(0, 0, N, I, r, 1.0f, d->dU, r, Aw, I, 0.0f, d->tmpI, I);
        /* dx += dropout(dU·A), the mask applied and added in one pass */
        PROF("bwd.dropout", kern_dropout_add(dx, d->tmpI, A->keep[m], (int64_t)N * I, 1.0f / (1.0f - l->cfg.dropout)));
    }
}


/* ---- backward ----------------------------------------------------------- */

/* gemma2: decoder/forward.c's gemma2_layer_fwd in reverse. */
static void gemma2_layer_bwd(decoder *d, const dec_pass *p, const token_batch *b, int layer, layer_acts *A,
                             const float *x, float *lg, layer_grads *G)
{
    const model_config *c = &d->m->cfg;
    const layer_weights *w = &d->m->layers[layer];
    int N = b->B * b->T, C = d->C, F = d->F;
    attn_shape as = dec_train_attn(c, layer, b->B, b->T, d->K, b->seg, b->prefix);
    float *dres = d->dres; /* in: dL/dx_out; out: dL/dx */

    /* x_out = h + rmsnorm(down(gelu_tanh(g)·u)) */
    PROF("bwd.rmsnorm", kern_rmsnorm_bwd(d->tmpC, G ? G->post_ffn_norm : NULL, dres, A->mo, w->post_ffn_norm,
                                         A->rstd4, N, C));
    PROF("bwd.recompute", kern_geglu_fwd(d->act, A->g, A->u, (int64_t)N * F));
    lin_bwd(d, p, A, layer, LM_DOWN, d->act, d->tmpC, d->dact, N, lg, G ? G->w_down : NULL, NULL, 0);
    PROF("bwd.geglu", kern_geglu_bwd(d->dg, d->du, d->dact, A->g, A->u, (int64_t)N * F));
    PROF("bwd.recompute", kern_rmsnorm_apply(d->xn, A->h, w->ffn_norm, A->rstd2, N, C));
    lin_bwd(d, p, A, layer, LM_GATE, d->xn, d->dg, d->dxn, N, lg, G ? G->w_gate : NULL, NULL, 0);
    lin_bwd(d, p, A, layer, LM_UP, d->xn, d->du, d->dxn, N, lg, G ? G->w_up : NULL, NULL, 1);
    PROF("bwd.rmsnorm", kern_rmsnorm_bwd_add(dres, G ? G->ffn_norm : NULL, d->dxn, A->h, w->ffn_norm, A->rstd2, N,
                                             C));                       /* now dL/dh */

    /* h = x + rmsnorm(o(attn(rope(q), rope(k), v))) */
    PROF("bwd.rmsnorm", kern_rmsnorm_bwd(d->tmpC, G ? G->post_attn_norm : NULL, dres, A->ao, w->post_attn_norm,
                                         A->rstd3, N, C));
    lin_bwd(d, p, A, layer, LM_O, A->att, d->tmpC, d->datt, N, lg, G ? G->wo : NULL, NULL, 0);
    PROF("bwd.attn", kern_attn_bwd(d->dq, d->dk, d->dv, d->datt, A->att, A->lse, A->q, A->k, A->v, &as, d->attn_scratch));
    PROF("bwd.rope", dec_rope(d, d->dq, N, c->n_head, 1); dec_rope(d, d->dk, N, c->n_kv_head, 1));
    PROF("bwd.recompute", kern_rmsnorm_apply(d->xn, x, w->attn_norm, A->rstd1, N, C));
    float *dxn = layer > 0 || G ? d->dxn : NULL;
    lin_bwd(d, p, A, layer, LM_Q, d->xn, d->dq, dxn, N, lg, G ? G->wq : NULL, NULL, 0);
    lin_bwd(d, p, A, layer, LM_K, d->xn, d->dk, dxn, N, lg, G ? G->wk : NULL, NULL, 1);
    lin_bwd(d, p, A, layer, LM_V, d->xn, d->dv, dxn, N, lg, G ? G->wv : NULL, NULL, 1);
    if (!dxn) return;
    PROF("bwd.rmsnorm", kern_rmsnorm_bwd_add(dres, G ? G->attn_norm : NULL, dxn, x, w->attn_norm, A->rstd1, N, C));
}

static void layer_bwd(decoder *d, const dec_pass *p, const token_batch *b, int layer, layer_acts *A,
                      const float *x, float *lg, layer_grads *G, int want_dx)
{
    if (d->m->cfg.sandwich) {
        gemma2_layer_bwd(d, p, b, layer, A, x, lg, G);
        return;
    }
    const model_config *c = &d->m->cfg;
    const layer_weights *w = &d->m->layers[layer];
    int N = b->B * b->T, C = d->C, F = d->F, K = d->K;
    size_t NC = (size_t)N * C;
    attn_shape as = dec_train_attn(c, layer, b->B, b->T, K, b->seg, b->prefix);
    float *dres = d->dres; /* in: dL/dx_out; out: dL/dx */
    int post = c->post_norm;

    if (c->n_expert) {
        /* mixtral: x_out = h + MoE(rmsnorm(h)) (grad/moe.c); then the attention */
        grad_moe_bwd(d, A, layer, dres, d->dxn, N);
        PROF("bwd.rmsnorm", kern_rmsnorm_bwd_add(dres, G ? G->ffn_norm : NULL, d->dxn, A->h, w->ffn_norm, A->rstd2,
                                                 N, C));
        goto attention;
    }
    /* MLP: x_out = h + down(silu(g)·u), or (post_norm) h + rmsnorm(down(·)) */
    const float *dmo = dres;
    if (post) {
        PROF("bwd.rmsnorm", kern_rmsnorm_bwd(d->tmpC, G ? G->post_ffn_norm : NULL, dres, A->mo, w->post_ffn_norm,
                                             A->rstd2, N, C));
        dmo = d->tmpC;
    }
    if (c->act_gelu) {   /* gemma: GeGLU */
        PROF("bwd.recompute", kern_geglu_fwd(d->act, A->g, A->u, (int64_t)N * F));
        lin_bwd(d, p, A, layer, LM_DOWN, d->act, dmo, d->dact, N, lg, G ? G->w_down : NULL, NULL, 0);
        PROF("bwd.geglu", kern_geglu_bwd(d->dg, d->du, d->dact, A->g, A->u, (int64_t)N * F));
    } else {
        PROF("bwd.recompute", kern_swiglu_fwd(d->act, A->g, A->u, (int64_t)N * F));
        lin_bwd(d, p, A, layer, LM_DOWN, d->act, dmo, d->dact, N, lg, G ? G->w_down : NULL, NULL, 0);
        PROF("bwd.swiglu", kern_swiglu_bwd(d->dg, d->du, d->dact, A->g, A->u, (int64_t)N * F));
    }
    const float *xm = A->h;
    if (!post) {
        PROF("bwd.recompute", kern_rmsnorm_apply(d->xn, A->h, w->ffn_norm, A->rstd2, N, C));
        xm = d->xn;
    }
    if (c->fused) {   /* phi3: one gate_up_proj, its gradient rows gate then up */
        PROF("bwd.split", dec_cols_gather(d->fuse, d->dg, N, 2 * F, 0, F); dec_cols_gather(d->fuse, d->du, N, 2 * F, F, F));
        lin_bwd(d, p, A, layer, LM_GATE, xm, d->fuse, d->dxn, N, lg, NULL, NULL, 0);
    } else {
        lin_bwd(d, p, A, layer, LM_GATE, xm, d->dg, d->dxn, N, lg, G ? G->w_gate : NULL, NULL, 0);
        lin_bwd(d, p, A, layer, LM_UP, xm, d->du, d->dxn, N, lg, G ? G->w_up : NULL, NULL, 1);
    }
    if (post) {
        for (size_t i = 0; i < NC; i++) dres[i] += d->dxn[i];
    } else {
        PROF("bwd.rmsnorm", kern_rmsnorm_bwd_add(dres, G ? G->ffn_norm : NULL, d->dxn, A->h, w->ffn_norm, A->rstd2,
                                                 N, C));
    }                                                                   /* now dL/dh */

attention:;
    /* attention: h = x + o(attn(rope(q), rope(k), v)), or h = x + rmsnorm(o(·)) */
    const float *dao = dres;
    if (post) {
        PROF("bwd.rmsnorm", kern_rmsnorm_bwd(d->tmpC, G ? G->post_attn_norm : NULL, dres, A->ao, w->post_attn_norm,
                                             A->rstd1, N, C));
        dao = d->tmpC;
    }
    lin_bwd(d, p, A, layer, LM_O, A->att, dao, d->datt, N, lg, G ? G->wo : NULL, NULL, 0);
    PROF("bwd.attn", kern_attn_bwd(d->dq, d->dk, d->dv, d->datt, A->att, A->lse, A->q, A->k, A->v, &as, d->attn_scratch));
    if (model_layer_rope(c, layer)) {
        PROF("bwd.rope", dec_rope(d, d->dq, N, c->n_head, 1); dec_rope(d, d->dk, N, c->n_kv_head, 1));
    }
    const float *dq = d->dq, *dk = d->dk;
    if (c->qk_norm) {   /* q, k = rmsnorm of the projections (per head or whole) */
        int64_t rq, rk;
        int nq, nk;
        dec_qk_norm_shape(c, N, 0, &rq, &nq);
        dec_qk_norm_shape(c, N, 1, &rk, &nk);
        PROF("bwd.rmsnorm", kern_rmsnorm_bwd(d->dqr, G ? G->q_norm : NULL, d->dq, A->qr, w->q_norm, A->rq, rq, nq);
             kern_rmsnorm_bwd(d->dkr, G ? G->k_norm : NULL, d->dk, A->kr, w->k_norm, A->rk, rk, nk));
        dq = d->dqr;
        dk = d->dkr;
    }
    const float *xa = x;
    if (!post) {
        PROF("bwd.recompute", kern_rmsnorm_apply(d->xn, x, w->attn_norm, A->rstd1, N, C));
        xa = d->xn;
    }
    /* The first layer's input gradient goes nowhere unless the embedding
     * (full mode) wants it. */
    float *dxn = layer > 0 || G || want_dx ? d->dxn : NULL;
    if (c->fused) {   /* phi3: one qkv_proj, its gradient rows q, k, v */
        int Q = d->Q, W = Q + 2 * K;
        PROF("bwd.split", dec_cols_gather(d->fuse, dq, N, W, 0, Q); dec_cols_gather(d->fuse, dk, N, W, Q, K);
             dec_cols_gather(d->fuse, d->dv, N, W, Q + K, K));
        lin_bwd(d, p, A, layer, LM_Q, xa, d->fuse, dxn, N, lg, NULL, NULL, 0);
    } else {
        lin_bwd(d, p, A, layer, LM_Q, xa, dq, dxn, N, lg, G ? G->wq : NULL, G ? G->bq : NULL, 0);
        lin_bwd(d, p, A, layer, LM_K, xa, dk, dxn, N, lg, G ? G->wk : NULL, G ? G->bk : NULL, 1);
        lin_bwd(d, p, A, layer, LM_V, xa, d->dv, dxn, N, lg, G ? G->wv : NULL, G ? G->bv : NULL, 1);
    }
    if (!dxn) return;
    if (post) {
        for (size_t i = 0; i < NC; i++) dres[i] += dxn[i];
    } else {
        PROF("bwd.rmsnorm", kern_rmsnorm_bwd_add(dres, G ? G->attn_norm : NULL, dxn, x, w->attn_norm, A->rstd1,
                                                 N, C));                /* now dL/dx */
    }
}

static double bwd(decoder *d, const token_batch *b, float *lora_grad, const full_grads *fg, float grad_scale,
                  uint64_t seed, uint64_t micro_step, const bwd_rows *rows, int64_t *n_loss)
{
    const model_config *c = &d->m->cfg;
    dec_pass p = {.train = 1, .seed = seed, .micro = micro_step, .B = b->B, .T = b->T, .seg = b->seg,
                  .prefix = b->prefix};
    int N = b->B * b->T, C = d->C;
    size_t stride = (size_t)d->N * C;
    decoder_dora_prepare(d);
    dec_forward_layers(d, &p, b);
    double loss = dec_head_loss(d, b, 1, grad_scale, fg ? (fg->output ? fg->output : fg->tok_embd) : NULL,
                            rows ? rows->nll : NULL, n_loss);
    if (rows) {
        rows->fn(rows->ctx, b, rows->nll, rows->scale);
        for (int n = 0; n < N; n++) {
            float s = rows->scale[n], *r = d->dxn + (size_t)n * C;
            for (int i = 0; i < C; i++) r[i] *= s;
        }
    }
    /* final norm */
    kern_rmsnorm_bwd(d->dres, fg ? fg->out_norm : NULL, d->dxn, d->X + (size_t)c->n_layer * stride,
                     d->m->out_norm, d->rstdf, N, C);
    for (int layer = c->n_layer - 1; layer >= 0; layer--) {
        layer_acts *A = dec_acts_for(d, layer);
        const float *x = d->X + (size_t)layer * stride;
        if (d->n_acts == 1) /* recompute: re-run this layer's forward, same inputs, same draws */
            dec_layer_fwd(d, &p, layer, A, x, d->tmpC /* output unused */);
        layer_bwd(d, &p, b, layer, A, x, lora_grad, fg && fg->layers ? &fg->layers[layer] : NULL, fg != NULL);
    }
    if (fg) { /* embedding rows: sequential scatter-add, fixed order (gemma2: × its scale); a spliced
               * row's gradient stops there (the towers are frozen) */
        float sc = c->embd_scale > 0 ? c->embd_scale : 1.0f;
        for (int n = 0; n < N; n++) {
            if (b->embed_row && b->embed_row[n] >= 0) continue;
            float *dst = fg->tok_embd + (size_t)b->tokens[n] * C;
            const float *src = d->dres + (size_t)n * C;
            for (int i = 0; i < C; i++) dst[i] += src[i] * sc;
        }
    }
    return loss;
}

double backward_step(decoder *d, const token_batch *b, float *lora_grad, const full_grads *fg, float grad_scale,
                     uint64_t seed, uint64_t micro_step, int64_t *n_loss)
{
    return bwd(d, b, lora_grad, fg, grad_scale, seed, micro_step, NULL, n_loss);
}

double backward_step_rows(decoder *d, const token_batch *b, float *lora_grad, uint64_t seed, uint64_t micro_step,
                          const bwd_rows *rows, int64_t *n_loss)
{
    return bwd(d, b, lora_grad, NULL, 1.0f, seed, micro_step, rows, n_loss);
}
