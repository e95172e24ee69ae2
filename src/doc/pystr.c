/* pystr — see pystr.h. */
#include "doc/pystr.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

int py_utf8_next(const char *s, size_t n, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    if (n == 0) { *cp = 0; return 1; }
    unsigned c = u[0];
    int len = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    if ((size_t)len > n) { *cp = c; return 1; }
    uint32_t v;
    switch (len) {
    case 1: v = c; break;
    case 2: v = ((c & 0x1fu) << 6) | (u[1] & 0x3fu); break;
    case 3: v = ((c & 0x0fu) << 12) | ((u[1] & 0x3fu) << 6) | (u[2] & 0x3fu); break;
    default: v = ((c & 0x07u) << 18) | ((u[1] & 0x3fu) << 12) | ((u[2] & 0x3fu) << 6) | (u[3] & 0x3fu);
    }
    *cp = v;
    return len;
}

int py_isspace(uint32_t c)
{
    if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
    if (c < 0x85) return 0;
    return c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) ||
           c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* Length of the whitespace code point ending at e (0 if none). */
static int space_before(const char *b, const char *e)
{
    /* Walk back over continuation bytes to the lead byte (max 4). */
    const char *p = e - 1;
    int k = 0;
    while (p > b && k < 3 && ((unsigned char)*p & 0xc0) == 0x80) { p--; k++; }
    uint32_t cp;
    int len = py_utf8_next(p, (size_t)(e - p), &cp);
    if (p + len != e) return 0;
    return py_isspace(cp) ? len : 0;
}

void py_strip(const char **b, const char **e)
{
    const char *s = *b, *t = *e;
    while (s < t) {
        uint32_t cp;
        int len = py_utf8_next(s, (size_t)(t - s), &cp);
        if (!py_isspace(cp)) break;
        s += len;
    }
    while (t > s) {
        int len = space_before(s, t);
        if (!len) break;
        t -= len;
    }
    *b = s;
    *e = t;
}

int py_is_blank(const char *s, size_t n)
{
    const char *b = s, *e = s + n;
    py_strip(&b, &e);
    return b == e;
}

int py_strip_equals(const char *s, size_t n, const char *lit)
{
    const char *b = s, *e = s + n;
    py_strip(&b, &e);
    size_t m = strlen(lit);
    return (size_t)(e - b) == m && memcmp(b, lit, m) == 0;
}

int py_isprintable(uint32_t cp)
{
    if (cp == ' ') return 1;
    if (cp < 0x20 || cp == 0x7f) return 0;
    if (cp < 0x7f) return 1;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
        return 0;
    default:
        return 1;
    }
}

void py_repr(strbuf *sb, const char *s, size_t n)
{
    int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    sb_putc(sb, q);
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        int len = py_utf8_next(s + i, n - i, &cp);
        if (cp == (uint32_t)q || cp == '\\') { sb_putc(sb, '\\'); sb_putc(sb, (char)cp); }
        else if (cp == '\t') sb_puts(sb, "\\t");
        else if (cp == '\n') sb_puts(sb, "\\n");
        else if (cp == '\r') sb_puts(sb, "\\r");
        else if (cp < 0x20 || cp == 0x7f) sb_printf(sb, "\\x%02x", cp);
        else if (cp < 0x7f || py_isprintable(cp)) sb_append(sb, s + i, (size_t)len);
        else if (cp <= 0xff) sb_printf(sb, "\\x%02x", cp);
        else if (cp <= 0xffff) sb_printf(sb, "\\u%04x", cp);
        else sb_printf(sb, "\\U%08x", cp);
        i += (size_t)len;
    }
    sb_putc(sb, q);
}

static int is_linebreak(uint32_t c)
{
    return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || (c >= 0x1c && c <= 0x1e) ||
           c == 0x85 || c == 0x2028 || c == 0x2029;
}

int py_splitlines(const char *s, size_t n, py_line_fn fn, void *ctx)
{
    size_t i = 0, start = 0;
    int nl = 0, start_nl = 0, count = 0;
    while (i < n) {
        uint32_t cp;
        int len = py_utf8_next(s + i, n - i, &cp);
        if (is_linebreak(cp)) {
            if (fn) fn(ctx, s + start, i - start, start_nl);
            count++;
            if (cp == '\n') nl++;
            i += (size_t)len;
            start = i;
            start_nl = nl;
            continue;
        }
        i += (size_t)len;
    }
    if (start < n) {
        if (fn) fn(ctx, s + start, n - start, start_nl);
        count++;
    }
    return count;
}

/* digitpart := digit ("_"? digit)* ; returns chars consumed (0 = none),
 * copying digits (without '_') into out. */
static size_t digitpart(const char *s, size_t n, strbuf *out)
{
    size_t i = 0;
    if (i >= n || s[i] < '0' || s[i] > '9') return 0;
    while (i < n) {
        if (s[i] >= '0' && s[i] <= '9') { sb_putc(out, s[i]); i++; continue; }
        if (s[i] == '_' && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '9' && i > 0) { i++; continue; }
        break;
    }
    return i;
}

static int ci_eq(const char *a, size_t n, const char *lit)
{
    size_t m = strlen(lit);
    if (n != m) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = a[i];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        if (c != lit[i]) return 0;
    }
    return 1;
}

int py_float_parse(const char *s, size_t n, double *out)
{
    const char *b = s, *e = s + n;
    py_strip(&b, &e);
    size_t len = (size_t)(e - b), i = 0;
    strbuf sb = STRBUF_INIT;
    int neg = 0;
    if (i < len && (b[i] == '+' || b[i] == '-')) { neg = b[i] == '-'; i++; }
    if (ci_eq(b + i, len - i, "inf") || ci_eq(b + i, len - i, "infinity")) {
        *out = neg ? -INFINITY : INFINITY;
        return 0;
    }
    if (ci_eq(b + i, len - i, "nan")) { *out = NAN; return 0; }
    if (neg) sb_putc(&sb, '-');
    size_t k = digitpart(b + i, len - i, &sb);
    int have = k > 0;
    i += k;
    if (i < len && b[i] == '.') {
        sb_putc(&sb, '.');
        i++;
        k = digitpart(b + i, len - i, &sb);
        have |= k > 0;
        i += k;
    }
    if (!have) { sb_free(&sb); return -1; }
    if (i < len && (b[i] == 'e' || b[i] == 'E')) {
        sb_putc(&sb, 'e');
        i++;
        if (i < len && (b[i] == '+' || b[i] == '-')) sb_putc(&sb, b[i++]);
        k = digitpart(b + i, len - i, &sb);
        if (!k) { sb_free(&sb); return -1; }
        i += k;
    }
    if (i != len || sb.oom) { sb_free(&sb); return -1; }
    *out = strtod(sb_str(&sb), NULL);
    sb_free(&sb);
    return 0;
}

int py_int_parse(const char *s, size_t n, int64_t *out, int *overflow)
{
    const char *b = s, *e = s + n;
    py_strip(&b, &e);
    size_t len = (size_t)(e - b), i = 0;
    int neg = 0;
    *overflow = 0;
    if (i < len && (b[i] == '+' || b[i] == '-')) { neg = b[i] == '-'; i++; }
    strbuf sb = STRBUF_INIT;
    size_t k = digitpart(b + i, len - i, &sb);
    if (!k || i + k != len || sb.oom) { sb_free(&sb); return -1; }
    uint64_t v = 0;
    for (const char *p = sb_str(&sb); *p; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) { *overflow = 1; v = UINT64_MAX; break; }
        v = v * 10 + d;
    }
    sb_free(&sb);
    if (!*overflow && v > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) *overflow = 1;
    if (*overflow) { *out = neg ? INT64_MIN : INT64_MAX; return 0; }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

static int ndig(const char *s, int n)
{
    for (int i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

static int num(const char *s, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) v = v * 10 + (s[i] - '0');
    return v;
}

/* HH[:MM[:SS[.f{1,6}]]] or HH[MM[SS[.f]]]; returns chars consumed or -1. */
static int iso_time(const char *s, int len)
{
    if (len < 2 || !ndig(s, 2) || num(s, 2) > 23) return -1;
    int i = 2;
    int ext = len > i && s[i] == ':';
    for (int part = 0; part < 2; part++) {
        if (ext) {
            if (i >= len || s[i] != ':') break;
            i++;
        } else if (i >= len || s[i] < '0' || s[i] > '9') break;
        if (i + 2 > len || !ndig(s + i, 2) || num(s + i, 2) > 59) return -1;
        i += 2;
        if (part == 1 && i < len && (s[i] == '.' || s[i] == ',')) {
            i++;
            int f = 0;
            while (i < len && s[i] >= '0' && s[i] <= '9') { i++; f++; }
            if (f == 0 || f > 9) return -1;
        }
    }
    return i;
}

int py_isoformat_ok(const char *s)
{
    /* Z → +00:00 as the original does before parsing. */
    char buf[96];
    size_t o = 0;
    for (const char *p = s; *p; p++) {
        if (o + 7 >= sizeof buf) return 0;
        if (*p == 'Z') { memcpy(buf + o, "+00:00", 6); o += 6; }
        else buf[o++] = *p;
    }
    buf[o] = 0;
    int len = (int)o, i;
    int y, m, d;
    if (len >= 10 && buf[4] == '-') {
        if (!ndig(buf, 4) || !ndig(buf + 5, 2) || buf[7] != '-' || !ndig(buf + 8, 2)) return 0;
        y = num(buf, 4); m = num(buf + 5, 2); d = num(buf + 8, 2);
        i = 10;
    } else if (len >= 8 && ndig(buf, 8)) {
        y = num(buf, 4); m = num(buf + 4, 2); d = num(buf + 6, 2);
        i = 8;
    } else return 0;
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (y < 1 || m < 1 || m > 12 || d < 1) return 0;
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (d > mdays[m - 1] + (m == 2 && leap)) return 0;
    if (i == len) return 1;
    i++; /* any single separator character */
    int t = iso_time(buf + i, len - i);
    if (t < 0) return 0;
    i += t;
    if (i == len) return 1;
    if (buf[i] != '+' && buf[i] != '-') return 0;
    i++;
    t = iso_time(buf + i, len - i);
    return t >= 0 && i + t == len;
}
