#include "util/str.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sb_free(strbuf *sb)
{
    free(sb->buf);
    sb->buf = NULL;
    sb->len = sb->cap = 0;
    sb->oom = 0;
}

void sb_reset(strbuf *sb)
{
    sb->len = 0;
    if (sb->buf) sb->buf[0] = 0;
}

int sb_reserve(strbuf *sb, size_t extra)
{
    if (sb->oom) return -1;
    if (extra > ((size_t)-1) / 2 - sb->len) { sb->oom = 1; return -1; }
    size_t need = sb->len + extra + 1;
    if (need <= sb->cap) return 0;
    size_t cap = sb->cap ? sb->cap : 64;
    while (cap < need) cap *= 2;
    char *nb = realloc(sb->buf, cap);
    if (!nb) { sb->oom = 1; return -1; }
    sb->buf = nb;
    sb->cap = cap;
    return 0;
}

int sb_append(strbuf *sb, const void *p, size_t n)
{
    if (sb_reserve(sb, n)) return -1;
    if (n) memcpy(sb->buf + sb->len, p, n);
    sb->len += n;
    sb->buf[sb->len] = 0;
    return 0;
}

int sb_puts(strbuf *sb, const char *s) { return sb_append(sb, s, strlen(s)); }
int sb_putc(strbuf *sb, char c) { return sb_append(sb, &c, 1); }

int sb_vprintf(strbuf *sb, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) return -1;
    if (sb_reserve(sb, (size_t)n)) return -1;
    vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
    sb->len += (size_t)n;
    return 0;
}

int sb_printf(strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = sb_vprintf(sb, fmt, ap);
    va_end(ap);
    return r;
}

char *sb_detach(strbuf *sb, size_t *len)
{
    if (sb->oom) { sb_free(sb); return NULL; }
    if (!sb->buf) {   /* nothing appended: an empty string (realloc'd memory is not zeroed) */
        if (sb_reserve(sb, 0)) return NULL;
        sb->buf[0] = 0;
    }
    char *p = sb->buf;
    if (len) *len = sb->len;
    sb->buf = NULL;
    sb->len = sb->cap = 0;
    return p;
}

const char *sb_str(const strbuf *sb) { return sb->buf ? sb->buf : ""; }

char *str_ndup(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

int str_startswith(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

int str_endswith(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

int str_edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 64 || m > 64) return 255;
    int d[65][65];
    for (size_t i = 0; i <= n; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int c = d[i - 1][j - 1] + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            int x = d[i - 1][j] + 1, y = d[i][j - 1] + 1;
            d[i][j] = c < x ? (c < y ? c : y) : (x < y ? x : y);
        }
    return d[n][m] > 255 ? 255 : d[n][m];
}

int str_parse_size(const char *s, unsigned long long *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0) return -1;
    while (*end == ' ') end++;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 0: break;
    case 'K': mul = 1024.0; end++; break;
    case 'M': mul = 1024.0 * 1024; end++; break;
    case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    case 'B': break;
    default: return -1;
    }
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'b' || *end == 'B') end++;
    if (*end) return -1;
    double r = v * mul;
    if (r > 1.8e19) return -1;
    *out = (unsigned long long)r;
    return 0;
}

char *str_human_size(unsigned long long n, char *buf, size_t cap)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int i = 0;
    while (v >= 1024 && i < 4) { v /= 1024; i++; }
    if (i == 0) snprintf(buf, cap, "%llu B", n);
    else snprintf(buf, cap, "%.2f %s", v, u[i]);
    return buf;
}

size_t str_utf8_complete(const unsigned char *p, size_t n)
{
    size_t i = n, back = 0;
    while (i > 0 && back < 4 && (p[i - 1] & 0xC0) == 0x80) { i--; back++; }
    if (i == 0) return n;
    unsigned char c = p[i - 1];
    size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (need == 1) return n;
    return back + 1 >= need ? n : i - 1;
}

size_t str_utf8_dec(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    size_t len = 1;
    uint32_t v = c, min = 0;
    if (c < 0x80) goto done;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; v = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; v = c & 0x07; min = 0x10000; }
    else return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
done:
    if (cp) *cp = v;
    return len;
}

/* Length of the maximal prefix of an ill-formed sequence at s that could
 * start a valid char (Unicode "maximal subpart"); at least 1. */
static size_t utf8_bad_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 1;
    size_t i = 1;
    if (i < n && s[i] >= lo && s[i] <= hi) {
        i++;
        while (i < need && i < n && (s[i] & 0xC0) == 0x80) i++;
    }
    return i;
}

int str_utf8_lossy(strbuf *out, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t run = 0, i = 0;
    while (i < n) {
        size_t l = str_utf8_dec(u + i, n - i, NULL);
        if (l) { i += l; continue; }
        if (sb_append(out, s + run, i - run)) return -1;
        if (sb_append(out, "\xEF\xBF\xBD", 3)) return -1;
        i += utf8_bad_len(u + i, n - i);
        run = i;
    }
    return sb_append(out, s + run, n - run);
}

const char *str_closest(const char *key, const char *const *cands)
{
    const char *best = NULL;
    int bd = 3;
    for (; *cands; cands++) {
        int d = str_edit_distance(key, *cands);
        if (d < bd) { bd = d; best = *cands; }
    }
    return best;
}
