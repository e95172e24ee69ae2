/* gotmpl — a small Go text/template interpreter for Ollama chat templates
 * (see gotmpl.h for the subset). Lexed into text and action items (trim
 * markers applied), parsed into a tree of text / print / if / range nodes,
 * then executed against the Ollama values. */
#include "export/gotmpl.h"

#include <stdlib.h>
#include <string.h>

#define KIND "TemplateError"
#define MAX_NODES 4096
#define MAX_DEPTH 64

/* ---- lexing ---------------------------------------------------------------------- */

typedef struct item {
    int action;             /* 0 text, 1 action */
    const char *s;
    size_t n;
} item;

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Split tmpl into items; trim markers eat the whitespace next to them. */
static int lex(const char *t, item *items, int cap, int *n_items, dlm_err *e)
{
    int n = 0;
    size_t len = strlen(t), i = 0;
    int trim_next = 0;
    while (i < len) {
        const char *open = strstr(t + i, "{{");
        size_t end = open ? (size_t)(open - t) : len;
        size_t a = i, b = end;
        if (trim_next)
            while (a < b && is_space(t[a])) a++;
        int left_trim = open && open[2] == '-' && open[3] && is_space(open[3]);
        if (left_trim)
            while (b > a && is_space(t[b - 1])) b--;
        if (b > a) {
            if (n >= cap) return err_set(e, KIND, "template too long");
            items[n++] = (item){0, t + a, b - a};
        }
        if (!open) break;
        size_t s = end + 2 + (left_trim ? 2 : 0);
        const char *close = strstr(t + s, "}}");
        if (!close) return err_set(e, KIND, "template: unclosed action at byte %zu", end);
        size_t ce = (size_t)(close - t);
        trim_next = ce >= s + 2 && t[ce - 1] == '-' && is_space(t[ce - 2]);
        size_t ae = trim_next ? ce - 2 : ce;
        if (n >= cap) return err_set(e, KIND, "template too long");
        items[n++] = (item){1, t + s, ae > s ? ae - s : 0};
        i = ce + 2;
    }
    *n_items = n;
    return 0;
}

/* ---- expressions --------------------------------------------------------------------- */

typedef enum { V_NIL, V_STR, V_BOOL, V_ROOT, V_MSGS, V_MSG, V_INT } vkind;

typedef struct gval {
    vkind k;
    const char *s;
    size_t n;               /* V_STR: length; V_MSGS: end of the slice */
    int b;
    size_t idx;             /* V_MSG: the message; V_MSGS: start of the slice */
    long long i;            /* V_INT */
} gval;

#define MAX_VARS 64
#define VAR_NAME 32

/* A template variable ($name), declared with := and set with =. Go scopes
 * a variable to the if / range body (or the template) it is declared in
 * and lets = change one of an enclosing scope (text/template, "Variables"). */
typedef struct gvar {
    char name[VAR_NAME];
    gval v;
} gvar;

typedef struct exec {
    const gotmpl_values *v;
    strbuf *out;
    dlm_err *e;
    char lit[8][512];       /* unescaped string literals of the current action */
    int n_lit;
    gvar vars[MAX_VARS];
    int n_vars;
} exec;

typedef struct cursor {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c)
{
    while (c->p < c->end && is_space(*c->p)) c->p++;
}

static int word_len(const cursor *c)
{
    const char *q = c->p;
    while (q < c->end && (((*q | 32) >= 'a' && (*q | 32) <= 'z') || (*q >= '0' && *q <= '9') || *q == '_')) q++;
    return (int)(q - c->p);
}

static int unsupported(exec *x, const cursor *c)
{
    return err_set(x->e, KIND, "unsupported template construct near '%.*s'", (int)(c->end - c->p > 40 ? 40 : c->end - c->p),
                   c->p);
}

static gval msgs_all(const exec *x) { return (gval){V_MSGS, NULL, x->v->n_msgs, 0, 0, 0}; }

static int truth(const exec *x, const gval *v)
{
    (void)x;
    switch (v->k) {
    case V_STR: return v->n > 0;
    case V_BOOL: return v->b;
    case V_INT: return v->i != 0;
    case V_MSGS: return v->n > v->idx;
    case V_ROOT: case V_MSG: return 1;
    default: return 0;
    }
}

/* $name at c->p ('$' included); its length, 1 for the bare root "$". */
static int var_len(const cursor *c)
{
    const char *q = c->p + 1;
    while (q < c->end && (((*q | 32) >= 'a' && (*q | 32) <= 'z') || (*q >= '0' && *q <= '9') || *q == '_')) q++;
    return (int)(q - c->p);
}

static gvar *var_find(exec *x, const char *name, int n)
{
    for (int k = x->n_vars; k-- > 0;)
        if ((int)strlen(x->vars[k].name) == n && !memcmp(x->vars[k].name, name, (size_t)n)) return &x->vars[k];
    return NULL;
}

static int var_declare(exec *x, const char *name, int n, const gval *v)
{
    if (x->n_vars >= MAX_VARS) return err_set(x->e, KIND, "template: too many variables");
    if (n >= VAR_NAME) return err_set(x->e, KIND, "template: variable name too long");
    gvar *g = &x->vars[x->n_vars++];
    memcpy(g->name, name, (size_t)n);
    g->name[n] = 0;
    g->v = *v;
    return 0;
}

static int field(exec *x, const gval *base, const char *name, int nlen, gval *out)
{
    memset(out, 0, sizeof *out);
#define IS(s) ((int)strlen(s) == nlen && !memcmp(name, s, (size_t)nlen))
    const gotmpl_values *v = x->v;
    if (base->k == V_ROOT) {
        const char *s = NULL;
        if (IS("System")) s = v->system;
        else if (IS("Prompt")) s = v->prompt;
        else if (IS("Response")) s = v->response;
        else if (IS("Messages")) { *out = msgs_all(x); return 0; }
        else if (IS("Tools")) { out->k = V_NIL; return 0; } /* no tools in a drift check */
        else return err_set(x->e, KIND, "template: can't evaluate field %.*s", nlen, name);
        out->k = V_STR;
        out->s = s ? s : "";
        out->n = strlen(out->s);
        return 0;
    }
    if (base->k == V_MSG) {
        const chat_msg *m = &v->msgs[base->idx];
        const char *s = IS("Role") ? m->role : IS("Content") ? m->content : NULL;
        if (!s) return err_set(x->e, KIND, "template: can't evaluate field %.*s of a message", nlen, name);
        out->k = V_STR;
        out->s = s;
        out->n = strlen(s);
        return 0;
    }
#undef IS
    return err_set(x->e, KIND, "template: can't evaluate field %.*s", nlen, name);
}

static int eval_cmd(exec *x, cursor *c, const gval *dot, gval *out, int depth);

/* One operand: .A.B, $, $.A, ., "lit", true/false, ( command ). */
static int eval_operand(exec *x, cursor *c, const gval *dot, gval *out, int depth)
{
    skip_ws(c);
    if (c->p >= c->end) return unsupported(x, c);
    char ch = *c->p;
    gval cur;
    if (ch == '(') {
        c->p++;
        if (eval_cmd(x, c, dot, &cur, depth + 1)) return -1;
        skip_ws(c);
        if (c->p >= c->end || *c->p != ')') return unsupported(x, c);
        c->p++;
        /* (pipeline).Field */
        if (c->p >= c->end || *c->p != '.') {
            *out = cur;
            return 0;
        }
        if (!word_len(&(cursor){c->p + 1, c->end})) return unsupported(x, c);
        goto fields;
    }
    if (ch == '"') {
        if (x->n_lit >= 8) return unsupported(x, c);
        char *buf = x->lit[x->n_lit++];
        size_t k = 0;
        c->p++;
        while (c->p < c->end && *c->p != '"') {
            char q = *c->p++;
            if (q == '\\' && c->p < c->end) {
                char esc = *c->p++;
                q = esc == 'n' ? '\n' : esc == 't' ? '\t' : esc == 'r' ? '\r' : esc == '"' ? '"' : esc == '\\' ? '\\' : 0;
                if (!q) return unsupported(x, c);
            }
            if (k + 1 >= sizeof x->lit[0]) return unsupported(x, c);
            buf[k++] = q;
        }
        if (c->p >= c->end) return unsupported(x, c);
        c->p++;
        buf[k] = 0;
        *out = (gval){V_STR, buf, k, 0, 0, 0};
        return 0;
    }
    if (ch == '$') {
        int w = var_len(c);
        if (w == 1) {
            cur = (gval){V_ROOT, NULL, 0, 0, 0, 0};
        } else {
            gvar *g = var_find(x, c->p, w);
            if (!g) return err_set(x->e, KIND, "template: undefined variable \"%.*s\"", w, c->p);
            cur = g->v;
        }
        c->p += w;
    } else if (ch == '.') {
        cur = *dot;
    } else if ((ch >= '0' && ch <= '9') || ch == '-') {
        /* a decimal integer constant */
        const char *q = c->p + (ch == '-');
        long long v = 0;
        int digits = 0;
        while (q < c->end && *q >= '0' && *q <= '9' && digits < 15) v = v * 10 + (*q++ - '0'), digits++;
        if (!digits || (q < c->end && ((*q >= '0' && *q <= '9') || *q == '.' || (*q | 32) == 'x' || (*q | 32) == 'e')))
            return unsupported(x, c);
        c->p = q;
        *out = (gval){V_INT, NULL, 0, 0, 0, ch == '-' ? -v : v};
        return 0;
    } else {
        int w = word_len(c);
        if (w == 4 && !memcmp(c->p, "true", 4)) { c->p += 4; *out = (gval){V_BOOL, NULL, 0, 1, 0, 0}; return 0; }
        if (w == 5 && !memcmp(c->p, "false", 5)) { c->p += 5; *out = (gval){V_BOOL, NULL, 0, 0, 0, 0}; return 0; }
        return unsupported(x, c);
    }
fields:
    /* a chain of .Field */
    while (c->p < c->end && *c->p == '.') {
        c->p++;
        int w = word_len(c);
        if (!w) break; /* a lone "." is dot itself */
        gval nx;
        if (field(x, &cur, c->p, w, &nx)) return -1;
        c->p += w;
        cur = nx;
    }
    *out = cur;
    return 0;
}

static int str_eq(const gval *a, const gval *b)
{
    if (a->k == V_STR && b->k == V_STR) return a->n == b->n && !memcmp(a->s, b->s, a->n);
    if (a->k == V_BOOL && b->k == V_BOOL) return a->b == b->b;
    if (a->k == V_INT && b->k == V_INT) return a->i == b->i;
    return -1;
}

/* len / slice / index, as Go's builtins treat a string (bytes) and the
 * message list. */
static int call_builtin(exec *x, const char *fn, int w, const gval *args, int na, gval *out)
{
    if (w == 3) { /* len */
        if (na != 1) return err_set(x->e, KIND, "template: wrong number of args for len: want 1 got %d", na);
        if (args[0].k == V_STR) *out = (gval){V_INT, NULL, 0, 0, 0, (long long)args[0].n};
        else if (args[0].k == V_MSGS) *out = (gval){V_INT, NULL, 0, 0, 0, (long long)(args[0].n - args[0].idx)};
        else return err_set(x->e, KIND, "template: error calling len: len of this type");
        return 0;
    }
    if (na < 1) return err_set(x->e, KIND, "template: wrong number of args for %.*s", w, fn);
    const gval *a = &args[0];
    if (a->k != V_STR && a->k != V_MSGS)
        return err_set(x->e, KIND, "template: error calling %.*s: can't index item of this type", w, fn);
    long long len = a->k == V_STR ? (long long)a->n : (long long)(a->n - a->idx);
    for (int k = 1; k < na; k++)
        if (args[k].k != V_INT) return err_set(x->e, KIND, "template: error calling %.*s: cannot index with a non-integer", w, fn);
    if (fn[0] == 'i') { /* index LIST I */
        if (na != 2 || a->k != V_MSGS) return err_set(x->e, KIND, "template: index takes a message list and one integer");
        long long i = args[1].i;
        if (i < 0 || i >= len) return err_set(x->e, KIND, "template: error calling index: index out of range: %lld", i);
        *out = (gval){V_MSG, NULL, 0, 0, a->idx + (size_t)i, 0};
        return 0;
    }
    /* slice X [I [J]] */
    if (na > 3) return err_set(x->e, KIND, "template: error calling slice: too many slice indexes: %d", na - 1);
    long long lo = na > 1 ? args[1].i : 0, hi = na > 2 ? args[2].i : len;
    if (lo < 0 || hi < lo || hi > len)
        return err_set(x->e, KIND, "template: error calling slice: index out of range: %lld", lo < 0 || lo > len ? lo : hi);
    *out = *a;
    if (a->k == V_STR) {
        out->s = a->s + lo;
        out->n = (size_t)(hi - lo);
    } else {
        out->idx = a->idx + (size_t)lo;
        out->n = a->idx + (size_t)hi;
    }
    return 0;
}

/* A command: a function call (eq ne not and or) or a single operand. */
static int eval_cmd(exec *x, cursor *c, const gval *dot, gval *out, int depth)
{
    if (depth > MAX_DEPTH) return err_set(x->e, KIND, "template nests too deeply");
    skip_ws(c);
    int w = word_len(c);
    const char *fn = c->p;
    int is_fn = (w == 2 && (!memcmp(fn, "eq", 2) || !memcmp(fn, "ne", 2) || !memcmp(fn, "or", 2))) ||
                (w == 3 && (!memcmp(fn, "not", 3) || !memcmp(fn, "and", 3) || !memcmp(fn, "len", 3))) ||
                (w == 5 && (!memcmp(fn, "slice", 5) || !memcmp(fn, "index", 5)));
    if (!is_fn) return eval_operand(x, c, dot, out, depth);
    c->p += w;
    gval args[8];
    int na = 0;
    for (;;) {
        skip_ws(c);
        if (c->p >= c->end || *c->p == ')') break;
        if (na == 8) return unsupported(x, c);
        if (eval_operand(x, c, dot, &args[na++], depth + 1)) return -1;
    }
    if (w == 3 && fn[0] == 'n') { /* not */
        if (na != 1) return err_set(x->e, KIND, "template: not takes one argument");
        *out = (gval){V_BOOL, NULL, 0, !truth(x, &args[0]), 0, 0};
        return 0;
    }
    if (w == 5 || (w == 3 && fn[0] == 'l')) return call_builtin(x, fn, w, args, na, out);
    if (w == 2 && (fn[0] == 'e' || fn[0] == 'n')) { /* eq a b [c...] : a == any of the rest; ne a b */
        if (na < 2 || (fn[0] == 'n' && na != 2)) return err_set(x->e, KIND, "template: %.2s needs two arguments", fn);
        int any = 0;
        for (int i = 1; i < na; i++) {
            int r = str_eq(&args[0], &args[i]);
            if (r < 0) return err_set(x->e, KIND, "template: incompatible types for comparison");
            any |= r;
        }
        *out = (gval){V_BOOL, NULL, 0, fn[0] == 'e' ? any : !any, 0, 0};
        return 0;
    }
    /* and / or: the first falsy (and) / truthy (or) argument, else the last */
    if (na < 1) return err_set(x->e, KIND, "template: %.*s needs arguments", w, fn);
    int want = fn[0] == 'o';
    for (int i = 0; i < na; i++)
        if (truth(x, &args[i]) == want || i == na - 1) {
            *out = args[i];
            return 0;
        }
    return 0;
}

/* Evaluate a whole action expression [s, s+n). */
static int eval_expr(exec *x, const char *s, size_t n, const gval *dot, gval *out)
{
    cursor c = {s, s + n};
    x->n_lit = 0;
    if (eval_cmd(x, &c, dot, out, 0)) return -1;
    skip_ws(&c);
    if (c.p != c.end) return unsupported(x, &c);
    return 0;
}

/* "$a := " / "$a = " / "$a, $b := " at the head of an action: the names
 * (up to two, with range) and whether it declares; 0 when the action does
 * not start so. [*s, *s+*n) is moved past the operator. */
typedef struct decl {
    const char *name[2];
    int len[2];
    int count, declare;
} decl;

static int parse_decl(const char **s, size_t *n, decl *d)
{
    cursor c = {*s, *s + *n};
    memset(d, 0, sizeof *d);
    for (;;) {
        skip_ws(&c);
        if (c.p >= c.end || *c.p != '$' || d->count == 2) return 0;
        int w = var_len(&c);
        if (w < 2) return 0;
        d->name[d->count] = c.p;
        d->len[d->count++] = w;
        c.p += w;
        skip_ws(&c);
        if (c.p < c.end && *c.p == ',') { c.p++; continue; }
        break;
    }
    if (c.end - c.p >= 2 && c.p[0] == ':' && c.p[1] == '=') { d->declare = 1; c.p += 2; }
    else if (c.p < c.end && c.p[0] == '=' && (c.p + 1 == c.end || c.p[1] != '=')) c.p++;
    else return 0;
    if (!d->declare && d->count != 1) return 0;
    *n = (size_t)(c.end - c.p);
    *s = c.p;
    return 1;
}

/* ---- tree ------------------------------------------------------------------------------ */

typedef enum { N_TEXT, N_PRINT, N_IF, N_RANGE } nkind;

typedef struct node {
    nkind k;
    const char *s;          /* text, or the expression */
    size_t n;
    int body, alt;          /* first node index of the then/else lists, -1 = empty */
    int next;               /* next sibling, -1 = end */
} node;

typedef struct parser {
    const item *it;
    int n_it, pos;
    node *nodes;
    int n_nodes;
    dlm_err *e;
} parser;

/* Keyword of an action: "if", "else", "end", "range", "" otherwise; *rest
 * points after it. */
static const char *keyword(const item *a, const char **rest, size_t *rn)
{
    const char *p = a->s, *end = a->s + a->n;
    while (p < end && is_space(*p)) p++;
    static const char *const KW[] = {"if", "else", "end", "range"};
    for (int i = 0; i < 4; i++) {
        size_t k = strlen(KW[i]);
        if ((size_t)(end - p) >= k && !memcmp(p, KW[i], k) && (p + k == end || is_space(p[k]))) {
            *rest = p + k;
            *rn = (size_t)(end - p - (ptrdiff_t)k);
            return KW[i];
        }
    }
    *rest = p;
    *rn = (size_t)(end - p);
    return "";
}

static int is_comment(const item *a)
{
    const char *p = a->s, *end = a->s + a->n;
    while (p < end && is_space(*p)) p++;
    while (end > p && is_space(end[-1])) end--;
    return end - p >= 4 && p[0] == '/' && p[1] == '*' && end[-2] == '*' && end[-1] == '/';
}

static int new_node(parser *P, nkind k, const char *s, size_t n)
{
    if (P->n_nodes >= MAX_NODES) return err_set(P->e, KIND, "template too long");
    node *x = &P->nodes[P->n_nodes];
    *x = (node){k, s, n, -1, -1, -1};
    return P->n_nodes++;
}

/* Parse a list of nodes until "end" or "else" (returned in *stop); the
 * first node index goes to *head (-1 for an empty list). */
static int parse_list(parser *P, int *head, const char **stop, const char **stop_rest, size_t *stop_rn, int depth)
{
    *head = -1;
    *stop = NULL;
    int tail = -1;
    if (depth > MAX_DEPTH) return err_set(P->e, KIND, "template nests too deeply");
    while (P->pos < P->n_it) {
        const item *a = &P->it[P->pos++];
        int id;
        if (!a->action) {
            if ((id = new_node(P, N_TEXT, a->s, a->n)) < 0) return -1;
        } else if (is_comment(a)) {
            continue;
        } else {
            const char *rest;
            size_t rn;
            const char *kw = keyword(a, &rest, &rn);
            if (!strcmp(kw, "end") || !strcmp(kw, "else")) {
                *stop = kw;
                *stop_rest = rest;
                *stop_rn = rn;
                return 0;
            }
            if (!strcmp(kw, "if") || !strcmp(kw, "range")) {
                if ((id = new_node(P, *kw == 'i' ? N_IF : N_RANGE, rest, rn)) < 0) return -1;
                const char *st, *sr;
                size_t srn;
                int body;
                if (parse_list(P, &body, &st, &sr, &srn, depth + 1)) return -1;
                P->nodes[id].body = body;
                /* else / else if chains */
                int cur = id;
                while (st && !strcmp(st, "else")) {
                    const char *r2 = sr;
                    while (r2 < sr + srn && is_space(*r2)) r2++;
                    size_t r2n = srn - (size_t)(r2 - sr);
                    if (r2n >= 2 && !memcmp(r2, "if", 2) && (r2n == 2 || is_space(r2[2]))) {
                        if (P->nodes[cur].k != N_IF) return err_set(P->e, KIND, "template: else if inside range");
                        int nif = new_node(P, N_IF, r2 + 2, r2n - 2);
                        if (nif < 0) return -1;
                        P->nodes[cur].alt = nif;
                        if (parse_list(P, &body, &st, &sr, &srn, depth + 1)) return -1;
                        P->nodes[nif].body = body;
                        cur = nif;
                        continue;
                    }
                    if (r2n) return err_set(P->e, KIND, "template: unexpected '%.*s' after else", (int)r2n, r2);
                    int alt;
                    if (parse_list(P, &alt, &st, &sr, &srn, depth + 1)) return -1;
                    P->nodes[cur].alt = alt;
                    if (st && strcmp(st, "end")) return err_set(P->e, KIND, "template: else after else");
                    break;
                }
                if (!st || strcmp(st, "end")) return err_set(P->e, KIND, "template: missing {{ end }}");
            } else {
                if ((id = new_node(P, N_PRINT, rest, rn)) < 0) return -1;
            }
        }
        if (tail < 0) *head = id;
        else P->nodes[tail].next = id;
        tail = id;
    }
    return 0;
}

/* A block body in its own variable scope. */
static int exec_list(exec *x, const node *nodes, int id, const gval *dot, int depth);

static int exec_scoped(exec *x, const node *nodes, int id, const gval *dot, int depth)
{
    int mark = x->n_vars;
    int rc = exec_list(x, nodes, id, dot, depth);
    x->n_vars = mark;
    return rc;
}

static int exec_list(exec *x, const node *nodes, int id, const gval *dot, int depth)
{
    if (depth > MAX_DEPTH) return err_set(x->e, KIND, "template nests too deeply");
    for (; id >= 0; id = nodes[id].next) {
        const node *nd = &nodes[id];
        const char *es = nd->s;
        size_t en = nd->n;
        decl d;
        gval v;
        switch (nd->k) {
        case N_TEXT: sb_append(x->out, nd->s, nd->n); break;
        case N_PRINT:
            if (parse_decl(&es, &en, &d)) {
                /* {{ $x := v }} / {{ $x = v }} print nothing */
                if (d.count != 1) return err_set(x->e, KIND, "template: too many declarations");
                if (eval_expr(x, es, en, dot, &v)) return -1;
                if (d.declare) {
                    if (var_declare(x, d.name[0], d.len[0], &v)) return -1;
                } else {
                    gvar *g = var_find(x, d.name[0], d.len[0]);
                    if (!g) return err_set(x->e, KIND, "template: undefined variable \"%.*s\"", d.len[0], d.name[0]);
                    g->v = v;
                }
                break;
            }
            if (eval_expr(x, nd->s, nd->n, dot, &v)) return -1;
            if (v.k == V_STR) sb_append(x->out, v.s, v.n);
            else if (v.k == V_BOOL) sb_puts(x->out, v.b ? "true" : "false");
            else if (v.k == V_INT) sb_printf(x->out, "%lld", v.i);
            else if (v.k == V_NIL) sb_puts(x->out, "<no value>");
            else return err_set(x->e, KIND, "template: printing a %s is not supported",
                                v.k == V_MSGS ? "message list" : "structure");
            break;
        case N_IF:
            if (eval_expr(x, nd->s, nd->n, dot, &v)) return -1;
            if (exec_scoped(x, nodes, truth(x, &v) ? nd->body : nd->alt, dot, depth + 1)) return -1;
            break;
        case N_RANGE:
            /* range [$i, ]$m := LIST: $m the element, $i (when two) the index */
            if (!parse_decl(&es, &en, &d)) d.count = 0;
            else if (!d.declare) return err_set(x->e, KIND, "template: range can only initialize variables");
            if (eval_expr(x, es, en, dot, &v)) return -1;
            if (v.k == V_NIL || (v.k == V_MSGS && v.n <= v.idx)) {
                if (exec_scoped(x, nodes, nd->alt, dot, depth + 1)) return -1;
                break;
            }
            if (v.k != V_MSGS) return err_set(x->e, KIND, "template: range over something that is not .Messages");
            for (size_t i = v.idx; i < v.n; i++) {
                gval m = {V_MSG, NULL, 0, 0, i, 0}, iv = {V_INT, NULL, 0, 0, 0, (long long)(i - v.idx)};
                int mark = x->n_vars;
                if (d.count == 2 && (var_declare(x, d.name[0], d.len[0], &iv) || var_declare(x, d.name[1], d.len[1], &m)))
                    return -1;
                if (d.count == 1 && var_declare(x, d.name[0], d.len[0], &m)) return -1;
                int rc = exec_list(x, nodes, nd->body, &m, depth + 1);
                x->n_vars = mark;
                if (rc) return -1;
            }
            break;
        }
    }
    return 0;
}

int gotmpl_render(const char *tmpl, const gotmpl_values *v, strbuf *out, dlm_err *e)
{
    int cap = 2 * MAX_NODES;
    item *items = malloc((size_t)cap * sizeof *items);
    node *nodes = malloc(MAX_NODES * sizeof *nodes);
    int rc = -1, n_items = 0;
    if (!items || !nodes) { err_set(e, "MemoryError", "out of memory"); goto done; }
    if (lex(tmpl, items, cap, &n_items, e)) goto done;
    parser P = {items, n_items, 0, nodes, 0, e};
    int head;
    const char *stop, *sr;
    size_t srn;
    if (parse_list(&P, &head, &stop, &sr, &srn, 0)) goto done;
    if (stop) { err_set(e, KIND, "template: unexpected {{ %s }}", stop); goto done; }
    exec x;
    memset(&x, 0, sizeof x);
    x.v = v;
    x.out = out;
    x.e = e;
    gval root = {V_ROOT, NULL, 0, 0, 0, 0};
    rc = exec_list(&x, nodes, head, &root, 0);
done:
    free(items);
    free(nodes);
    return rc;
}

int gotmpl_render_ollama(const char *tmpl, const char *modelfile_system, const chat_msg *msgs, size_t n,
                         strbuf *out, dlm_err *e)
{
    int inject = modelfile_system && *modelfile_system && (n == 0 || strcmp(msgs[0].role, "system"));
    size_t total = n + (size_t)inject;
    chat_msg *all = calloc(total ? total : 1, sizeof *all);
    char **owned = calloc(total ? total : 1, sizeof *owned);
    strbuf sys = STRBUF_INIT;
    int rc = -1;
    if (!all || !owned) { err_set(e, "MemoryError", "out of memory"); goto done; }
    size_t k = 0;
    if (inject) all[k++] = (chat_msg){"system", modelfile_system};
    for (size_t i = 0; i < n; i++) all[k++] = msgs[i];
    /* collate: system contents joined; consecutive same-role messages merged */
    size_t m = 0;
    for (size_t i = 0; i < total; i++) {
        if (!strcmp(all[i].role, "system")) {
            if (sys.len) sb_puts(&sys, "\n\n");
            sb_puts(&sys, all[i].content);
        }
        if (m > 0 && !strcmp(all[m - 1].role, all[i].role) && strcmp(all[i].role, "tool")) {
            strbuf c = STRBUF_INIT;
            sb_printf(&c, "%s\n\n%s", all[m - 1].content, all[i].content);
            free(owned[m - 1]);
            owned[m - 1] = sb_detach(&c, NULL);
            all[m - 1].content = owned[m - 1];
        } else {
            all[m++] = all[i];
        }
    }
    gotmpl_values v = {sb_str(&sys), all, m, "", ""};
    rc = gotmpl_render(tmpl, &v, out, e);
done:
    for (size_t i = 0; owned && i < total; i++) free(owned[i]);
    free(owned);
    free(all);
    sb_free(&sys);
    return rc;
}
