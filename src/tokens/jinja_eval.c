/* jinja_eval — the evaluator of jinja.c's tree: values, scopes, filters,
 * tests, string and dict methods, the global functions chat templates call
 * (raise_exception, range, namespace, strftime_now). Value printing and
 * JSON follow @huggingface/jinja (what the tests compare with); string
 * methods follow Python (what transformers runs), e.g. lstrip('\n') strips
 * newlines only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokens/jinja.h"
#include "tokens/jinja_impl.h"

enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_MACRO, V_METHOD, V_FUNC };

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jenv jenv;
typedef struct jmeth jmeth;

typedef struct jval {
    int k;
    union {
        int64_t i;
        double f;
        jstr *s;
        jlist *l;
        jdict *d;
        jmeth *m;
    };
} jval;

struct jlist {
    size_t n, cap;
    jval *v;
};
struct jdict {
    size_t n, cap;
    jstr **key;
    jval *v;
};
struct jmeth {
    jval self;
    const char *name;     /* method or builtin name */
    const jnode *macro;   /* V_MACRO */
    jenv *env;            /* macro closure */
    const jnode *caller;  /* call block body (for `caller()`) */
    jenv *caller_env;
};
struct jenv {
    jenv *parent;
    jdict *vars;
};

typedef struct jbuf {
    char *p;
    size_t n, cap;
} jbuf;

typedef struct rt {
    jx x;
    jenv *globals;
} rt;

#define X (&r->x)
static const jval UNDEF = {V_UNDEF, {0}};
static const jval NONE = {V_NONE, {0}};

static void step(rt *r)
{
    if (++r->x.steps > JINJA_MAX_STEPS) jx_fail(X, "template ran more than %llu steps", JINJA_MAX_STEPS);
}

static void buf_add(rt *r, jbuf *b, const char *s, size_t n)
{
    if (b->n + n > JINJA_MAX_OUTPUT) jx_fail(X, "template output larger than %u MiB", JINJA_MAX_OUTPUT >> 20);
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *p = jx_alloc(X, nc);
        if (b->n) memcpy(p, b->p, b->n);
        b->p = p;
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void buf_puts(rt *r, jbuf *b, const char *s) { buf_add(r, b, s, strlen(s)); }

static jval vstr(rt *r, const char *s, size_t n)
{
    jval v = {V_STR, {0}};
    v.s = jx_str(X, s, n);
    return v;
}
static jval vcs(rt *r, const char *s) { return vstr(r, s, strlen(s)); }
static jval vbuf(rt *r, const jbuf *b) { return vstr(r, b->p ? b->p : "", b->n); }
static jval vint(int64_t i) { jval v = {V_INT, {0}}; v.i = i; return v; }
static jval vbool(int b) { jval v = {V_BOOL, {0}}; v.i = !!b; return v; }
static jval vfloat(double f) { jval v = {V_FLOAT, {0}}; v.f = f; return v; }

static jval vlist(rt *r)
{
    jval v = {V_LIST, {0}};
    v.l = jx_alloc(X, sizeof *v.l);
    return v;
}
static void list_push(rt *r, jlist *l, jval x)
{
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 8;
        jval *nv = jx_alloc(X, nc * sizeof *nv);
        if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = x;
}
static jval vdict(rt *r)
{
    jval v = {V_DICT, {0}};
    v.d = jx_alloc(X, sizeof *v.d);
    return v;
}
static jval *dict_find(const jdict *d, const char *k, size_t kn)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->key[i]->n == kn && !memcmp(d->key[i]->s, k, kn)) return &d->v[i];
    return NULL;
}
static void dict_set(rt *r, jdict *d, const char *k, size_t kn, jval v)
{
    jval *p = dict_find(d, k, kn);
    if (p) {
        *p = v;
        return;
    }
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 8;
        jstr **nk = jx_alloc(X, nc * sizeof *nk);
        jval *nv = jx_alloc(X, nc * sizeof *nv);
        if (d->n) {
            memcpy(nk, d->key, d->n * sizeof *nk);
            memcpy(nv, d->v, d->n * sizeof *nv);
        }
        d->key = nk;
        d->v = nv;
        d->cap = nc;
    }
    d->key[d->n] = jx_str(X, k, kn);
    d->v[d->n++] = v;
}

/* ---- JSON in -------------------------------------------------------------------------------- */

static jval from_json(rt *r, const json_t *j, int depth)
{
    if (depth > 64) jx_fail(X, "variables nested too deeply");
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        jval v = vdict(r);
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)j, k, x) dict_set(r, v.d, k, strlen(k), from_json(r, x, depth + 1));
        return v;
    }
    case JSON_ARRAY: {
        jval v = vlist(r);
        for (size_t i = 0; i < json_array_size(j); i++) list_push(r, v.l, from_json(r, json_array_get(j, i), depth + 1));
        return v;
    }
    case JSON_STRING: return vstr(r, json_string_value(j), json_string_length(j));
    case JSON_INTEGER: return vint((int64_t)json_integer_value(j));
    case JSON_REAL: return vfloat(json_real_value(j));
    case JSON_TRUE: return vbool(1);
    case JSON_FALSE: return vbool(0);
    default: return NONE;
    }
}

/* ---- printing ------------------------------------------------------------------------------- */

static void fmt_float(char *b, size_t cap, double f)
{
    if (f == 0 && signbit(f)) snprintf(b, cap, "-0.0");
    else if (isfinite(f) && f == floor(f) && fabs(f) < 1e21) snprintf(b, cap, "%.1f", f);
    else if (isnan(f)) snprintf(b, cap, "NaN");
    else if (isinf(f)) snprintf(b, cap, f > 0 ? "Infinity" : "-Infinity");
    else {
        for (int p = 1; p <= 17; p++) {
            snprintf(b, cap, "%.*g", p, f);
            if (strtod(b, NULL) == f) break;
        }
    }
}

static void json_str(rt *r, jbuf *o, const char *s, size_t n)
{
    buf_add(r, o, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[8];
        if (c == '"') buf_add(r, o, "\\\"", 2);
        else if (c == '\\') buf_add(r, o, "\\\\", 2);
        else if (c == '\n') buf_add(r, o, "\\n", 2);
        else if (c == '\r') buf_add(r, o, "\\r", 2);
        else if (c == '\t') buf_add(r, o, "\\t", 2);
        else if (c == '\b') buf_add(r, o, "\\b", 2);
        else if (c == '\f') buf_add(r, o, "\\f", 2);
        else if (c < 0x20) {
            snprintf(e, sizeof e, "\\u%04x", c);
            buf_puts(r, o, e);
        } else buf_add(r, o, (const char *)&c, 1);
    }
    buf_add(r, o, "\"", 1);
}

static void to_json(rt *r, jbuf *o, jval v, int indent, int depth, int undef_null)
{
    char b[64];
    if (depth > 64) jx_fail(X, "tojson: value nested too deeply");
    switch (v.k) {
    case V_UNDEF: buf_puts(r, o, undef_null ? "null" : "undefined"); return;
    case V_NONE: buf_puts(r, o, "null"); return;
    case V_BOOL: buf_puts(r, o, v.i ? "true" : "false"); return;
    case V_INT: snprintf(b, sizeof b, "%lld", (long long)v.i); buf_puts(r, o, b); return;
    case V_FLOAT:
        /* JSON.stringify: integers without ".0" */
        if (isfinite(v.f) && v.f == floor(v.f) && fabs(v.f) < 1e21) snprintf(b, sizeof b, "%.0f", v.f);
        else if (!isfinite(v.f)) snprintf(b, sizeof b, "null");
        else fmt_float(b, sizeof b, v.f);
        buf_puts(r, o, b);
        return;
    case V_STR: json_str(r, o, v.s->s, v.s->n); return;
    case V_LIST:
    case V_DICT: {
        int list = v.k == V_LIST;
        size_t n = list ? v.l->n : v.d->n;
        const char *item = indent ? "," : ", ";
        buf_puts(r, o, list ? "[" : "{");
        for (size_t i = 0; i < n; i++) {
            if (i) buf_puts(r, o, item);
            if (indent) {
                buf_puts(r, o, "\n");
                for (int k = 0; k < indent * (depth + 1); k++) buf_puts(r, o, " ");
            }
            if (list) to_json(r, o, v.l->v[i], indent, depth + 1, undef_null);
            else {
                json_str(r, o, v.d->key[i]->s, v.d->key[i]->n);
                buf_puts(r, o, ": ");
                to_json(r, o, v.d->v[i], indent, depth + 1, undef_null);
            }
        }
        if (indent && n) {
            buf_puts(r, o, "\n");
            for (int k = 0; k < indent * depth; k++) buf_puts(r, o, " ");
        }
        buf_puts(r, o, list ? "]" : "}");
        return;
    }
    default: buf_puts(r, o, "null"); return;
    }
}

static void to_text(rt *r, jbuf *o, jval v)
{
    char b[64];
    switch (v.k) {
    case V_UNDEF: return;
    case V_NONE: buf_puts(r, o, "null"); return;
    case V_BOOL: buf_puts(r, o, v.i ? "true" : "false"); return;
    case V_INT: snprintf(b, sizeof b, "%lld", (long long)v.i); buf_puts(r, o, b); return;
    case V_FLOAT: fmt_float(b, sizeof b, v.f); buf_puts(r, o, b); return;
    case V_STR: buf_add(r, o, v.s->s, v.s->n); return;
    case V_LIST:
    case V_DICT: to_json(r, o, v, 0, 0, 0); return;
    default: buf_puts(r, o, "[function]"); return;
    }
}

static jstr *str_of(rt *r, jval v)
{
    if (v.k == V_STR) return v.s;
    jbuf b = {0};
    to_text(r, &b, v);
    return jx_str(X, b.p ? b.p : "", b.n);
}

static int truthy(jval v)
{
    switch (v.k) {
    case V_UNDEF: case V_NONE: return 0;
    case V_BOOL: case V_INT: return v.i != 0;
    case V_FLOAT: return v.f != 0;
    case V_STR: return v.s->n != 0;
    case V_LIST: return v.l->n != 0;
    case V_DICT: return v.d->n != 0;
    default: return 1;
    }
}

/* double -> int64 without UB for NaN or out-of-range values */
static int64_t to_i64(double d)
{
    if (!(d == d)) return 0;
    if (d >= 9.2e18) return INT64_MAX;
    if (d <= -9.2e18) return INT64_MIN;
    return (int64_t)d;
}

static int is_num(jval v) { return v.k == V_INT || v.k == V_FLOAT; }
static double num(jval v) { return v.k == V_INT ? (double)v.i : v.k == V_FLOAT ? v.f : v.k == V_BOOL ? (double)v.i : 0; }

/* == as @huggingface/jinja compares (JS == on the underlying values):
 * strings by content, numbers and booleans by value, undefined == none,
 * lists and dicts by identity. */
static int equal(jval a, jval b)
{
    int an = a.k == V_INT || a.k == V_FLOAT || a.k == V_BOOL, bn = b.k == V_INT || b.k == V_FLOAT || b.k == V_BOOL;
    if (an && bn) return num(a) == num(b);
    if ((a.k == V_UNDEF || a.k == V_NONE) && (b.k == V_UNDEF || b.k == V_NONE)) return 1;
    if (a.k != b.k) {
        /* JS: "1" == 1 */
        if (a.k == V_STR && bn) return a.s->n && strtod(a.s->s, NULL) == num(b);
        if (b.k == V_STR && an) return b.s->n && strtod(b.s->s, NULL) == num(a);
        return 0;
    }
    switch (a.k) {
    case V_STR: return a.s->n == b.s->n && !memcmp(a.s->s, b.s->s, a.s->n);
    case V_LIST: return a.l == b.l;
    case V_DICT: return a.d == b.d;
    default: return a.m == b.m;
    }
}

/* ---- scopes --------------------------------------------------------------------------------- */

static jenv *env_new(rt *r, jenv *parent)
{
    jenv *e = jx_alloc(X, sizeof *e);
    e->parent = parent;
    e->vars = jx_alloc(X, sizeof *e->vars);
    return e;
}

static jval env_get(rt *r, jenv *e, const char *k, size_t kn)
{
    for (; e; e = e->parent) {
        jval *v = dict_find(e->vars, k, kn);
        if (v) return *v;
    }
    static const char *const builtins[] = {"raise_exception", "range", "namespace", "strftime_now", "dict"};
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (kn == strlen(builtins[i]) && !memcmp(k, builtins[i], kn)) {
            jval f = {V_FUNC, {0}};
            f.m = jx_alloc(X, sizeof *f.m);
            f.m->name = builtins[i];
            return f;
        }
    (void)r;
    return UNDEF;
}

/* ---- strings -------------------------------------------------------------------------------- */

static int py_space(unsigned char c) { return c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f); }

/* Python str.strip family: chars NULL = whitespace (ASCII + the UTF-8
 * encoded Unicode spaces are rare in templates; ASCII is what matters). */
static jval strip(rt *r, jstr *s, const jstr *chars, int left, int right)
{
    size_t a = 0, b = s->n;
#define STRIPC(c) (chars ? memchr(chars->s, (c), chars->n) != NULL : py_space((unsigned char)(c)))
    if (left) while (a < b && STRIPC(s->s[a])) a++;
    if (right) while (b > a && STRIPC(s->s[b - 1])) b--;
#undef STRIPC
    return vstr(r, s->s + a, b - a);
}

static jval case_map(rt *r, jstr *s, int mode /* 0 lower 1 upper 2 title 3 capitalize */)
{
    jval v = vstr(r, s->s, s->n);
    int start = 1;
    for (size_t i = 0; i < v.s->n; i++) {
        char c = v.s->s[i];
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (mode == 0) c = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        else if (mode == 1) c = (char)(c >= 'a' && c <= 'z' ? c - 32 : c);
        else if (mode == 3) c = (char)(i == 0 ? (c >= 'a' && c <= 'z' ? c - 32 : c) : (c >= 'A' && c <= 'Z' ? c + 32 : c));
        else {
            if (start && c >= 'a' && c <= 'z') c = (char)(c - 32);
            else if (!start && c >= 'A' && c <= 'Z') c = (char)(c + 32);
            start = !alpha && !((unsigned char)c & 0x80);
        }
        v.s->s[i] = c;
    }
    return v;
}

static jval replace_str(rt *r, jstr *s, jstr *a, jstr *b, int64_t count)
{
    jbuf o = {0};
    size_t i = 0;
    int64_t done = 0;
    if (!a->n) {
        /* Python: "" matches between every char */
        for (size_t k = 0; k <= s->n; k++) {
            if (count < 0 || done < count) {
                buf_add(r, &o, b->s, b->n);
                done++;
            }
            if (k < s->n) buf_add(r, &o, s->s + k, 1);
        }
        return vbuf(r, &o);
    }
    while (i < s->n && (count < 0 || done < count)) {
        const char *h = s->n - i >= a->n ? memmem(s->s + i, s->n - i, a->s, a->n) : NULL;
        if (!h) break;
        buf_add(r, &o, s->s + i, (size_t)(h - (s->s + i)));
        buf_add(r, &o, b->s, b->n);
        i = (size_t)(h - s->s) + a->n;
        done++;
    }
    buf_add(r, &o, s->s + i, s->n - i);
    return vbuf(r, &o);
}

static jval split_str(rt *r, jstr *s, jval sep, int64_t maxsplit)
{
    jval out = vlist(r);
    size_t i = 0;
    int64_t done = 0;
    if (sep.k != V_STR) {
        /* whitespace runs, leading/trailing ignored */
        while (i < s->n) {
            while (i < s->n && py_space((unsigned char)s->s[i])) i++;
            if (i >= s->n) break;
            size_t a = i;
            if (maxsplit >= 0 && done >= maxsplit) {
                size_t b = s->n;
                while (b > a && py_space((unsigned char)s->s[b - 1])) b--;
                list_push(r, out.l, vstr(r, s->s + a, b - a));
                break;
            }
            while (i < s->n && !py_space((unsigned char)s->s[i])) i++;
            list_push(r, out.l, vstr(r, s->s + a, i - a));
            done++;
        }
        return out;
    }
    if (!sep.s->n) jx_fail(X, "split: empty separator");
    for (;;) {
        const char *h = (maxsplit < 0 || done < maxsplit) && s->n - i >= sep.s->n
                            ? memmem(s->s + i, s->n - i, sep.s->s, sep.s->n) : NULL;
        if (!h) break;
        list_push(r, out.l, vstr(r, s->s + i, (size_t)(h - (s->s + i))));
        i = (size_t)(h - s->s) + sep.s->n;
        done++;
    }
    list_push(r, out.l, vstr(r, s->s + i, s->n - i));
    return out;
}

/* ---- arguments ------------------------------------------------------------------------------ */

typedef struct jargs {
    jval pos[8];
    int np;
    const char *kw[8];
    size_t kwn[8];
    jval kwv[8];
    int nk;
} jargs;

static jval ev(rt *r, const jnode *n, jenv *e);

static void eval_args(rt *r, const jnode *args, jenv *e, jargs *a)
{
    memset(a, 0, sizeof *a);
    for (size_t i = 0; args && i < args->nk; i++) {
        const jnode *k = args->k[i];
        if (k->kind == N_KWARG) {
            if (a->nk >= 8) jx_fail(X, "too many keyword arguments");
            a->kw[a->nk] = k->s;
            a->kwn[a->nk] = k->sn;
            a->kwv[a->nk++] = ev(r, k->a, e);
        } else {
            if (a->np >= 8) jx_fail(X, "too many arguments");
            a->pos[a->np++] = ev(r, k, e);
        }
    }
}

/* Positional i, else keyword name, else def. */
static jval arg(const jargs *a, int i, const char *name, jval def)
{
    if (i >= 0 && i < a->np) return a->pos[i];
    for (int k = 0; name && k < a->nk; k++)
        if (a->kwn[k] == strlen(name) && !memcmp(a->kw[k], name, a->kwn[k])) return a->kwv[k];
    return def;
}

static jstr *arg_str(rt *r, const jargs *a, int i, const char *name, const char *fn)
{
    jval v = arg(a, i, name, UNDEF);
    if (v.k != V_STR) jx_fail(X, "%s: argument %d must be a string", fn, i + 1);
    return v.s;
}

/* ---- indexing ------------------------------------------------------------------------------- */

static size_t seq_len(rt *r, jval v)
{
    if (v.k == V_STR) return v.s->n; /* bytes: chat templates slice ASCII and lists */
    if (v.k == V_LIST) return v.l->n;
    if (v.k == V_DICT) return v.d->n;
    jx_fail(X, "value has no length");
}

static jval slice(rt *r, jval v, jval a, jval b, jval c)
{
    if (v.k != V_LIST && v.k != V_STR) jx_fail(X, "only lists and strings can be sliced");
    int64_t n = (int64_t)seq_len(r, v), st = c.k == V_INT ? c.i : 1;
    if (st == 0) jx_fail(X, "slice step cannot be zero");
    if (st > n + 1) st = n + 1; /* one element either way; no overflow of i + st */
    if (st < -n - 1) st = -n - 1;
    int64_t lo, hi;
    if (st > 0) {
        lo = a.k == V_INT ? a.i : 0;
        hi = b.k == V_INT ? b.i : n;
        if (lo < 0) lo += n;
        if (hi < 0) hi += n;
        lo = lo < 0 ? 0 : lo > n ? n : lo;
        hi = hi < 0 ? 0 : hi > n ? n : hi;
    } else {
        lo = a.k == V_INT ? a.i : n - 1;
        hi = b.k == V_INT ? b.i : -n - 1;
        if (lo < 0) lo += n;
        if (hi < 0) hi += n;
        lo = lo < -1 ? -1 : lo > n - 1 ? n - 1 : lo;
        hi = hi < -1 ? -1 : hi > n - 1 ? n - 1 : hi;
    }
    jval out = v.k == V_LIST ? vlist(r) : UNDEF;
    jbuf sb = {0};
    for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) {
        step(r);
        if (v.k == V_LIST) list_push(r, out.l, v.l->v[i]);
        else buf_add(r, &sb, v.s->s + i, 1);
    }
    return v.k == V_LIST ? out : vbuf(r, &sb);
}

static jval method(rt *r, jval self, const char *name)
{
    jval m = {V_METHOD, {0}};
    m.m = jx_alloc(X, sizeof *m.m);
    m.m->self = self;
    m.m->name = name;
    return m;
}

static jval member(rt *r, jval o, jval key)
{
    static const char *const str_methods[] = {"upper", "lower", "strip", "lstrip", "rstrip", "startswith", "endswith",
                                              "split", "title", "capitalize", "replace", "format", "join", "count", "find"};
    static const char *const dict_methods[] = {"items", "keys", "values", "get"};
    if (o.k == V_DICT) {
        if (key.k == V_STR) {
            jval *v = dict_find(o.d, key.s->s, key.s->n);
            if (v) return *v;
            for (size_t i = 0; i < sizeof dict_methods / sizeof dict_methods[0]; i++)
                if (!strcmp(key.s->s, dict_methods[i])) return method(r, o, dict_methods[i]);
            return UNDEF;
        }
        jstr *k = str_of(r, key);
        jval *v = dict_find(o.d, k->s, k->n);
        return v ? *v : UNDEF;
    }
    if (o.k == V_LIST || o.k == V_STR) {
        if (key.k == V_INT) {
            int64_t n = (int64_t)seq_len(r, o), i = key.i < 0 ? key.i + n : key.i;
            if (i < 0 || i >= n) return UNDEF;
            return o.k == V_LIST ? o.l->v[i] : vstr(r, o.s->s + i, 1);
        }
        if (key.k == V_STR && o.k == V_STR)
            for (size_t i = 0; i < sizeof str_methods / sizeof str_methods[0]; i++)
                if (!strcmp(key.s->s, str_methods[i])) return method(r, o, str_methods[i]);
        if (key.k == V_STR && o.k == V_LIST && !strcmp(key.s->s, "append")) return method(r, o, "append");
        return UNDEF;
    }
    if (o.k == V_UNDEF) jx_fail(X, "cannot read '%s' of an undefined value", key.k == V_STR ? key.s->s : "[index]");
    if (o.k == V_NONE) jx_fail(X, "cannot read '%s' of none", key.k == V_STR ? key.s->s : "[index]");
    return UNDEF;
}

/* ---- filters and tests ---------------------------------------------------------------------- */

static int test(rt *r, jval v, const char *name, const jargs *a);

static jval attr_of(rt *r, jval item, jstr *attr)
{
    /* "a.b" paths as Jinja's attribute= */
    jval cur = item;
    size_t i = 0;
    while (i <= attr->n) {
        const char *dot = memchr(attr->s + i, '.', attr->n - i);
        size_t e = dot ? (size_t)(dot - attr->s) : attr->n;
        if (cur.k != V_DICT) return UNDEF;
        jval *v = dict_find(cur.d, attr->s + i, e - i);
        if (!v) return UNDEF;
        cur = *v;
        i = e + 1;
    }
    return cur;
}

static int cmp_vals(rt *r, jval a, jval b)
{
    if (is_num(a) && is_num(b)) return num(a) < num(b) ? -1 : num(a) > num(b);
    if (a.k == V_STR && b.k == V_STR) {
        size_t n = a.s->n < b.s->n ? a.s->n : b.s->n;
        int c = memcmp(a.s->s, b.s->s, n);
        return c ? c : (a.s->n > b.s->n) - (a.s->n < b.s->n);
    }
    jx_fail(X, "cannot compare these values");
}

static jval filter(rt *r, jval v, const char *f, size_t fn, const jargs *a)
{
    char name[32];
    snprintf(name, sizeof name, "%.*s", (int)(fn < 31 ? fn : 31), f);
#define IS(w) (!strcmp(name, w))
    if (IS("safe")) return v;
    if (IS("string")) return v.k == V_STR ? v : vcs(r, str_of(r, v)->s);
    if (IS("tojson")) {
        jbuf o = {0};
        jval ind = arg(a, 0, "indent", UNDEF);
        to_json(r, &o, v, ind.k == V_INT && ind.i > 0 && ind.i < 32 ? (int)ind.i : 0, 0, 1);
        return vbuf(r, &o);
    }
    if (IS("length") || IS("count")) return vint((int64_t)seq_len(r, v));
    if (IS("default") || IS("d")) {
        jval def = arg(a, 0, "default_value", vcs(r, ""));
        int boolean = truthy(arg(a, 1, "boolean", vbool(0)));
        if (v.k == V_UNDEF || (boolean && !truthy(v))) return def;
        return v;
    }
    if (IS("first") || IS("last")) {
        if (v.k == V_LIST) return v.l->n ? v.l->v[IS("first") ? 0 : v.l->n - 1] : UNDEF;
        if (v.k == V_STR) return v.s->n ? vstr(r, v.s->s + (IS("first") ? 0 : v.s->n - 1), 1) : UNDEF;
        jx_fail(X, "%s: expected a list or a string", name);
    }
    if (IS("list")) {
        if (v.k == V_LIST) return v;
        jval out = vlist(r);
        if (v.k == V_STR) for (size_t i = 0; i < v.s->n; i++) list_push(r, out.l, vstr(r, v.s->s + i, 1));
        else if (v.k == V_DICT) for (size_t i = 0; i < v.d->n; i++) list_push(r, out.l, vstr(r, v.d->key[i]->s, v.d->key[i]->n));
        else jx_fail(X, "list: expected a list, string or dict");
        return out;
    }
    if (IS("items")) {
        if (v.k == V_UNDEF) return vlist(r);
        if (v.k != V_DICT) jx_fail(X, "items: expected a dict");
        jval out = vlist(r);
        for (size_t i = 0; i < v.d->n; i++) {
            jval pair = vlist(r);
            list_push(r, pair.l, vstr(r, v.d->key[i]->s, v.d->key[i]->n));
            list_push(r, pair.l, v.d->v[i]);
            list_push(r, out.l, pair);
        }
        return out;
    }
    if (IS("reverse")) {
        if (v.k == V_STR) {
            jval s = vstr(r, v.s->s, v.s->n);
            for (size_t i = 0; i < s.s->n / 2; i++) {
                char c = s.s->s[i];
                s.s->s[i] = s.s->s[s.s->n - 1 - i];
                s.s->s[s.s->n - 1 - i] = c;
            }
            return s;
        }
        if (v.k != V_LIST) jx_fail(X, "reverse: expected a list");
        jval out = vlist(r);
        for (size_t i = v.l->n; i-- > 0;) list_push(r, out.l, v.l->v[i]);
        return out;
    }
    if (IS("join")) {
        if (v.k != V_LIST) jx_fail(X, "join: expected a list");
        jval sep = arg(a, 0, "d", vcs(r, ""));
        jstr *ss = str_of(r, sep);
        jbuf o = {0};
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) buf_add(r, &o, ss->s, ss->n);
            to_text(r, &o, v.l->v[i]);
        }
        return vbuf(r, &o);
    }
    if (IS("abs")) {
        if (v.k == V_INT) return vint(v.i < 0 ? -v.i : v.i);
        if (v.k == V_FLOAT) return vfloat(fabs(v.f));
        jx_fail(X, "abs: expected a number");
    }
    if (IS("int")) {
        if (v.k == V_INT) return v;
        if (v.k == V_FLOAT) return vint(to_i64(v.f));
        if (v.k == V_BOOL) return vint(v.i);
        if (v.k == V_STR) return vint(strtoll(v.s->s, NULL, 10));
        return arg(a, 0, "default", vint(0));
    }
    if (IS("float")) {
        if (is_num(v) || v.k == V_BOOL) return vfloat(num(v));
        if (v.k == V_STR) return vfloat(strtod(v.s->s, NULL));
        return arg(a, 0, "default", vfloat(0));
    }
    if (v.k == V_STR) {
        if (IS("trim")) return strip(r, v.s, NULL, 1, 1);
        if (IS("upper")) return case_map(r, v.s, 1);
        if (IS("lower")) return case_map(r, v.s, 0);
        if (IS("title")) return case_map(r, v.s, 2);
        if (IS("capitalize")) return case_map(r, v.s, 3);
        if (IS("replace")) {
            jval c = arg(a, 2, "count", UNDEF);
            return replace_str(r, v.s, arg_str(r, a, 0, "old", name), arg_str(r, a, 1, "new", name), c.k == V_INT ? c.i : -1);
        }
        if (IS("indent")) {
            jval w = arg(a, 0, "width", vint(4));
            int first = truthy(arg(a, 1, "first", vbool(0)));
            jbuf pad = {0}, o = {0};
            if (w.k == V_STR) buf_add(r, &pad, w.s->s, w.s->n);
            else for (int64_t k = 0; k < (w.k == V_INT && w.i < 256 ? w.i : 0); k++) buf_puts(r, &pad, " ");
            for (size_t i = 0; i < v.s->n; i++) {
                if ((i == 0 && first) || (i > 0 && v.s->s[i - 1] == '\n' && v.s->s[i] != '\n')) buf_add(r, &o, pad.p, pad.n);
                buf_add(r, &o, v.s->s + i, 1);
            }
            return vbuf(r, &o);
        }
    }
    if (v.k == V_LIST && (IS("map") || IS("selectattr") || IS("rejectattr") || IS("select") || IS("reject") ||
                          IS("unique") || IS("sort"))) {
        jval out = vlist(r);
        if (IS("map")) {
            jval at = arg(a, -1, "attribute", UNDEF);
            if (at.k != V_STR) {
                jval fnm = arg(a, 0, NULL, UNDEF);
                if (fnm.k != V_STR) jx_fail(X, "map: needs attribute= or a filter name");
                jargs none = {0};
                for (size_t i = 0; i < v.l->n; i++) list_push(r, out.l, filter(r, v.l->v[i], fnm.s->s, fnm.s->n, &none));
                return out;
            }
            jval def = arg(a, -1, "default", UNDEF);
            for (size_t i = 0; i < v.l->n; i++) {
                jval x = attr_of(r, v.l->v[i], at.s);
                list_push(r, out.l, x.k == V_UNDEF ? def : x);
            }
            return out;
        }
        if (IS("unique")) {
            for (size_t i = 0; i < v.l->n; i++) {
                int seen = 0;
                for (size_t k = 0; k < out.l->n && !seen; k++) seen = equal(out.l->v[k], v.l->v[i]);
                if (!seen) list_push(r, out.l, v.l->v[i]);
            }
            return out;
        }
        if (IS("sort")) {
            int rev = truthy(arg(a, 0, "reverse", vbool(0)));
            jval at = arg(a, 2, "attribute", UNDEF);
            for (size_t i = 0; i < v.l->n; i++) list_push(r, out.l, v.l->v[i]);
            for (size_t i = 1; i < out.l->n; i++) /* insertion sort: stable */
                for (size_t k = i; k > 0; k--) {
                    step(r);
                    jval x = out.l->v[k - 1], y = out.l->v[k];
                    jval kx = at.k == V_STR ? attr_of(r, x, at.s) : x, ky = at.k == V_STR ? attr_of(r, y, at.s) : y;
                    int c = cmp_vals(r, kx, ky);
                    if (rev ? c >= 0 : c <= 0) break;
                    out.l->v[k - 1] = y;
                    out.l->v[k] = x;
                }
            return out;
        }
        int attr = IS("selectattr") || IS("rejectattr"), keep = IS("selectattr") || IS("select");
        jargs ta = {0};
        int base = attr ? 1 : 0;
        jval tname = arg(a, base, NULL, UNDEF);
        for (int k = base + 1; k < a->np; k++) ta.pos[ta.np++] = a->pos[k];
        for (size_t i = 0; i < v.l->n; i++) {
            jval x = v.l->v[i];
            if (attr) {
                jval at = arg(a, 0, NULL, UNDEF);
                if (at.k != V_STR) jx_fail(X, "%s: needs an attribute name", name);
                x = attr_of(r, x, at.s);
            }
            int ok = tname.k == V_STR ? test(r, x, tname.s->s, &ta) : truthy(x);
            if (ok == keep) list_push(r, out.l, v.l->v[i]);
        }
        return out;
    }
    jx_fail(X, "unknown filter '%s' (or not for this type)", name);
#undef IS
}

static int test(rt *r, jval v, const char *name, const jargs *a)
{
#define IS(w) (!strcmp(name, w))
    if (IS("defined")) return v.k != V_UNDEF;
    if (IS("undefined")) return v.k == V_UNDEF;
    if (IS("none")) return v.k == V_NONE;
    if (IS("string")) return v.k == V_STR;
    if (IS("number")) return v.k == V_INT || v.k == V_FLOAT;
    if (IS("integer")) return v.k == V_INT;
    if (IS("float")) return v.k == V_FLOAT;
    if (IS("boolean")) return v.k == V_BOOL;
    if (IS("true")) return v.k == V_BOOL && v.i;
    if (IS("false")) return v.k == V_BOOL && !v.i;
    if (IS("mapping")) return v.k == V_DICT;
    if (IS("iterable")) return v.k == V_LIST || v.k == V_DICT || v.k == V_STR;
    if (IS("sequence")) return v.k == V_LIST || v.k == V_DICT || v.k == V_STR;
    if (IS("callable")) return v.k == V_MACRO || v.k == V_METHOD || v.k == V_FUNC;
    if (IS("odd") || IS("even")) {
        if (v.k != V_INT) jx_fail(X, "%s: expected an integer", name);
        return (int)(v.i & 1) == IS("odd");
    }
    if (IS("lower") || IS("upper")) {
        if (v.k != V_STR) return 0;
        for (size_t i = 0; i < v.s->n; i++)
            if (IS("lower") ? (v.s->s[i] >= 'A' && v.s->s[i] <= 'Z') : (v.s->s[i] >= 'a' && v.s->s[i] <= 'z')) return 0;
        return 1;
    }
    if (IS("eq") || IS("equalto") || IS("==")) return equal(v, arg(a, 0, NULL, UNDEF));
    if (IS("ne") || IS("!=")) return !equal(v, arg(a, 0, NULL, UNDEF));
    if (IS("in")) {
        jval c = arg(a, 0, NULL, UNDEF);
        if (c.k == V_LIST) {
            for (size_t i = 0; i < c.l->n; i++)
                if (equal(c.l->v[i], v)) return 1;
            return 0;
        }
        return 0;
    }
    jx_fail(X, "unknown test '%s'", name);
#undef IS
}

/* ---- calls ---------------------------------------------------------------------------------- */

typedef struct ctl {
    int brk, cont;
} ctl;

static void exec_block(rt *r, const jnode *n, jenv *e, jbuf *o, ctl *c);

static jval call_macro(rt *r, jmeth *m, const jargs *a, const jnode *caller, jenv *caller_env)
{
    if (++r->x.depth > JINJA_MAX_DEPTH) jx_fail(X, "macro calls nested too deeply");
    const jnode *mac = m->macro;
    jenv *e = env_new(r, m->env);
    const jnode *params = mac->a;
    int npos = 0;
    for (size_t i = 0; params && i < params->nk; i++) {
        const jnode *p = params->k[i];
        const char *pn = p->kind == N_KWARG ? p->s : p->s;
        size_t pl = p->sn;
        jval v = UNDEF;
        if ((int)i < a->np) v = a->pos[i], npos++;
        else {
            int found = 0;
            for (int k = 0; k < a->nk; k++)
                if (a->kwn[k] == pl && !memcmp(a->kw[k], pn, pl)) v = a->kwv[k], found = 1;
            if (!found && p->kind == N_KWARG) v = ev(r, p->a, e);
        }
        dict_set(r, e->vars, pn, pl, v);
    }
    if (caller) {
        jval cv = {V_MACRO, {0}};
        cv.m = jx_alloc(X, sizeof *cv.m);
        cv.m->caller = caller;
        cv.m->caller_env = caller_env;
        dict_set(r, e->vars, "caller", 6, cv);
    }
    jbuf o = {0};
    ctl c = {0, 0};
    exec_block(r, mac->b, e, &o, &c);
    r->x.depth--;
    return vbuf(r, &o);
}

static jval call_value(rt *r, jval f, const jargs *a)
{
    step(r);
    if (f.k == V_MACRO) {
        if (f.m->caller) {
            jbuf o = {0};
            ctl c = {0, 0};
            exec_block(r, f.m->caller, env_new(r, f.m->caller_env), &o, &c);
            return vbuf(r, &o);
        }
        return call_macro(r, f.m, a, NULL, NULL);
    }
    if (f.k == V_FUNC) {
        const char *nm = f.m->name;
        if (!strcmp(nm, "raise_exception")) {
            jval msg = arg(a, 0, NULL, vcs(r, "raise_exception() was called"));
            jx_fail(X, "%s", str_of(r, msg)->s);
        }
        if (!strcmp(nm, "range")) {
            int64_t lo = 0, hi, st = 1;
            if (a->np == 1) hi = to_i64(num(a->pos[0]));
            else if (a->np >= 2) lo = to_i64(num(a->pos[0])), hi = to_i64(num(a->pos[1]));
            else jx_fail(X, "range() needs arguments");
            if (a->np >= 3) st = to_i64(num(a->pos[2]));
            /* bounded by the step and memory limits long before these */
            if (lo < -(INT64_C(1) << 60) || lo > (INT64_C(1) << 60) || hi < -(INT64_C(1) << 60) || hi > (INT64_C(1) << 60))
                jx_fail(X, "range() bounds too large");
            if (!st) jx_fail(X, "range() step cannot be zero");
            jval out = vlist(r);
            for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) {
                step(r);
                list_push(r, out.l, vint(i));
            }
            return out;
        }
        if (!strcmp(nm, "namespace") || !strcmp(nm, "dict")) {
            jval d = vdict(r);
            if (a->np && a->pos[0].k == V_DICT)
                for (size_t i = 0; i < a->pos[0].d->n; i++)
                    dict_set(r, d.d, a->pos[0].d->key[i]->s, a->pos[0].d->key[i]->n, a->pos[0].d->v[i]);
            for (int k = 0; k < a->nk; k++) dict_set(r, d.d, a->kw[k], a->kwn[k], a->kwv[k]);
            return d;
        }
        if (!strcmp(nm, "strftime_now")) {
            jstr *fmt = arg_str(r, a, 0, NULL, "strftime_now");
            char b[256];
            time_t now = time(NULL);
            struct tm tmv;
            localtime_r(&now, &tmv);
            size_t l = strftime(b, sizeof b, fmt->s, &tmv);
            return vstr(r, b, l);
        }
    }
    if (f.k == V_METHOD) {
        const char *nm = f.m->name;
        jval s = f.m->self;
        if (s.k == V_DICT) {
            if (!strcmp(nm, "get")) {
                jval k = arg(a, 0, NULL, UNDEF);
                jstr *ks = str_of(r, k);
                jval *v = dict_find(s.d, ks->s, ks->n);
                return v ? *v : arg(a, 1, NULL, NONE);
            }
            jargs none = {0};
            if (!strcmp(nm, "items")) return filter(r, s, "items", 5, &none);
            jval out = vlist(r);
            for (size_t i = 0; i < s.d->n; i++)
                list_push(r, out.l, !strcmp(nm, "keys") ? vstr(r, s.d->key[i]->s, s.d->key[i]->n) : s.d->v[i]);
            return out;
        }
        if (s.k == V_LIST && !strcmp(nm, "append")) {
            list_push(r, s.l, arg(a, 0, NULL, NONE));
            return NONE;
        }
        if (s.k == V_STR) {
            jstr *str = s.s;
            if (!strcmp(nm, "upper")) return case_map(r, str, 1);
            if (!strcmp(nm, "lower")) return case_map(r, str, 0);
            if (!strcmp(nm, "title")) return case_map(r, str, 2);
            if (!strcmp(nm, "capitalize")) return case_map(r, str, 3);
            if (!strcmp(nm, "strip") || !strcmp(nm, "lstrip") || !strcmp(nm, "rstrip")) {
                jval ch = arg(a, 0, "chars", NONE);
                return strip(r, str, ch.k == V_STR ? ch.s : NULL, nm[0] != 'r', nm[0] != 'l');
            }
            if (!strcmp(nm, "startswith") || !strcmp(nm, "endswith")) {
                jval p = arg(a, 0, NULL, UNDEF);
                int ends = nm[0] == 'e';
                jlist one = {1, 1, &p};
                const jlist *alts = p.k == V_LIST ? p.l : &one;
                for (size_t i = 0; i < alts->n; i++) {
                    if (alts->v[i].k != V_STR) jx_fail(X, "%s: expected a string", nm);
                    jstr *x = alts->v[i].s;
                    if (x->n <= str->n && !memcmp(str->s + (ends ? str->n - x->n : 0), x->s, x->n)) return vbool(1);
                }
                return vbool(0);
            }
            if (!strcmp(nm, "split")) {
                jval ms = arg(a, 1, "maxsplit", vint(-1));
                return split_str(r, str, arg(a, 0, "sep", NONE), ms.k == V_INT ? ms.i : -1);
            }
            if (!strcmp(nm, "replace")) {
                jval c = arg(a, 2, "count", UNDEF);
                return replace_str(r, str, arg_str(r, a, 0, NULL, nm), arg_str(r, a, 1, NULL, nm), c.k == V_INT ? c.i : -1);
            }
            if (!strcmp(nm, "count") || !strcmp(nm, "find")) {
                jstr *x = arg_str(r, a, 0, NULL, nm);
                int64_t cnt = 0, first = -1;
                for (size_t i = 0; x->n && i + x->n <= str->n;) {
                    if (!memcmp(str->s + i, x->s, x->n)) {
                        if (first < 0) first = (int64_t)i;
                        cnt++;
                        i += x->n;
                    } else i++;
                }
                return vint(nm[0] == 'c' ? cnt : first);
            }
            if (!strcmp(nm, "join")) {
                jval l = arg(a, 0, NULL, UNDEF);
                jargs sep = {0};
                sep.pos[0] = s;
                sep.np = 1;
                return filter(r, l, "join", 4, &sep);
            }
            if (!strcmp(nm, "format")) {
                /* "%s"-free Python format: {} fields in order */
                jbuf o = {0};
                int k = 0;
                for (size_t i = 0; i < str->n; i++) {
                    if (str->s[i] == '{' && i + 1 < str->n && str->s[i + 1] == '}') {
                        to_text(r, &o, arg(a, k++, NULL, UNDEF));
                        i++;
                    } else buf_add(r, &o, str->s + i, 1);
                }
                return vbuf(r, &o);
            }
        }
    }
    jx_fail(X, "value is not callable");
}

/* ---- expressions ---------------------------------------------------------------------------- */

static jval binary(rt *r, const jnode *n, jenv *e)
{
    const char *op = n->opname;
    jval l = ev(r, n->a, e);
    if (!strcmp(op, "and")) return truthy(l) ? ev(r, n->b, e) : l;
    if (!strcmp(op, "or")) return truthy(l) ? l : ev(r, n->b, e);
    jval rv = ev(r, n->b, e);
    if (!strcmp(op, "==")) return vbool(equal(l, rv));
    if (!strcmp(op, "!=")) return vbool(!equal(l, rv));
    if (!strcmp(op, "in") || !strcmp(op, "notin")) {
        int neg = op[0] == 'n', hit = 0;
        if (rv.k == V_UNDEF) return vbool(neg);
        if (rv.k == V_STR) {
            if (l.k != V_STR) jx_fail(X, "'in <string>' needs a string on the left");
            hit = l.s->n <= rv.s->n && (l.s->n == 0 || memmem(rv.s->s, rv.s->n, l.s->s, l.s->n) != NULL);
        } else if (rv.k == V_LIST) {
            for (size_t i = 0; i < rv.l->n && !hit; i++) hit = equal(rv.l->v[i], l);
        } else if (rv.k == V_DICT) {
            jstr *k = str_of(r, l);
            hit = dict_find(rv.d, k->s, k->n) != NULL;
        } else jx_fail(X, "'in' needs a string, list or dict on the right");
        return vbool(hit ^ neg);
    }
    if (l.k == V_UNDEF || rv.k == V_UNDEF) jx_fail(X, "cannot apply '%s' to an undefined value", op);
    if (l.k == V_NONE || rv.k == V_NONE) jx_fail(X, "cannot apply '%s' to none", op);
    if (!strcmp(op, "~")) {
        jbuf o = {0};
        to_text(r, &o, l);
        to_text(r, &o, rv);
        return vbuf(r, &o);
    }
    if (is_num(l) && is_num(rv)) {
        int fl = l.k == V_FLOAT || rv.k == V_FLOAT;
        double a = num(l), b = num(rv);
        if (!strcmp(op, "<")) return vbool(a < b);
        if (!strcmp(op, ">")) return vbool(a > b);
        if (!strcmp(op, "<=")) return vbool(a <= b);
        if (!strcmp(op, ">=")) return vbool(a >= b);
        if (!strcmp(op, "/")) return vfloat(a / b);
        if (!fl) {
            int64_t x = l.i, y = rv.i;
            if (!strcmp(op, "+")) return vint((int64_t)((uint64_t)x + (uint64_t)y));
            if (!strcmp(op, "-")) return vint((int64_t)((uint64_t)x - (uint64_t)y));
            if (!strcmp(op, "*")) return vint((int64_t)((uint64_t)x * (uint64_t)y));
            if (!strcmp(op, "//") || !strcmp(op, "%")) {
                if (y == 0) jx_fail(X, "division by zero");
                if (x == INT64_MIN && y == -1) return vint(op[0] == '%' ? 0 : x);
                int64_t q = x / y, m = x % y;
                if (!strcmp(op, "//")) return vint((m != 0 && ((m < 0) != (y < 0))) ? q - 1 : q);
                return vint(m); /* JS % keeps the sign of the left side */
            }
            if (!strcmp(op, "**")) {
                double p = pow(a, b);
                if (!isfinite(p) || fabs(p) > 9.2e18) jx_fail(X, "'**' result out of range");
                return b < 0 ? vfloat(p) : vint((int64_t)p);
            }
        }
        if (!strcmp(op, "+")) return vfloat(a + b);
        if (!strcmp(op, "-")) return vfloat(a - b);
        if (!strcmp(op, "*")) return vfloat(a * b);
        if (!strcmp(op, "//")) return vfloat(floor(a / b));
        if (!strcmp(op, "%")) return vfloat(fmod(a, b));
        if (!strcmp(op, "**")) return vfloat(pow(a, b));
    }
    if (!strcmp(op, "+")) {
        if (l.k == V_LIST && rv.k == V_LIST) {
            jval out = vlist(r);
            for (size_t i = 0; i < l.l->n; i++) list_push(r, out.l, l.l->v[i]);
            for (size_t i = 0; i < rv.l->n; i++) list_push(r, out.l, rv.l->v[i]);
            return out;
        }
        if (l.k == V_STR || rv.k == V_STR) {
            jbuf o = {0};
            to_text(r, &o, l);
            to_text(r, &o, rv);
            return vbuf(r, &o);
        }
    }
    if (!strcmp(op, "*") && ((l.k == V_STR && rv.k == V_INT) || (l.k == V_INT && rv.k == V_STR))) {
        jstr *s = l.k == V_STR ? l.s : rv.s;
        int64_t k = l.k == V_INT ? l.i : rv.i;
        jbuf o = {0};
        for (int64_t i = 0; i < k; i++) {
            step(r);
            buf_add(r, &o, s->s, s->n);
        }
        return vbuf(r, &o);
    }
    if (l.k == V_STR && rv.k == V_STR && (op[0] == '<' || op[0] == '>')) {
        int c = cmp_vals(r, l, rv);
        if (!strcmp(op, "<")) return vbool(c < 0);
        if (!strcmp(op, ">")) return vbool(c > 0);
        if (!strcmp(op, "<=")) return vbool(c <= 0);
        return vbool(c >= 0);
    }
    jx_fail(X, "unsupported operation '%s'", op);
}

static jval ev(rt *r, const jnode *n, jenv *e)
{
    step(r);
    if (++r->x.depth > JINJA_MAX_DEPTH) jx_fail(X, "expression nested too deeply");
    jval v = UNDEF;
    switch (n->kind) {
    case N_INT: v = vint(n->i); break;
    case N_FLOAT: v = vfloat(n->f); break;
    case N_STR: v = vstr(r, n->s, n->sn); break;
    case N_BOOL: v = vbool((int)n->i); break;
    case N_NONE: v = NONE; break;
    case N_IDENT: v = env_get(r, e, n->s, n->sn); break;
    case N_LIST:
    case N_TUPLE:
        v = vlist(r);
        for (size_t i = 0; i < n->nk; i++) list_push(r, v.l, ev(r, n->k[i], e));
        break;
    case N_DICT:
        v = vdict(r);
        for (size_t i = 0; i + 1 < n->nk; i += 2) {
            jstr *k = str_of(r, ev(r, n->k[i], e));
            dict_set(r, v.d, k->s, k->n, ev(r, n->k[i + 1], e));
        }
        break;
    case N_MEMBER: {
        jval o = ev(r, n->a, e);
        if (n->b->kind == N_SLICE) {
            const jnode *s = n->b;
            v = slice(r, o, s->a ? ev(r, s->a, e) : UNDEF, s->b ? ev(r, s->b, e) : UNDEF, s->c ? ev(r, s->c, e) : UNDEF);
        } else v = member(r, o, ev(r, n->b, e));
        break;
    }
    case N_CALL: {
        jval f = ev(r, n->a, e);
        jargs a;
        eval_args(r, n->b, e, &a);
        v = call_value(r, f, &a);
        break;
    }
    case N_FILTER: {
        jval x = ev(r, n->a, e);
        jargs a;
        eval_args(r, n->b, e, &a);
        v = filter(r, x, n->s, n->sn, &a);
        break;
    }
    case N_TEST: {
        jval x = ev(r, n->a, e);
        jargs a;
        eval_args(r, n->b, e, &a);
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)(n->sn < 31 ? n->sn : 31), n->s);
        v = vbool(test(r, x, name, &a) ^ n->neg);
        break;
    }
    case N_BIN: v = binary(r, n, e); break;
    case N_NOT: v = vbool(!truthy(ev(r, n->a, e))); break;
    case N_NEG: {
        jval x = ev(r, n->a, e);
        if (x.k == V_INT) v = n->op == '-' ? vint((int64_t)(0 - (uint64_t)x.i)) : x;
        else if (x.k == V_FLOAT) v = n->op == '-' ? vfloat(-x.f) : x;
        else jx_fail(X, "unary '%c' needs a number", n->op);
        break;
    }
    case N_COND:
        if (truthy(ev(r, n->a, e))) v = ev(r, n->b, e);
        else v = n->c ? ev(r, n->c, e) : UNDEF;
        break;
    default: jx_fail(X, "cannot evaluate this node");
    }
    r->x.depth--;
    return v;
}

/* ---- statements ----------------------------------------------------------------------------- */

static void assign(rt *r, const jnode *target, jval v, jenv *e)
{
    if (target->kind == N_IDENT) {
        dict_set(r, e->vars, target->s, target->sn, v);
    } else if (target->kind == N_TUPLE) {
        if (v.k != V_LIST || v.l->n != target->nk) jx_fail(X, "cannot unpack: wrong number of values");
        for (size_t i = 0; i < target->nk; i++) assign(r, target->k[i], v.l->v[i], e);
    } else if (target->kind == N_MEMBER && target->b->kind == N_STR) {
        jval o = ev(r, target->a, e);
        if (o.k != V_DICT) jx_fail(X, "can only set attributes of a namespace");
        dict_set(r, o.d, target->b->s, target->b->sn, v);
    } else jx_fail(X, "invalid assignment target");
}

static void exec_for(rt *r, const jnode *n, jenv *e, jbuf *o)
{
    jenv *scope = env_new(r, e);
    const jnode *it = n->a, *cond = NULL;
    if (it->kind == N_COND && !it->c) {
        cond = it->a;
        it = it->b;
    }
    jval seq = ev(r, it, scope);
    jval items = vlist(r);
    if (seq.k == V_DICT) {
        for (size_t i = 0; i < seq.d->n; i++) list_push(r, items.l, vstr(r, seq.d->key[i]->s, seq.d->key[i]->n));
    } else if (seq.k == V_LIST) {
        for (size_t i = 0; i < seq.l->n; i++) list_push(r, items.l, seq.l->v[i]);
    } else if (seq.k == V_STR) {
        for (size_t i = 0; i < seq.s->n; i++) list_push(r, items.l, vstr(r, seq.s->s + i, 1));
    } else jx_fail(X, "for: expected a list or dict to iterate over");
    if (cond) {
        jval kept = vlist(r);
        for (size_t i = 0; i < items.l->n; i++) {
            jenv *ls = env_new(r, scope);
            assign(r, n->c, items.l->v[i], ls);
            if (truthy(ev(r, cond, ls))) list_push(r, kept.l, items.l->v[i]);
        }
        items = kept;
    }
    size_t len = items.l->n;
    for (size_t i = 0; i < len; i++) {
        jval loop = vdict(r);
        dict_set(r, loop.d, "index", 5, vint((int64_t)i + 1));
        dict_set(r, loop.d, "index0", 6, vint((int64_t)i));
        dict_set(r, loop.d, "revindex", 8, vint((int64_t)(len - i)));
        dict_set(r, loop.d, "revindex0", 9, vint((int64_t)(len - i - 1)));
        dict_set(r, loop.d, "first", 5, vbool(i == 0));
        dict_set(r, loop.d, "last", 4, vbool(i == len - 1));
        dict_set(r, loop.d, "length", 6, vint((int64_t)len));
        dict_set(r, loop.d, "previtem", 8, i > 0 ? items.l->v[i - 1] : UNDEF);
        dict_set(r, loop.d, "nextitem", 8, i + 1 < len ? items.l->v[i + 1] : UNDEF);
        dict_set(r, scope->vars, "loop", 4, loop);
        assign(r, n->c, items.l->v[i], scope);
        ctl c = {0, 0};
        exec_block(r, n->b, scope, o, &c);
        if (c.brk) break;
    }
    if (!len && n->d) {
        ctl c = {0, 0};
        exec_block(r, n->d, scope, o, &c);
    }
}

static void exec_node(rt *r, const jnode *n, jenv *e, jbuf *o, ctl *c)
{
    step(r);
    switch (n->kind) {
    case N_BLOCK: exec_block(r, n, e, o, c); return;
    case N_TEXT: buf_add(r, o, n->s, n->sn); return;
    case N_OUT: {
        jval v = ev(r, n->a, e);
        if (v.k != V_NONE) to_text(r, o, v);
        return;
    }
    case N_IF:
        if (truthy(ev(r, n->a, e))) exec_block(r, n->b, e, o, c);
        else if (n->c) exec_block(r, n->c, e, o, c);
        return;
    case N_FOR: exec_for(r, n, e, o); return;
    case N_SET:
        if (n->b) assign(r, n->a, ev(r, n->b, e), e);
        else {
            jbuf b = {0};
            ctl cc = {0, 0};
            exec_block(r, n->c, e, &b, &cc);
            assign(r, n->a, vbuf(r, &b), e);
        }
        return;
    case N_MACRO: {
        jval m = {V_MACRO, {0}};
        m.m = jx_alloc(X, sizeof *m.m);
        m.m->macro = n;
        m.m->env = e;
        dict_set(r, e->vars, n->s, n->sn, m);
        return;
    }
    case N_CALLBLK: {
        jval f = ev(r, n->a->a, e);
        if (f.k != V_MACRO || !f.m->macro) jx_fail(X, "call: not a macro");
        jargs a;
        eval_args(r, n->a->b, e, &a);
        jval v = call_macro(r, f.m, &a, n->b, e);
        to_text(r, o, v);
        return;
    }
    case N_FILTERBLK: {
        jbuf b = {0};
        ctl cc = {0, 0};
        exec_block(r, n->b, e, &b, &cc);
        jargs a;
        eval_args(r, n->a, e, &a);
        to_text(r, o, filter(r, vbuf(r, &b), n->s, n->sn, &a));
        return;
    }
    case N_BREAK: c->brk = 1; return;
    case N_CONTINUE: c->cont = 1; return;
    default: jx_fail(X, "cannot run this node");
    }
}

static void exec_block(rt *r, const jnode *n, jenv *e, jbuf *o, ctl *c)
{
    if (++r->x.depth > JINJA_MAX_DEPTH) jx_fail(X, "blocks nested too deeply");
    for (size_t i = 0; i < n->nk && !c->brk && !c->cont; i++) exec_node(r, n->k[i], e, o, c);
    r->x.depth--;
}

int jx_render(const jnode *root, const json_t *vars, strbuf *out, dlm_err *e)
{
    rt *r = calloc(1, sizeof *r);
    if (!r) return err_set(e, "OOMError", "out of memory");
    r->x.arena_limit = JINJA_MAX_BYTES;
    if (setjmp(r->x.jb)) {
        err_set(e, "TemplateError", "chat template: %s", r->x.msg);
        jx_arena_free((ablk_list *)&r->x.arena);
        free(r);
        return -1;
    }
    r->globals = env_new(r, NULL);
    if (vars && json_is_object(vars)) {
        jval g = from_json(r, vars, 0);
        r->globals->vars = g.d;
    }
    jbuf o = {0};
    ctl c = {0, 0};
    exec_block(r, root, env_new(r, r->globals), &o, &c);
    int rc = sb_append(out, o.p ? o.p : "", o.n) ? err_set(e, "OOMError", "out of memory") : 0;
    jx_arena_free((ablk_list *)&r->x.arena);
    free(r);
    return rc;
}
