/* synth — the text side of growing a document from a teacher model:
 * reading {question, answer} pairs out of what a model replies, and the
 * near-duplicate test the original uses (spec §8, `dlm synth`).
 *
 * Replies are noisy: prose around the JSON, ``` fences, trailing commas,
 * items that are not pairs. synth_parse_reply takes the first JSON array in
 * the reply that parses (after dropping trailing commas outside strings)
 * and keeps the items that are objects with non-empty string `question`
 * and `answer`; everything else is counted as rejected. Bounds-checked for
 * untrusted input (tests/fuzz/fuzz_synth_reply.c). */
#ifndef DLM_SYNTH_H
#define DLM_SYNTH_H

#include <stddef.h>
#include "util/err.h"
#include "util/str.h"

typedef struct synth_pair {
    char *question, *answer;   /* stripped */
} synth_pair;

/* Pairs found in reply[0..len). *n_rejected counts array items that were
 * not pairs. Returns 0 (possibly with *n == 0 when no array was found,
 * *found_array then 0), -1 on out of memory. */
int synth_parse_reply(const char *reply, size_t len, synth_pair **out, int *n, int *n_rejected, int *found_array,
                      dlm_err *e);
void synth_pairs_free(synth_pair *v, int n);

/* difflib.SequenceMatcher(None, a, b).ratio() of Python 3 over the code
 * points of two UTF-8 strings (autojunk on, as the default): the same
 * matching blocks, the same popular-element rule for b of 200+ items.
 * Invalid UTF-8 bytes count as one code point each (U+FFFD would merge
 * distinct bytes). -1 on out of memory. */
double synth_ratio(const char *a, const char *b);
/* " ".join(s.strip().lower().split()) as Python computes it for the common
 * cases: Unicode whitespace, simple (one-to-one) lowercase mappings. */
void synth_normalize(strbuf *out, const char *s);
/* The original's dedup rule: the normalised questions are equal, or
 * ratio(norm(q1) "\n" norm(a1), norm(q2) "\n" norm(a2)) > 0.95. */
int synth_is_near_dup(const char *q1, const char *a1, const char *q2, const char *a2);

#endif
