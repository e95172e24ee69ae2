/* pystr — the few Python string behaviours the .dlm format inherits.
 *
 * The original tool is Python: its grammar strips with str.strip() (Unicode
 * whitespace), its messages quote values with repr(), and its schema errors
 * name Python types. These helpers reproduce exactly those behaviours over
 * UTF-8 so that documents parse the same way and messages read the same. */
#ifndef DLM_DOC_PYSTR_H
#define DLM_DOC_PYSTR_H

#include <stddef.h>
#include <stdint.h>
#include "util/str.h"

/* Decode one UTF-8 code point at s[0..n) (input already validated).
 * Returns its byte length (>= 1) and stores the code point. */
int py_utf8_next(const char *s, size_t n, uint32_t *cp);

/* str.isspace() for one code point. */
int py_isspace(uint32_t cp);

/* str.strip(): [*b, *e) narrowed in place (UTF-8 aware). */
void py_strip(const char **b, const char **e);
/* 1 when s[0..n) is empty after str.strip(). */
int py_is_blank(const char *s, size_t n);
/* s[0..n).strip() == lit */
int py_strip_equals(const char *s, size_t n, const char *lit);

/* repr(str) appended to sb: quote choice, escapes and printability as
 * CPython does. */
void py_repr(strbuf *sb, const char *s, size_t n);

/* str.isprintable() for one code point. */
int py_isprintable(uint32_t cp);

/* Line splitting the way str.splitlines() does (\n, \v, \f, \x1c-\x1e,
 * \x85, \u2028, \u2029; input has no \r after normalisation). Calls fn for
 * each line with the number of '\n' seen before it (to map back to file
 * lines). Returns the number of lines. */
typedef void (*py_line_fn)(void *ctx, const char *s, size_t n, int nl_before);
int py_splitlines(const char *s, size_t n, py_line_fn fn, void *ctx);

/* Python's float() on a string: accepts surrounding whitespace, '_'
 * between digits, inf/infinity/nan. Returns 0 and sets *out, or -1. */
int py_float_parse(const char *s, size_t n, double *out);
/* Python's int() on a string (base 10): whitespace, sign, '_' between
 * digits. -1 when malformed; *overflow set when it does not fit int64. */
int py_int_parse(const char *s, size_t n, int64_t *out, int *overflow);

/* datetime.fromisoformat(s.replace("Z", "+00:00")) succeeds (3.11 rules,
 * the common subset: date, date+time, fractions, offsets). */
int py_isoformat_ok(const char *s);

#endif
