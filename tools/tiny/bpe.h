/* bpe — a byte-level BPE tokenizer trainer (the embedded base's tokenizer).
 *
 * What it learns is what HF's ByteLevel BPE would encode with:
 *   1. text is cut into pre-tokens by the GPT-2 regex (the same pattern the
 *      encoder in src/tok compiles, Oniguruma escapes rewritten the same way),
 *   2. the distinct pre-tokens are counted,
 *   3. starting from the 256 single bytes, the most frequent adjacent pair is
 *      merged, again and again. Ties go to the pair whose (left bytes, right
 *      bytes) sort first, so the result depends on the text only — never on
 *      hash order or insertion order.
 *
 * Ids: 0..255 are the bytes in byte order, 256.. the merges in rank order,
 * then the special tokens (added by the caller). The trainer works on raw
 * bytes; bpe_byte_level() gives the GPT-2 ByteLevel spelling ("Ġthe") that
 * tokenizer.json and GGUF store. */
#ifndef DLM_TINY_BPE_H
#define DLM_TINY_BPE_H

#include <stddef.h>
#include <stdint.h>
#include "util/err.h"
#include "util/str.h"

typedef struct bpe_trainer bpe_trainer;

/* Bounds on what a trainer accepts (the recipe stays far below them). */
#define BPE_MAX_WORDS (1 << 24)        /* distinct pre-tokens */
#define BPE_MAX_WORD_BYTES 256         /* longer pre-tokens are counted as their first 256 bytes' pieces */
#define BPE_MAX_VOCAB 65536

int bpe_new(bpe_trainer **out, dlm_err *e);
void bpe_free(bpe_trainer *t);

/* Pre-tokenize len bytes of UTF-8 text and count its pre-tokens. */
int bpe_add_text(bpe_trainer *t, const char *text, size_t len, dlm_err *e);
/* Distinct pre-tokens counted so far. */
size_t bpe_n_words(const bpe_trainer *t);

/* Learn merges until the vocabulary (256 bytes + merges) has n_vocab tokens
 * or no pair occurs min_count times. Callable once. */
int bpe_train(bpe_trainer *t, int n_vocab, int64_t min_count, dlm_err *e);

/* The result (valid after bpe_train, owned by the trainer). */
int bpe_vocab_size(const bpe_trainer *t);                 /* 256 + merges */
const char *bpe_token(const bpe_trainer *t, int id, size_t *len); /* raw bytes */
int bpe_n_merges(const bpe_trainer *t);
void bpe_merge(const bpe_trainer *t, int i, int *left, int *right);

/* The ids a pre-token (raw bytes, as counted) ended up as after training:
 * the trainer's own segmentation, for tests. -1 if the word was not seen. */
int bpe_word_ids(const bpe_trainer *t, const char *word, size_t len, int32_t *ids, int cap);

/* GPT-2 ByteLevel spelling of raw bytes, appended to out (UTF-8). */
int bpe_byte_level(const char *raw, size_t len, strbuf *out);

#endif
