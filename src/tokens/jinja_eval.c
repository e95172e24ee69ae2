/* jinja_eval — the evaluator of jinja.c's tree: scopes, expressions,
 * statements, macros, method calls and the global functions chat templates
 * call (raise_exception, range, namespace, strftime_now). Values, printing,
 * filters and tests are in jinja_val.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokens/jinja_val.h"

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
    static const char *const builtins[] = {"raise_exception", "range", "namespace", "strftime_now", "dict"};
    for (; e; e = e->parent) {
        jval *v = jv_dict_find(e->vars, k, kn);
        /* a string bound to strftime_now pins the clock: the builtin returns
         * it whatever the format (dlm pins dates so that prompts and
         * training rows do not change with the day; chat_dialect_vars) */
        if (v && v->k == V_STR && kn == 12 && !memcmp(k, "strftime_now", 12)) {
            jval f = {V_FUNC, {0}};
            f.m = jx_alloc(X, sizeof *f.m);
            memset(f.m, 0, sizeof *f.m);
            f.m->name = builtins[3];
            f.m->self = *v;
            return f;
        }
        if (v) return *v;
    }
    for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
        if (kn == strlen(builtins[i]) && !memcmp(k, builtins[i], kn)) {
            jval f = {V_FUNC, {0}};
            f.m = jx_alloc(X, sizeof *f.m);
            memset(f.m, 0, sizeof *f.m);
            f.m->name = builtins[i];
            return f;
        }
    (void)r;
    return UNDEF;
}

/* ---- arguments ------------------------------------------------------------------------------ */

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
/* ---- indexing ------------------------------------------------------------------------------- */

static jval slice(rt *r, jval v, jval a, jval b, jval c)
{
    if (v.k != V_LIST && v.k != V_STR) jx_fail(X, "only lists and strings can be sliced");
    int64_t n = (int64_t)jv_seq_len(r, v), st = c.k == V_INT ? c.i : 1;
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
    jval out = v.k == V_LIST ? jv_vlist(r) : UNDEF;
    jbuf sb = {0};
    for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) {
        jv_step(r);
        if (v.k == V_LIST) jv_list_push(r, out.l, v.l->v[i]);
        else jv_buf_add(r, &sb, v.s->s + i, 1);
    }
    return v.k == V_LIST ? out : jv_vbuf(r, &sb);
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
            jval *v = jv_dict_find(o.d, key.s->s, key.s->n);
            if (v) return *v;
            for (size_t i = 0; i < sizeof dict_methods / sizeof dict_methods[0]; i++)
                if (!strcmp(key.s->s, dict_methods[i])) return method(r, o, dict_methods[i]);
            return UNDEF;
        }
        jstr *k = jv_str_of(r, key);
        jval *v = jv_dict_find(o.d, k->s, k->n);
        return v ? *v : UNDEF;
    }
    if (o.k == V_LIST || o.k == V_STR) {
        if (key.k == V_INT) {
            int64_t n = (int64_t)jv_seq_len(r, o), i = key.i < 0 ? key.i + n : key.i;
            if (i < 0 || i >= n) return UNDEF;
            return o.k == V_LIST ? o.l->v[i] : jv_vstr(r, o.s->s + i, 1);
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
        jv_dict_set(r, e->vars, pn, pl, v);
    }
    if (caller) {
        jval cv = {V_MACRO, {0}};
        cv.m = jx_alloc(X, sizeof *cv.m);
        cv.m->caller = caller;
        cv.m->caller_env = caller_env;
        jv_dict_set(r, e->vars, "caller", 6, cv);
    }
    jbuf o = {0};
    ctl c = {0, 0};
    exec_block(r, mac->b, e, &o, &c);
    r->x.depth--;
    return jv_vbuf(r, &o);
}

static jval call_value(rt *r, jval f, const jargs *a)
{
    jv_step(r);
    if (f.k == V_MACRO) {
        if (f.m->caller) {
            jbuf o = {0};
            ctl c = {0, 0};
            exec_block(r, f.m->caller, env_new(r, f.m->caller_env), &o, &c);
            return jv_vbuf(r, &o);
        }
        return call_macro(r, f.m, a, NULL, NULL);
    }
    if (f.k == V_FUNC) {
        const char *nm = f.m->name;
        if (!strcmp(nm, "raise_exception")) {
            jval msg = jv_arg(a, 0, NULL, jv_vcs(r, "raise_exception() was called"));
            jx_fail(X, "%s", jv_str_of(r, msg)->s);
        }
        if (!strcmp(nm, "range")) {
            int64_t lo = 0, hi, st = 1;
            if (a->np == 1) hi = jv_to_i64(jv_num(a->pos[0]));
            else if (a->np >= 2) lo = jv_to_i64(jv_num(a->pos[0])), hi = jv_to_i64(jv_num(a->pos[1]));
            else jx_fail(X, "range() needs arguments");
            if (a->np >= 3) st = jv_to_i64(jv_num(a->pos[2]));
            /* bounded by the step and memory limits long before these */
            if (lo < -(INT64_C(1) << 60) || lo > (INT64_C(1) << 60) || hi < -(INT64_C(1) << 60) || hi > (INT64_C(1) << 60))
                jx_fail(X, "range() bounds too large");
            if (!st) jx_fail(X, "range() step cannot be zero");
            jval out = jv_vlist(r);
            for (int64_t i = lo; st > 0 ? i < hi : i > hi; i += st) {
                jv_step(r);
                jv_list_push(r, out.l, jv_vint(i));
            }
            return out;
        }
        if (!strcmp(nm, "namespace") || !strcmp(nm, "dict")) {
            jval d = jv_vdict(r);
            if (a->np && a->pos[0].k == V_DICT)
                for (size_t i = 0; i < a->pos[0].d->n; i++)
                    jv_dict_set(r, d.d, a->pos[0].d->key[i]->s, a->pos[0].d->key[i]->n, a->pos[0].d->v[i]);
            for (int k = 0; k < a->nk; k++) jv_dict_set(r, d.d, a->kw[k], a->kwn[k], a->kwv[k]);
            return d;
        }
        if (!strcmp(nm, "strftime_now")) {
            jstr *fmt = jv_arg_str(r, a, 0, NULL, "strftime_now");
            if (f.m->self.k == V_STR) return f.m->self;   /* pinned (env_get) */
            char b[256];
            time_t now = time(NULL);
            struct tm tmv;
            localtime_r(&now, &tmv);
            size_t l = strftime(b, sizeof b, fmt->s, &tmv);
            return jv_vstr(r, b, l);
        }
    }
    if (f.k == V_METHOD) {
        const char *nm = f.m->name;
        jval s = f.m->self;
        if (s.k == V_DICT) {
            if (!strcmp(nm, "get")) {
                jval k = jv_arg(a, 0, NULL, UNDEF);
                jstr *ks = jv_str_of(r, k);
                jval *v = jv_dict_find(s.d, ks->s, ks->n);
                return v ? *v : jv_arg(a, 1, NULL, NONE);
            }
            jargs none = {0};
            if (!strcmp(nm, "items")) return jv_filter(r, s, "items", 5, &none);
            jval out = jv_vlist(r);
            for (size_t i = 0; i < s.d->n; i++)
                jv_list_push(r, out.l, !strcmp(nm, "keys") ? jv_vstr(r, s.d->key[i]->s, s.d->key[i]->n) : s.d->v[i]);
            return out;
        }
        if (s.k == V_LIST && !strcmp(nm, "append")) {
            jv_list_push(r, s.l, jv_arg(a, 0, NULL, NONE));
            return NONE;
        }
        if (s.k == V_STR) {
            jstr *str = s.s;
            if (!strcmp(nm, "upper")) return jv_case_map(r, str, 1);
            if (!strcmp(nm, "lower")) return jv_case_map(r, str, 0);
            if (!strcmp(nm, "title")) return jv_case_map(r, str, 2);
            if (!strcmp(nm, "capitalize")) return jv_case_map(r, str, 3);
            if (!strcmp(nm, "strip") || !strcmp(nm, "lstrip") || !strcmp(nm, "rstrip")) {
                jval ch = jv_arg(a, 0, "chars", NONE);
                return jv_strip(r, str, ch.k == V_STR ? ch.s : NULL, nm[0] != 'r', nm[0] != 'l');
            }
            if (!strcmp(nm, "startswith") || !strcmp(nm, "endswith")) {
                jval p = jv_arg(a, 0, NULL, UNDEF);
                int ends = nm[0] == 'e';
                jlist one = {1, 1, &p};
                const jlist *alts = p.k == V_LIST ? p.l : &one;
                for (size_t i = 0; i < alts->n; i++) {
                    if (alts->v[i].k != V_STR) jx_fail(X, "%s: expected a string", nm);
                    jstr *x = alts->v[i].s;
                    if (x->n <= str->n && !memcmp(str->s + (ends ? str->n - x->n : 0), x->s, x->n)) return jv_vbool(1);
                }
                return jv_vbool(0);
            }
            if (!strcmp(nm, "split")) {
                jval ms = jv_arg(a, 1, "maxsplit", jv_vint(-1));
                return jv_split_str(r, str, jv_arg(a, 0, "sep", NONE), ms.k == V_INT ? ms.i : -1);
            }
            if (!strcmp(nm, "replace")) {
                jval c = jv_arg(a, 2, "count", UNDEF);
                return jv_replace_str(r, str, jv_arg_str(r, a, 0, NULL, nm), jv_arg_str(r, a, 1, NULL, nm), c.k == V_INT ? c.i : -1);
            }
            if (!strcmp(nm, "count") || !strcmp(nm, "find")) {
                jstr *x = jv_arg_str(r, a, 0, NULL, nm);
                int64_t cnt = 0, first = -1;
                for (size_t i = 0; x->n && i + x->n <= str->n;) {
                    if (!memcmp(str->s + i, x->s, x->n)) {
                        if (first < 0) first = (int64_t)i;
                        cnt++;
                        i += x->n;
                    } else i++;
                }
                return jv_vint(nm[0] == 'c' ? cnt : first);
            }
            if (!strcmp(nm, "join")) {
                jval l = jv_arg(a, 0, NULL, UNDEF);
                jargs sep = {0};
                sep.pos[0] = s;
                sep.np = 1;
                return jv_filter(r, l, "join", 4, &sep);
            }
            if (!strcmp(nm, "format")) {
                /* "%s"-free Python format: {} fields in order */
                jbuf o = {0};
                int k = 0;
                for (size_t i = 0; i < str->n; i++) {
                    if (str->s[i] == '{' && i + 1 < str->n && str->s[i + 1] == '}') {
                        jv_to_text(r, &o, jv_arg(a, k++, NULL, UNDEF));
                        i++;
                    } else jv_buf_add(r, &o, str->s + i, 1);
                }
                return jv_vbuf(r, &o);
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
    if (!strcmp(op, "and")) return jv_truthy(l) ? ev(r, n->b, e) : l;
    if (!strcmp(op, "or")) return jv_truthy(l) ? l : ev(r, n->b, e);
    jval rv = ev(r, n->b, e);
    if (!strcmp(op, "==")) return jv_vbool(jv_equal(l, rv));
    if (!strcmp(op, "!=")) return jv_vbool(!jv_equal(l, rv));
    if (!strcmp(op, "in") || !strcmp(op, "notin")) {
        int neg = op[0] == 'n', hit = 0;
        if (rv.k == V_UNDEF) return jv_vbool(neg);
        if (rv.k == V_STR) {
            if (l.k != V_STR) jx_fail(X, "'in <string>' needs a string on the left");
            hit = l.s->n <= rv.s->n && (l.s->n == 0 || memmem(rv.s->s, rv.s->n, l.s->s, l.s->n) != NULL);
        } else if (rv.k == V_LIST) {
            for (size_t i = 0; i < rv.l->n && !hit; i++) hit = jv_equal(rv.l->v[i], l);
        } else if (rv.k == V_DICT) {
            jstr *k = jv_str_of(r, l);
            hit = jv_dict_find(rv.d, k->s, k->n) != NULL;
        } else jx_fail(X, "'in' needs a string, list or dict on the right");
        return jv_vbool(hit ^ neg);
    }
    if (l.k == V_UNDEF || rv.k == V_UNDEF) jx_fail(X, "cannot apply '%s' to an undefined value", op);
    if (l.k == V_NONE || rv.k == V_NONE) jx_fail(X, "cannot apply '%s' to none", op);
    if (!strcmp(op, "~")) {
        jbuf o = {0};
        jv_to_text(r, &o, l);
        jv_to_text(r, &o, rv);
        return jv_vbuf(r, &o);
    }
    if (jv_is_num(l) && jv_is_num(rv)) {
        int fl = l.k == V_FLOAT || rv.k == V_FLOAT;
        double a = jv_num(l), b = jv_num(rv);
        if (!strcmp(op, "<")) return jv_vbool(a < b);
        if (!strcmp(op, ">")) return jv_vbool(a > b);
        if (!strcmp(op, "<=")) return jv_vbool(a <= b);
        if (!strcmp(op, ">=")) return jv_vbool(a >= b);
        if (!strcmp(op, "/")) return jv_vfloat(a / b);
        if (!fl) {
            int64_t x = l.i, y = rv.i;
            if (!strcmp(op, "+")) return jv_vint((int64_t)((uint64_t)x + (uint64_t)y));
            if (!strcmp(op, "-")) return jv_vint((int64_t)((uint64_t)x - (uint64_t)y));
            if (!strcmp(op, "*")) return jv_vint((int64_t)((uint64_t)x * (uint64_t)y));
            if (!strcmp(op, "//") || !strcmp(op, "%")) {
                if (y == 0) jx_fail(X, "division by zero");
                if (x == INT64_MIN && y == -1) return jv_vint(op[0] == '%' ? 0 : x);
                int64_t q = x / y, m = x % y;
                if (!strcmp(op, "//")) return jv_vint((m != 0 && ((m < 0) != (y < 0))) ? q - 1 : q);
                return jv_vint(m); /* JS % keeps the sign of the left side */
            }
            if (!strcmp(op, "**")) {
                double p = pow(a, b);
                if (!isfinite(p) || fabs(p) > 9.2e18) jx_fail(X, "'**' result out of range");
                return b < 0 ? jv_vfloat(p) : jv_vint((int64_t)p);
            }
        }
        if (!strcmp(op, "+")) return jv_vfloat(a + b);
        if (!strcmp(op, "-")) return jv_vfloat(a - b);
        if (!strcmp(op, "*")) return jv_vfloat(a * b);
        if (!strcmp(op, "//")) return jv_vfloat(floor(a / b));
        if (!strcmp(op, "%")) return jv_vfloat(fmod(a, b));
        if (!strcmp(op, "**")) return jv_vfloat(pow(a, b));
    }
    if (!strcmp(op, "+")) {
        if (l.k == V_LIST && rv.k == V_LIST) {
            jval out = jv_vlist(r);
            for (size_t i = 0; i < l.l->n; i++) jv_list_push(r, out.l, l.l->v[i]);
            for (size_t i = 0; i < rv.l->n; i++) jv_list_push(r, out.l, rv.l->v[i]);
            return out;
        }
        if (l.k == V_STR || rv.k == V_STR) {
            jbuf o = {0};
            jv_to_text(r, &o, l);
            jv_to_text(r, &o, rv);
            return jv_vbuf(r, &o);
        }
    }
    if (!strcmp(op, "*") && ((l.k == V_STR && rv.k == V_INT) || (l.k == V_INT && rv.k == V_STR))) {
        jstr *s = l.k == V_STR ? l.s : rv.s;
        int64_t k = l.k == V_INT ? l.i : rv.i;
        jbuf o = {0};
        for (int64_t i = 0; i < k; i++) {
            jv_step(r);
            jv_buf_add(r, &o, s->s, s->n);
        }
        return jv_vbuf(r, &o);
    }
    if (l.k == V_STR && rv.k == V_STR && (op[0] == '<' || op[0] == '>')) {
        int c = jv_cmp_vals(r, l, rv);
        if (!strcmp(op, "<")) return jv_vbool(c < 0);
        if (!strcmp(op, ">")) return jv_vbool(c > 0);
        if (!strcmp(op, "<=")) return jv_vbool(c <= 0);
        return jv_vbool(c >= 0);
    }
    jx_fail(X, "unsupported operation '%s'", op);
}

static jval ev(rt *r, const jnode *n, jenv *e)
{
    jv_step(r);
    if (++r->x.depth > JINJA_MAX_DEPTH) jx_fail(X, "expression nested too deeply");
    jval v = UNDEF;
    switch (n->kind) {
    case N_INT: v = jv_vint(n->i); break;
    case N_FLOAT: v = jv_vfloat(n->f); break;
    case N_STR: v = jv_vstr(r, n->s, n->sn); break;
    case N_BOOL: v = jv_vbool((int)n->i); break;
    case N_NONE: v = NONE; break;
    case N_IDENT: v = env_get(r, e, n->s, n->sn); break;
    case N_LIST:
    case N_TUPLE:
        v = jv_vlist(r);
        for (size_t i = 0; i < n->nk; i++) jv_list_push(r, v.l, ev(r, n->k[i], e));
        break;
    case N_DICT:
        v = jv_vdict(r);
        for (size_t i = 0; i + 1 < n->nk; i += 2) {
            jstr *k = jv_str_of(r, ev(r, n->k[i], e));
            jv_dict_set(r, v.d, k->s, k->n, ev(r, n->k[i + 1], e));
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
        v = jv_filter(r, x, n->s, n->sn, &a);
        break;
    }
    case N_TEST: {
        jval x = ev(r, n->a, e);
        jargs a;
        eval_args(r, n->b, e, &a);
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)(n->sn < 31 ? n->sn : 31), n->s);
        v = jv_vbool(jv_test(r, x, name, &a) ^ n->neg);
        break;
    }
    case N_BIN: v = binary(r, n, e); break;
    case N_NOT: v = jv_vbool(!jv_truthy(ev(r, n->a, e))); break;
    case N_NEG: {
        jval x = ev(r, n->a, e);
        if (x.k == V_INT) v = n->op == '-' ? jv_vint((int64_t)(0 - (uint64_t)x.i)) : x;
        else if (x.k == V_FLOAT) v = n->op == '-' ? jv_vfloat(-x.f) : x;
        else jx_fail(X, "unary '%c' needs a number", n->op);
        break;
    }
    case N_COND:
        if (jv_truthy(ev(r, n->a, e))) v = ev(r, n->b, e);
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
        jv_dict_set(r, e->vars, target->s, target->sn, v);
    } else if (target->kind == N_TUPLE) {
        if (v.k != V_LIST || v.l->n != target->nk) jx_fail(X, "cannot unpack: wrong number of values");
        for (size_t i = 0; i < target->nk; i++) assign(r, target->k[i], v.l->v[i], e);
    } else if (target->kind == N_MEMBER && target->b->kind == N_STR) {
        jval o = ev(r, target->a, e);
        if (o.k != V_DICT) jx_fail(X, "can only set attributes of a namespace");
        jv_dict_set(r, o.d, target->b->s, target->b->sn, v);
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
    jval items = jv_vlist(r);
    if (seq.k == V_DICT) {
        for (size_t i = 0; i < seq.d->n; i++) jv_list_push(r, items.l, jv_vstr(r, seq.d->key[i]->s, seq.d->key[i]->n));
    } else if (seq.k == V_LIST) {
        for (size_t i = 0; i < seq.l->n; i++) jv_list_push(r, items.l, seq.l->v[i]);
    } else if (seq.k == V_STR) {
        for (size_t i = 0; i < seq.s->n; i++) jv_list_push(r, items.l, jv_vstr(r, seq.s->s + i, 1));
    } else jx_fail(X, "for: expected a list or dict to iterate over");
    if (cond) {
        jval kept = jv_vlist(r);
        for (size_t i = 0; i < items.l->n; i++) {
            jenv *ls = env_new(r, scope);
            assign(r, n->c, items.l->v[i], ls);
            if (jv_truthy(ev(r, cond, ls))) jv_list_push(r, kept.l, items.l->v[i]);
        }
        items = kept;
    }
    size_t len = items.l->n;
    for (size_t i = 0; i < len; i++) {
        jval loop = jv_vdict(r);
        jv_dict_set(r, loop.d, "index", 5, jv_vint((int64_t)i + 1));
        jv_dict_set(r, loop.d, "index0", 6, jv_vint((int64_t)i));
        jv_dict_set(r, loop.d, "revindex", 8, jv_vint((int64_t)(len - i)));
        jv_dict_set(r, loop.d, "revindex0", 9, jv_vint((int64_t)(len - i - 1)));
        jv_dict_set(r, loop.d, "first", 5, jv_vbool(i == 0));
        jv_dict_set(r, loop.d, "last", 4, jv_vbool(i == len - 1));
        jv_dict_set(r, loop.d, "length", 6, jv_vint((int64_t)len));
        jv_dict_set(r, loop.d, "previtem", 8, i > 0 ? items.l->v[i - 1] : UNDEF);
        jv_dict_set(r, loop.d, "nextitem", 8, i + 1 < len ? items.l->v[i + 1] : UNDEF);
        jv_dict_set(r, scope->vars, "loop", 4, loop);
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
    jv_step(r);
    switch (n->kind) {
    case N_BLOCK: exec_block(r, n, e, o, c); return;
    case N_TEXT: jv_buf_add(r, o, n->s, n->sn); return;
    case N_OUT: {
        jval v = ev(r, n->a, e);
        if (v.k != V_NONE) jv_to_text(r, o, v);
        return;
    }
    case N_IF:
        if (jv_truthy(ev(r, n->a, e))) exec_block(r, n->b, e, o, c);
        else if (n->c) exec_block(r, n->c, e, o, c);
        return;
    case N_FOR: exec_for(r, n, e, o); return;
    case N_SET:
        if (n->b) assign(r, n->a, ev(r, n->b, e), e);
        else {
            jbuf b = {0};
            ctl cc = {0, 0};
            exec_block(r, n->c, e, &b, &cc);
            assign(r, n->a, jv_vbuf(r, &b), e);
        }
        return;
    case N_MACRO: {
        jval m = {V_MACRO, {0}};
        m.m = jx_alloc(X, sizeof *m.m);
        m.m->macro = n;
        m.m->env = e;
        jv_dict_set(r, e->vars, n->s, n->sn, m);
        return;
    }
    case N_CALLBLK: {
        jval f = ev(r, n->a->a, e);
        if (f.k != V_MACRO || !f.m->macro) jx_fail(X, "call: not a macro");
        jargs a;
        eval_args(r, n->a->b, e, &a);
        jval v = call_macro(r, f.m, &a, n->b, e);
        jv_to_text(r, o, v);
        return;
    }
    case N_FILTERBLK: {
        jbuf b = {0};
        ctl cc = {0, 0};
        exec_block(r, n->b, e, &b, &cc);
        jargs a;
        eval_args(r, n->a, e, &a);
        jv_to_text(r, o, jv_filter(r, jv_vbuf(r, &b), n->s, n->sn, &a));
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
        jval g = jv_from_json(r, vars, 0);
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
