/* fb — the training forward and backward pass of the llama/qwen2 decoder,
 * with LoRA/DoRA adapters or with every weight trainable.
 *
 * One fb_ctx owns every activation and scratch buffer for a micro-batch of
 * B sequences × T tokens, allocated once by fb_create (size known in advance
 * through fb_plan_bytes, which the memory planner and doctor share). Nothing
 * is allocated by fb_step.
 *
 * Numerics follow HF transformers: RMSNorm in f32, rotate-half RoPE, GQA
 * (query head h uses kv head h/(NH/KVH)), SwiGLU, causal attention (plus
 * segment masking for packed rows), tied or separate LM head, mean token
 * cross-entropy. Gradients are accumulated (+=) into the caller's slabs so
 * micro-batches add up; the caller zeroes them per optimizer step. */
#ifndef DLM_FB_H
#define DLM_FB_H

#include <stddef.h>
#include <stdint.h>
#include "weights/model.h"
#include "decoder/lora.h"
#include "tokens/batch.h"
#include "util/err.h"


/* Gradients of every weight, for full-parameter training. The layout of the
 * slab is model_full_layout()'s canonical order (see fb_full_carve). */
typedef struct fb_layer_grads {
    float *attn_norm, *wq, *wk, *wv, *wo, *bq, *bk, *bv, *ffn_norm, *w_gate, *w_up, *w_down;
} fb_layer_grads;
typedef struct fb_full_grads {
    float *tok_embd, *output, *out_norm; /* output NULL when tied */
    fb_layer_grads *layers;              /* [L] (owned, free()) */
} fb_full_grads;

/* Canonical order of every trainable tensor for full-parameter training:
 * tok_embd, then per layer attn_norm wq [bq] wk [bk] wv [bv] wo ffn_norm
 * w_gate w_up w_down, then out_norm, then output (untied only). Returns the
 * total float count; fills g (if non-NULL) with pointers into slab. */
size_t fb_full_carve(const model_config *c, float *slab, fb_full_grads *g);

typedef struct fb_opts {
    int B, T;               /* micro-batch shape (max; a batch may use fewer rows) */
    int recompute;          /* keep only layer inputs, recompute in backward */
    int full;               /* every weight trainable (weights must be F32) */
    int logit_rows;         /* LM-head rows per chunk (0 = auto) */
} fb_opts;

/* Bytes fb_create will allocate for these options (activations + scratch). */
size_t fb_plan_bytes(const model_config *c, const lora_config *lc, const fb_opts *o);

/* The same total by purpose (the memory plan's items): what the forward
 * keeps for the backward, the LM head's buffers, the backward's working
 * buffers, the attention scratch. The four add up to the return value. */
typedef struct fb_parts { size_t acts, head, bwd, attn; } fb_parts;
size_t fb_plan_parts(const model_config *c, const lora_config *lc, const fb_opts *o, fb_parts *parts);

typedef struct fb_ctx fb_ctx;
/* lc may be NULL (full training, or plain forward). */
int fb_create(const model *m, const lora *l, const fb_opts *o, fb_ctx **out, dlm_err *e);
void fb_free(fb_ctx *f);

/* Forward + backward of one micro-batch. Gradients are added into
 * lora_grad (same layout as l->w) or into fg (full mode). dlogits are scaled
 * by grad_scale (normally 1 / tokens-with-loss in the optimizer step).
 * Dropout draws come from (seed, RNG_DROPOUT, micro_step, ...).
 * Returns the summed NLL of the batch; *n_loss = tokens with a target. */
double fb_step(fb_ctx *f, const token_batch *b, float *lora_grad, const fb_full_grads *fg,
               float grad_scale, uint64_t seed, uint64_t micro_step, int64_t *n_loss);

/* Forward only (no dropout): summed NLL, and per-position NLL into nll[B*T]
 * if non-NULL (0 where target = -1). logits_out [B*T, V] if non-NULL. */
double fb_forward(fb_ctx *f, const token_batch *b, float *nll, float *logits_out, int64_t *n_loss);

/* DoRA norms are computed from the current A/B at the start of each fb_step /
 * fb_forward; nothing to call. */

#endif
