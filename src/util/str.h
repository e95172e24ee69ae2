/* str — a growable byte buffer (always NUL-terminated) and small string
 * helpers. Used for building files and messages, never in hot loops. */
#ifndef DLM_STR_H
#define DLM_STR_H

#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>

typedef struct strbuf {
    char *buf;      /* NUL-terminated; NULL until the first append */
    size_t len;
    size_t cap;
    int oom;        /* set once an allocation failed; later appends are no-ops */
} strbuf;

#define STRBUF_INIT {0, 0, 0, 0}

void sb_free(strbuf *sb);
void sb_reset(strbuf *sb);                     /* len = 0, keeps memory */
int sb_reserve(strbuf *sb, size_t extra);      /* 0 ok, -1 oom */
int sb_append(strbuf *sb, const void *p, size_t n);
int sb_puts(strbuf *sb, const char *s);
int sb_putc(strbuf *sb, char c);
int sb_printf(strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int sb_vprintf(strbuf *sb, const char *fmt, va_list ap);
/* Detach the buffer (caller frees); sb becomes empty. Never NULL unless oom. */
char *sb_detach(strbuf *sb, size_t *len);
/* Pointer to the contents, "" when empty. */
const char *sb_str(const strbuf *sb);

/* Duplicate up to n bytes, NUL-terminated. NULL on oom. */
char *str_ndup(const char *s, size_t n);
int str_startswith(const char *s, const char *prefix);
int str_endswith(const char *s, const char *suffix);
/* Levenshtein distance (for "did you mean"); capped at 255. */
int str_edit_distance(const char *a, const char *b);
/* The "did you mean" of every unknown name (commands, frontmatter keys,
 * templates): the candidate of the NULL-terminated cands closest to key,
 * if it is at most 2 edits away (the first of equals); else NULL. */
const char *str_closest(const char *key, const char *const *cands);
/* Parse a byte size such as "8G", "512M", "1.5GiB", "1000" into *out. */
int str_parse_size(const char *s, unsigned long long *out);
/* Human-readable size into buf ("1.23 GiB"). Returns buf. */
char *str_human_size(unsigned long long n, char *buf, size_t cap);
/* Length of the longest prefix of p[0..n) that ends on a UTF-8 character
 * boundary: a trailing incomplete sequence is held back (what a stream of
 * token bytes may print now). */
size_t str_utf8_complete(const unsigned char *p, size_t n);
/* Append s[0..n) to out with every ill-formed UTF-8 sequence replaced by
 * U+FFFD, one per maximal invalid subpart (Unicode's recommended practice,
 * as Rust's String::from_utf8_lossy and HF tokenizers' decode). The one
 * repair of sampled bytes: the tokenizer's decode, the API's JSON bodies
 * and the repl's conversation all go through it. 0 ok, -1 oom. */
int str_utf8_lossy(strbuf *out, const char *s, size_t n);
/* The well-formed UTF-8 character at s (n > 0 bytes): its length, and its
 * code point in *cp (cp may be NULL); 0 if the bytes there are not one
 * (overlong, surrogate, > U+10FFFF, truncated). */
size_t str_utf8_dec(const unsigned char *s, size_t n, uint32_t *cp);

#endif
