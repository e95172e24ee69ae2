/* rpc — Content-Length framing (see rpc.h). */
#include "lsp/rpc.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

void rpc_reader_init(rpc_reader *r, size_t max_body)
{
    memset(r, 0, sizeof *r);
    r->max_body = max_body;
}

void rpc_reader_free(rpc_reader *r)
{
    sb_free(&r->buf);
    memset(r, 0, sizeof *r);
}

/* Drop consumed bytes once they are the larger part of the buffer, so a
 * long session does not grow the buffer without bound. */
static void compact(rpc_reader *r)
{
    if (r->off == 0) return;
    if (r->off == r->buf.len) {
        sb_reset(&r->buf);
        r->off = 0;
    } else if (r->off > r->buf.len / 2) {
        memmove(r->buf.buf, r->buf.buf + r->off, r->buf.len - r->off);
        r->buf.len -= r->off;
        r->buf.buf[r->buf.len] = 0;
        r->off = 0;
    }
}

int rpc_reader_feed(rpc_reader *r, const void *p, size_t n)
{
    const char *c = p;
    if (r->skip) {   /* the rest of an oversized body: never stored */
        size_t k = n < r->skip ? n : r->skip;
        r->skip -= k;
        c += k;
        n -= k;
    }
    compact(r);
    return n ? sb_append(&r->buf, c, n) : 0;
}

/* The end of the header block ("\r\n\r\n") in [p, p+n), or NULL. */
static const char *header_end(const char *p, size_t n)
{
    for (size_t i = 0; i + 3 < n; i++)
        if (p[i] == '\r' && p[i + 1] == '\n' && p[i + 2] == '\r' && p[i + 3] == '\n') return p + i;
    return NULL;
}

/* Content-Length from a header block; -1 when absent or malformed. */
static int parse_headers(const char *h, size_t n, size_t *clen, char *why, size_t whycap)
{
    int have = 0;
    const char *p = h, *end = h + n;
    while (p < end) {
        const char *eol = memchr(p, '\r', (size_t)(end - p));
        if (!eol) eol = end;
        const char *colon = memchr(p, ':', (size_t)(eol - p));
        if (!colon) {
            snprintf(why, whycap, "header line without ':'");
            return -1;
        }
        size_t nl = (size_t)(colon - p);
        if (nl == 14 && !strncasecmp(p, "Content-Length", 14)) {
            const char *v = colon + 1;
            while (v < eol && (*v == ' ' || *v == '\t')) v++;
            if (v == eol) { snprintf(why, whycap, "empty Content-Length"); return -1; }
            size_t x = 0;
            for (; v < eol && isdigit((unsigned char)*v); v++) {
                if (x > ((size_t)-1 - 9) / 10) { snprintf(why, whycap, "Content-Length overflows"); return -1; }
                x = x * 10 + (size_t)(*v - '0');
            }
            while (v < eol && (*v == ' ' || *v == '\t')) v++;
            if (v != eol) { snprintf(why, whycap, "Content-Length is not a number"); return -1; }
            *clen = x;
            have = 1;
        }
        p = eol + 2;   /* header lines end in "\r\n" */
    }
    if (!have) { snprintf(why, whycap, "no Content-Length header"); return -1; }
    return 0;
}

int rpc_reader_next(rpc_reader *r, const char **body, size_t *len, char *why, size_t whycap)
{
    if (whycap) why[0] = 0;
    if (r->skip) return 0;
    const char *p = r->buf.buf ? r->buf.buf + r->off : "";
    size_t n = r->buf.len - r->off;
    if (n == 0) return 0;
    size_t scan = n < RPC_MAX_HEADER + 4 ? n : RPC_MAX_HEADER + 4;
    const char *he = header_end(p, scan);
    if (!he) {
        if (n < RPC_MAX_HEADER + 4) return 0;
        /* no header end in a full header's worth: drop it all, resync on the next "Content-Length" */
        const char *next = NULL;
        for (size_t i = 1; i + 14 <= n; i++)
            if (!strncasecmp(p + i, "Content-Length", 14)) { next = p + i; break; }
        r->off += next ? (size_t)(next - p) : n;
        snprintf(why, whycap, "header longer than %d bytes", RPC_MAX_HEADER);
        return -1;
    }
    size_t hlen = (size_t)(he - p), clen = 0;
    if (parse_headers(p, hlen, &clen, why, whycap)) {
        r->off += hlen + 4;
        return -1;
    }
    if (clen > r->max_body) {
        size_t have = n - hlen - 4;
        r->off += hlen + 4 + (have < clen ? have : clen);
        r->skip = have < clen ? clen - have : 0;
        snprintf(why, whycap, "message of %zu bytes is larger than the %zu-byte limit", clen, r->max_body);
        return -1;
    }
    if (n - hlen - 4 < clen) return 0;
    *body = p + hlen + 4;
    *len = clen;
    r->off += hlen + 4 + clen;
    return 1;
}

int rpc_frame(strbuf *out, const char *body, size_t len)
{
    if (sb_printf(out, "Content-Length: %zu\r\n\r\n", len)) return -1;
    return sb_append(out, body, len);
}
