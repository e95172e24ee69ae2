/* cbor — the subset of CBOR (RFC 8949) the original's replay records use
 * (cbor2.dumps(..., canonical=True)): maps with text keys, text strings,
 * unsigned and negative integers, booleans, null, arrays, floats, and tag 0
 * (an RFC 3339 date-time string).
 *
 * Writing: the cbor_put_* calls append one item to a strbuf with the
 * shortest head (canonical); the caller writes map keys in canonical order
 * (shorter first, then bytewise), as cbor2's canonical mode does.
 * Reading: cbor_to_json turns one whole item into a json_t (tags 0 and 1
 * become their content; byte strings, other tags, indefinite lengths and
 * trailing bytes are errors). */
#ifndef DLM_CBOR_H
#define DLM_CBOR_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "util/err.h"
#include "util/str.h"

void cbor_put_uint(strbuf *sb, uint64_t v);
void cbor_put_text(strbuf *sb, const char *s, size_t n);
void cbor_put_bool(strbuf *sb, int v);
void cbor_put_map(strbuf *sb, size_t n_pairs);
void cbor_put_array(strbuf *sb, size_t n);
void cbor_put_tag(strbuf *sb, uint64_t tag);

/* Decode exactly one item spanning p[0..n). */
int cbor_to_json(const uint8_t *p, size_t n, json_t **out, dlm_err *e);

#endif
