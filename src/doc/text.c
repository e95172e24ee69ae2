/* text — bytes of a .dlm file → the text every later stage sees.
 *
 * Strict UTF-8 with the same verdicts and byte offsets as Python's codec
 * (so messages match the original), a leading BOM stripped with a warning,
 * CRLF then lone CR turned into LF. One deliberate divergence: U+0000 is
 * refused, because no real document contains it and the rest of dlm can
 * then treat document text as C strings. */
#include "doc/doc_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util/log.h"

/* Python's verdict for the sequence starting at s[i]: 0 ok (len in *adv),
 * else the reason string. */
static const char *utf8_check(const unsigned char *s, size_t n, size_t i, size_t *adv)
{
    unsigned c = s[i];
    if (c < 0x80) { *adv = 1; return NULL; }
    int need;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) need = 1;
    else if (c >= 0xe0 && c <= 0xef) {
        need = 2;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 3;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
    } else return "invalid start byte";
    for (int k = 1; k <= need; k++) {
        if (i + (size_t)k >= n) return "unexpected end of data";
        unsigned b = s[i + (size_t)k];
        unsigned l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xbf;
        if (b < l || b > h) return "invalid continuation byte";
    }
    *adv = (size_t)need + 1;
    return NULL;
}

int doc_text_normalize(const char *label, const char *bytes, size_t len, char **out,
                       size_t *out_len, int *had_bom, dlm_err *e)
{
    const unsigned char *s = (const unsigned char *)bytes;
    *out = NULL;
    if (had_bom) *had_bom = 0;
    for (size_t i = 0; i < len;) {
        size_t adv = 1;
        const char *why = utf8_check(s, len, i, &adv);
        if (why)
            return err_at(e, "DlmEncodingError", label, 0, 0, "invalid UTF-8 at byte %zu: %s", i, why);
        if (s[i] == 0)
            return err_at(e, "DlmEncodingError", label, 0, 0,
                          "NUL character at byte %zu: a .dlm document is text", i);
        i += adv;
    }
    size_t start = 0;
    if (len >= 3 && s[0] == 0xef && s[1] == 0xbb && s[2] == 0xbf) {
        start = 3;
        if (had_bom) *had_bom = 1;
        log_warn("%s: UTF-8 BOM present; stripped", label);
    }
    char *t = malloc(len - start + 1);
    if (!t) return err_set(e, "MemoryError", "out of memory reading '%s'", label);
    size_t o = 0;
    for (size_t i = start; i < len; i++) {
        if (s[i] == '\r') {
            t[o++] = '\n';
            if (i + 1 < len && s[i + 1] == '\n') i++;
        } else t[o++] = (char)s[i];
    }
    t[o] = 0;
    *out = t;
    *out_len = o;
    return 0;
}
