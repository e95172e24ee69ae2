/* decoder — the llama/qwen2 decoder's forward pass, written once.
 *
 * Every caller runs the same layer equations (decoder/forward.c):
 *   - training (grad/backward.c): a micro-batch of B sequences × T tokens,
 *     keeping what the backward needs (every layer's activations, or only
 *     the layer inputs when recomputing), dropout on the adapter path;
 *   - evaluation and validation loss (decoder_loss): the same pass without
 *     dropout, the LM head fused with the cross-entropy;
 *   - prompt-time inference (decoder/session.c): one sequence growing
 *     through a KV cache, keeping nothing but the cache.
 *
 * One decoder owns every activation and scratch buffer for its shape,
 * allocated once by decoder_create (size known in advance through
 * decoder_plan_bytes, which the memory plan and doctor share). Nothing is
 * allocated by a pass.
 *
 * Numerics follow HF transformers: RMSNorm in f32, rotate-half RoPE, GQA
 * (query head h uses kv head h/(NH/KVH)), SwiGLU, causal attention (plus
 * segment masking for packed rows), tied or separate LM head, mean token
 * cross-entropy. The adapter (decoder/lora.h) is applied on the fly, so
 * the base weights stay in their stored type. */
#ifndef DLM_DECODER_H
#define DLM_DECODER_H

#include <stddef.h>
#include <stdint.h>
#include "decoder/lora.h"
#include "tokens/batch.h"
#include "util/err.h"
#include "weights/model.h"

typedef struct decoder_opts {
    int B, T;               /* rows per pass: B sequences × T tokens (max; a pass may use fewer) */
    int recompute;          /* training: keep only layer inputs, recompute each layer in backward */
    int full;               /* training: every weight trainable (weights must be F32) */
    int logit_rows;         /* full mode: LM-head rows per chunk (0 = auto) */
    int head_grad;          /* LoRA training: backward may also take the LM-head weight's gradient (a
                             * second, chunked head pass: the fused head's loss and input gradient are
                             * untouched); training.cpt's embed warm-up */
    int n_ctx;              /* > 0: inference with a KV cache of n_ctx positions (B = 1; no backward) */
    int n_seq;              /* inference: sequences with a cache each, decoded together (0 = 1) */
} decoder_opts;

/* Bytes decoder_create will allocate for these options (activations +
 * scratch), and the same total by purpose (the memory plan's items): what
 * the forward keeps for the backward, the LM head's buffers, the
 * backward's working buffers, the attention scratch. */
typedef struct decoder_parts { size_t acts, head, bwd, attn; } decoder_parts;
size_t decoder_plan_parts(const model_config *c, const lora_config *lc, const decoder_opts *o, decoder_parts *parts);
size_t decoder_plan_bytes(const model_config *c, const lora_config *lc, const decoder_opts *o);

typedef struct decoder decoder;
/* 0 if the decoder of config c can run b's multimodal fields (embeds,
 * embed_row, pos3, prefix; tokens/batch.h), else an error saying why.
 * Every pass assumes a checked batch; a text batch always passes. */
int decoder_batch_check(const model_config *c, const token_batch *b, dlm_err *e);
/* l may be NULL (full training, or the bare base). */
int decoder_create(const model *m, const lora *l, const decoder_opts *o, decoder **out, dlm_err *e);
void decoder_free(decoder *d);

/* Forward only (no dropout) over a training-shaped batch: summed NLL, and
 * per-position NLL into nll[B*T] if non-NULL (0 where target = -1);
 * logits_out [B*T, V] if non-NULL. DoRA norms come from the current A/B. */
double decoder_loss(decoder *d, const token_batch *b, float *nll, float *logits_out, int64_t *n_loss);

/* KV-cache inference (n_ctx > 0): evaluate tokens[0..n) at positions
 * n_past..n_past+n-1 (n <= B·T rows per call), appending their K/V to the
 * cache. logits receives [V] for the last token, or [n, V] when all_logits.
 * The caller keeps n_past (decoder/session.c). */
void decoder_eval(decoder *d, const int32_t *tokens, int n, int n_past, float *logits, int all_logits);
/* After decoder_eval: the final norm's output (HF's last_hidden_state) of
 * the n tokens evaluated, [n, d_model]; valid until the next call. */
const float *decoder_hidden(const decoder *d);
/* Several sequences in one pass: group g's rows tokens[row0, row0+n) are
 * positions n_past.. of sequence seq (distinct seqs, rows in order, at most
 * B·T rows in all). The projections, the MLP and the head run once over
 * every row; attention runs per sequence over its own cache. logits gets
 * each group's last row [n_groups, V], or every row [rows, V] with
 * all_logits. */
typedef struct dec_group {
    int row0, n, seq, n_past;
    int pos_off;   /* RoPE position of row i = n_past + i + pos_off (M-RoPE's delta after an image; 0 for text) */
    int prefix;    /* PaliGemma's prefix-LM: cache positions < prefix attend to each other both ways (the
                    * whole block must be in this group); 0 = causal */
} dec_group;
void decoder_eval_groups(decoder *d, const int32_t *tokens, const dec_group *groups, int n_groups, float *logits,
                         int all_logits);
/* The multimodal rows of one inference call over `rows` rows, as the same
 * fields of token_batch: embed_row [rows] (-1 = the token, k = embeds row
 * k), pos3 [3][rows] (NULL = each group's n_past + i + pos_off on the three
 * streams). Checked by the caller (session_eval_splice). */
typedef struct dec_splice {
    const float *embeds;
    const int32_t *embed_row;
    const int32_t *pos3;
} dec_splice;
void decoder_eval_splice(decoder *d, const int32_t *tokens, const dec_group *groups, int n_groups,
                         const dec_splice *sp, float *logits, int all_logits);
/* Sequence dst's first n cached positions become src's (a shared prefix);
 * _from copies between two decoders of the same model and n_ctx. */
void decoder_cache_copy(decoder *d, int dst_seq, int src_seq, int n);
void decoder_cache_copy_from(decoder *dst, int dst_seq, const decoder *src, int src_seq, int n);
/* An observer of every projection's input (llama.cpp's imatrix collects
 * the same, export/imatrix.h): called once per matmul of a pass with the
 * rows x[n_rows, n_cols] that multiply the weight of (layer, module),
 * module an LM_* or DECODER_OBS_ROUTER (mixtral's router), expert the
 * mixtral expert (-1 for dense weights). Called from the pass's thread, in
 * pass order. fn NULL removes it. */
#define DECODER_OBS_ROUTER LM_COUNT
typedef void (*decoder_obs_fn)(void *user, int layer, int module, int expert, const float *x, int n_rows, int n_cols);
void decoder_set_observer(decoder *d, decoder_obs_fn fn, void *user);
/* Recompute the DoRA scales from the adapter's current weights (the
 * inference decoder does it at create; training passes do it each time). */
void decoder_dora_prepare(decoder *d);

#endif
