/* jinja_val — see jinja_val.h: building and printing values, JSON in and
 * out, truthiness and equality as @huggingface/jinja has them (what the
 * tests compare with), Python's string methods (what transformers runs:
 * lstrip('\n') strips newlines only), the filters and tests. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokens/jinja_val.h"

void jv_step(rt *r)
{
    if (++r->x.steps > JINJA_MAX_STEPS) jx_fail(X, "template ran more than %llu steps", JINJA_MAX_STEPS);
}

void jv_buf_add(rt *r, jbuf *b, const char *s, size_t n)
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

void jv_buf_puts(rt *r, jbuf *b, const char *s) { jv_buf_add(r, b, s, strlen(s)); }

jval jv_vstr(rt *r, const char *s, size_t n)
{
    jval v = {V_STR, {0}};
    v.s = jx_str(X, s, n);
    return v;
}
jval jv_vcs(rt *r, const char *s) { return jv_vstr(r, s, strlen(s)); }
jval jv_vbuf(rt *r, const jbuf *b) { return jv_vstr(r, b->p ? b->p : "", b->n); }
jval jv_vint(int64_t i) { jval v = {V_INT, {0}}; v.i = i; return v; }
jval jv_vbool(int b) { jval v = {V_BOOL, {0}}; v.i = !!b; return v; }
jval jv_vfloat(double f) { jval v = {V_FLOAT, {0}}; v.f = f; return v; }

jval jv_vlist(rt *r)
{
    jval v = {V_LIST, {0}};
    v.l = jx_alloc(X, sizeof *v.l);
    return v;
}
void jv_list_push(rt *r, jlist *l, jval x)
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
jval jv_vdict(rt *r)
{
    jval v = {V_DICT, {0}};
    v.d = jx_alloc(X, sizeof *v.d);
    return v;
}
jval *jv_dict_find(const jdict *d, const char *k, size_t kn)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->key[i]->n == kn && !memcmp(d->key[i]->s, k, kn)) return &d->v[i];
    return NULL;
}
void jv_dict_set(rt *r, jdict *d, const char *k, size_t kn, jval v)
{
    jval *p = jv_dict_find(d, k, kn);
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

jval jv_from_json(rt *r, const json_t *j, int depth)
{
    if (depth > 64) jx_fail(X, "variables nested too deeply");
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        jval v = jv_vdict(r);
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)j, k, x) jv_dict_set(r, v.d, k, strlen(k), jv_from_json(r, x, depth + 1));
        return v;
    }
    case JSON_ARRAY: {
        jval v = jv_vlist(r);
        for (size_t i = 0; i < json_array_size(j); i++) jv_list_push(r, v.l, jv_from_json(r, json_array_get(j, i), depth + 1));
        return v;
    }
    case JSON_STRING: return jv_vstr(r, json_string_value(j), json_string_length(j));
    case JSON_INTEGER: return jv_vint((int64_t)json_integer_value(j));
    case JSON_REAL: return jv_vfloat(json_real_value(j));
    case JSON_TRUE: return jv_vbool(1);
    case JSON_FALSE: return jv_vbool(0);
    default: return NONE;
    }
}

/* ---- printing ------------------------------------------------------------------------------- */

void jv_fmt_float(char *b, size_t cap, double f)
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

void jv_json_str(rt *r, jbuf *o, const char *s, size_t n)
{
    jv_buf_add(r, o, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char e[8];
        if (c == '"') jv_buf_add(r, o, "\\\"", 2);
        else if (c == '\\') jv_buf_add(r, o, "\\\\", 2);
        else if (c == '\n') jv_buf_add(r, o, "\\n", 2);
        else if (c == '\r') jv_buf_add(r, o, "\\r", 2);
        else if (c == '\t') jv_buf_add(r, o, "\\t", 2);
        else if (c == '\b') jv_buf_add(r, o, "\\b", 2);
        else if (c == '\f') jv_buf_add(r, o, "\\f", 2);
        else if (c < 0x20) {
            snprintf(e, sizeof e, "\\u%04x", c);
            jv_buf_puts(r, o, e);
        } else jv_buf_add(r, o, (const char *)&c, 1);
    }
    jv_buf_add(r, o, "\"", 1);
}

void jv_to_json(rt *r, jbuf *o, jval v, int indent, int depth, int undef_null)
{
    char b[64];
    if (depth > 64) jx_fail(X, "tojson: value nested too deeply");
    switch (v.k) {
    case V_UNDEF: jv_buf_puts(r, o, undef_null ? "null" : "undefined"); return;
    case V_NONE: jv_buf_puts(r, o, "null"); return;
    case V_BOOL: jv_buf_puts(r, o, v.i ? "true" : "false"); return;
    case V_INT: snprintf(b, sizeof b, "%lld", (long long)v.i); jv_buf_puts(r, o, b); return;
    case V_FLOAT:
        /* JSON.stringify: integers without ".0" */
        if (isfinite(v.f) && v.f == floor(v.f) && fabs(v.f) < 1e21) snprintf(b, sizeof b, "%.0f", v.f);
        else if (!isfinite(v.f)) snprintf(b, sizeof b, "null");
        else jv_fmt_float(b, sizeof b, v.f);
        jv_buf_puts(r, o, b);
        return;
    case V_STR: jv_json_str(r, o, v.s->s, v.s->n); return;
    case V_LIST:
    case V_DICT: {
        int list = v.k == V_LIST;
        size_t n = list ? v.l->n : v.d->n;
        const char *item = indent ? "," : ", ";
        jv_buf_puts(r, o, list ? "[" : "{");
        for (size_t i = 0; i < n; i++) {
            if (i) jv_buf_puts(r, o, item);
            if (indent) {
                jv_buf_puts(r, o, "\n");
                for (int k = 0; k < indent * (depth + 1); k++) jv_buf_puts(r, o, " ");
            }
            if (list) jv_to_json(r, o, v.l->v[i], indent, depth + 1, undef_null);
            else {
                jv_json_str(r, o, v.d->key[i]->s, v.d->key[i]->n);
                jv_buf_puts(r, o, ": ");
                jv_to_json(r, o, v.d->v[i], indent, depth + 1, undef_null);
            }
        }
        if (indent && n) {
            jv_buf_puts(r, o, "\n");
            for (int k = 0; k < indent * depth; k++) jv_buf_puts(r, o, " ");
        }
        jv_buf_puts(r, o, list ? "]" : "}");
        return;
    }
    default: jv_buf_puts(r, o, "null"); return;
    }
}

void jv_to_text(rt *r, jbuf *o, jval v)
{
    char b[64];
    switch (v.k) {
    case V_UNDEF: return;
    case V_NONE: jv_buf_puts(r, o, "null"); return;
    case V_BOOL: jv_buf_puts(r, o, v.i ? "true" : "false"); return;
    case V_INT: snprintf(b, sizeof b, "%lld", (long long)v.i); jv_buf_puts(r, o, b); return;
    case V_FLOAT: jv_fmt_float(b, sizeof b, v.f); jv_buf_puts(r, o, b); return;
    case V_STR: jv_buf_add(r, o, v.s->s, v.s->n); return;
    case V_LIST:
    case V_DICT: jv_to_json(r, o, v, 0, 0, 0); return;
    default: jv_buf_puts(r, o, "[function]"); return;
    }
}

jstr *jv_str_of(rt *r, jval v)
{
    if (v.k == V_STR) return v.s;
    jbuf b = {0};
    jv_to_text(r, &b, v);
    return jx_str(X, b.p ? b.p : "", b.n);
}

int jv_truthy(jval v)
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
int64_t jv_to_i64(double d)
{
    if (!(d == d)) return 0;
    if (d >= 9.2e18) return INT64_MAX;
    if (d <= -9.2e18) return INT64_MIN;
    return (int64_t)d;
}

int jv_is_num(jval v) { return v.k == V_INT || v.k == V_FLOAT; }
double jv_num(jval v) { return v.k == V_INT ? (double)v.i : v.k == V_FLOAT ? v.f : v.k == V_BOOL ? (double)v.i : 0; }

/* == as @huggingface/jinja compares (JS == on the underlying values):
 * strings by content, numbers and booleans by value, undefined == none,
 * lists and dicts by identity. */
int jv_equal(jval a, jval b)
{
    int an = a.k == V_INT || a.k == V_FLOAT || a.k == V_BOOL, bn = b.k == V_INT || b.k == V_FLOAT || b.k == V_BOOL;
    if (an && bn) return jv_num(a) == jv_num(b);
    if ((a.k == V_UNDEF || a.k == V_NONE) && (b.k == V_UNDEF || b.k == V_NONE)) return 1;
    if (a.k != b.k) {
        /* JS: "1" == 1 */
        if (a.k == V_STR && bn) return a.s->n && strtod(a.s->s, NULL) == jv_num(b);
        if (b.k == V_STR && an) return b.s->n && strtod(b.s->s, NULL) == jv_num(a);
        return 0;
    }
    switch (a.k) {
    case V_STR: return a.s->n == b.s->n && !memcmp(a.s->s, b.s->s, a.s->n);
    case V_LIST: return a.l == b.l;
    case V_DICT: return a.d == b.d;
    default: return a.m == b.m;
    }
}

/* ---- strings -------------------------------------------------------------------------------- */

int jv_py_space(unsigned char c) { return c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1c && c <= 0x1f); }

/* Python str.strip family: chars NULL = whitespace (ASCII + the UTF-8
 * encoded Unicode spaces are rare in templates; ASCII is what matters). */
jval jv_strip(rt *r, jstr *s, const jstr *chars, int left, int right)
{
    size_t a = 0, b = s->n;
#define STRIPC(c) (chars ? memchr(chars->s, (c), chars->n) != NULL : jv_py_space((unsigned char)(c)))
    if (left) while (a < b && STRIPC(s->s[a])) a++;
    if (right) while (b > a && STRIPC(s->s[b - 1])) b--;
#undef STRIPC
    return jv_vstr(r, s->s + a, b - a);
}

jval jv_case_map(rt *r, jstr *s, int mode /* 0 lower 1 upper 2 title 3 capitalize */)
{
    jval v = jv_vstr(r, s->s, s->n);
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

jval jv_replace_str(rt *r, jstr *s, jstr *a, jstr *b, int64_t count)
{
    jbuf o = {0};
    size_t i = 0;
    int64_t done = 0;
    if (!a->n) {
        /* Python: "" matches between every char */
        for (size_t k = 0; k <= s->n; k++) {
            if (count < 0 || done < count) {
                jv_buf_add(r, &o, b->s, b->n);
                done++;
            }
            if (k < s->n) jv_buf_add(r, &o, s->s + k, 1);
        }
        return jv_vbuf(r, &o);
    }
    while (i < s->n && (count < 0 || done < count)) {
        const char *h = s->n - i >= a->n ? memmem(s->s + i, s->n - i, a->s, a->n) : NULL;
        if (!h) break;
        jv_buf_add(r, &o, s->s + i, (size_t)(h - (s->s + i)));
        jv_buf_add(r, &o, b->s, b->n);
        i = (size_t)(h - s->s) + a->n;
        done++;
    }
    jv_buf_add(r, &o, s->s + i, s->n - i);
    return jv_vbuf(r, &o);
}

jval jv_split_str(rt *r, jstr *s, jval sep, int64_t maxsplit)
{
    jval out = jv_vlist(r);
    size_t i = 0;
    int64_t done = 0;
    if (sep.k != V_STR) {
        /* whitespace runs, leading/trailing ignored */
        while (i < s->n) {
            while (i < s->n && jv_py_space((unsigned char)s->s[i])) i++;
            if (i >= s->n) break;
            size_t a = i;
            if (maxsplit >= 0 && done >= maxsplit) {
                size_t b = s->n;
                while (b > a && jv_py_space((unsigned char)s->s[b - 1])) b--;
                jv_list_push(r, out.l, jv_vstr(r, s->s + a, b - a));
                break;
            }
            while (i < s->n && !jv_py_space((unsigned char)s->s[i])) i++;
            jv_list_push(r, out.l, jv_vstr(r, s->s + a, i - a));
            done++;
        }
        return out;
    }
    if (!sep.s->n) jx_fail(X, "split: empty separator");
    for (;;) {
        const char *h = (maxsplit < 0 || done < maxsplit) && s->n - i >= sep.s->n
                            ? memmem(s->s + i, s->n - i, sep.s->s, sep.s->n) : NULL;
        if (!h) break;
        jv_list_push(r, out.l, jv_vstr(r, s->s + i, (size_t)(h - (s->s + i))));
        i = (size_t)(h - s->s) + sep.s->n;
        done++;
    }
    jv_list_push(r, out.l, jv_vstr(r, s->s + i, s->n - i));
    return out;
}

jval jv_arg(const jargs *a, int i, const char *name, jval def)
{
    if (i >= 0 && i < a->np) return a->pos[i];
    for (int k = 0; name && k < a->nk; k++)
        if (a->kwn[k] == strlen(name) && !memcmp(a->kw[k], name, a->kwn[k])) return a->kwv[k];
    return def;
}

jstr *jv_arg_str(rt *r, const jargs *a, int i, const char *name, const char *fn)
{
    jval v = jv_arg(a, i, name, UNDEF);
    if (v.k != V_STR) jx_fail(X, "%s: argument %d must be a string", fn, i + 1);
    return v.s;
}

size_t jv_seq_len(rt *r, jval v)
{
    if (v.k == V_STR) return v.s->n; /* bytes: chat templates slice ASCII and lists */
    if (v.k == V_LIST) return v.l->n;
    if (v.k == V_DICT) return v.d->n;
    jx_fail(X, "value has no length");
}

/* ---- filters and tests ---------------------------------------------------------------------- */


jval jv_attr_of(rt *r, jval item, jstr *attr)
{
    /* "a.b" paths as Jinja's attribute= */
    jval cur = item;
    size_t i = 0;
    while (i <= attr->n) {
        const char *dot = memchr(attr->s + i, '.', attr->n - i);
        size_t e = dot ? (size_t)(dot - attr->s) : attr->n;
        if (cur.k != V_DICT) return UNDEF;
        jval *v = jv_dict_find(cur.d, attr->s + i, e - i);
        if (!v) return UNDEF;
        cur = *v;
        i = e + 1;
    }
    return cur;
}

int jv_cmp_vals(rt *r, jval a, jval b)
{
    if (jv_is_num(a) && jv_is_num(b)) return jv_num(a) < jv_num(b) ? -1 : jv_num(a) > jv_num(b);
    if (a.k == V_STR && b.k == V_STR) {
        size_t n = a.s->n < b.s->n ? a.s->n : b.s->n;
        int c = memcmp(a.s->s, b.s->s, n);
        return c ? c : (a.s->n > b.s->n) - (a.s->n < b.s->n);
    }
    jx_fail(X, "cannot compare these values");
}

jval jv_filter(rt *r, jval v, const char *f, size_t fn, const jargs *a)
{
    char name[32];
    snprintf(name, sizeof name, "%.*s", (int)(fn < 31 ? fn : 31), f);
#define IS(w) (!strcmp(name, w))
    if (IS("safe")) return v;
    if (IS("string")) return v.k == V_STR ? v : jv_vcs(r, jv_str_of(r, v)->s);
    if (IS("tojson")) {
        jbuf o = {0};
        jval ind = jv_arg(a, 0, "indent", UNDEF);
        jv_to_json(r, &o, v, ind.k == V_INT && ind.i > 0 && ind.i < 32 ? (int)ind.i : 0, 0, 1);
        return jv_vbuf(r, &o);
    }
    if (IS("length") || IS("count")) return jv_vint((int64_t)jv_seq_len(r, v));
    if (IS("default") || IS("d")) {
        jval def = jv_arg(a, 0, "default_value", jv_vcs(r, ""));
        int boolean = jv_truthy(jv_arg(a, 1, "boolean", jv_vbool(0)));
        if (v.k == V_UNDEF || (boolean && !jv_truthy(v))) return def;
        return v;
    }
    if (IS("first") || IS("last")) {
        if (v.k == V_LIST) return v.l->n ? v.l->v[IS("first") ? 0 : v.l->n - 1] : UNDEF;
        if (v.k == V_STR) return v.s->n ? jv_vstr(r, v.s->s + (IS("first") ? 0 : v.s->n - 1), 1) : UNDEF;
        jx_fail(X, "%s: expected a list or a string", name);
    }
    if (IS("list")) {
        if (v.k == V_LIST) return v;
        jval out = jv_vlist(r);
        if (v.k == V_STR) for (size_t i = 0; i < v.s->n; i++) jv_list_push(r, out.l, jv_vstr(r, v.s->s + i, 1));
        else if (v.k == V_DICT) for (size_t i = 0; i < v.d->n; i++) jv_list_push(r, out.l, jv_vstr(r, v.d->key[i]->s, v.d->key[i]->n));
        else jx_fail(X, "list: expected a list, string or dict");
        return out;
    }
    if (IS("items")) {
        if (v.k == V_UNDEF) return jv_vlist(r);
        if (v.k != V_DICT) jx_fail(X, "items: expected a dict");
        jval out = jv_vlist(r);
        for (size_t i = 0; i < v.d->n; i++) {
            jval pair = jv_vlist(r);
            jv_list_push(r, pair.l, jv_vstr(r, v.d->key[i]->s, v.d->key[i]->n));
            jv_list_push(r, pair.l, v.d->v[i]);
            jv_list_push(r, out.l, pair);
        }
        return out;
    }
    if (IS("reverse")) {
        if (v.k == V_STR) {
            jval s = jv_vstr(r, v.s->s, v.s->n);
            for (size_t i = 0; i < s.s->n / 2; i++) {
                char c = s.s->s[i];
                s.s->s[i] = s.s->s[s.s->n - 1 - i];
                s.s->s[s.s->n - 1 - i] = c;
            }
            return s;
        }
        if (v.k != V_LIST) jx_fail(X, "reverse: expected a list");
        jval out = jv_vlist(r);
        for (size_t i = v.l->n; i-- > 0;) jv_list_push(r, out.l, v.l->v[i]);
        return out;
    }
    if (IS("join")) {
        if (v.k != V_LIST) jx_fail(X, "join: expected a list");
        jval sep = jv_arg(a, 0, "d", jv_vcs(r, ""));
        jstr *ss = jv_str_of(r, sep);
        jbuf o = {0};
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) jv_buf_add(r, &o, ss->s, ss->n);
            jv_to_text(r, &o, v.l->v[i]);
        }
        return jv_vbuf(r, &o);
    }
    if (IS("abs")) {
        if (v.k == V_INT) return jv_vint(v.i < 0 ? -v.i : v.i);
        if (v.k == V_FLOAT) return jv_vfloat(fabs(v.f));
        jx_fail(X, "abs: expected a number");
    }
    if (IS("int")) {
        if (v.k == V_INT) return v;
        if (v.k == V_FLOAT) return jv_vint(jv_to_i64(v.f));
        if (v.k == V_BOOL) return jv_vint(v.i);
        if (v.k == V_STR) return jv_vint(strtoll(v.s->s, NULL, 10));
        return jv_arg(a, 0, "default", jv_vint(0));
    }
    if (IS("float")) {
        if (jv_is_num(v) || v.k == V_BOOL) return jv_vfloat(jv_num(v));
        if (v.k == V_STR) return jv_vfloat(strtod(v.s->s, NULL));
        return jv_arg(a, 0, "default", jv_vfloat(0));
    }
    if (v.k == V_STR) {
        if (IS("trim")) return jv_strip(r, v.s, NULL, 1, 1);
        if (IS("upper")) return jv_case_map(r, v.s, 1);
        if (IS("lower")) return jv_case_map(r, v.s, 0);
        if (IS("title")) return jv_case_map(r, v.s, 2);
        if (IS("capitalize")) return jv_case_map(r, v.s, 3);
        if (IS("replace")) {
            jval c = jv_arg(a, 2, "count", UNDEF);
            return jv_replace_str(r, v.s, jv_arg_str(r, a, 0, "old", name), jv_arg_str(r, a, 1, "new", name), c.k == V_INT ? c.i : -1);
        }
        if (IS("indent")) {
            jval w = jv_arg(a, 0, "width", jv_vint(4));
            int first = jv_truthy(jv_arg(a, 1, "first", jv_vbool(0)));
            jbuf pad = {0}, o = {0};
            if (w.k == V_STR) jv_buf_add(r, &pad, w.s->s, w.s->n);
            else for (int64_t k = 0; k < (w.k == V_INT && w.i < 256 ? w.i : 0); k++) jv_buf_puts(r, &pad, " ");
            for (size_t i = 0; i < v.s->n; i++) {
                if ((i == 0 && first) || (i > 0 && v.s->s[i - 1] == '\n' && v.s->s[i] != '\n')) jv_buf_add(r, &o, pad.p, pad.n);
                jv_buf_add(r, &o, v.s->s + i, 1);
            }
            return jv_vbuf(r, &o);
        }
    }
    if (v.k == V_LIST && (IS("map") || IS("selectattr") || IS("rejectattr") || IS("select") || IS("reject") ||
                          IS("unique") || IS("sort"))) {
        jval out = jv_vlist(r);
        if (IS("map")) {
            jval at = jv_arg(a, -1, "attribute", UNDEF);
            if (at.k != V_STR) {
                jval fnm = jv_arg(a, 0, NULL, UNDEF);
                if (fnm.k != V_STR) jx_fail(X, "map: needs attribute= or a filter name");
                jargs none = {0};
                for (size_t i = 0; i < v.l->n; i++) jv_list_push(r, out.l, jv_filter(r, v.l->v[i], fnm.s->s, fnm.s->n, &none));
                return out;
            }
            jval def = jv_arg(a, -1, "default", UNDEF);
            for (size_t i = 0; i < v.l->n; i++) {
                jval x = jv_attr_of(r, v.l->v[i], at.s);
                jv_list_push(r, out.l, x.k == V_UNDEF ? def : x);
            }
            return out;
        }
        if (IS("unique")) {
            for (size_t i = 0; i < v.l->n; i++) {
                int seen = 0;
                for (size_t k = 0; k < out.l->n && !seen; k++) seen = jv_equal(out.l->v[k], v.l->v[i]);
                if (!seen) jv_list_push(r, out.l, v.l->v[i]);
            }
            return out;
        }
        if (IS("sort")) {
            int rev = jv_truthy(jv_arg(a, 0, "reverse", jv_vbool(0)));
            jval at = jv_arg(a, 2, "attribute", UNDEF);
            for (size_t i = 0; i < v.l->n; i++) jv_list_push(r, out.l, v.l->v[i]);
            for (size_t i = 1; i < out.l->n; i++) /* insertion sort: stable */
                for (size_t k = i; k > 0; k--) {
                    jv_step(r);
                    jval x = out.l->v[k - 1], y = out.l->v[k];
                    jval kx = at.k == V_STR ? jv_attr_of(r, x, at.s) : x, ky = at.k == V_STR ? jv_attr_of(r, y, at.s) : y;
                    int c = jv_cmp_vals(r, kx, ky);
                    if (rev ? c >= 0 : c <= 0) break;
                    out.l->v[k - 1] = y;
                    out.l->v[k] = x;
                }
            return out;
        }
        int attr = IS("selectattr") || IS("rejectattr"), keep = IS("selectattr") || IS("select");
        jargs ta = {0};
        int base = attr ? 1 : 0;
        jval tname = jv_arg(a, base, NULL, UNDEF);
        for (int k = base + 1; k < a->np; k++) ta.pos[ta.np++] = a->pos[k];
        for (size_t i = 0; i < v.l->n; i++) {
            jval x = v.l->v[i];
            if (attr) {
                jval at = jv_arg(a, 0, NULL, UNDEF);
                if (at.k != V_STR) jx_fail(X, "%s: needs an attribute name", name);
                x = jv_attr_of(r, x, at.s);
            }
            int ok = tname.k == V_STR ? jv_test(r, x, tname.s->s, &ta) : jv_truthy(x);
            if (ok == keep) jv_list_push(r, out.l, v.l->v[i]);
        }
        return out;
    }
    jx_fail(X, "unknown filter '%s' (or not for this type)", name);
#undef IS
}

int jv_test(rt *r, jval v, const char *name, const jargs *a)
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
    if (IS("eq") || IS("equalto") || IS("==")) return jv_equal(v, jv_arg(a, 0, NULL, UNDEF));
    if (IS("ne") || IS("!=")) return !jv_equal(v, jv_arg(a, 0, NULL, UNDEF));
    if (IS("in")) {
        jval c = jv_arg(a, 0, NULL, UNDEF);
        if (c.k == V_LIST) {
            for (size_t i = 0; i < c.l->n; i++)
                if (jv_equal(c.l->v[i], v)) return 1;
            return 0;
        }
        return 0;
    }
    jx_fail(X, "unknown test '%s'", name);
#undef IS
}
