/* kvpool — several sequences decoded together over one copy of the
 * weights: each sequence has its own KV cache, and a step feeds every
 * active sequence's new tokens through one pass of the decoder (the
 * projections and the MLP run as one GEMM over all rows; attention runs
 * per sequence). What a server's continuous batching is built on. */
#ifndef DLM_KVPOOL_H
#define DLM_KVPOOL_H

#include <stdint.h>
#include "decoder/lora.h"
#include "util/err.h"
#include "weights/model.h"

typedef struct kv_pool kv_pool;

/* n_seq caches of n_ctx positions; at most n_batch tokens per step in all. */
int kv_pool_create(const model *m, const lora *l, int n_seq, int n_ctx, int n_batch, kv_pool **out, dlm_err *e);
void kv_pool_free(kv_pool *p);
int kv_pool_n_seq(const kv_pool *p);
int kv_pool_n_ctx(const kv_pool *p);
int kv_pool_vocab(const kv_pool *p);
int kv_pool_n_past(const kv_pool *p, int seq);
/* Keep the first n_past positions of seq (0 = reset). */
void kv_pool_truncate(kv_pool *p, int seq, int n_past);
/* dst's first n positions become src's (prefix reuse). */
int kv_pool_copy(kv_pool *p, int dst, int src, int n, dlm_err *e);
/* One step over n sequences: feed ntok[i] tokens toks[i] to sequence
 * seq[i] (distinct); the logits of each one's last token go to
 * logits + i*V. More tokens than n_batch are fed in several passes. */
int kv_pool_eval(kv_pool *p, int n, const int *seq, const int32_t *const *toks, const int *ntok, float *logits,
                 dlm_err *e);

/* kv_pool_eval with image rows (a vision-language model; infer/vl_prompt.h)
 * or audio rows (Qwen2-Audio, infer/audio_prompt.h: pos3 NULL, 1-D positions):
 * sp[i] (or NULL, or sp NULL) describes sequence i's ntok[i] tokens of
 * this step: embed_row[k] >= 0 takes embeds row embed_row[k] instead of
 * the token's; pos3 (or NULL: text positions) holds the step's absolute
 * M-RoPE positions, stream s of token k at pos3[s * pos3_stride + k]; once
 * its tokens are all fed, the sequence keeps delta as the rotary offset of
 * every later token (kv_pool_truncate to 0 clears it, kv_pool_copy copies
 * it). */
typedef struct kv_splice {
    const float *embeds;
    const int32_t *embed_row;
    const int32_t *pos3;
    int pos3_stride;
    int delta;
    /* PaliGemma's prefix-LM (infer/vl_prompt.h): the first `prefix` of the
     * step's tokens (image + prompt) attend to each other both ways, so
     * they go through one pass whole: only on an empty sequence, prefix <=
     * the pool's n_batch (a pass that has no room left for the block
     * leaves the sequence to the next pass). delta is then the rotary
     * offset of every position from the block on. 0 = causal. */
    int prefix;
} kv_splice;
int kv_pool_eval_splice(kv_pool *p, int n, const int *seq, const int32_t *const *toks, const int *ntok,
                        const kv_splice *const *sp, float *logits, dlm_err *e);

#endif
