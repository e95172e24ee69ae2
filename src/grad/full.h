/* full — a model whose every weight is a trainable f32 tensor in one slab,
 * for full-parameter training (the embedded base is pretrained this way).
 *
 * The slab follows full_grads_carve's canonical order, so parameters,
 * gradients and AdamW moments are four equal flat vectors. */
#ifndef DLM_FULL_H
#define DLM_FULL_H

#include "weights/model.h"
#include "util/err.h"

/* Gradients of every weight, for full-parameter training. The layout of the
 * slab is the canonical order of full_grads_carve. */
typedef struct layer_grads {
    float *attn_norm, *wq, *wk, *wv, *wo, *bq, *bk, *bv, *ffn_norm, *w_gate, *w_up, *w_down;
    float *q_norm, *k_norm;   /* qk_norm models only ([HS] each, or [Q] [K]) */
    float *post_attn_norm, *post_ffn_norm; /* post_norm models (attn_norm, ffn_norm NULL then) */
} layer_grads;
typedef struct full_grads {
    float *tok_embd, *output, *out_norm; /* output NULL when tied */
    layer_grads *layers;                 /* [L] (owned, free()) */
} full_grads;

/* Canonical order of every trainable tensor for full-parameter training:
 * tok_embd, then per layer attn_norm wq [bq] [q_norm] wk [bk] [k_norm] wv [bv] wo ffn_norm
 * w_gate w_up w_down (post_norm: no attn_norm; post_attn_norm for ffn_norm;
 * post_ffn_norm after w_down; sandwich (gemma2): attn_norm, and ffn_norm after post_attn_norm), then out_norm, then output (untied only). Returns the
 * total float count; fills g (if non-NULL) with pointers into slab. */
size_t full_grads_carve(const model_config *c, float *slab, full_grads *g);

typedef struct full_model {
    model m;                 /* weights point into slab; usable by the decoder */
    float *slab;             /* n floats */
    size_t n;
    full_grads p;            /* pointers to each parameter tensor in slab */
    layer_weights *layers_store;
    double *rope_store;
} full_model;

/* Copy (dequantizing) every weight of src into a fresh slab. */
int full_model_from(const model *src, full_model **out, dlm_err *e);
/* A zero-initialised model of shape cfg (for pretraining from scratch). */
int full_model_new(const model_config *cfg, full_model **out, dlm_err *e);
void full_model_free(full_model *f);
/* Repoint wmats/vectors at p (after the slab moved or was created). */
void full_model_bind(full_model *f);

/* Every tensor of the canonical layout with its HF name, for saving and for
 * comparing with references. Returns the count (<= full_tensor_max(c)). */
typedef struct full_tensor {
    char name[96];
    float *p;
    int64_t rows, cols;     /* cols = 1 for vectors */
} full_tensor;
int full_tensor_max(const model_config *c);
int full_tensors(const model_config *c, const full_grads *g, full_tensor *out);

#endif
