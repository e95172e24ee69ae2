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
/* Reset, run tokens[0..n) and write the mean over the tokens of the final
 * norm's output (HF last_hidden_state mean-pooled) into out[d_model]: the
 * prompt embedding the adapter gate routes on (src/adapter/gate.h). */
int session_embed_mean(session *s, const int32_t *tokens, int n, float *out, dlm_err *e);

/* dst's first n positions (n <= src's n_past) become src's, and dst's
 * n_past = n; dst == src keeps a prefix. Same model and n_ctx required.
 * Returns -1 on a size mismatch. For decoder/kvpool.c's prefix reuse. */
int session_copy_prefix(session *dst, const session *src, int n);

#endif
