/* cbor — see cbor.h. */
#include "util/cbor.h"

#include <math.h>
#include <string.h>

static void head(strbuf *sb, int major, uint64_t v)
{
    unsigned char b[9];
    int n;
    if (v < 24) { b[0] = (unsigned char)(major << 5 | (int)v); n = 1; }
    else if (v <= 0xff) { b[0] = (unsigned char)(major << 5 | 24); b[1] = (unsigned char)v; n = 2; }
    else if (v <= 0xffff) { b[0] = (unsigned char)(major << 5 | 25); n = 3; }
    else if (v <= 0xffffffffu) { b[0] = (unsigned char)(major << 5 | 26); n = 5; }
    else { b[0] = (unsigned char)(major << 5 | 27); n = 9; }
    for (int i = 1; n > 2 && i < n; i++) b[i] = (unsigned char)(v >> (8 * (n - 1 - i)));   /* big-endian */
    sb_append(sb, b, (size_t)n);
}

void cbor_put_uint(strbuf *sb, uint64_t v) { head(sb, 0, v); }
void cbor_put_text(strbuf *sb, const char *s, size_t n) { head(sb, 3, n); sb_append(sb, s, n); }
void cbor_put_bool(strbuf *sb, int v) { sb_putc(sb, (char)(v ? 0xf5 : 0xf4)); }
void cbor_put_map(strbuf *sb, size_t n_pairs) { head(sb, 5, n_pairs); }
void cbor_put_array(strbuf *sb, size_t n) { head(sb, 4, n); }
void cbor_put_tag(strbuf *sb, uint64_t tag) { head(sb, 6, tag); }

/* ---- reading --------------------------------------------------------------- */

typedef struct rd {
    const uint8_t *p;
    size_t n, at;
    int depth;
} rd;

static int bad(dlm_err *e, const rd *r, const char *what)
{
    return err_set(e, "CBORDecodeError", "CBOR: %s at byte %zu", what, r->at);
}

/* the head's argument: major type and value (ai 31 = indefinite: refused) */
static int arg(rd *r, int *major, uint64_t *v, int *ai, dlm_err *e)
{
    if (r->at >= r->n) return bad(e, r, "truncated item");
    uint8_t b = r->p[r->at++];
    *major = b >> 5;
    *ai = b & 31;
    if (*ai < 24) { *v = (uint64_t)*ai; return 0; }
    if (*ai > 27) return bad(e, r, *ai == 31 ? "indefinite lengths are not supported" : "reserved head");
    size_t k = (size_t)1 << (*ai - 24);
    if (r->n - r->at < k) return bad(e, r, "truncated head");
    uint64_t x = 0;
    for (size_t i = 0; i < k; i++) x = x << 8 | r->p[r->at++];
    *v = x;
    return 0;
}

static double half(uint16_t h)
{
    int ex = (h >> 10) & 31, mant = h & 1023;
    double v = ex == 0 ? ldexp(mant, -24) : ex == 31 ? (mant ? NAN : INFINITY) : ldexp(mant + 1024, ex - 25);
    return h & 0x8000 ? -v : v;
}

static json_t *item(rd *r, dlm_err *e)
{
    if (++r->depth > 64) { bad(e, r, "nesting deeper than 64"); return NULL; }
    int major = 0, ai = 0;
    uint64_t v = 0;
    json_t *out = NULL;
    if (arg(r, &major, &v, &ai, e)) return NULL;
    switch (major) {
    case 0:
        if (v > INT64_MAX) { bad(e, r, "integer out of range"); break; }
        out = json_integer((json_int_t)v);
        break;
    case 1:
        if (v > INT64_MAX) { bad(e, r, "integer out of range"); break; }
        out = json_integer(-1 - (json_int_t)v);
        break;
    case 2: bad(e, r, "byte strings are not supported"); break;
    case 3:
        if (v > r->n - r->at) { bad(e, r, "truncated text"); break; }
        out = json_stringn((const char *)r->p + r->at, (size_t)v);
        if (!out) bad(e, r, "text is not UTF-8");
        r->at += (size_t)v;
        break;
    case 4:
        if (v > r->n - r->at) { bad(e, r, "array longer than the data"); break; }
        out = json_array();
        for (uint64_t i = 0; out && i < v; i++) {
            json_t *x = item(r, e);
            if (!x) { json_decref(out); out = NULL; break; }
            json_array_append_new(out, x);
        }
        break;
    case 5:
        if (v > r->n - r->at) { bad(e, r, "map longer than the data"); break; }
        out = json_object();
        for (uint64_t i = 0; out && i < v; i++) {
            json_t *k = item(r, e), *x = k ? item(r, e) : NULL;
            if (k && x && !json_is_string(k)) bad(e, r, "a map key is not text");
            if (!k || !x || !json_is_string(k)) {
                json_decref(k);
                json_decref(x);
                json_decref(out);
                out = NULL;
                break;
            }
            json_object_set_new(out, json_string_value(k), x);
            json_decref(k);
        }
        break;
    case 6:
        /* 0: date-time string, 1: epoch seconds: the value as it is */
        if (v > 1) { bad(e, r, "unsupported tag"); break; }
        out = item(r, e);
        break;
    case 7:
        if (ai == 20 || ai == 21) out = json_boolean(ai == 21);
        else if (ai == 22 || ai == 23) out = json_null();
        else if (ai >= 25 && ai <= 27) {
            double d;
            if (ai == 25) d = half((uint16_t)v);
            else if (ai == 26) {
                uint32_t u = (uint32_t)v;
                float f;
                memcpy(&f, &u, 4);
                d = f;
            } else memcpy(&d, &v, 8);
            if (isfinite(d)) out = json_real(d);
            else bad(e, r, "a NaN or infinite float");   /* JSON cannot hold it */
        } else bad(e, r, "unsupported simple value");
        break;
    }
    r->depth--;
    return out;
}

int cbor_to_json(const uint8_t *p, size_t n, json_t **out, dlm_err *e)
{
    rd r = {p, n, 0, 0};
    *out = item(&r, e);
    if (!*out) return -1;
    if (r.at != n) {
        json_decref(*out);
        *out = NULL;
        return bad(e, &r, "trailing bytes after the item");
    }
    return 0;
}
