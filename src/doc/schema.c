/* schema — frontmatter validation, as the original's pydantic models do it.
 *
 * Every object forbids unknown keys; every field has the original's type,
 * default and range; scalars are coerced the way pydantic's lax mode does
 * ("8" and 8.0 are the int 8, "2e-4" is a float, "yes" is a bool). Errors
 * are collected like pydantic's (fields in declaration order, then unknown
 * keys) and flattened to "<dotted.loc>: <msg>; ..." with pydantic's exact
 * wording, so messages read like the original's. Where the original says
 * only `<path>:2`, dlm reports the line:col of the first offending key.
 *
 * The dlm extensions (loss_on, packing, ...) are validated with the same
 * machinery; see docs/dlm-format.md. */
#include "doc/doc_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "doc/pystr.h"
#include "util/ulid.h"

#define MAX_ERRORS 30

const char *const doc_adapter_kind_names[] = {"lora", "qlora", "dora", NULL};
const char *const doc_optimizer_names[] = {"adamw_torch", "adamw_bnb_8bit", "paged_adamw_8bit",
                                           "galore_adamw", "galore_adamw_8bit", NULL};
const char *const doc_lr_scheduler_names[] = {"cosine", "linear", "constant", "cosine_min_lr", NULL};
const char *const doc_precision_names[] = {NULL, "bf16", "fp16", "fp32", NULL};
const char *const doc_pref_method_names[] = {"dpo", "orpo", NULL};
const char *const doc_pref_loss_names[] = {"sigmoid", "hinge", "ipo", NULL};
const char *const doc_pref_reference_names[] = {"pre_adapter", "base", NULL};
const char *const doc_cpt_schedule_names[] = {"auto", "dapt", "sft", NULL};
const char *const doc_sources_policy_names[] = {"permissive", "strict", NULL};
const char *const doc_quant_names[] = {"Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", NULL};
const char *const doc_loss_on_names[] = {"completion", "all", NULL};
const char *const doc_recompute_names[] = {"auto", "on", "off", NULL};

/* Literal order as the original declares it (messages list them so). */
static const char *const pref_reference_order[] = {"base", "pre_adapter", NULL};

/* ---- error collection ------------------------------------------------------- */

typedef struct vctx {
    const char *path;
    strbuf msg;
    int nerr;
    int line, col;
    char loc[512];
    size_t loc_len;
    char hint[600];     /* "did you mean" of the first unknown key that has one */
} vctx;

static size_t loc_push(vctx *v, const char *part)
{
    size_t mark = v->loc_len;
    int n = snprintf(v->loc + v->loc_len, sizeof v->loc - v->loc_len, "%s%s",
                     v->loc_len ? "." : "", part);
    if (n > 0) v->loc_len = strlen(v->loc);
    return mark;
}

static size_t loc_push_node(vctx *v, const ynode *key)
{
    strbuf sb = STRBUF_INIT;
    ynode_pystr(key, &sb);
    size_t m = loc_push(v, sb_str(&sb));
    sb_free(&sb);
    return m;
}

static size_t loc_push_int(vctx *v, size_t i)
{
    char b[32];
    snprintf(b, sizeof b, "%zu", i);
    return loc_push(v, b);
}

static void loc_pop(vctx *v, size_t mark)
{
    v->loc_len = mark;
    v->loc[mark] = 0;
}

/* Record "<loc>[.suffix]: <msg>"; at locates it (NULL = line 2). */
static void verr(vctx *v, const ynode *at, const char *suffix, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void verr(vctx *v, const ynode *at, const char *suffix, const char *fmt, ...)
{
    v->nerr++;
    if (v->nerr > MAX_ERRORS) {
        if (v->nerr == MAX_ERRORS + 1) sb_puts(&v->msg, "; ...");
        return;
    }
    if (v->nerr == 1) {
        v->line = at ? at->line : 2;
        v->col = at ? at->col : 0;
    } else sb_puts(&v->msg, "; ");
    const char *loc = v->loc_len ? v->loc : "<root>";
    if (suffix) sb_printf(&v->msg, "%s%s%s: ", v->loc_len ? loc : "", v->loc_len ? "." : "", suffix);
    else sb_printf(&v->msg, "%s: ", loc);
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&v->msg, fmt, ap);
    va_end(ap);
}

/* ---- scalar coercions (pydantic lax mode) ---------------------------------- */

/* pydantic's int-from-str: stripped, sign, digits with single '_' between
 * digits, optionally ".0..." (only zeros after the dot). */
static int pyd_int_str(const char *s, size_t n, int64_t *out, int *big, double *approx)
{
    const char *b = s, *e = s + n;
    py_strip(&b, &e);
    size_t len = (size_t)(e - b), i = 0;
    int neg = 0;
    if (i < len && (b[i] == '+' || b[i] == '-')) { neg = b[i] == '-'; i++; }
    if (i >= len || b[i] < '0' || b[i] > '9') return -1;
    uint64_t v = 0;
    int over = 0;
    double ap = 0;
    for (; i < len; i++) {
        char c = b[i];
        if (c >= '0' && c <= '9') {
            unsigned d = (unsigned)(c - '0');
            if (v > (UINT64_MAX - d) / 10) over = 1;
            else v = v * 10 + d;
            ap = ap * 10 + d;
            continue;
        }
        if (c == '_' && i + 1 < len && b[i + 1] >= '0' && b[i + 1] <= '9' && b[i - 1] != '_') continue;
        if (c == '.') {
            size_t j = i + 1;
            if (j >= len) return -1;
            for (; j < len; j++)
                if (b[j] != '0') return -1;
            break;
        }
        return -1;
    }
    if (!over && v > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) over = 1;
    *big = over;
    *approx = neg ? -ap : ap;
    *out = over ? (neg ? INT64_MIN : INT64_MAX) : neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* pydantic's float-from-str. With '_' present the string is not stripped
 * (pydantic-core rejects "  -1_0  " but accepts "\t1\n"). */
static int pyd_float_str(const char *s, size_t n, double *out)
{
    char buf[128];
    const char *b = s, *e = s + n;
    int has_us = memchr(s, '_', n) != NULL;
    if (!has_us) py_strip(&b, &e);
    size_t len = (size_t)(e - b), m = 0;
    if (len == 0 || len >= sizeof buf) return -1;
    for (size_t i = 0; i < len; i++) {
        if (b[i] == '_') {
            if (i == 0 || i + 1 >= len || b[i - 1] == '_' || b[i + 1] == '_') return -1;
            continue;
        }
        buf[m++] = b[i];
    }
    buf[m] = 0;
    size_t i = 0;
    int neg = 0;
    if (buf[i] == '+' || buf[i] == '-') { neg = buf[i] == '-'; i++; }
    const char *p = buf + i;
    if (!strcasecmp(p, "inf") || !strcasecmp(p, "infinity")) { *out = neg ? -INFINITY : INFINITY; return 0; }
    if (!strcasecmp(p, "nan")) { *out = NAN; return 0; }
    size_t j = 0, dig = 0;
    while (p[j] >= '0' && p[j] <= '9') { j++; dig++; }
    if (p[j] == '.') {
        j++;
        while (p[j] >= '0' && p[j] <= '9') { j++; dig++; }
    }
    if (!dig) return -1;
    if (p[j] == 'e' || p[j] == 'E') {
        j++;
        if (p[j] == '+' || p[j] == '-') j++;
        size_t ed = 0;
        while (p[j] >= '0' && p[j] <= '9') { j++; ed++; }
        if (!ed) return -1;
    }
    if (p[j]) return -1;
    *out = strtod(buf, NULL);
    return 0;
}

/* Coerce to int. On error reports at `at` with loc suffix sfx. */
static int c_int(vctx *v, const ynode *n, const ynode *at, const char *sfx, int64_t *out, int *big, double *approx)
{
    *big = 0;
    switch (n->kind) {
    case YN_BOOL: *out = n->b; *approx = n->b; return 0;
    case YN_INT:
        *out = n->i;
        *big = n->big;
        *approx = n->big ? strtod(n->bigtext, NULL) : (double)n->i;
        return 0;
    case YN_FLOAT:
        if (!isfinite(n->f)) { verr(v, at, sfx, "Input should be a finite number"); return -1; }
        if (n->f != floor(n->f)) {
            verr(v, at, sfx, "Input should be a valid integer, got a number with a fractional part");
            return -1;
        }
        *approx = n->f;
        if (n->f >= 9223372036854775808.0 || n->f < -9223372036854775808.0) {
            *big = 1;
            *out = n->f > 0 ? INT64_MAX : INT64_MIN;
        } else *out = (int64_t)n->f;
        return 0;
    case YN_STR:
        if (pyd_int_str(n->text, n->len, out, big, approx)) {
            verr(v, at, sfx, "Input should be a valid integer, unable to parse string as an integer");
            return -1;
        }
        return 0;
    default:
        verr(v, at, sfx, "Input should be a valid integer");
        return -1;
    }
}

static int c_float(vctx *v, const ynode *n, const ynode *at, double *out)
{
    switch (n->kind) {
    case YN_BOOL: *out = n->b; return 0;
    case YN_INT: *out = n->big ? strtod(n->bigtext, NULL) : (double)n->i; return 0;
    case YN_FLOAT: *out = n->f; return 0;
    case YN_STR:
        if (pyd_float_str(n->text, n->len, out)) {
            verr(v, at, NULL, "Input should be a valid number, unable to parse string as a number");
            return -1;
        }
        return 0;
    default:
        verr(v, at, NULL, "Input should be a valid number");
        return -1;
    }
}

static int c_bool(vctx *v, const ynode *n, const ynode *at, int *out)
{
    static const char *const t[] = {"1", "on", "t", "true", "y", "yes"};
    static const char *const f[] = {"0", "off", "f", "false", "n", "no"};
    switch (n->kind) {
    case YN_BOOL: *out = n->b; return 0;
    case YN_INT:
        if (!n->big && (n->i == 0 || n->i == 1)) { *out = (int)n->i; return 0; }
        if (n->big) break;
        verr(v, at, NULL, "Input should be a valid boolean, unable to interpret input");
        return -1;
    case YN_FLOAT:
        if (n->f == 0.0 || n->f == 1.0) { *out = n->f == 1.0; return 0; }
        break;
    case YN_STR:
        for (int k = 0; k < 6; k++) {
            if (strlen(t[k]) == n->len && !strncasecmp(n->text, t[k], n->len)) { *out = 1; return 0; }
            if (strlen(f[k]) == n->len && !strncasecmp(n->text, f[k], n->len)) { *out = 0; return 0; }
        }
        verr(v, at, NULL, "Input should be a valid boolean, unable to interpret input");
        return -1;
    default: break;
    }
    verr(v, at, NULL, "Input should be a valid boolean");
    return -1;
}

static void fmt_num(char *buf, size_t cap, double d)
{
    snprintf(buf, cap, "%g", d);
}

/* Integer field with optional bounds. */
typedef struct icons { int has_ge, has_le; int64_t ge, le; } icons;

static int f_int_node(vctx *v, const ynode *n, const ynode *at, int64_t *dst, icons c)
{
    int64_t x;
    int big;
    double ap;
    if (c_int(v, n, at, NULL, &x, &big, &ap)) return -1;
    /* pydantic checks the upper bound first (a NaN-like order), then the lower. */
    if (c.has_le && (big ? ap > 0 : x > c.le)) {
        verr(v, at, NULL, "Input should be less than or equal to %lld", (long long)c.le);
        return -1;
    }
    if (c.has_ge && (big ? ap < 0 : x < c.ge)) {
        verr(v, at, NULL, "Input should be greater than or equal to %lld", (long long)c.ge);
        return -1;
    }
    if (big) {
        /* Python ints are unbounded; dlm stores 64-bit ones. */
        verr(v, at, NULL, "Input should be %s than or equal to %lld", ap > 0 ? "less" : "greater",
             ap > 0 ? (long long)INT64_MAX : (long long)INT64_MIN);
        return -1;
    }
    *dst = x;
    return 0;
}

typedef struct fcons { int has_gt, has_ge, has_le; double gt, ge, le; } fcons;

static int f_float_node(vctx *v, const ynode *n, const ynode *at, double *dst, fcons c)
{
    double x;
    char b[32];
    if (c_float(v, n, at, &x)) return -1;
    if (c.has_le && !(x <= c.le)) {
        fmt_num(b, sizeof b, c.le);
        verr(v, at, NULL, "Input should be less than or equal to %s", b);
        return -1;
    }
    if (c.has_ge && !(x >= c.ge)) {
        fmt_num(b, sizeof b, c.ge);
        verr(v, at, NULL, "Input should be greater than or equal to %s", b);
        return -1;
    }
    if (c.has_gt && !(x > c.gt)) {
        fmt_num(b, sizeof b, c.gt);
        verr(v, at, NULL, "Input should be greater than %s", b);
        return -1;
    }
    *dst = x;
    return 0;
}

static void lit_expect(strbuf *sb, const char *const *names)
{
    int n = 0;
    while (names[n]) n++;
    for (int i = 0; i < n; i++) {
        if (i) sb_puts(sb, i == n - 1 ? " or " : ", ");
        sb_printf(sb, "'%s'", names[i]);
    }
}

/* Literal field: dst gets the index in `names` (after skip). order lists
 * the values in the original's declaration order for the message. */
static int f_lit_node(vctx *v, const ynode *n, const ynode *at, const char *const *names,
                      const char *const *order, int *dst)
{
    if (n->kind == YN_STR)
        for (int i = 0; names[i]; i++)
            if (strlen(names[i]) == n->len && !memcmp(names[i], n->text, n->len)) { *dst = i; return 0; }
    strbuf sb = STRBUF_INIT;
    lit_expect(&sb, order ? order : names);
    verr(v, at, NULL, "Input should be %s", sb_str(&sb));
    sb_free(&sb);
    return -1;
}

static int f_str_node(vctx *v, const ynode *n, const ynode *at, char **dst, int min_len)
{
    if (n->kind != YN_STR) {
        verr(v, at, NULL, "Input should be a valid string");
        return -1;
    }
    if ((int)n->len < min_len) {
        verr(v, at, NULL, "String should have at least %d character%s", min_len, min_len == 1 ? "" : "s");
        return -1;
    }
    free(*dst);
    *dst = str_ndup(n->text, n->len);
    return *dst ? 0 : -1;
}

/* list[str] / tuple[str, ...]: kind = "list" or "tuple" for the message. */
static int f_strlist_node(vctx *v, const ynode *n, const ynode *at, doc_strlist *dst, const char *kind,
                          const char *sfx)
{
    if (n->kind != YN_SEQ) {
        verr(v, at, sfx, "Input should be a valid %s", kind);
        return -1;
    }
    int bad = 0;
    for (size_t i = 0; i < n->n; i++) {
        if (n->vals[i]->kind == YN_STR) continue;
        size_t m = sfx ? loc_push(v, sfx) : v->loc_len;
        size_t m2 = loc_push_int(v, i);
        verr(v, n->vals[i], NULL, "Input should be a valid string");
        loc_pop(v, m2);
        loc_pop(v, m);
        bad = 1;
    }
    if (bad) return -1;
    for (int i = 0; i < dst->n; i++) free(dst->v[i]);
    free(dst->v);
    dst->v = NULL;
    dst->n = 0;
    if (n->n) {
        dst->v = calloc(n->n, sizeof *dst->v);
        if (!dst->v) return -1;
        for (size_t i = 0; i < n->n; i++) {
            dst->v[i] = str_ndup(n->vals[i]->text, n->vals[i]->len);
            if (!dst->v[i]) return -1;
            dst->n++;
        }
    }
    return 0;
}

/* ---- model helpers ------------------------------------------------------------ */

/* A nested model value must be a mapping. */
static int is_model(vctx *v, const ynode *n, const ynode *at, const char *cls)
{
    if (n->kind == YN_MAP) return 1;
    verr(v, at, NULL, "Input should be a valid dictionary or instance of %s", cls);
    return 0;
}

static void extras(vctx *v, const ynode *map, const char *const *fields)
{
    for (size_t i = 0; i < map->n; i++) {
        const ynode *k = map->keys[i];
        int known = 0;
        if (k->kind == YN_STR)
            for (int f = 0; fields[f]; f++)
                if (ynode_is_str(k, fields[f])) { known = 1; break; }
        if (known) continue;
        /* pydantic-core names a bool key by its int value here */
        size_t m = k->kind == YN_BOOL ? loc_push(v, k->b ? "1" : "0") : loc_push_node(v, k);
        if (k->kind == YN_STR) {
            verr(v, k, NULL, "Extra inputs are not permitted");
            char key[128];
            snprintf(key, sizeof key, "%.*s", (int)(k->len < 127 ? k->len : 127), k->text);
            const char *best = v->hint[0] ? NULL : str_closest(key, fields);
            if (best) /* v->loc[0..m) is the enclosing object's path */
                snprintf(v->hint, sizeof v->hint, "did you mean '%.*s%s%s'? (docs/dlm-format.md lists the keys)",
                         (int)m, v->loc, m ? "." : "", best);
        } else verr(v, k, NULL, "Keys should be strings");
        loc_pop(v, m);
    }
}

/* Field fetch + loc push; returns the value or NULL (absent). */
#define FIELD(map, name)                                                      \
    for (ynode *_k = NULL, *val = ymap_get((map), (name), &_k); val; val = NULL) \
        for (size_t _m = loc_push(v, (name)), _once = 1; _once; _once = 0, loc_pop(v, _m))

/* Shorthands used inside FIELD bodies: `val` is the value, `_k` the key. */
#define AT _k

static icons GE(int64_t lo) { icons c = {1, 0, lo, 0}; return c; }
static icons GELE(int64_t lo, int64_t hi) { icons c = {1, 1, lo, hi}; return c; }
static icons NOI(void) { icons c = {0, 0, 0, 0}; return c; }

static fcons F_GT(double gt) { fcons c = {1, 0, 0, gt, 0, 0}; return c; }
static fcons F_GE(double ge) { fcons c = {0, 1, 0, 0, ge, 0}; return c; }
static fcons F_GELE(double ge, double le) { fcons c = {0, 1, 1, 0, ge, le}; return c; }
static fcons F_GTLE(double gt, double le) { fcons c = {1, 0, 1, gt, 0, le}; return c; }

static void set_int(int *dst, int64_t x) { *dst = (int)x; }

/* "auto" | int (micro_batch_size, grad_accum, threads): 0 = auto. A union:
 * when neither branch matches, both branches' errors are reported. */
static void f_auto_int(vctx *v, const ynode *val, const ynode *at, int64_t *dst)
{
    if (ynode_is_str(val, "auto")) { *dst = 0; return; }
    int64_t x = 0;
    int big = 0;
    double ap = 0;
    const char *int_err = NULL;
    switch (val->kind) {
    case YN_BOOL: x = val->b; ap = (double)x; break;
    case YN_INT: x = val->i; big = val->big; ap = big ? strtod(val->bigtext, NULL) : (double)x; break;
    case YN_FLOAT:
        if (!isfinite(val->f)) { int_err = "Input should be a finite number"; break; }
        if (val->f != floor(val->f)) { int_err = "Input should be a valid integer, got a number with a fractional part"; break; }
        ap = val->f;
        big = fabs(val->f) >= 9223372036854775808.0;
        x = big ? (val->f > 0 ? INT64_MAX : INT64_MIN) : (int64_t)val->f;
        break;
    case YN_STR:
        if (pyd_int_str(val->text, val->len, &x, &big, &ap))
            int_err = "Input should be a valid integer, unable to parse string as an integer";
        break;
    default: int_err = "Input should be a valid integer"; break;
    }
    if (int_err) {
        verr(v, at, "literal['auto']", "Input should be 'auto'");
        verr(v, at, "int", "%s", int_err);
        return;
    }
    if (big && ap > 0) {
        verr(v, at, NULL, "Input should be less than or equal to %lld", (long long)INT64_MAX);
        return;
    }
    if (big || x < 1) {
        if (big) verr(v, at, NULL, "Value error, must be a positive int or 'auto', got %s", val->bigtext ? val->bigtext : "a huge negative number");
        else verr(v, at, NULL, "Value error, must be a positive int or 'auto', got %lld", (long long)x);
        return;
    }
    *dst = x;
}

/* "auto" | list[str] (target_modules). */
static void f_target_modules(vctx *v, const ynode *val, const ynode *at, int *is_auto, doc_strlist *dst)
{
    if (ynode_is_str(val, "auto")) {
        *is_auto = 1;
        return;
    }
    if (val->kind == YN_SEQ) {
        int ok = 1;
        for (size_t i = 0; i < val->n; i++)
            if (val->vals[i]->kind != YN_STR) ok = 0;
        if (ok) {
            if (!f_strlist_node(v, val, at, dst, "list", NULL)) *is_auto = 0;
            return;
        }
        verr(v, at, "literal['auto']", "Input should be 'auto'");
        f_strlist_node(v, val, at, dst, "list", "list[str]");
        return;
    }
    verr(v, at, "literal['auto']", "Input should be 'auto'");
    verr(v, at, "list[str]", "Input should be a valid list");
}

/* ---- models ------------------------------------------------------------------- */

static const char *const ADAPTER_FIELDS[] = {"adapter", "lora_r", "lora_alpha", "lora_dropout",
                                             "target_modules", "learning_rate", NULL};

static int adapter_name_ok(const char *s, size_t n)
{
    if (n < 1 || n > 32 || s[0] < 'a' || s[0] > 'z') return 0;
    for (size_t i = 1; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return 0;
    }
    return 1;
}

int doc_adapter_name_ok(const char *s);
int doc_adapter_name_ok(const char *s) { return adapter_name_ok(s, strlen(s)); }

static void v_adapter_cfg(vctx *v, const ynode *map, doc_adapter_cfg *a)
{
    int64_t x;
    int k;
    FIELD(map, "adapter") if (!f_lit_node(v, val, AT, doc_adapter_kind_names, NULL, &k)) a->adapter = (doc_adapter_kind)k;
    FIELD(map, "lora_r") if (!f_int_node(v, val, AT, &x, GELE(1, 256))) set_int(&a->lora_r, x);
    FIELD(map, "lora_alpha") f_int_node(v, val, AT, &a->lora_alpha, GE(1));
    FIELD(map, "lora_dropout") f_float_node(v, val, AT, &a->lora_dropout, F_GELE(0.0, 0.5));
    FIELD(map, "target_modules") f_target_modules(v, val, AT, &a->target_modules_auto, &a->target_modules);
    FIELD(map, "learning_rate") f_float_node(v, val, AT, &a->learning_rate, F_GT(0.0));
    extras(v, map, ADAPTER_FIELDS);
}

static const char *const SOURCE_FIELDS[] = {"path", "include", "exclude", "max_bytes_per_file", "max_files", NULL};

static void v_source(vctx *v, const ynode *map, const ynode *at, doc_source *s)
{
    ynode *pk;
    if (!ymap_get(map, "path", &pk)) {
        size_t m = loc_push(v, "path");
        verr(v, at, NULL, "Field required");
        loc_pop(v, m);
    }
    FIELD(map, "path") f_str_node(v, val, AT, &s->path, 1);
    FIELD(map, "include") f_strlist_node(v, val, AT, &s->include, "tuple", NULL);
    FIELD(map, "exclude") f_strlist_node(v, val, AT, &s->exclude, "tuple", NULL);
    FIELD(map, "max_bytes_per_file") if (val->kind != YN_NULL) f_int_node(v, val, AT, &s->max_bytes_per_file, GE(1));
    FIELD(map, "max_files") if (val->kind != YN_NULL) f_int_node(v, val, AT, &s->max_files, GE(1));
    extras(v, map, SOURCE_FIELDS);
}

static const char *const PREF_FIELDS[] = {"enabled", "method", "hyperparams", "loss_type", "reference", NULL};
static const char *const HYPER_FIELDS[] = {"beta", "alpha", "learning_rate", "num_epochs", NULL};
static const char *const CPT_FIELDS[] = {"schedule", "embed_warmup_steps", NULL};
static const char *const GATE_FIELDS[] = {"enabled", "hidden_proj_dim", "steps", "lr", "cold_start_floor",
                                          "entropy_lambda", NULL};
static const char *const CACHE_FIELDS[] = {"enabled", "max_bytes", "prune_older_than_days", NULL};
static const char *const AUDIO_FIELDS[] = {"auto_resample", NULL};
static const char *const REPLAY_FIELDS[] = {"max_bytes", "enabled", NULL};

static void v_hyper(vctx *v, const ynode *h, doc_training *t)
{
    FIELD(h, "beta") f_float_node(v, val, AT, &t->preference.hyperparams.beta, F_GELE(0.0, 1.0));
    FIELD(h, "alpha") f_float_node(v, val, AT, &t->preference.hyperparams.alpha, F_GELE(0.0, 1.0));
    FIELD(h, "learning_rate") f_float_node(v, val, AT, &t->preference.hyperparams.learning_rate, F_GT(0.0));
    FIELD(h, "num_epochs") f_int_node(v, val, AT, &t->preference.hyperparams.num_epochs, GE(1));
    extras(v, h, HYPER_FIELDS);
}

static void v_cpt(vctx *v, const ynode *c, doc_training *t)
{
    int k;
    FIELD(c, "schedule") if (!f_lit_node(v, val, AT, doc_cpt_schedule_names, NULL, &k)) t->cpt.schedule = (doc_cpt_schedule)k;
    FIELD(c, "embed_warmup_steps") f_int_node(v, val, AT, &t->cpt.embed_warmup_steps, GE(0));
    extras(v, c, CPT_FIELDS);
}

static void v_cache(vctx *v, const ynode *c, doc_training *t)
{
    FIELD(c, "enabled") c_bool(v, val, AT, &t->cache.enabled);
    FIELD(c, "max_bytes") f_int_node(v, val, AT, &t->cache.max_bytes, GE(1));
    FIELD(c, "prune_older_than_days") f_int_node(v, val, AT, &t->cache.prune_older_than_days, GE(1));
    extras(v, c, CACHE_FIELDS);
}

static void v_audio(vctx *v, const ynode *c, doc_training *t)
{
    FIELD(c, "auto_resample") c_bool(v, val, AT, &t->audio.auto_resample);
    extras(v, c, AUDIO_FIELDS);
}

static void v_replay(vctx *v, const ynode *c, doc_training *t)
{
    FIELD(c, "max_bytes") f_int_node(v, val, AT, &t->replay.max_bytes, GE(1));
    FIELD(c, "enabled") c_bool(v, val, AT, &t->replay.enabled);
    extras(v, c, REPLAY_FIELDS);
}

static void v_preference(vctx *v, const ynode *map, doc_training *t)
{
    int k;
    FIELD(map, "enabled") if (!c_bool(v, val, AT, &t->preference.enabled)) t->preference.enabled_explicit = 1;
    FIELD(map, "method") if (!f_lit_node(v, val, AT, doc_pref_method_names, NULL, &k)) t->preference.method = (doc_pref_method)k;
    FIELD(map, "hyperparams") if (is_model(v, val, AT, "PreferenceHyperparams")) v_hyper(v, val, t);
    FIELD(map, "loss_type") if (!f_lit_node(v, val, AT, doc_pref_loss_names, NULL, &k)) t->preference.loss_type = (doc_pref_loss)k;
    FIELD(map, "reference") if (!f_lit_node(v, val, AT, doc_pref_reference_names, pref_reference_order, &k))
        t->preference.reference = (doc_pref_reference)k;
    extras(v, map, PREF_FIELDS);
}

static void v_gate(vctx *v, const ynode *map, doc_training *t)
{
    int64_t x;
    FIELD(map, "enabled") c_bool(v, val, AT, &t->gate.enabled);
    FIELD(map, "hidden_proj_dim") if (!f_int_node(v, val, AT, &x, GELE(8, 2048))) set_int(&t->gate.hidden_proj_dim, x);
    FIELD(map, "steps") if (!f_int_node(v, val, AT, &x, GELE(1, 10000))) set_int(&t->gate.steps, x);
    FIELD(map, "lr") f_float_node(v, val, AT, &t->gate.lr, F_GTLE(0.0, 1.0));
    FIELD(map, "cold_start_floor") if (!f_int_node(v, val, AT, &x, GELE(1, 1024))) set_int(&t->gate.cold_start_floor, x);
    FIELD(map, "entropy_lambda") f_float_node(v, val, AT, &t->gate.entropy_lambda, F_GELE(0.0, 1.0));
    extras(v, map, GATE_FIELDS);
}

static const char *const TRAINING_FIELDS[] = {
    "adapter", "lora_r", "lora_alpha", "lora_dropout", "target_modules", "sequence_len",
    "micro_batch_size", "grad_accum", "learning_rate", "num_epochs", "optimizer", "lr_scheduler",
    "warmup_ratio", "precision", "seed", "preference", "cpt", "gate", "cache", "audio", "adapters",
    "sources", "sources_policy",
    /* dlm extensions */
    "loss_on", "packing", "save_steps", "weight_decay", "min_lr_ratio", "replay", "recompute", "threads",
    "val_frac", "multi_turn", NULL};

static void v_adapters(vctx *v, const ynode *val, const ynode *at, doc_training *t)
{
    if (val->kind == YN_NULL) return;
    if (val->kind != YN_MAP) {
        verr(v, at, NULL, "Input should be a valid dictionary");
        return;
    }
    int before = v->nerr;
    doc_adapter_cfg *arr = calloc(val->n ? val->n : 1, sizeof *arr);
    if (!arr) { verr(v, at, NULL, "out of memory"); return; }
    for (size_t i = 0; i < val->n; i++) {
        const ynode *k = val->keys[i], *cfg = val->vals[i];
        size_t m = loc_push_node(v, k);
        arr[i].adapter = DOC_ADAPTER_LORA;
        arr[i].lora_r = 8;
        arr[i].lora_alpha = 16;
        arr[i].lora_dropout = 0.05;
        arr[i].target_modules_auto = 1;
        arr[i].learning_rate = 2e-4;
        if (k->kind != YN_STR) verr(v, k, "[key]", "Input should be a valid string");
        else arr[i].name = str_ndup(k->text, k->len);
        if (is_model(v, cfg, k, "AdapterConfig")) v_adapter_cfg(v, cfg, &arr[i]);
        loc_pop(v, m);
    }
    if (v->nerr == before) {
        /* field_validator("adapters"): non-empty, names match the grammar. */
        if (val->n == 0)
            verr(v, at, NULL, "Value error, training.adapters: at least one adapter must be declared "
                              "(omit the block entirely for the single-adapter shorthand)");
        for (size_t i = 0; i < val->n && v->nerr == before; i++) {
            const ynode *k = val->keys[i];
            if (!adapter_name_ok(k->text, k->len)) {
                strbuf r = STRBUF_INIT;
                py_repr(&r, k->text, k->len);
                verr(v, k, NULL, "Value error, training.adapters: %s is not a valid adapter name "
                                 "(must match ^[a-z][a-z0-9_]{0,31}$)", sb_str(&r));
                sb_free(&r);
            }
        }
    }
    t->adapters = arr;
    t->n_adapters = (int)val->n;
}

static void v_sources(vctx *v, const ynode *val, const ynode *at, doc_training *t)
{
    if (val->kind == YN_NULL) return;
    if (val->kind != YN_SEQ) {
        verr(v, at, NULL, "Input should be a valid tuple");
        return;
    }
    doc_source *arr = calloc(val->n ? val->n : 1, sizeof *arr);
    if (!arr) { verr(v, at, NULL, "out of memory"); return; }
    t->sources = arr;
    t->n_sources = (int)val->n;
    t->sources_set = 1;
    for (size_t i = 0; i < val->n; i++) {
        const ynode *it = val->vals[i];
        size_t m = loc_push_int(v, i);
        static const char *const def_inc = "**/*";
        arr[i].include.v = calloc(1, sizeof(char *));
        if (arr[i].include.v) {
            arr[i].include.v[0] = strdup(def_inc);
            arr[i].include.n = 1;
        }
        arr[i].line = it->line;
        if (is_model(v, it, it, "SourceDirective")) v_source(v, it, it, &arr[i]);
        loc_pop(v, m);
    }
}

static void v_training(vctx *v, const ynode *map, const ynode *tkey, doc_training *t)
{
    int64_t x;
    int k;
    int before = v->nerr;
    FIELD(map, "adapter") if (!f_lit_node(v, val, AT, doc_adapter_kind_names, NULL, &k)) t->adapter = (doc_adapter_kind)k;
    FIELD(map, "lora_r") if (!f_int_node(v, val, AT, &x, GELE(1, 256))) set_int(&t->lora_r, x);
    FIELD(map, "lora_alpha") f_int_node(v, val, AT, &t->lora_alpha, GE(1));
    FIELD(map, "lora_dropout") f_float_node(v, val, AT, &t->lora_dropout, F_GELE(0.0, 0.5));
    FIELD(map, "target_modules") f_target_modules(v, val, AT, &t->target_modules_auto, &t->target_modules);
    FIELD(map, "sequence_len") if (!f_int_node(v, val, AT, &x, GELE(64, 32768))) set_int(&t->sequence_len, x);
    FIELD(map, "micro_batch_size") f_auto_int(v, val, AT, &t->micro_batch_size);
    FIELD(map, "grad_accum") f_auto_int(v, val, AT, &t->grad_accum);
    FIELD(map, "learning_rate") f_float_node(v, val, AT, &t->learning_rate, F_GT(0.0));
    FIELD(map, "num_epochs") f_int_node(v, val, AT, &t->num_epochs, GE(1));
    FIELD(map, "optimizer") if (!f_lit_node(v, val, AT, doc_optimizer_names, NULL, &k)) {
        t->optimizer = (doc_optimizer)k;
        /* accepted by the original's schema, but GaLore projects the
         * gradients of full fine-tuning; dlm trains LoRA adapters only,
         * where there is no full gradient to project: refuse rather than
         * ignore it */
        if (k == DOC_OPT_GALORE_ADAMW || k == DOC_OPT_GALORE_ADAMW_8BIT)
            verr(v, AT, NULL,
                 "'%s' is not supported by dlm: GaLore projects full fine-tuning gradients and dlm trains LoRA "
                 "adapters only; use 'adamw_torch'", doc_optimizer_names[k]);
    }
    FIELD(map, "lr_scheduler") if (!f_lit_node(v, val, AT, doc_lr_scheduler_names, NULL, &k)) t->lr_scheduler = (doc_lr_scheduler)k;
    FIELD(map, "warmup_ratio") f_float_node(v, val, AT, &t->warmup_ratio, F_GELE(0.0, 0.5));
    FIELD(map, "precision") {
        if (val->kind == YN_NULL) t->precision = DOC_PREC_AUTO;
        else if (!f_lit_node(v, val, AT, doc_precision_names + 1, NULL, &k)) t->precision = (doc_precision)(k + 1);
    }
    FIELD(map, "seed") f_int_node(v, val, AT, &t->seed, NOI());
    FIELD(map, "preference") if (is_model(v, val, AT, "PreferenceConfig")) v_preference(v, val, t);
    FIELD(map, "cpt") if (is_model(v, val, AT, "CptConfig")) v_cpt(v, val, t);
    FIELD(map, "gate") if (is_model(v, val, AT, "GateConfig")) v_gate(v, val, t);
    FIELD(map, "cache") if (is_model(v, val, AT, "CacheConfig")) v_cache(v, val, t);
    FIELD(map, "audio") if (is_model(v, val, AT, "AudioConfig")) v_audio(v, val, t);
    FIELD(map, "adapters") v_adapters(v, val, AT, t);
    FIELD(map, "sources") v_sources(v, val, AT, t);
    FIELD(map, "sources_policy") if (!f_lit_node(v, val, AT, doc_sources_policy_names, NULL, &k))
        t->sources_policy = (doc_sources_policy)k;

    /* dlm extensions */
    FIELD(map, "loss_on") if (!f_lit_node(v, val, AT, doc_loss_on_names, NULL, &k)) t->loss_on = (doc_loss_on)k;
    FIELD(map, "packing") c_bool(v, val, AT, &t->packing);
    FIELD(map, "save_steps") if (val->kind != YN_NULL) f_int_node(v, val, AT, &t->save_steps, GE(1));
    FIELD(map, "weight_decay") f_float_node(v, val, AT, &t->weight_decay, F_GE(0.0));
    FIELD(map, "min_lr_ratio") f_float_node(v, val, AT, &t->min_lr_ratio, F_GELE(0.0, 1.0));
    FIELD(map, "replay") if (is_model(v, val, AT, "ReplayConfig")) v_replay(v, val, t);
    FIELD(map, "recompute") {
        /* YAML 1.1 reads a bare on/off as a boolean; take it as meant. */
        if (val->kind == YN_BOOL) t->recompute = val->b ? DOC_RECOMPUTE_ON : DOC_RECOMPUTE_OFF;
        else if (!f_lit_node(v, val, AT, doc_recompute_names, NULL, &k)) t->recompute = (doc_recompute)k;
    }
    FIELD(map, "threads") f_auto_int(v, val, AT, &t->threads);
    FIELD(map, "val_frac") {
        if (val->kind == YN_NULL) t->val_frac = -1;
        else f_float_node(v, val, AT, &t->val_frac, F_GELE(0.0, 0.5));
    }
    FIELD(map, "multi_turn") f_int_node(v, val, AT, &t->multi_turn, GELE(0, 8));

    extras(v, map, TRAINING_FIELDS);
    if (v->nerr != before) return;

    /* model validators, in the original's order */
    if (t->gate.enabled && t->n_adapters < 2) {
        verr(v, tkey, NULL, "Value error, training.gate.enabled=true requires training.adapters with two or "
                            "more named adapters (a gate over a single adapter has nothing to route between)");
        return;
    }
    if (t->adapters) {
        strbuf drift = STRBUF_INIT;
        const char *names[6];
        int nd = 0;
        if (t->adapter != DOC_ADAPTER_LORA) names[nd++] = "adapter";
        if (t->lora_r != 8) names[nd++] = "lora_r";
        if (t->lora_alpha != 16) names[nd++] = "lora_alpha";
        if (t->lora_dropout != 0.05) names[nd++] = "lora_dropout";
        if (!t->target_modules_auto) names[nd++] = "target_modules";
        if (t->learning_rate != 2e-4) names[nd++] = "learning_rate";
        if (nd) {
            sb_putc(&drift, '[');
            for (int i = 0; i < nd; i++) sb_printf(&drift, "%s'%s'", i ? ", " : "", names[i]);
            sb_putc(&drift, ']');
            verr(v, tkey, NULL, "Value error, training.adapters is declared; flat per-adapter fields %s must "
                                "stay at their defaults (move them into the per-adapter block instead)",
                 sb_str(&drift));
        }
        sb_free(&drift);
    }
}

void doc_training_defaults(doc_training *t)
{
    memset(t, 0, sizeof *t);
    t->adapter = DOC_ADAPTER_LORA;
    t->lora_r = 8;
    t->lora_alpha = 16;
    t->lora_dropout = 0.05;
    t->target_modules_auto = 1;
    t->sequence_len = 2048;
    t->learning_rate = 2e-4;
    t->num_epochs = 3;
    t->warmup_ratio = 0.1;
    t->seed = 42;
    t->preference.hyperparams.beta = 0.1;
    t->preference.hyperparams.alpha = 0.1;
    t->preference.hyperparams.learning_rate = 5e-6;
    t->preference.hyperparams.num_epochs = 1;
    t->gate.hidden_proj_dim = 64;
    t->gate.steps = 200;
    t->gate.lr = 3e-4;
    t->gate.cold_start_floor = 4;
    t->gate.entropy_lambda = 0.01;
    t->cache.enabled = 1;
    t->cache.max_bytes = 10737418240LL;
    t->cache.prune_older_than_days = 90;
    t->packing = 1;
    t->min_lr_ratio = 0.1;
    t->replay.max_bytes = 268435456;
    t->replay.enabled = 1;
    t->val_frac = -1;
    t->multi_turn = DOC_MULTI_TURN_DEFAULT;
}

static void strlist_free(doc_strlist *l)
{
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

void doc_fm_free(doc_frontmatter *fm)
{
    free(fm->base_model);
    free(fm->system_prompt);
    doc_training *t = &fm->training;
    strlist_free(&t->target_modules);
    for (int i = 0; i < t->n_adapters; i++) {
        free(t->adapters[i].name);
        strlist_free(&t->adapters[i].target_modules);
    }
    free(t->adapters);
    for (int i = 0; i < t->n_sources; i++) {
        free(t->sources[i].path);
        strlist_free(&t->sources[i].include);
        strlist_free(&t->sources[i].exclude);
    }
    free(t->sources);
    memset(fm, 0, sizeof *fm);
}

static const char *const TOP_FIELDS[] = {"dlm_id", "dlm_version", "base_model", "training", "export",
                                         "system_prompt", NULL};
static const char *const EXPORT_FIELDS[] = {"default_quant", "default_temperature", "default_top_p", NULL};

static void v_export(vctx *v, const ynode *x, doc_export *ex)
{
    int q;
    FIELD(x, "default_quant") if (!f_lit_node(v, val, AT, doc_quant_names, NULL, &q)) ex->default_quant = (doc_quant)q;
    FIELD(x, "default_temperature") if (val->kind != YN_NULL &&
        !f_float_node(v, val, AT, &ex->default_temperature, F_GTLE(0.0, 2.0))) ex->has_temperature = 1;
    FIELD(x, "default_top_p") if (val->kind != YN_NULL &&
        !f_float_node(v, val, AT, &ex->default_top_p, F_GTLE(0.0, 1.0))) ex->has_top_p = 1;
    extras(v, x, EXPORT_FIELDS);
}

int doc_schema_validate(const char *path, const ynode *root, doc_frontmatter *fm, dlm_err *e)
{
    vctx vc;
    memset(&vc, 0, sizeof vc);
    vctx *v = &vc;
    v->path = path;
    memset(fm, 0, sizeof *fm);
    fm->dlm_version = DOC_SCHEMA_VERSION;
    doc_training_defaults(&fm->training);

    ynode *k;
    if (!ymap_get(root, "dlm_id", &k)) { loc_push(v, "dlm_id"); verr(v, NULL, NULL, "Field required"); loc_pop(v, 0); }
    FIELD(root, "dlm_id") {
        if (val->kind != YN_STR) verr(v, AT, NULL, "Input should be a valid string");
        else if (val->len != 26 || !ulid_valid(val->text)) {
            strbuf r = STRBUF_INIT;
            py_repr(&r, val->text, val->len);
            verr(v, AT, NULL, "Value error, dlm_id must be a 26-char Crockford base32 ULID, got %s", sb_str(&r));
            sb_free(&r);
        } else memcpy(fm->dlm_id, val->text, 27);
    }
    /* dlm_version was checked and stamped by the migration step. */
    if (!ymap_get(root, "base_model", &k)) { loc_push(v, "base_model"); verr(v, NULL, NULL, "Field required"); loc_pop(v, 0); }
    FIELD(root, "base_model") f_str_node(v, val, AT, &fm->base_model, 1);
    FIELD(root, "training") if (is_model(v, val, AT, "TrainingConfig")) v_training(v, val, AT, &fm->training);
    FIELD(root, "export") if (is_model(v, val, AT, "ExportConfig")) v_export(v, val, &fm->export);
    FIELD(root, "system_prompt") if (val->kind != YN_NULL) f_str_node(v, val, AT, &fm->system_prompt, 0);
    extras(v, root, TOP_FIELDS);

    if (v->nerr) {
        err_at(e, "SchemaValidationError", path, v->line, v->col, "%s", sb_str(&v->msg));
        if (v->hint[0]) err_hint(e, "%s", v->hint);
        sb_free(&v->msg);
        doc_fm_free(fm);
        return -1;
    }
    sb_free(&v->msg);
    return 0;
}

/* ---- the key list ------------------------------------------------------------ */

/* Where each object's field table sits in the frontmatter: doc_schema_keys
 * walks these tables, so a key added to one is listed (and
 * tests/cli/t0807-slow-schema-keys.sh fails until it has a case). */
static const struct {
    const char *prefix;
    const char *const *fields;
} SCHEMA_OBJECTS[] = {
    {"", TOP_FIELDS},
    {"training.", TRAINING_FIELDS},
    {"training.preference.", PREF_FIELDS},
    {"training.preference.hyperparams.", HYPER_FIELDS},
    {"training.cpt.", CPT_FIELDS},
    {"training.gate.", GATE_FIELDS},
    {"training.cache.", CACHE_FIELDS},
    {"training.audio.", AUDIO_FIELDS},
    {"training.replay.", REPLAY_FIELDS},
    {"training.adapters.*.", ADAPTER_FIELDS},
    {"training.sources[].", SOURCE_FIELDS},
    {"export.", EXPORT_FIELDS},
};

int doc_schema_keys(doc_schema_key_fn fn, void *ctx)
{
    char key[256];
    int n = 0;
    for (size_t i = 0; i < sizeof SCHEMA_OBJECTS / sizeof SCHEMA_OBJECTS[0]; i++)
        for (const char *const *f = SCHEMA_OBJECTS[i].fields; *f; f++) {
            snprintf(key, sizeof key, "%s%s", SCHEMA_OBJECTS[i].prefix, *f);
            fn(ctx, key);
            n++;
        }
    return n;
}
