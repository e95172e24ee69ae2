/* kvpool — several sequences decoded together over one model.
 *
 * n_seq slots, each with its own KV cache of n_ctx positions. kv_pool_eval
 * advances any subset of the slots by one step (a prompt chunk for one,
 * a single sampled token for another), which is what a continuously
 * batching server needs: sequences join and leave between steps.
 *
 * This version keeps one decoder/session.h session per slot and evaluates
 * them one after another; the API is shaped so that a single batched
 * forward can replace the internals without touching callers. */
#ifndef DLM_KVPOOL_H
#define DLM_KVPOOL_H

#include <stdint.h>
#include "weights/model.h"
#include "decoder/lora.h"
#include "util/err.h"

typedef struct kv_pool kv_pool;

int kv_pool_create(const model *m, const lora *l, int n_seq, int n_ctx, int n_batch, kv_pool **out, dlm_err *e);
void kv_pool_free(kv_pool *p);
int kv_pool_n_seq(const kv_pool *p);
int kv_pool_n_ctx(const kv_pool *p);
int kv_pool_vocab(const kv_pool *p);      /* logits per sequence (V) */
int kv_pool_n_past(const kv_pool *p, int seq);
/* Keep the first n_past positions of seq (0 = reset). */
void kv_pool_truncate(kv_pool *p, int seq, int n_past);
/* dst's first n positions = src's (prefix reuse); n <= src's n_past. */
int kv_pool_copy(kv_pool *p, int dst, int src, int n, dlm_err *e);
/* One step over n sequences: feed ntok[i] tokens toks[i] to sequence seq[i]
 * (distinct seqs); the logits of each one's last token go to logits + i*V. */
int kv_pool_eval(kv_pool *p, int n, const int *seq, const int32_t *const *toks, const int *ntok, float *logits,
                 dlm_err *e);

#endif
