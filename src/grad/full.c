#include "grad/full.h"

#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"

/* ---- the canonical layout ------------------------------------------------ */

size_t full_grads_carve(const model_config *c, float *slab, full_grads *g)
{
    size_t off = 0, C = (size_t)c->d_model, V = (size_t)c->vocab, F = (size_t)c->n_ff;
    size_t Q = (size_t)c->n_head * c->head_dim, K = (size_t)c->n_kv_head * c->head_dim;
#define TAKE(dst, n) do { if (g) (dst) = slab ? slab + off : NULL; off += (n); } while (0)
    TAKE(g->tok_embd, V * C);
    for (int l = 0; l < c->n_layer; l++) {
        layer_grads *lg = g ? &g->layers[l] : NULL;
        size_t nq = c->qk_norm == QK_NORM_FULL ? Q : (size_t)c->head_dim;
        size_t nk = c->qk_norm == QK_NORM_FULL ? K : (size_t)c->head_dim;
        if (!c->post_norm || c->sandwich) TAKE(lg->attn_norm, C);
        TAKE(lg->wq, Q * C);
        if (c->qkv_bias) TAKE(lg->bq, Q);
        if (c->qk_norm) TAKE(lg->q_norm, nq);
        TAKE(lg->wk, K * C);
        if (c->qkv_bias) TAKE(lg->bk, K);
        if (c->qk_norm) TAKE(lg->k_norm, nk);
        TAKE(lg->wv, K * C);
        if (c->qkv_bias) TAKE(lg->bv, K);
        TAKE(lg->wo, C * Q);
        if (c->post_norm) TAKE(lg->post_attn_norm, C);
        if (!c->post_norm || c->sandwich) TAKE(lg->ffn_norm, C);   /* gemma2: pre_feedforward_layernorm */
        TAKE(lg->w_gate, F * C);
        TAKE(lg->w_up, F * C);
        TAKE(lg->w_down, C * F);
        if (c->post_norm) TAKE(lg->post_ffn_norm, C);
    }
    TAKE(g->out_norm, C);
    if (!c->tied) TAKE(g->output, V * C);
    else if (g) g->output = NULL;
#undef TAKE
    return off;
}


static wmat f32mat(float *p, int64_t rows, int64_t cols)
{
    wmat w = {DT_F32, rows, cols, (size_t)cols * sizeof(float), p};
    return w;
}

void full_model_bind(full_model *f)
{
    const model_config *c = &f->m.cfg;
    int64_t C = c->d_model, V = c->vocab, F = c->n_ff;
    int64_t Q = (int64_t)c->n_head * c->head_dim, K = (int64_t)c->n_kv_head * c->head_dim;
    f->m.tok_embd = f32mat(f->p.tok_embd, V, C);
    f->m.output = c->tied ? f->m.tok_embd : f32mat(f->p.output, V, C);
    f->m.out_norm = f->p.out_norm;
    for (int l = 0; l < c->n_layer; l++) {
        layer_weights *w = &f->m.layers[l];
        layer_grads *p = &f->p.layers[l];
        w->attn_norm = p->attn_norm;
        w->ffn_norm = p->ffn_norm;
        w->wq = f32mat(p->wq, Q, C);
        w->wk = f32mat(p->wk, K, C);
        w->wv = f32mat(p->wv, K, C);
        w->wo = f32mat(p->wo, C, Q);
        w->w_gate = f32mat(p->w_gate, F, C);
        w->w_up = f32mat(p->w_up, F, C);
        w->w_down = f32mat(p->w_down, C, F);
        w->bq = p->bq;
        w->bk = p->bk;
        w->bv = p->bv;
        w->q_norm = p->q_norm;
        w->k_norm = p->k_norm;
        w->post_attn_norm = p->post_attn_norm;
        w->post_ffn_norm = p->post_ffn_norm;
    }
}

static int alloc_full(const model_config *cfg, full_model **out, dlm_err *e)
{
    full_model *f = calloc(1, sizeof *f);
    if (!f) return err_set(e, "MemoryError", "out of memory");
    f->m.cfg = *cfg;
    f->p.layers = calloc((size_t)cfg->n_layer, sizeof *f->p.layers);
    f->layers_store = calloc((size_t)cfg->n_layer, sizeof *f->layers_store);
    f->rope_store = calloc((size_t)cfg->head_dim / 2 + 1, sizeof(double));
    f->n = full_grads_carve(cfg, NULL, NULL);
    f->slab = calloc(f->n, sizeof(float));
    if (!f->p.layers || !f->layers_store || !f->rope_store || !f->slab) {
        full_model_free(f);
        return err_set(e, "MemoryError", "out of memory for a full-parameter model");
    }
    full_grads_carve(cfg, f->slab, &f->p);
    f->m.layers = f->layers_store;
    f->m.rope_inv_freq = f->rope_store;
    model_rope_freqs(cfg, f->rope_store);
    full_model_bind(f);
    *out = f;
    return 0;
}

int full_model_new(const model_config *cfg, full_model **out, dlm_err *e)
{
    return alloc_full(cfg, out, e);
}

static void copy_mat(float *dst, const wmat *w)
{
    for (int64_t r = 0; r < w->rows; r++)
        kern_dequant_row(w->type, (const char *)w->data + (size_t)r * w->row_bytes, dst + r * w->cols, w->cols);
}

int full_model_from(const model *src, full_model **out, dlm_err *e)
{
    const model_config *c = &src->cfg;
    full_model *f;
    if (alloc_full(c, &f, e)) return -1;
    snprintf(f->m.source, sizeof f->m.source, "%s", src->source);
    memcpy(f->rope_store, src->rope_inv_freq, (size_t)(c->head_dim / 2) * sizeof(double));
    size_t C = (size_t)c->d_model;
    copy_mat(f->p.tok_embd, &src->tok_embd);
    if (!c->tied) copy_mat(f->p.output, &src->output);
    memcpy(f->p.out_norm, src->out_norm, C * sizeof(float));
    size_t Q = (size_t)c->n_head * c->head_dim, K = (size_t)c->n_kv_head * c->head_dim;
    for (int l = 0; l < c->n_layer; l++) {
        const layer_weights *w = &src->layers[l];
        layer_grads *p = &f->p.layers[l];
        if (c->post_norm) {
            memcpy(p->post_attn_norm, w->post_attn_norm, C * sizeof(float));
            memcpy(p->post_ffn_norm, w->post_ffn_norm, C * sizeof(float));
        }
        if (!c->post_norm || c->sandwich) {
            memcpy(p->attn_norm, w->attn_norm, C * sizeof(float));
            memcpy(p->ffn_norm, w->ffn_norm, C * sizeof(float));
        }
        copy_mat(p->wq, &w->wq);
        copy_mat(p->wk, &w->wk);
        copy_mat(p->wv, &w->wv);
        copy_mat(p->wo, &w->wo);
        copy_mat(p->w_gate, &w->w_gate);
        copy_mat(p->w_up, &w->w_up);
        copy_mat(p->w_down, &w->w_down);
        if (c->qkv_bias) {
            memcpy(p->bq, w->bq, Q * sizeof(float));
            memcpy(p->bk, w->bk, K * sizeof(float));
            memcpy(p->bv, w->bv, K * sizeof(float));
        }
        if (c->qk_norm) {
            int full = c->qk_norm == QK_NORM_FULL;
            memcpy(p->q_norm, w->q_norm, (full ? Q : (size_t)c->head_dim) * sizeof(float));
            memcpy(p->k_norm, w->k_norm, (full ? K : (size_t)c->head_dim) * sizeof(float));
        }
    }
    *out = f;
    return 0;
}

void full_model_free(full_model *f)
{
    if (!f) return;
    free(f->p.layers);
    free(f->layers_store);
    free(f->rope_store);
    free(f->slab);
    free(f);
}

int full_tensor_max(const model_config *c) { return 3 + c->n_layer * 15; }

int full_tensors(const model_config *c, const full_grads *g, full_tensor *out)
{
    int n = 0;
    int64_t C = c->d_model, V = c->vocab, F = c->n_ff;
    int64_t Q = (int64_t)c->n_head * c->head_dim, K = (int64_t)c->n_kv_head * c->head_dim;
#define ADD(ptr, r, cc, ...) do { snprintf(out[n].name, sizeof out[n].name, __VA_ARGS__); \
        out[n].p = (ptr); out[n].rows = (r); out[n].cols = (cc); n++; } while (0)
    ADD(g->tok_embd, V, C, "model.embed_tokens.weight");
    for (int l = 0; l < c->n_layer; l++) {
        const layer_grads *p = &g->layers[l];
        int64_t nq = c->qk_norm == QK_NORM_FULL ? Q : c->head_dim, nk = c->qk_norm == QK_NORM_FULL ? K : c->head_dim;
        if (p->attn_norm) ADD(p->attn_norm, C, 1, "model.layers.%d.input_layernorm.weight", l);
        ADD(p->wq, Q, C, "model.layers.%d.self_attn.q_proj.weight", l);
        if (p->bq) ADD(p->bq, Q, 1, "model.layers.%d.self_attn.q_proj.bias", l);
        if (p->q_norm) ADD(p->q_norm, nq, 1, "model.layers.%d.self_attn.q_norm.weight", l);
        ADD(p->wk, K, C, "model.layers.%d.self_attn.k_proj.weight", l);
        if (p->bk) ADD(p->bk, K, 1, "model.layers.%d.self_attn.k_proj.bias", l);
        if (p->k_norm) ADD(p->k_norm, nk, 1, "model.layers.%d.self_attn.k_norm.weight", l);
        ADD(p->wv, K, C, "model.layers.%d.self_attn.v_proj.weight", l);
        if (p->bv) ADD(p->bv, K, 1, "model.layers.%d.self_attn.v_proj.bias", l);
        ADD(p->wo, C, Q, "model.layers.%d.self_attn.o_proj.weight", l);
        if (p->ffn_norm && !c->sandwich) ADD(p->ffn_norm, C, 1, "model.layers.%d.post_attention_layernorm.weight", l);
        if (p->post_attn_norm) ADD(p->post_attn_norm, C, 1, "model.layers.%d.post_attention_layernorm.weight", l);
        if (p->ffn_norm && c->sandwich) ADD(p->ffn_norm, C, 1, "model.layers.%d.pre_feedforward_layernorm.weight", l);
        ADD(p->w_gate, F, C, "model.layers.%d.mlp.gate_proj.weight", l);
        ADD(p->w_up, F, C, "model.layers.%d.mlp.up_proj.weight", l);
        ADD(p->w_down, C, F, "model.layers.%d.mlp.down_proj.weight", l);
        if (p->post_ffn_norm) ADD(p->post_ffn_norm, C, 1, "model.layers.%d.post_feedforward_layernorm.weight", l);
    }
    ADD(g->out_norm, C, 1, "model.norm.weight");
    if (g->output) ADD(g->output, V, C, "lm_head.weight");
#undef ADD
    return n;
}
