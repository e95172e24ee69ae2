/* tok_json — recursive-descent JSON reader into a flat node array (see
 * tok_json.h for why it exists). Every read is bounds-checked; errors carry
 * the line and column of the offending byte. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tokens/tok_impl.h"
#include "tokens/tok_json.h"

#define TJ_MAX_DEPTH 64

typedef struct parser {
    tj_doc *d;
    const char *s;
    size_t n, i;
    const char *name;
    dlm_err *e;
} parser;

static int fail(parser *p, const char *msg)
{
    int line = 1, col = 1;
    for (size_t k = 0; k < p->i && k < p->n; k++) {
        if (p->s[k] == '\n') {
            line++;
            col = 1;
        } else col++;
    }
    return err_at(p->e, "JSONError", p->name, line, col, "invalid JSON: %s", msg);
}

static uint32_t node_new(parser *p, int type)
{
    tj_doc *d = p->d;
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 1024;
        if (nc > UINT32_MAX) return 0;
        tj_node *nn = realloc(d->nodes, nc * sizeof *nn);
        if (!nn) return 0;
        d->nodes = nn;
        d->cap = nc;
    }
    tj_node *x = &d->nodes[d->n];
    memset(x, 0, sizeof *x);
    x->type = (uint8_t)type;
    return (uint32_t)d->n++;
}

static int str_reserve(parser *p, size_t extra)
{
    tj_doc *d = p->d;
    if (d->str_len + extra + 1 <= d->str_cap) return 0;
    size_t nc = d->str_cap ? d->str_cap : 4096;
    while (nc < d->str_len + extra + 1) nc *= 2;
    if (nc > UINT32_MAX) return -1;
    char *s = realloc(d->str, nc);
    if (!s) return -1;
    d->str = s;
    d->str_cap = nc;
    return 0;
}

static void skip_ws(parser *p)
{
    while (p->i < p->n) {
        char c = p->s[p->i];
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
        p->i++;
    }
}

static int hex4(parser *p, unsigned *out)
{
    if (p->n - p->i < 4) return -1;
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        char c = p->s[p->i++];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* At the opening quote. Decodes into the arena; the node records it. */
static int parse_string(parser *p, uint32_t node)
{
    p->i++;
    if (str_reserve(p, 0)) return fail(p, "out of memory");
    size_t start = p->d->str_len;
    for (;;) {
        /* Copy a run of plain bytes at once. */
        size_t j = p->i;
        while (j < p->n) {
            unsigned char c = (unsigned char)p->s[j];
            if (c == '"' || c == '\\' || c < 0x20) break;
            if (c < 0x80) {
                j++;
                continue;
            }
            uint32_t cp;
            size_t l = tok_utf8_dec((const unsigned char *)p->s + j, p->n - j, &cp);
            if (!l) {
                p->i = j;
                return fail(p, "string is not valid UTF-8");
            }
            j += l;
        }
        if (j > p->i) {
            if (str_reserve(p, j - p->i)) return fail(p, "out of memory");
            memcpy(p->d->str + p->d->str_len, p->s + p->i, j - p->i);
            p->d->str_len += j - p->i;
            p->i = j;
        }
        if (p->i >= p->n) return fail(p, "unterminated string");
        char c = p->s[p->i];
        if (c == '"') {
            p->i++;
            break;
        }
        if ((unsigned char)c < 0x20) return fail(p, "control character in string");
        /* An escape. */
        if (++p->i >= p->n) return fail(p, "unterminated string");
        char x = p->s[p->i++];
        char out[4];
        size_t ol = 1;
        switch (x) {
        case '"': out[0] = '"'; break;
        case '\\': out[0] = '\\'; break;
        case '/': out[0] = '/'; break;
        case 'b': out[0] = '\b'; break;
        case 'f': out[0] = '\f'; break;
        case 'n': out[0] = '\n'; break;
        case 'r': out[0] = '\r'; break;
        case 't': out[0] = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (hex4(p, &cp)) return fail(p, "bad \\u escape");
            if (cp >= 0xDC00 && cp <= 0xDFFF) return fail(p, "lone low surrogate in \\u escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (p->n - p->i < 6 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u')
                    return fail(p, "lone high surrogate in \\u escape");
                p->i += 2;
                if (hex4(p, &lo) || lo < 0xDC00 || lo > 0xDFFF) return fail(p, "bad surrogate pair");
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            ol = put_utf8(out, cp);
            break;
        }
        default: p->i--; return fail(p, "bad escape");
        }
        if (str_reserve(p, ol)) return fail(p, "out of memory");
        memcpy(p->d->str + p->d->str_len, out, ol);
        p->d->str_len += ol;
    }
    if (p->d->str_len - start > UINT32_MAX - 1) return fail(p, "string too long");
    p->d->str[p->d->str_len] = 0;
    p->d->nodes[node].v.s.off = (uint32_t)start;
    p->d->nodes[node].v.s.len = (uint32_t)(p->d->str_len - start);
    p->d->str_len++;
    return 0;
}

static int parse_number(parser *p, uint32_t node)
{
    size_t j = p->i;
    int is_int = 1;
    if (j < p->n && p->s[j] == '-') j++;
    if (j >= p->n || p->s[j] < '0' || p->s[j] > '9') return fail(p, "bad number");
    if (p->s[j] == '0') j++;
    else
        while (j < p->n && p->s[j] >= '0' && p->s[j] <= '9') j++;
    if (j < p->n && p->s[j] == '.') {
        is_int = 0;
        j++;
        if (j >= p->n || p->s[j] < '0' || p->s[j] > '9') return fail(p, "bad number");
        while (j < p->n && p->s[j] >= '0' && p->s[j] <= '9') j++;
    }
    if (j < p->n && (p->s[j] == 'e' || p->s[j] == 'E')) {
        is_int = 0;
        j++;
        if (j < p->n && (p->s[j] == '+' || p->s[j] == '-')) j++;
        if (j >= p->n || p->s[j] < '0' || p->s[j] > '9') return fail(p, "bad number");
        while (j < p->n && p->s[j] >= '0' && p->s[j] <= '9') j++;
    }
    char buf[64];
    size_t len = j - p->i;
    tj_node *x = &p->d->nodes[node];
    if (len < sizeof buf) {
        memcpy(buf, p->s + p->i, len);
        buf[len] = 0;
        errno = 0;
        if (is_int) {
            long long v = strtoll(buf, NULL, 10);
            if (errno == 0) {
                x->type = TJ_INT;
                x->v.i = v;
                p->i = j;
                return 0;
            }
        }
        x->type = TJ_REAL;
        x->v.d = strtod(buf, NULL);
    } else {
        x->type = TJ_REAL;  /* absurdly long literal: keep the type, value unknown */
        x->v.d = 0;
    }
    p->i = j;
    return 0;
}

static int parse_value(parser *p, uint32_t *out, int depth);

static int parse_container(parser *p, uint32_t node, int is_obj, int depth)
{
    p->i++;
    uint32_t last = 0, count = 0;
    skip_ws(p);
    char close = is_obj ? '}' : ']';
    if (p->i < p->n && p->s[p->i] == close) {
        p->i++;
        return 0;
    }
    for (;;) {
        uint32_t key = 0, val;
        if (is_obj) {
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != '"') return fail(p, "expected a string key");
            key = node_new(p, TJ_STR);
            if (!key) return fail(p, "out of memory");
            if (parse_string(p, key)) return -1;
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') return fail(p, "expected ':'");
            p->i++;
        }
        if (parse_value(p, &val, depth + 1)) return -1;
        if (is_obj) p->d->nodes[key].next = val;
        uint32_t head = is_obj ? key : val;
        if (last) p->d->nodes[last].next = head;
        else p->d->nodes[node].child = head;
        last = val;
        count++;
        skip_ws(p);
        if (p->i >= p->n) return fail(p, "unterminated container");
        char c = p->s[p->i++];
        if (c == close) break;
        if (c != ',') {
            p->i--;
            return fail(p, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
        }
    }
    p->d->nodes[node].count = count;
    return 0;
}

static int parse_value(parser *p, uint32_t *out, int depth)
{
    if (depth > TJ_MAX_DEPTH) return fail(p, "nested too deeply");
    skip_ws(p);
    if (p->i >= p->n) return fail(p, "unexpected end of input");
    char c = p->s[p->i];
    uint32_t x;
    switch (c) {
    case '{':
    case '[':
        x = node_new(p, c == '{' ? TJ_OBJ : TJ_ARR);
        if (!x) return fail(p, "out of memory");
        *out = x;
        return parse_container(p, x, c == '{', depth);
    case '"':
        x = node_new(p, TJ_STR);
        if (!x) return fail(p, "out of memory");
        *out = x;
        return parse_string(p, x);
    case 't':
    case 'f':
    case 'n': {
        const char *w = c == 't' ? "true" : c == 'f' ? "false" : "null";
        size_t wl = strlen(w);
        if (p->n - p->i < wl || memcmp(p->s + p->i, w, wl)) return fail(p, "unknown literal");
        p->i += wl;
        x = node_new(p, c == 't' ? TJ_TRUE : c == 'f' ? TJ_FALSE : TJ_NULL);
        if (!x) return fail(p, "out of memory");
        *out = x;
        return 0;
    }
    default:
        x = node_new(p, TJ_INT);
        if (!x) return fail(p, "out of memory");
        *out = x;
        return parse_number(p, x);
    }
}

int tj_parse(tj_doc *d, const char *s, size_t n, const char *name, dlm_err *e)
{
    memset(d, 0, sizeof *d);
    parser p = {d, s, n, 0, name ? name : "json", e};
    node_new(&p, TJ_NONE); /* node 0 = none */
    if (d->n != 1) return fail(&p, "out of memory");
    uint32_t root;
    if (parse_value(&p, &root, 0)) {
        tj_free(d);
        return -1;
    }
    skip_ws(&p);
    if (p.i != n) {
        fail(&p, "trailing characters after the JSON value");
        tj_free(d);
        return -1;
    }
    return 0;
}

void tj_free(tj_doc *d)
{
    free(d->nodes);
    free(d->str);
    memset(d, 0, sizeof *d);
}

uint32_t tj_get(const tj_doc *d, uint32_t o, const char *key)
{
    if (tj_type(d, o) != TJ_OBJ) return 0;
    size_t kl = strlen(key);
    for (uint32_t k = d->nodes[o].child; k; k = d->nodes[d->nodes[k].next].next) {
        const tj_node *kn = &d->nodes[k];
        if (kn->v.s.len == kl && !memcmp(d->str + kn->v.s.off, key, kl)) return kn->next;
    }
    return 0;
}

const char *tj_str(const tj_doc *d, uint32_t i, size_t *len)
{
    if (tj_type(d, i) != TJ_STR) return NULL;
    if (len) *len = d->nodes[i].v.s.len;
    return d->str + d->nodes[i].v.s.off;
}

int tj_bool(const tj_doc *d, uint32_t i, int def)
{
    int t = tj_type(d, i);
    return t == TJ_TRUE ? 1 : t == TJ_FALSE ? 0 : def;
}

int tj_int(const tj_doc *d, uint32_t i, int64_t *out)
{
    if (tj_type(d, i) != TJ_INT) return -1;
    *out = d->nodes[i].v.i;
    return 0;
}

int tj_num(const tj_doc *d, uint32_t i, double *out)
{
    int t = tj_type(d, i);
    if (t == TJ_INT) *out = (double)d->nodes[i].v.i;
    else if (t == TJ_REAL) *out = d->nodes[i].v.d;
    else return -1;
    return 0;
}

uint32_t tj_at(const tj_doc *d, uint32_t a, size_t k)
{
    if (tj_type(d, a) != TJ_ARR || k >= d->nodes[a].count) return 0;
    uint32_t x = d->nodes[a].child;
    while (k-- && x) x = d->nodes[x].next;
    return x;
}
