/* generate — the decode loop: prompt in, tokens out, streamed as text.
 *
 * Text is emitted as soon as it forms whole UTF-8 characters (a token may
 * end inside one); special tokens are not printed. Generation stops at
 * max_tokens, at a stop token, or when the context is full. */
#ifndef DLM_GENERATE_H
#define DLM_GENERATE_H

#include <stdint.h>
#include "infer/sample.h"
#include "decoder/session.h"
#include "tokens/tok.h"
#include "util/err.h"

typedef int (*gen_emit_fn)(void *ctx, const char *text, size_t n);   /* nonzero: stop */

typedef struct gen_opts {
    sample_params sp;
    int max_tokens;
    const int32_t *stops;
    int n_stops;
    gen_emit_fn emit;       /* may be NULL */
    void *emit_ctx;
    volatile int *cancel;   /* set asynchronously (Ctrl-C) to stop; may be NULL */
    const session_splice *splice;   /* the prompt's image rows (infer/vl_prompt.h), or NULL */
} gen_opts;

/* Feeds prompt[0..n) to s (which must be empty or hold the history), then
 * samples. out_ids (capacity max_tokens, may be NULL) receives the new ids,
 * *n_out their count; *stopped_by is the stop id or -1. */
int generate(session *s, tok *t, const int32_t *prompt, int n, const gen_opts *o, int32_t *out_ids, int *n_out,
             int32_t *stopped_by, dlm_err *e);

/* Stop ids for a tokenizer and dialect stop strings: EOS, each dialect stop
 * that is one token, and the tokenizer's end-of-generation specials.
 * Returns the count written (<= cap). */
int gen_stop_ids(const tok *t, const char *const *stop_strings, int32_t *out, int cap);

#endif
