/* jinja — see jinja.h. Lexer and parser follow @huggingface/jinja's grammar
 * (the reference the tests render with) so that precedence and whitespace
 * handling agree: or < and < not < comparisons/in < + - ~ < * / // % < ** <
 * `is` tests < `|` filters < unary sign < call/member < primary.
 *
 * Errors unwind with longjmp: every allocation of a parse or a render is in
 * an arena freed as a whole, so nothing leaks on the error path. */
#include "tokens/jinja.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokens/jinja_impl.h"

/* ---- arena ------------------------------------------------------------------------------ */

typedef struct ablk {
    struct ablk *next;
    size_t used, cap;
    max_align_t data[];
} ablk;

void *jx_alloc(jx *x, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    ablk *b = x->arena;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > (64u << 10) ? n : (64u << 10);
        if (x->arena_bytes + cap > x->arena_limit) jx_fail(x, "template used more than %zu MiB of memory", x->arena_limit >> 20);
        b = malloc(sizeof *b + cap);
        if (!b) jx_fail(x, "out of memory");
        b->next = x->arena;
        b->used = 0;
        b->cap = cap;
        x->arena = b;
        x->arena_bytes += cap;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

void jx_arena_free(ablk_list *l)
{
    ablk *b = (ablk *)*l;
    while (b) {
        ablk *n = b->next;
        free(b);
        b = n;
    }
    *l = NULL;
}

void jx_fail(jx *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->msg, sizeof x->msg, fmt, ap);
    va_end(ap);
    longjmp(x->jb, 1);
}

jstr *jx_str(jx *x, const char *s, size_t n)
{
    jstr *r = jx_alloc(x, sizeof *r + n + 1);
    r->n = n;
    if (n) memcpy(r->s, s, n);
    r->s[n] = 0;
    return r;
}

/* ---- lexer ------------------------------------------------------------------------------ */

static int is_js_ws(const char *s, size_t n, size_t *len)
{
    unsigned char c = (unsigned char)s[0];
    *len = 1;
    if (c == ' ' || (c >= 9 && c <= 13)) return 1;
    if (c < 0x80) return 0;
    /* JS \s beyond ASCII: U+00A0 U+1680 U+2000-200A U+2028 U+2029 U+202F U+205F U+3000 U+FEFF */
    if (n >= 2 && c == 0xC2 && (unsigned char)s[1] == 0xA0) return *len = 2, 1;
    if (n >= 3) {
        unsigned a = (unsigned char)s[1], b = (unsigned char)s[2];
        uint32_t cp = ((c & 0x0Fu) << 12) | ((a & 0x3Fu) << 6) | (b & 0x3Fu);
        if ((c & 0xF0) == 0xE0 && (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
                                   cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF))
            return *len = 3, 1;
    }
    return 0;
}

/* Trailing JS whitespace removed (String.prototype.trimEnd). */
static size_t trim_end_len(const char *s, size_t n)
{
    for (;;) {
        size_t best = n;
        for (size_t k = 1; k <= 3 && k <= n; k++) {
            size_t l;
            if (is_js_ws(s + n - k, k, &l) && l == k) {
                best = n - k;
                break;
            }
        }
        if (best == n) return n;
        n = best;
    }
}

static void tok_push(jx *x, jlex *L, int type, const char *s, size_t n, size_t at)
{
    if (L->n == L->cap) {
        size_t nc = L->cap ? L->cap * 2 : 256;
        jtok *t = jx_alloc(x, nc * sizeof *t);
        if (L->n) memcpy(t, L->t, L->n * sizeof *t);
        L->t = t;
        L->cap = nc;
    }
    L->t[L->n++] = (jtok){type, s, n, at};
}

/* @huggingface/jinja's preprocess with trim_blocks and lstrip_blocks. */
static char *preprocess(jx *x, const char *src, size_t n, size_t *on)
{
    if (n && src[n - 1] == '\n') n--;
    char *a = jx_alloc(x, n + 1);
    size_t o = 0;
    /* lstrip_blocks: /^[ \t]*({[#%-])/gm -> "$1" */
    for (size_t i = 0; i < n;) {
        if (i == 0 || src[i - 1] == '\n') {
            size_t j = i;
            while (j < n && (src[j] == ' ' || src[j] == '\t')) j++;
            if (j + 1 < n && src[j] == '{' && (src[j + 1] == '#' || src[j + 1] == '%' || src[j + 1] == '-')) i = j;
        }
        a[o++] = src[i++];
        /* copy the rest of the line */
        while (i < n && src[i - 1] != '\n') a[o++] = src[i++];
    }
    /* trim_blocks: /([#%-]})\n/g -> "$1" */
    char *b = jx_alloc(x, o + 1);
    size_t p = 0;
    for (size_t i = 0; i < o; i++) {
        b[p++] = a[i];
        if (a[i] == '}' && i > 0 && (a[i - 1] == '#' || a[i - 1] == '%' || a[i - 1] == '-') && i + 1 < o && a[i + 1] == '\n')
            i++;
    }
    /* {% generation %} / {% endgeneration %} (transformers' own tag) are dropped. */
    *on = p;
    return b;
}

static int isword(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }
static int isdig(char c) { return c >= '0' && c <= '9'; }

static void lex(jx *x, jlex *L, const char *src, size_t n)
{
    size_t i = 0;
    static const struct { const char *s; int t; } table[] = {
        {"{%", T_OPEN_STMT}, {"%}", T_CLOSE_STMT}, {"{{", T_OPEN_EXPR}, {"}}", T_CLOSE_EXPR},
        {"(", T_LPAREN}, {")", T_RPAREN}, {"{", T_LBRACE}, {"}", T_RBRACE}, {"[", T_LBRACK}, {"]", T_RBRACK},
        {",", T_COMMA}, {".", T_DOT}, {":", T_COLON}, {"|", T_PIPE},
        {"<=", T_CMP}, {">=", T_CMP}, {"==", T_CMP}, {"!=", T_CMP}, {"<", T_CMP}, {">", T_CMP},
        {"+", T_ADD}, {"-", T_ADD}, {"~", T_ADD}, {"**", T_POW}, {"*", T_MUL}, {"//", T_MUL}, {"/", T_MUL},
        {"%", T_MUL}, {"=", T_EQUALS}};
    int depth = 0;
    while (i < n) {
        int last = L->n ? L->t[L->n - 1].type : -1;
        if (last < 0 || last == T_CLOSE_STMT || last == T_CLOSE_EXPR || last == T_COMMENT) {
            size_t s = i;
            while (i < n && !(src[i] == '{' && i + 1 < n && (src[i + 1] == '%' || src[i + 1] == '{' || src[i + 1] == '#'))) i++;
            if (i > s) {
                tok_push(x, L, T_TEXT, src + s, i - s, s);
                continue;
            }
        }
        if (src[i] == '{' && i + 1 < n && src[i + 1] == '#') {
            i += 2;
            int strip_before = i < n && src[i] == '-';
            if (strip_before) i++;
            size_t s = i;
            while (!(i + 1 < n && src[i] == '#' && src[i + 1] == '}')) {
                if (i + 2 >= n) jx_fail(x, "missing end of comment tag");
                i++;
            }
            int strip_after = i > s && src[i - 1] == '-';
            if (strip_before) goto strip_prev_comment;
        after_strip_comment:
            tok_push(x, L, T_COMMENT, src + s, i - s, s);
            i += 2;
            if (strip_after) {
                size_t l;
                while (i < n && is_js_ws(src + i, n - i, &l)) i += l;
            }
            continue;
        strip_prev_comment:
            if (L->n && L->t[L->n - 1].type == T_TEXT) {
                L->t[L->n - 1].n = trim_end_len(L->t[L->n - 1].s, L->t[L->n - 1].n);
                if (!L->t[L->n - 1].n) L->n--;
            }
            goto after_strip_comment;
        }
        if (i + 2 < n && src[i] == '{' && (src[i + 1] == '%' || src[i + 1] == '{') && src[i + 2] == '-') {
            if (L->n && L->t[L->n - 1].type == T_TEXT) {
                L->t[L->n - 1].n = trim_end_len(L->t[L->n - 1].s, L->t[L->n - 1].n);
                if (!L->t[L->n - 1].n) L->n--;
            }
            tok_push(x, L, src[i + 1] == '%' ? T_OPEN_STMT : T_OPEN_EXPR, src + i, 2, i);
            if (src[i + 1] == '{') depth = 0;
            i += 3;
            continue;
        }
        size_t l;
        while (i < n && is_js_ws(src + i, n - i, &l)) i += l;
        if (i >= n) break;
        if (i + 2 < n && src[i] == '-' && ((src[i + 1] == '%' && src[i + 2] == '}') || (src[i + 1] == '}' && src[i + 2] == '}'))) {
            tok_push(x, L, src[i + 1] == '%' ? T_CLOSE_STMT : T_CLOSE_EXPR, src + i + 1, 2, i);
            i += 3;
            while (i < n && is_js_ws(src + i, n - i, &l)) i += l;
            continue;
        }
        char c = src[i];
        if ((c == '-' || c == '+')) {
            if (last == T_TEXT || last < 0) jx_fail(x, "unexpected character '%c' at offset %zu", c, i);
            if (!(last == T_IDENT || last == T_NUM || last == T_STR || last == T_RPAREN || last == T_RBRACK)) {
                size_t s = i++;
                while (i < n && isdig(src[i])) i++;
                if (i > s + 1 && i + 1 < n && src[i] == '.' && isdig(src[i + 1])) {
                    i++;
                    while (i < n && isdig(src[i])) i++;
                }
                tok_push(x, L, i > s + 1 ? T_NUM : T_UNARY, src + s, i - s, s);
                continue;
            }
        }
        int hit = 0;
        for (size_t k = 0; k < sizeof table / sizeof table[0]; k++) {
            size_t tl = strlen(table[k].s);
            if (table[k].t == T_CLOSE_EXPR && depth > 0) continue;
            if (i + tl <= n && !memcmp(src + i, table[k].s, tl)) {
                tok_push(x, L, table[k].t, src + i, tl, i);
                if (table[k].t == T_OPEN_EXPR) depth = 0;
                else if (table[k].t == T_LBRACE) depth++;
                else if (table[k].t == T_RBRACE) depth--;
                i += tl;
                hit = 1;
                break;
            }
        }
        if (hit) continue;
        if (c == '\'' || c == '"') {
            size_t at = i++;
            strbuf sb = STRBUF_INIT;
            while (i < n && src[i] != c) {
                if (src[i] == '\\') {
                    if (++i >= n) break;
                    char d = src[i++];
                    char r = d == 'n' ? '\n' : d == 't' ? '\t' : d == 'r' ? '\r' : d == 'b' ? '\b' : d == 'f' ? '\f'
                           : d == 'v' ? '\v' : d == '\'' ? '\'' : d == '"' ? '"' : d == '\\' ? '\\' : 0;
                    if (!r) {
                        sb_free(&sb);
                        jx_fail(x, "unexpected escaped character '\\%c' at offset %zu", d, i);
                    }
                    sb_putc(&sb, r);
                    continue;
                }
                sb_putc(&sb, src[i++]);
            }
            if (i >= n) {
                sb_free(&sb);
                jx_fail(x, "unterminated string at offset %zu", at);
            }
            i++;
            jstr *s = jx_str(x, sb.buf ? sb.buf : "", sb.len);
            sb_free(&sb);
            tok_push(x, L, T_STR, s->s, s->n, at);
            continue;
        }
        if (isdig(c)) {
            size_t s = i;
            while (i < n && isdig(src[i])) i++;
            if (last != T_DOT && i + 1 < n && src[i] == '.' && isdig(src[i + 1])) {
                i++;
                while (i < n && isdig(src[i])) i++;
            }
            tok_push(x, L, T_NUM, src + s, i - s, s);
            continue;
        }
        if (isword(c)) {
            size_t s = i;
            while (i < n && isword(src[i])) i++;
            tok_push(x, L, T_IDENT, src + s, i - s, s);
            continue;
        }
        jx_fail(x, "unexpected character '%c' at offset %zu", c, i);
    }
}

/* ---- parser ----------------------------------------------------------------------------- */

typedef struct parser {
    jx *x;
    jlex *L;
    size_t cur;
} parser;

static jtok *peek(parser *p, size_t k)
{
    return p->cur + k < p->L->n ? &p->L->t[p->cur + k] : NULL;
}

static int is_type(parser *p, int type)
{
    jtok *t = peek(p, 0);
    return t && t->type == type;
}

static int is_ident(parser *p, size_t k, const char *name)
{
    jtok *t = peek(p, k);
    return t && t->type == T_IDENT && t->n == strlen(name) && !memcmp(t->s, name, t->n);
}

static int is_stmt(parser *p, const char *name)
{
    return is_type(p, T_OPEN_STMT) && is_ident(p, 1, name);
}

static jtok *expect(parser *p, int type, const char *what)
{
    jtok *t = peek(p, 0);
    if (!t || t->type != type) jx_fail(p->x, "expected %s%s", what, t ? "" : " before the end of the template");
    p->cur++;
    return t;
}

static void expect_ident(parser *p, const char *name)
{
    if (!is_ident(p, 0, name)) jx_fail(p->x, "expected '%s'", name);
    p->cur++;
}

/* Every recursive production counts its depth: a hostile template cannot
 * overflow the C stack ("{{ ------1 }}", "not not not ...", "f()()()"). */
static void enter(parser *p)
{
    if (++p->x->depth > JINJA_MAX_DEPTH) jx_fail(p->x, "template nested too deeply");
}

static void leave(parser *p) { p->x->depth--; }

static jnode *mk(parser *p, int kind)
{
    jnode *nd = jx_alloc(p->x, sizeof *nd);
    nd->kind = kind;
    jtok *t = peek(p, 0);
    nd->at = t ? t->at : 0;
    return nd;
}

static void kid(parser *p, jnode *nd, jnode *k)
{
    if (nd->nk == nd->capk) {
        size_t nc = nd->capk ? nd->capk * 2 : 4;
        jnode **v = jx_alloc(p->x, nc * sizeof *v);
        if (nd->nk) memcpy(v, nd->k, nd->nk * sizeof *v);
        nd->k = v;
        nd->capk = nc;
    }
    nd->k[nd->nk++] = k;
}

static jnode *parse_any(parser *p);
static jnode *parse_expr(parser *p);
static jnode *parse_primary(parser *p);
static jnode *parse_or(parser *p);

static jnode *body_until(parser *p, const char *a, const char *b, const char *c)
{
    jnode *blk = mk(p, N_BLOCK);
    while (!(a && is_stmt(p, a)) && !(b && is_stmt(p, b)) && !(c && is_stmt(p, c))) {
        if (!peek(p, 0)) jx_fail(p->x, "missing {%% %s %%}", c ? c : b ? b : a);
        kid(p, blk, parse_any(p));
    }
    return blk;
}

static void close_stmt(parser *p) { expect(p, T_CLOSE_STMT, "'%}'"); }

static void end_stmt(parser *p, const char *name)
{
    expect(p, T_OPEN_STMT, "'{%'");
    expect_ident(p, name);
    close_stmt(p);
}

static jnode *parse_seq(parser *p, int primary)
{
    jnode *first = primary ? parse_primary(p) : parse_expr(p);
    if (!is_type(p, T_COMMA)) return first;
    jnode *t = mk(p, N_TUPLE);
    kid(p, t, first);
    while (is_type(p, T_COMMA)) {
        p->cur++;
        kid(p, t, primary ? parse_primary(p) : parse_expr(p));
    }
    return t;
}

/* Arguments: positional (N_*) and keyword (N_KWARG: s = name, a = value). */
static jnode *parse_args(parser *p)
{
    expect(p, T_LPAREN, "'('");
    jnode *args = mk(p, N_ARGS);
    while (!is_type(p, T_RPAREN)) {
        if (!peek(p, 0)) jx_fail(p->x, "missing ')'");
        jnode *a = parse_expr(p);
        if (is_type(p, T_EQUALS)) {
            p->cur++;
            if (a->kind != N_IDENT) jx_fail(p->x, "expected an identifier before '='");
            jnode *kw = mk(p, N_KWARG);
            kw->s = a->s;
            kw->sn = a->sn;
            kw->a = parse_expr(p);
            a = kw;
        }
        kid(p, args, a);
        if (is_type(p, T_COMMA)) p->cur++;
        else if (!is_type(p, T_RPAREN)) jx_fail(p->x, "expected ',' or ')' in arguments");
    }
    p->cur++;
    return args;
}

static jnode *parse_member(parser *p, jnode *obj);

static jnode *parse_call(parser *p, jnode *callee)
{
    enter(p);
    jnode *c = mk(p, N_CALL);
    c->a = callee;
    c->b = parse_args(p);
    c = parse_member(p, c);
    if (is_type(p, T_LPAREN)) c = parse_call(p, c);
    leave(p);
    return c;
}

static jnode *parse_member(parser *p, jnode *obj)
{
    while (is_type(p, T_DOT) || is_type(p, T_LBRACK)) {
        int computed = is_type(p, T_LBRACK);
        p->cur++;
        jnode *m = mk(p, N_MEMBER);
        m->a = obj;
        if (computed) {
            jnode *sl[3] = {NULL, NULL, NULL};
            int ns = 0, is_slice = 0;
            while (!is_type(p, T_RBRACK)) {
                if (!peek(p, 0) || ns >= 3) jx_fail(p->x, "bad subscript");
                if (is_type(p, T_COLON)) {
                    sl[ns++] = NULL;
                    p->cur++;
                    is_slice = 1;
                } else {
                    sl[ns++] = parse_expr(p);
                    if (is_type(p, T_COLON)) {
                        p->cur++;
                        is_slice = 1;
                    }
                }
            }
            p->cur++;
            if (!ns) jx_fail(p->x, "empty subscript");
            if (is_slice) {
                jnode *s = mk(p, N_SLICE);
                s->a = sl[0];
                s->b = sl[1];
                s->c = sl[2];
                m->b = s;
            } else m->b = sl[0];
        } else {
            jnode *prop = parse_primary(p);
            if (prop->kind != N_IDENT && prop->kind != N_INT) jx_fail(p->x, "expected a name after '.'");
            if (prop->kind == N_IDENT) prop->kind = N_STR; /* obj.name == obj["name"] */
            m->b = prop;
            m->dot = 1;
        }
        obj = m;
    }
    return obj;
}

static jnode *parse_unary(parser *p)
{
    jtok *t = peek(p, 0);
    if (t && (t->type == T_UNARY || t->type == T_ADD) && t->n == 1 && (t->s[0] == '-' || t->s[0] == '+')) {
        p->cur++;
        enter(p);
        jnode *u = mk(p, N_NEG);
        u->op = t->s[0];
        u->a = parse_unary(p);
        leave(p);
        return u;
    }
    jnode *m = parse_member(p, parse_primary(p));
    if (is_type(p, T_LPAREN)) m = parse_call(p, m);
    return m;
}

static jnode *parse_filter(parser *p)
{
    jnode *x = parse_unary(p);
    while (is_type(p, T_PIPE)) {
        p->cur++;
        jnode *f = parse_primary(p);
        if (f->kind != N_IDENT) jx_fail(p->x, "expected a filter name after '|'");
        jnode *nd = mk(p, N_FILTER);
        nd->a = x;
        nd->s = f->s;
        nd->sn = f->sn;
        if (is_type(p, T_LPAREN)) nd->b = parse_args(p);
        x = nd;
    }
    return x;
}

static jnode *parse_test(parser *p)
{
    jnode *x = parse_filter(p);
    while (is_ident(p, 0, "is")) {
        p->cur++;
        int neg = is_ident(p, 0, "not");
        if (neg) p->cur++;
        jnode *f = parse_primary(p);
        if (f->kind != N_IDENT && f->kind != N_NONE && f->kind != N_BOOL) jx_fail(p->x, "expected a test name after 'is'");
        jnode *nd = mk(p, N_TEST);
        nd->a = x;
        nd->neg = neg;
        if (f->kind == N_IDENT) {
            nd->s = f->s;
            nd->sn = f->sn;
        } else {
            nd->s = f->kind == N_NONE ? "none" : f->i ? "true" : "false";
            nd->sn = strlen(nd->s);
        }
        if (is_type(p, T_LPAREN)) nd->b = parse_args(p);
        x = nd;
    }
    return x;
}

static jnode *binop(parser *p, jnode *l, const char *op, size_t on, jnode *r)
{
    jnode *b = mk(p, N_BIN);
    b->a = l;
    b->b = r;
    memcpy(b->opname, op, on < 7 ? on : 7);
    return b;
}

static jnode *parse_pow(parser *p)
{
    jnode *l = parse_test(p);
    while (is_type(p, T_POW)) {
        p->cur++;
        l = binop(p, l, "**", 2, parse_test(p));
    }
    return l;
}

static jnode *parse_mul(parser *p)
{
    jnode *l = parse_pow(p);
    while (is_type(p, T_MUL)) {
        jtok *t = peek(p, 0);
        p->cur++;
        l = binop(p, l, t->s, t->n, parse_pow(p));
    }
    return l;
}

static jnode *parse_add(parser *p)
{
    jnode *l = parse_mul(p);
    while (is_type(p, T_ADD)) {
        jtok *t = peek(p, 0);
        p->cur++;
        l = binop(p, l, t->s, t->n, parse_mul(p));
    }
    return l;
}

static jnode *parse_cmp(parser *p)
{
    jnode *l = parse_add(p);
    for (;;) {
        if (is_ident(p, 0, "not") && is_ident(p, 1, "in")) {
            p->cur += 2;
            l = binop(p, l, "notin", 5, parse_add(p));
        } else if (is_ident(p, 0, "in")) {
            p->cur++;
            l = binop(p, l, "in", 2, parse_add(p));
        } else if (is_type(p, T_CMP)) {
            jtok *t = peek(p, 0);
            p->cur++;
            l = binop(p, l, t->s, t->n, parse_add(p));
        } else return l;
    }
}

static jnode *parse_not(parser *p)
{
    if (is_ident(p, 0, "not")) {
        p->cur++;
        enter(p);
        jnode *u = mk(p, N_NOT);
        u->a = parse_not(p);
        leave(p);
        return u;
    }
    return parse_cmp(p);
}

static jnode *parse_and(parser *p)
{
    jnode *l = parse_not(p);
    while (is_ident(p, 0, "and")) {
        p->cur++;
        l = binop(p, l, "and", 3, parse_not(p));
    }
    return l;
}

static jnode *parse_or(parser *p)
{
    jnode *l = parse_and(p);
    while (is_ident(p, 0, "or")) {
        p->cur++;
        l = binop(p, l, "or", 2, parse_and(p));
    }
    return l;
}

static jnode *parse_expr(parser *p)
{
    if (++p->x->depth > JINJA_MAX_DEPTH) jx_fail(p->x, "expression nested too deeply");
    jnode *a = parse_or(p);
    if (is_ident(p, 0, "if")) {
        p->cur++;
        jnode *t = mk(p, N_COND);
        t->b = a;
        t->a = parse_or(p);
        if (is_ident(p, 0, "else")) {
            p->cur++;
            t->c = parse_expr(p);
        }
        a = t;
    }
    p->x->depth--;
    return a;
}

static jnode *parse_primary(parser *p)
{
    jtok *t = peek(p, 0);
    if (!t) jx_fail(p->x, "unexpected end of template");
    if (++p->x->depth > JINJA_MAX_DEPTH) jx_fail(p->x, "expression nested too deeply");
    jnode *nd = NULL;
    p->cur++;
    switch (t->type) {
    case T_NUM: {
        char buf[64];
        size_t l = t->n < 63 ? t->n : 63;
        memcpy(buf, t->s, l);
        buf[l] = 0;
        if (memchr(buf, '.', l)) {
            nd = mk(p, N_FLOAT);
            nd->f = strtod(buf, NULL);
        } else {
            nd = mk(p, N_INT);
            nd->i = strtoll(buf, NULL, 10);
        }
        break;
    }
    case T_STR: {
        /* adjacent string literals concatenate */
        strbuf sb = STRBUF_INIT;
        sb_append(&sb, t->s, t->n);
        while (is_type(p, T_STR)) {
            jtok *u = peek(p, 0);
            sb_append(&sb, u->s, u->n);
            p->cur++;
        }
        jstr *s = jx_str(p->x, sb.buf ? sb.buf : "", sb.len);
        sb_free(&sb);
        nd = mk(p, N_STR);
        nd->s = s->s;
        nd->sn = s->n;
        break;
    }
    case T_IDENT:
        if ((t->n == 4 && (!memcmp(t->s, "true", 4) || !memcmp(t->s, "True", 4))) ||
            (t->n == 5 && (!memcmp(t->s, "false", 5) || !memcmp(t->s, "False", 5)))) {
            nd = mk(p, N_BOOL);
            nd->i = t->n == 4;
        } else if (t->n == 4 && (!memcmp(t->s, "none", 4) || !memcmp(t->s, "None", 4))) {
            nd = mk(p, N_NONE);
        } else {
            nd = mk(p, N_IDENT);
            nd->s = t->s;
            nd->sn = t->n;
        }
        break;
    case T_LPAREN:
        nd = parse_seq(p, 0);
        expect(p, T_RPAREN, "')'");
        break;
    case T_LBRACK:
        nd = mk(p, N_LIST);
        while (!is_type(p, T_RBRACK)) {
            if (!peek(p, 0)) jx_fail(p->x, "missing ']'");
            kid(p, nd, parse_expr(p));
            if (is_type(p, T_COMMA)) p->cur++;
            else if (!is_type(p, T_RBRACK)) jx_fail(p->x, "expected ',' or ']'");
        }
        p->cur++;
        break;
    case T_LBRACE:
        nd = mk(p, N_DICT);
        while (!is_type(p, T_RBRACE)) {
            if (!peek(p, 0)) jx_fail(p->x, "missing '}'");
            kid(p, nd, parse_expr(p));
            expect(p, T_COLON, "':' in a dict literal");
            kid(p, nd, parse_expr(p));
            if (is_type(p, T_COMMA)) p->cur++;
            else if (!is_type(p, T_RBRACE)) jx_fail(p->x, "expected ',' or '}'");
        }
        p->cur++;
        break;
    default:
        jx_fail(p->x, "unexpected '%.*s'", (int)(t->n > 16 ? 16 : t->n), t->s);
    }
    p->x->depth--;
    return nd;
}

static jnode *parse_if(parser *p)
{
    jnode *nd = mk(p, N_IF);
    nd->a = parse_expr(p);
    close_stmt(p);
    nd->b = body_until(p, "elif", "else", "endif");
    if (is_stmt(p, "elif")) {
        p->cur += 2;
        jnode *alt = mk(p, N_BLOCK);
        kid(p, alt, parse_if(p));
        nd->c = alt;
    } else if (is_stmt(p, "else")) {
        p->cur += 2;
        close_stmt(p);
        nd->c = body_until(p, "endif", NULL, NULL);
    }
    return nd;
}

static jnode *parse_stmt(parser *p)
{
    expect(p, T_OPEN_STMT, "'{%'");
    jtok *t = peek(p, 0);
    if (!t || t->type != T_IDENT) jx_fail(p->x, "expected a statement name after '{%%'");
    p->cur++;
    jnode *nd;
#define NAMED(w) (t->n == strlen(w) && !memcmp(t->s, w, t->n))
    if (NAMED("set")) {
        nd = mk(p, N_SET);
        nd->a = parse_seq(p, 0);
        if (is_type(p, T_EQUALS)) {
            p->cur++;
            nd->b = parse_seq(p, 0);
        } else {
            close_stmt(p);
            nd->c = body_until(p, "endset", NULL, NULL);
            p->cur++;
            expect_ident(p, "endset");
        }
        close_stmt(p);
    } else if (NAMED("if")) {
        nd = parse_if(p);
        end_stmt(p, "endif");
    } else if (NAMED("for")) {
        nd = mk(p, N_FOR);
        nd->c = parse_seq(p, 1);
        if (nd->c->kind != N_IDENT && nd->c->kind != N_TUPLE) jx_fail(p->x, "expected a loop variable");
        expect_ident(p, "in");
        nd->a = parse_expr(p);
        close_stmt(p);
        nd->b = body_until(p, "endfor", "else", NULL);
        if (is_stmt(p, "else")) {
            p->cur += 2;
            close_stmt(p);
            nd->d = body_until(p, "endfor", NULL, NULL);
        }
        end_stmt(p, "endfor");
    } else if (NAMED("macro")) {
        nd = mk(p, N_MACRO);
        jnode *name = parse_primary(p);
        if (name->kind != N_IDENT) jx_fail(p->x, "expected a macro name");
        nd->s = name->s;
        nd->sn = name->sn;
        nd->a = parse_args(p);
        close_stmt(p);
        nd->b = body_until(p, "endmacro", NULL, NULL);
        end_stmt(p, "endmacro");
    } else if (NAMED("call")) {
        nd = mk(p, N_CALLBLK);
        if (is_type(p, T_LPAREN)) nd->c = parse_args(p);
        jnode *callee = parse_primary(p);
        if (callee->kind != N_IDENT) jx_fail(p->x, "expected a macro name after 'call'");
        jnode *call = mk(p, N_CALL);
        call->a = callee;
        call->b = parse_args(p);
        nd->a = call;
        close_stmt(p);
        nd->b = body_until(p, "endcall", NULL, NULL);
        end_stmt(p, "endcall");
    } else if (NAMED("break") || NAMED("continue")) {
        nd = mk(p, NAMED("break") ? N_BREAK : N_CONTINUE);
        close_stmt(p);
    } else if (NAMED("filter")) {
        nd = mk(p, N_FILTERBLK);
        jnode *f = parse_primary(p);
        if (f->kind != N_IDENT) jx_fail(p->x, "expected a filter name");
        nd->s = f->s;
        nd->sn = f->sn;
        if (is_type(p, T_LPAREN)) nd->a = parse_args(p);
        close_stmt(p);
        nd->b = body_until(p, "endfilter", NULL, NULL);
        end_stmt(p, "endfilter");
    } else if (NAMED("generation")) {
        /* transformers' assistant-mask tag: renders its body unchanged */
        close_stmt(p);
        nd = body_until(p, "endgeneration", NULL, NULL);
        end_stmt(p, "endgeneration");
    } else {
        jx_fail(p->x, "unknown statement '%.*s'", (int)(t->n > 32 ? 32 : t->n), t->s);
    }
#undef NAMED
    return nd;
}

static jnode *parse_any(parser *p)
{
    jtok *t = peek(p, 0);
    switch (t->type) {
    case T_COMMENT:
        p->cur++;
        return mk(p, N_BLOCK);
    case T_TEXT: {
        p->cur++;
        jnode *nd = mk(p, N_TEXT);
        nd->s = t->s;
        nd->sn = t->n;
        return nd;
    }
    case T_OPEN_STMT: {
        enter(p);
        jnode *nd = parse_stmt(p);
        leave(p);
        return nd;
    }
    case T_OPEN_EXPR: {
        p->cur++;
        jnode *nd = mk(p, N_OUT);
        nd->a = parse_expr(p);
        expect(p, T_CLOSE_EXPR, "'}}'");
        return nd;
    }
    default:
        jx_fail(p->x, "unexpected '%.*s'", (int)(t->n > 16 ? 16 : t->n), t->s);
    }
    return NULL;
}

struct jinja_tmpl {
    ablk_list arena;
    jnode *root;
    char *src;   /* the template after preprocessing (tokens point into it) */
};

/* line:col of a byte offset of the preprocessed text (close to the
 * original: only stripped whitespace and newlines differ). */
static void where(const char *s, size_t n, size_t at, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < at && i < n; i++) {
        if (s[i] == '\n') {
            (*line)++;
            *col = 1;
        } else (*col)++;
    }
}

int jinja_parse(const char *src, size_t n, jinja_tmpl **out, dlm_err *e)
{
    *out = NULL;
    jinja_tmpl *t = calloc(1, sizeof *t);
    if (!t) return err_set(e, "OOMError", "out of memory");
    jx x;
    memset(&x, 0, sizeof x);
    x.arena_limit = JINJA_MAX_BYTES;
    jlex L = {0};
    parser P = {&x, &L, 0};
    /* read after a longjmp: volatile */
    size_t volatile pn = 0;
    char *volatile pre = NULL;
    if (setjmp(x.jb)) {
        int line = 0, col = 0;
        jtok *tk = L.n ? &L.t[P.cur < L.n ? P.cur : L.n - 1] : NULL;
        if (pre && tk) where(pre, pn, tk->at, &line, &col);
        if (line) err_at(e, "TemplateError", "chat_template", line, col, "%s", x.msg);
        else err_set(e, "TemplateError", "chat template: %s", x.msg);
        err_hint(e, "the template uses Jinja that dlm's interpreter does not support or is malformed; see docs/chat-templates.md");
        jx_arena_free((ablk_list *)&x.arena);
        free(t);
        return -1;
    }
    size_t plen;
    pre = preprocess(&x, src, n, &plen);
    pn = plen;
    lex(&x, &L, pre, plen);
    jnode *root = jx_alloc(&x, sizeof *root);
    root->kind = N_BLOCK;
    while (P.cur < L.n) kid(&P, root, parse_any(&P));
    t->arena = (ablk_list)x.arena;
    t->root = root;
    t->src = pre;
    *out = t;
    return 0;
}

void jinja_free(jinja_tmpl *t)
{
    if (!t) return;
    jx_arena_free(&t->arena);
    free(t);
}

int jinja_render(const jinja_tmpl *t, const json_t *vars, strbuf *out, dlm_err *e)
{
    return jx_render(t->root, vars, out, e);
}
