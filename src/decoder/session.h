/* session — inference over one growing sequence with a KV cache (the
 * decoder of decoder/decoder.h with its cache and the count of cached
 * positions).
 *
 * session_eval feeds n new tokens (the prompt in one call, then one token at
 * a time) and returns logits. Buffers are allocated once at create for
 * n_ctx positions and batches of up to n_batch tokens; eval allocates
 * nothing. The optional adapter (LoRA/DoRA) is applied on the fly, so the
 * base weights stay in their stored type. */
#ifndef DLM_SESSION_H
#define DLM_SESSION_H

#include <stdint.h>
#include "weights/model.h"
#include "decoder/lora.h"
#include "util/err.h"

typedef struct session session;

int session_create(const model *m, const lora *l, int n_ctx, int n_batch, session **out, dlm_err *e);
void session_free(session *s);
/* Bytes session_create allocates (for the memory plan). */
size_t session_plan_bytes(const model_config *c, int n_ctx, int n_batch);

/* Forget the sequence (keeps buffers). */
void session_reset(session *s);
int session_n_past(const session *s);
int session_n_ctx(const session *s);
int session_vocab(const session *s);   /* logits per position */

/* Evaluate tokens[0..n) at positions n_past..n_past+n-1. logits receives
 * [V] for the last token, or [n, V] when all_logits. Fails when the context
 * would overflow n_ctx. */
/* dst's first n positions (n <= src's n_past) become src's, and dst's
 * n_past = n; dst == src keeps a prefix (the repl rewinds a turn with it).
 * Same model and n_ctx required; -1 on a size mismatch. */
int session_copy_prefix(session *dst, const session *src, int n);

int session_eval(session *s, const int32_t *tokens, int n, float *logits, int all_logits, dlm_err *e);
/* A multimodal prompt (docs/images.md): tokens[0..n) with spliced rows
 * (embed_row[i] = k >= 0: the row is embeds row k of d_model floats; -1:
 * the token) and, for Qwen2-VL, pos3 [3][n] the absolute M-RoPE positions
 * of the n rows (vision/mrope.h's qwen2vl_rope_index over the whole
 * sequence, this call's slice) and delta, the offset every later token's
 * rotary position gets (kept until reset). Text-only calls are
 * session_eval's. */
typedef struct session_splice {
    const float *embeds;
    int n_embeds;
    const int32_t *embed_row;   /* [n] or NULL */
    const int32_t *pos3;        /* [3][n] or NULL (1-D positions, delta unchanged) */
    int delta;
    /* PaliGemma's prefix-LM: the first `prefix` rows (image + prompt) attend
     * to each other both ways; they go through the decoder in one piece, so
     * prefix <= the session's n_batch, and only on an empty session. With
     * prefix > 0, delta is the rotary offset from these rows on (PaliGemma's
     * 1-indexed positions: 1), kept for every later token. 0 = causal. */
    int prefix;
} session_splice;
int session_eval_splice(session *s, const int32_t *tokens, int n, const session_splice *sp, float *logits,
                        int all_logits, dlm_err *e);
/* The M-RoPE offset later tokens get (0 without an image). */
int session_delta(const session *s);
/* Reset, run tokens[0..n) and write the mean over the tokens of the final
 * norm's output (HF last_hidden_state mean-pooled) into out[d_model]: the
 * prompt embedding the adapter gate routes on (src/adapter/gate.h). */
int session_embed_mean(session *s, const int32_t *tokens, int n, float *out, dlm_err *e);

/* dst's first n positions (n <= src's n_past) become src's, and dst's
 * n_past = n; dst == src keeps a prefix. Same model and n_ctx required.
 * Returns -1 on a size mismatch. For decoder/kvpool.c's prefix reuse. */
int session_copy_prefix(session *dst, const session *src, int n);

#endif
