/* ynode — see ynode.h. */
#include "doc/ynode.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "util/json.h"
#include "util/log.h"

#define Y_MAX_DEPTH 64
#define Y_MAX_WEIGHT 1000000u   /* nodes reachable through aliases, in total */

/* ---- arena ---------------------------------------------------------------- */

typedef struct ablock {
    struct ablock *next;
    size_t used, cap;
    max_align_t data[];
} ablock;

struct yarena {
    ablock *head;
};

static void *aalloc(yarena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (!a->head || a->head->cap - a->head->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        ablock *b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
    }
    void *p = (char *)a->head->data + a->head->used;
    a->head->used += n;
    memset(p, 0, n);
    return p;
}

static char *astrdup(yarena *a, const char *s, size_t n)
{
    char *p = aalloc(a, n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void ydoc_free(ydoc *d)
{
    if (!d || !d->arena) return;
    ablock *b = d->arena->head;
    while (b) {
        ablock *n = b->next;
        free(b);
        b = n;
    }
    free(d->arena);
    d->arena = NULL;
    d->root = NULL;
}

ynode *ynode_new(ydoc *d, yn_kind kind, int line, int col)
{
    ynode *n = aalloc(d->arena, sizeof *n);
    if (!n) return NULL;
    n->kind = kind;
    n->line = line;
    n->col = col;
    n->weight = 1;
    n->text = "";
    return n;
}

ynode *ynode_new_str(ydoc *d, const char *s, int line, int col)
{
    ynode *n = ynode_new(d, YN_STR, line, col);
    if (!n) return NULL;
    n->text = astrdup(d->arena, s, strlen(s));
    n->len = strlen(s);
    n->synthetic = 1;
    return n->text ? n : NULL;
}

/* ---- PyYAML's implicit resolver (YAML 1.1) -------------------------------- */

static int all_in(const char *s, size_t n, const char *set)
{
    for (size_t i = 0; i < n; i++)
        if (!strchr(set, s[i])) return 0;
    return 1;
}

static int isdig(char c) { return c >= '0' && c <= '9'; }

/* [0-9][0-9_]* from s; returns length consumed (0 = no match). */
static size_t digits_us(const char *s, size_t n)
{
    if (!n || !isdig(s[0])) return 0;
    size_t i = 1;
    while (i < n && (isdig(s[i]) || s[i] == '_')) i++;
    return i;
}

/* (?::[0-5]?[0-9])+ ; returns length consumed (0 = none). */
static size_t sexa_tail(const char *s, size_t n)
{
    size_t i = 0, groups = 0;
    while (i < n && s[i] == ':') {
        size_t j = i + 1;
        if (j + 1 < n && s[j] >= '0' && s[j] <= '5' && isdig(s[j + 1])) j += 2;
        else if (j < n && isdig(s[j])) j += 1;
        else break;
        i = j;
        groups++;
    }
    return groups ? i : 0;
}

static int match_int(const char *s, size_t n)
{
    size_t i = 0;
    if (i < n && (s[i] == '-' || s[i] == '+')) i++;
    const char *p = s + i;
    size_t m = n - i;
    if (m >= 3 && p[0] == '0' && p[1] == 'b') return all_in(p + 2, m - 2, "01_");
    if (m >= 3 && p[0] == '0' && p[1] == 'x') return all_in(p + 2, m - 2, "0123456789abcdefABCDEF_");
    if (m >= 2 && p[0] == '0') return all_in(p + 1, m - 1, "01234567_");
    if (m == 1 && p[0] == '0') return 1;
    if (m >= 1 && p[0] >= '1' && p[0] <= '9') {
        size_t k = digits_us(p, m);
        if (k == m) return 1;
        size_t t = sexa_tail(p + k, m - k);
        return t && k + t == m;
    }
    return 0;
}

static int match_exp(const char *s, size_t n)
{
    /* [eE][-+][0-9]+ */
    if (n < 3 || (s[0] != 'e' && s[0] != 'E') || (s[1] != '-' && s[1] != '+')) return 0;
    return all_in(s + 2, n - 2, "0123456789");
}

static int match_float(const char *s, size_t n)
{
    size_t i = 0;
    int sign = 0;
    if (i < n && (s[i] == '-' || s[i] == '+')) { i++; sign = 1; }
    const char *p = s + i;
    size_t m = n - i;
    /* [-+]?\.(inf|Inf|INF) and \.(nan|NaN|NAN) (the latter unsigned) */
    if (m == 4 && p[0] == '.' &&
        (!memcmp(p + 1, "inf", 3) || !memcmp(p + 1, "Inf", 3) || !memcmp(p + 1, "INF", 3)))
        return 1;
    if (!sign && m == 4 && p[0] == '.' &&
        (!memcmp(p + 1, "nan", 3) || !memcmp(p + 1, "NaN", 3) || !memcmp(p + 1, "NAN", 3)))
        return 1;
    /* \.[0-9][0-9_]*(exp)?   (unsigned) */
    if (!sign && m >= 2 && p[0] == '.' && isdig(p[1])) {
        size_t k = 1 + digits_us(p + 1, m - 1);
        return k == m || match_exp(p + k, m - k);
    }
    size_t k = digits_us(p, m);
    if (!k) return 0;
    /* [0-9][0-9_]*\.[0-9_]*(exp)? */
    if (k < m && p[k] == '.') {
        size_t j = k + 1;
        while (j < m && (isdig(p[j]) || p[j] == '_')) j++;
        return j == m || match_exp(p + j, m - j);
    }
    /* [0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]* */
    size_t t = sexa_tail(p + k, m - k);
    if (!t) return 0;
    size_t j = k + t;
    if (j >= m || p[j] != '.') return 0;
    return all_in(p + j + 1, m - j - 1, "0123456789_");
}

static int match_timestamp(const char *s, size_t n, int *date_only)
{
    /* YYYY-MM-DD */
    if (n == 10 && isdig(s[0]) && isdig(s[1]) && isdig(s[2]) && isdig(s[3]) && s[4] == '-' &&
        isdig(s[5]) && isdig(s[6]) && s[7] == '-' && isdig(s[8]) && isdig(s[9])) {
        *date_only = 1;
        return 1;
    }
    /* YYYY-M[M]-D[D](T|t|[ \t]+)H[H]:MM:SS(.f*)?([ \t]*(Z|[-+]H[H](:MM)?))? */
    size_t i = 0;
    if (n < 4 || !all_in(s, 4, "0123456789")) return 0;
    i = 4;
    for (int part = 0; part < 2; part++) {
        if (i >= n || s[i] != '-') return 0;
        i++;
        if (i >= n || !isdig(s[i])) return 0;
        i++;
        if (i < n && isdig(s[i])) i++;
    }
    if (i < n && (s[i] == 'T' || s[i] == 't')) i++;
    else {
        size_t j = i;
        while (j < n && (s[j] == ' ' || s[j] == '\t')) j++;
        if (j == i) return 0;
        i = j;
    }
    if (i >= n || !isdig(s[i])) return 0;
    i++;
    if (i < n && isdig(s[i])) i++;
    for (int part = 0; part < 2; part++) {
        if (i + 3 > n || s[i] != ':' || !isdig(s[i + 1]) || !isdig(s[i + 2])) return 0;
        i += 3;
    }
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && isdig(s[i])) i++;
    }
    if (i == n) { *date_only = 0; return 1; }
    while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
    if (i < n && s[i] == 'Z') i++;
    else if (i < n && (s[i] == '-' || s[i] == '+')) {
        i++;
        if (i >= n || !isdig(s[i])) return 0;
        i++;
        if (i < n && isdig(s[i])) i++;
        if (i < n && s[i] == ':') {
            if (i + 3 > n || !isdig(s[i + 1]) || !isdig(s[i + 2])) return 0;
            i += 3;
        }
    } else return 0;
    if (i != n) return 0;
    *date_only = 0;
    return 1;
}

static int is_null_text(const char *s, size_t n)
{
    return n == 0 || (n == 1 && s[0] == '~') || (n == 4 && (!memcmp(s, "null", 4) ||
           !memcmp(s, "Null", 4) || !memcmp(s, "NULL", 4)));
}

static int bool_text(const char *s, size_t n, int *v)
{
    static const char *const t[] = {"yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"};
    static const char *const f[] = {"no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"};
    for (size_t k = 0; k < sizeof t / sizeof *t; k++) {
        if (strlen(t[k]) == n && !memcmp(s, t[k], n)) { *v = 1; return 1; }
        if (strlen(f[k]) == n && !memcmp(s, f[k], n)) { *v = 0; return 1; }
    }
    return 0;
}

/* ---- constructors (PyYAML SafeConstructor) --------------------------------- */

static int construct_int(yarena *a, ynode *n, const char *s, size_t len)
{
    char buf[256];
    size_t m = 0;
    for (size_t k = 0; k < len && m + 1 < sizeof buf; k++)
        if (s[k] != '_') buf[m++] = s[k];
    buf[m] = 0;
    if (m == 0) return -1;
    int neg = buf[0] == '-';
    char *p = buf + ((buf[0] == '-' || buf[0] == '+') ? 1 : 0);
    if (!*p) return -1;
    uint64_t v = 0;
    int over = 0, base = 10;
    if (!strcmp(p, "0")) v = 0;
    else if (!strncmp(p, "0b", 2)) { base = 2; p += 2; }
    else if (!strncmp(p, "0x", 2)) { base = 16; p += 2; }
    else if (p[0] == '0') { base = 8; p += 1; }
    if (strchr(p, ':')) {
        /* sexagesimal: 1:30 = 90 */
        char *q = p;
        while (*q) {
            char *end;
            errno = 0;
            unsigned long long part = strtoull(q, &end, 10);
            if (end == q || errno) return -1;
            if (v > (UINT64_MAX - part) / 60) over = 1;
            else v = v * 60 + part;
            q = *end == ':' ? end + 1 : end;
            if (*end && *end != ':') return -1;
        }
    } else if (strcmp(p, "0") || base != 10) {
        if (!*p) return -1;
        for (const char *q = p; *q; q++) {
            int d = isdig(*q) ? *q - '0' : (*q >= 'a' && *q <= 'f') ? *q - 'a' + 10 :
                    (*q >= 'A' && *q <= 'F') ? *q - 'A' + 10 : 99;
            if (d >= base) return -1;
            if (v > (UINT64_MAX - (unsigned)d) / (unsigned)base) { over = 1; break; }
            v = v * (unsigned)base + (unsigned)d;
        }
    }
    if (!over && v > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) over = 1;
    if (over) {
        n->big = 1;
        n->i = neg ? INT64_MIN : INT64_MAX;
        /* Decimal text for messages; non-decimal big literals keep their spelling. */
        const char *digits = p;
        while (base == 10 && digits[0] == '0' && digits[1]) digits++;
        char tmp[260];
        snprintf(tmp, sizeof tmp, "%s%s", neg ? "-" : "", base == 10 ? digits : s);
        n->bigtext = astrdup(a, tmp, strlen(tmp));
        return n->bigtext ? 0 : -1;
    }
    n->i = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

static int construct_float(ynode *n, const char *s, size_t len)
{
    char buf[256];
    size_t m = 0;
    for (size_t k = 0; k < len && m + 1 < sizeof buf; k++) {
        if (s[k] == '_') continue;
        char c = s[k];
        if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
        buf[m++] = c;
    }
    buf[m] = 0;
    if (!m) return -1;
    double sign = buf[0] == '-' ? -1.0 : 1.0;
    char *p = buf + ((buf[0] == '-' || buf[0] == '+') ? 1 : 0);
    if (!strcmp(p, ".inf")) { n->f = sign * INFINITY; return 0; }
    if (!strcmp(p, ".nan")) { n->f = NAN; return 0; }
    if (strchr(p, ':')) {
        double v = 0;
        char *q = p;
        while (*q) {
            char *end;
            double part = strtod(q, &end);
            if (end == q) return -1;
            v = v * 60 + part;
            if (*end && *end != ':') return -1;
            q = *end == ':' ? end + 1 : end;
        }
        n->f = sign * v;
        return 0;
    }
    char *end;
    double v = strtod(p, &end);
    if (end == p || *end) return -1;
    n->f = sign * v;
    return 0;
}

static int valid_date(const char *s)
{
    int y = atoi(s), m = atoi(s + 5), d = atoi(s + 8);
    static const int md[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (y < 1 || m < 1 || m > 12 || d < 1 || d > md[m - 1]) return 0;
    if (m == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return 0;
    return 1;
}

/* ---- composer --------------------------------------------------------------- */

typedef struct anchor {
    char *name;
    ynode *node;
} anchor;

typedef struct composer {
    yaml_parser_t parser;
    yarena *arena;
    const char *path;
    int first_line;
    anchor *anchors;
    size_t nanchors, capanchors;
    dlm_err *e;
    const char *text;
    size_t text_len;
} composer;

static int pos_line(composer *c, yaml_mark_t m) { return (int)m.line + c->first_line; }
static int pos_col(yaml_mark_t m) { return (int)m.column + 1; }

static int fail_at(composer *c, yaml_mark_t m, const char *fmt, const char *arg)
{
    char msg[1024];
    snprintf(msg, sizeof msg, fmt, arg);
    return err_at(c->e, "FrontmatterError", c->path, pos_line(c, m), pos_col(m), "invalid YAML: %s", msg);
}

/* Line `ln` (0-based) of the frontmatter text: 1 and its bytes, or 0. */
static int line_text(const composer *c, size_t ln, const char **p, size_t *n)
{
    const char *s = c->text, *end = c->text + c->text_len;
    for (size_t i = 0; i < ln; i++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        if (!nl) return 0;
        s = nl + 1;
    }
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    *p = s;
    *n = (size_t)((nl ? nl : end) - s);
    return 1;
}

static size_t indent_of(const char *p, size_t n)
{
    size_t i = 0;
    while (i < n && p[i] == ' ') i++;
    return i;
}

/* Blank or a comment only. */
static int blank_line(const composer *c, size_t ln)
{
    const char *p;
    size_t n;
    if (!line_text(c, ln, &p, &n)) return 0;
    size_t i = indent_of(p, n);
    return i == n || p[i] == '#' || p[i] == '\r';
}

/* The line holds a mapping key: a ':' followed by a space or the end. */
static int has_colon(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] == ':' && (i + 1 == n || p[i + 1] == ' ' || p[i + 1] == '\r')) return 1;
    return 0;
}

/* What to do about the commonest YAML mistakes in a frontmatter. */
static int yaml_hint(dlm_err *e, const char *ctx, const char *problem)
{
    if (strstr(ctx, "flow sequence"))
        return err_hint(e, "close the '[' opened here with ']' on the same line, or quote the value if it is text");
    if (strstr(ctx, "flow mapping"))
        return err_hint(e, "close the '{' opened here with '}', or quote the value if it is text");
    if (strstr(ctx, "quoted scalar"))
        return err_hint(e, "close the quote opened here; inside \"...\" write \\\" for a quote, inside '...' write ''");
    if (strstr(ctx, "simple key"))
        return err_hint(e, "a key needs ': ' (colon and space) before its value, e.g. 'num_epochs: 3'");
    if (strstr(problem, "cannot start any token"))
        return err_hint(e, "indent with spaces, never tabs; quote a value that starts with @, ` or %%");
    if (strstr(problem, "mapping values are not allowed"))
        return err_hint(e, "quote a value that contains ': ', e.g. system_prompt: \"Note: be brief\"");
    if (strstr(problem, "expected key") || strstr(problem, "expected <block end>"))
        return err_hint(e, "check this line's indentation: the keys of one mapping line up, nested keys 2 spaces deeper");
    return err_hint(e, "the frontmatter between the two '---' lines is YAML: check this line's indentation, quotes and brackets");
}

static int parser_error(composer *c)
{
    yaml_parser_t *p = &c->parser;
    const char *problem = p->problem ? p->problem : "syntax error";
    if (p->error == YAML_READER_ERROR) {
        /* Offset → line/col by scanning the text (byte offsets from libyaml). */
        size_t off = p->problem_offset < c->text_len ? p->problem_offset : c->text_len;
        int line = 0, col = 0;
        for (size_t k = 0; k < off; k++) {
            if (c->text[k] == '\n') { line++; col = 0; }
            else if (((unsigned char)c->text[k] & 0xc0) != 0x80) col++;
        }
        if (p->problem_value != -1)
            return err_at(c->e, "FrontmatterError", c->path, line + c->first_line, col + 1,
                          "invalid YAML: %s: #x%04x", problem, (unsigned)p->problem_value);
        return err_at(c->e, "FrontmatterError", c->path, line + c->first_line, col + 1,
                      "invalid YAML: %s", problem);
    }
    yaml_mark_t m = p->problem_mark;
    /* An unclosed bracket or quote, or a key without its ':', is noticed
     * where the next token starts, often on the next line: point at where
     * it opened (libyaml's context mark), the line to fix. */
    const char *ctx = p->context ? p->context : "";
    int at_open = strstr(ctx, "flow sequence") || strstr(ctx, "flow mapping") || strstr(ctx, "quoted scalar") ||
                  strstr(ctx, "simple key");
    if (at_open) m = p->context_mark;
    else if (m.index >= c->text_len) {
        /* found at the stream's end (the frontmatter stopped inside a flow
         * collection or a node): the end of the last line with text, where
         * the missing part belongs, as PyYAML marks it */
        const char *t;
        size_t tn;
        size_t pl = m.line;
        while (pl > 0 && (!line_text(c, pl, &t, &tn) || blank_line(c, pl))) pl--;
        if (line_text(c, pl, &t, &tn)) {
            size_t col = 0;
            for (size_t k = 0; k < tn && t[k] != '\r'; k++) col += ((unsigned char)t[k] & 0xc0) != 0x80;
            m.line = pl;
            m.column = col;
        }
    }
    if (strstr(problem, "mapping values are not allowed") && m.line > 0) {
        /* "key: value" where the scanner is inside a plain scalar: either the
         * line above lacks its ':' (its text ran on into this one), or this
         * line is indented under a key that already has a value */
        const char *prev, *cur;
        size_t prev_n, cur_n;
        size_t pl = m.line - 1;
        while (pl > 0 && blank_line(c, pl)) pl--;
        if (line_text(c, pl, &prev, &prev_n) && line_text(c, m.line, &cur, &cur_n)) {
            size_t pi = indent_of(prev, prev_n), ci = indent_of(cur, cur_n);
            if (!has_colon(prev, prev_n) && (prev_n <= pi || prev[pi] != '-')) {
                yaml_mark_t pm = {0, pl, pi};
                return (err_at(c->e, "FrontmatterError", c->path, pos_line(c, pm), pos_col(pm),
                               "invalid YAML: %s (this line has no ':' and runs on into the next)", problem),
                        err_hint(c->e, "a key needs ': ' (colon and space) before its value, e.g. 'num_epochs: 3'"));
            }
            if (ci > pi)
                return (err_at(c->e, "FrontmatterError", c->path, pos_line(c, m), pos_col(m), "invalid YAML: %s", problem),
                        err_hint(c->e, "this key is indented deeper than the one above it, which already has a value: "
                                       "line the keys of one mapping up"));
        }
    }
    if (p->context)
        err_at(c->e, "FrontmatterError", c->path, pos_line(c, m), pos_col(m), "invalid YAML: %s: %s", p->context,
               problem);
    else err_at(c->e, "FrontmatterError", c->path, pos_line(c, m), pos_col(m), "invalid YAML: %s", problem);
    return yaml_hint(c->e, ctx, problem);
}

static int next_event(composer *c, yaml_event_t *ev)
{
    if (!yaml_parser_parse(&c->parser, ev)) return parser_error(c);
    return 0;
}

static int add_anchor(composer *c, const char *name, ynode *n)
{
    for (size_t k = 0; k < c->nanchors; k++)
        if (!strcmp(c->anchors[k].name, name)) { c->anchors[k].node = n; return 0; }
    if (c->nanchors == c->capanchors) {
        size_t cap = c->capanchors ? c->capanchors * 2 : 8;
        anchor *na = realloc(c->anchors, cap * sizeof *na);
        if (!na) return err_set(c->e, "MemoryError", "out of memory");
        c->anchors = na;
        c->capanchors = cap;
    }
    c->anchors[c->nanchors].name = astrdup(c->arena, name, strlen(name));
    c->anchors[c->nanchors].node = n;
    if (!c->anchors[c->nanchors].name) return err_set(c->e, "MemoryError", "out of memory");
    c->nanchors++;
    return 0;
}

static ynode *new_node(composer *c, yn_kind k, yaml_mark_t m)
{
    ynode *n = aalloc(c->arena, sizeof *n);
    if (!n) { err_set(c->e, "MemoryError", "out of memory"); return NULL; }
    n->kind = k;
    n->line = pos_line(c, m);
    n->col = pos_col(m);
    n->weight = 1;
    n->text = "";
    return n;
}

#define TAG_PREFIX "tag:yaml.org,2002:"

static ynode *compose_scalar(composer *c, yaml_event_t *ev)
{
    const char *s = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    const char *tag = (const char *)ev->data.scalar.tag;
    ynode *n = new_node(c, YN_STR, ev->start_mark);
    if (!n) return NULL;
    n->text = astrdup(c->arena, s, len);
    n->len = len;
    if (!n->text) { err_set(c->e, "MemoryError", "out of memory"); return NULL; }
    const char *kind = NULL;   /* resolved tag suffix */
    if (tag && strcmp(tag, "!")) {
        if (strncmp(tag, TAG_PREFIX, strlen(TAG_PREFIX))) {
            fail_at(c, ev->start_mark, "could not determine a constructor for the tag '%s'", tag);
            return NULL;
        }
        kind = tag + strlen(TAG_PREFIX);
    } else if (ev->data.scalar.plain_implicit && !tag) {
        int b, d;
        if (is_null_text(s, len)) kind = "null";
        else if (bool_text(s, len, &b)) kind = "bool";
        else if (match_int(s, len)) kind = "int";
        else if (match_float(s, len)) kind = "float";
        else if (match_timestamp(s, len, &d)) kind = "timestamp";
        else kind = "str";
    } else kind = "str";

    if (!strcmp(kind, "str")) return n;
    if (!strcmp(kind, "null")) {
        if (!is_null_text(s, len) && tag) { fail_at(c, ev->start_mark, "cannot construct a null from '%s'", n->text); return NULL; }
        n->kind = YN_NULL;
        return n;
    }
    if (!strcmp(kind, "bool")) {
        int b;
        /* PyYAML looks the lower-cased text up in its table. */
        char low[8] = {0};
        if (len < sizeof low)
            for (size_t k = 0; k < len; k++) low[k] = (char)(s[k] >= 'A' && s[k] <= 'Z' ? s[k] - 'A' + 'a' : s[k]);
        if (!bool_text(low, strlen(low), &b) || len >= sizeof low) {
            fail_at(c, ev->start_mark, "cannot construct a bool from '%s'", n->text);
            return NULL;
        }
        n->kind = YN_BOOL;
        n->b = b;
        return n;
    }
    if (!strcmp(kind, "int")) {
        n->kind = YN_INT;
        if (construct_int(c->arena, n, s, len)) {
            fail_at(c, ev->start_mark, "cannot construct an int from '%s'", n->text);
            return NULL;
        }
        return n;
    }
    if (!strcmp(kind, "float")) {
        n->kind = YN_FLOAT;
        if (construct_float(n, s, len)) {
            fail_at(c, ev->start_mark, "cannot construct a float from '%s'", n->text);
            return NULL;
        }
        return n;
    }
    if (!strcmp(kind, "timestamp")) {
        int d;
        if (!match_timestamp(s, len, &d) || !valid_date(s)) {
            fail_at(c, ev->start_mark, "invalid timestamp '%s'", n->text);
            return NULL;
        }
        n->kind = YN_TIMESTAMP;
        n->date_only = d;
        return n;
    }
    fail_at(c, ev->start_mark, "could not determine a constructor for the tag '%s'", tag ? tag : kind);
    return NULL;
}

typedef struct pairvec {
    ynode **k, **v;
    size_t n, cap;
} pairvec;

static int pv_push(pairvec *p, ynode *k, ynode *v)
{
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        ynode **nk = realloc(p->k, cap * sizeof *nk);
        if (!nk) return -1;
        p->k = nk;
        ynode **nv = realloc(p->v, cap * sizeof *nv);
        if (!nv) return -1;
        p->v = nv;
        p->cap = cap;
    }
    p->k[p->n] = k;
    p->v[p->n] = v;
    p->n++;
    return 0;
}

static int key_equal(const ynode *a, const ynode *b)
{
    if (a->kind != b->kind) {
        /* Python: 1 == 1.0 == True as dict keys. */
        double x, y;
        int na = a->kind == YN_INT || a->kind == YN_FLOAT || a->kind == YN_BOOL;
        int nb = b->kind == YN_INT || b->kind == YN_FLOAT || b->kind == YN_BOOL;
        if (!na || !nb || a->big || b->big) return 0;
        x = a->kind == YN_INT ? (double)a->i : a->kind == YN_FLOAT ? a->f : a->b;
        y = b->kind == YN_INT ? (double)b->i : b->kind == YN_FLOAT ? b->f : b->b;
        return x == y;
    }
    switch (a->kind) {
    case YN_NULL: return 1;
    case YN_BOOL: return a->b == b->b;
    case YN_INT: return a->big || b->big ? (a->bigtext && b->bigtext && !strcmp(a->bigtext, b->bigtext)) : a->i == b->i;
    case YN_FLOAT: return a->f == b->f;
    default: return a->len == b->len && !memcmp(a->text, b->text, a->len);
    }
}

/* Build the final map from pairs in order: later duplicates replace the
 * value but keep the first position (Python dict semantics). */
static ynode *finish_map(composer *c, ynode *m, pairvec *pv, size_t own_from, int warn_dups)
{
    ynode **keys = aalloc(c->arena, (pv->n ? pv->n : 1) * sizeof *keys);
    ynode **vals = aalloc(c->arena, (pv->n ? pv->n : 1) * sizeof *vals);
    if (!keys || !vals) { err_set(c->e, "MemoryError", "out of memory"); return NULL; }
    size_t n = 0;
    uint64_t w = 1;
    for (size_t i = 0; i < pv->n; i++) {
        size_t j = 0;
        for (; j < n; j++)
            if (key_equal(keys[j], pv->k[i])) break;
        if (j < n) {
            if (warn_dups && i >= own_from && !pv->k[i]->synthetic) {
                strbuf sb = STRBUF_INIT;
                ynode_pystr(pv->k[i], &sb);
                log_warn("%s:%d:%d: duplicate key '%s' in the frontmatter; the last value is used",
                         c->path, pv->k[i]->line, pv->k[i]->col, sb_str(&sb));
                sb_free(&sb);
            }
            vals[j] = pv->v[i];
            continue;
        }
        keys[n] = pv->k[i];
        vals[n] = pv->v[i];
        n++;
    }
    for (size_t i = 0; i < n; i++) {
        w += keys[i]->weight + vals[i]->weight;
        if (w > Y_MAX_WEIGHT) w = Y_MAX_WEIGHT + 1;
    }
    m->keys = keys;
    m->vals = vals;
    m->n = n;
    m->weight = w;
    return m;
}

static ynode *compose(composer *c, yaml_event_t *ev, int depth);

static ynode *compose_mapping(composer *c, yaml_event_t *start, int depth)
{
    const char *tag = (const char *)start->data.mapping_start.tag;
    if (tag && strcmp(tag, "!") && strcmp(tag, TAG_PREFIX "map")) {
        fail_at(c, start->start_mark, "could not determine a constructor for the tag '%s'", tag);
        return NULL;
    }
    ynode *m = new_node(c, YN_MAP, start->start_mark);
    if (!m) return NULL;
    pairvec own = {0}, merged = {0};
    ynode *result = NULL;
    for (;;) {
        yaml_event_t ev;
        if (next_event(c, &ev)) goto out;
        if (ev.type == YAML_MAPPING_END_EVENT) { yaml_event_delete(&ev); break; }
        int is_merge = ev.type == YAML_SCALAR_EVENT && ev.data.scalar.plain_implicit &&
                       !ev.data.scalar.tag && ev.data.scalar.length == 2 &&
                       !memcmp(ev.data.scalar.value, "<<", 2);
        yaml_mark_t kmark = ev.start_mark;
        ynode *k = compose(c, &ev, depth + 1);
        yaml_event_delete(&ev);
        if (!k) goto out;
        if (k->kind == YN_SEQ || k->kind == YN_MAP) {
            fail_at(c, kmark, "while constructing a mapping: found unhashable key%s", "");
            goto out;
        }
        yaml_event_t vev;
        if (next_event(c, &vev)) goto out;
        yaml_mark_t vmark = vev.start_mark;
        ynode *v = compose(c, &vev, depth + 1);
        yaml_event_delete(&vev);
        if (!v) goto out;
        if (is_merge) {
            /* PyYAML flatten_mapping: a map merges its pairs; a list of maps
             * merges them last-first; own keys win over merged ones. */
            if (v->kind == YN_MAP) {
                for (size_t i = 0; i < v->n; i++)
                    if (pv_push(&merged, v->keys[i], v->vals[i])) goto oom;
            } else if (v->kind == YN_SEQ) {
                for (size_t j = v->n; j-- > 0;) {
                    ynode *sub = v->vals[j];
                    if (sub->kind != YN_MAP) {
                        err_at(c->e, "FrontmatterError", c->path, sub->line, sub->col,
                               "invalid YAML: while constructing a mapping: expected a mapping for merging, but found %s",
                               sub->kind == YN_SEQ ? "sequence" : "scalar");
                        goto out;
                    }
                    for (size_t i = 0; i < sub->n; i++)
                        if (pv_push(&merged, sub->keys[i], sub->vals[i])) goto oom;
                }
            } else {
                fail_at(c, vmark, "while constructing a mapping: expected a mapping or list of mappings for merging, but found %s",
                        "scalar");
                goto out;
            }
            continue;
        }
        if (pv_push(&own, k, v)) goto oom;
    }
    {
        size_t own_from = merged.n;
        for (size_t i = 0; i < own.n; i++)
            if (pv_push(&merged, own.k[i], own.v[i])) goto oom;
        result = finish_map(c, m, &merged, own_from, 1);
    }
    goto out;
oom:
    err_set(c->e, "MemoryError", "out of memory");
out:
    free(own.k); free(own.v); free(merged.k); free(merged.v);
    return result;
}

static ynode *compose_sequence(composer *c, yaml_event_t *start, int depth)
{
    const char *tag = (const char *)start->data.sequence_start.tag;
    if (tag && strcmp(tag, "!") && strcmp(tag, TAG_PREFIX "seq")) {
        fail_at(c, start->start_mark, "could not determine a constructor for the tag '%s'", tag);
        return NULL;
    }
    ynode *s = new_node(c, YN_SEQ, start->start_mark);
    if (!s) return NULL;
    ynode **items = NULL;
    size_t n = 0, cap = 0;
    uint64_t w = 1;
    for (;;) {
        yaml_event_t ev;
        if (next_event(c, &ev)) { free(items); return NULL; }
        if (ev.type == YAML_SEQUENCE_END_EVENT) { yaml_event_delete(&ev); break; }
        ynode *it = compose(c, &ev, depth + 1);
        yaml_event_delete(&ev);
        if (!it) { free(items); return NULL; }
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            ynode **ni = realloc(items, cap * sizeof *ni);
            if (!ni) { free(items); err_set(c->e, "MemoryError", "out of memory"); return NULL; }
            items = ni;
        }
        items[n++] = it;
        w += it->weight;
        if (w > Y_MAX_WEIGHT) w = Y_MAX_WEIGHT + 1;
    }
    s->vals = aalloc(c->arena, (n ? n : 1) * sizeof *s->vals);
    if (!s->vals) { free(items); err_set(c->e, "MemoryError", "out of memory"); return NULL; }
    if (n) memcpy(s->vals, items, n * sizeof *items);
    free(items);
    s->n = n;
    s->weight = w;
    return s;
}

static ynode *compose(composer *c, yaml_event_t *ev, int depth)
{
    if (depth > Y_MAX_DEPTH) {
        fail_at(c, ev->start_mark, "nesting deeper than %s levels", "64");
        return NULL;
    }
    ynode *n = NULL;
    const char *anchor_name = NULL;
    switch (ev->type) {
    case YAML_ALIAS_EVENT: {
        const char *name = (const char *)ev->data.alias.anchor;
        for (size_t k = c->nanchors; k-- > 0;)
            if (!strcmp(c->anchors[k].name, name)) return c->anchors[k].node;
        fail_at(c, ev->start_mark, "found undefined alias '%s'", name);
        return NULL;
    }
    case YAML_SCALAR_EVENT:
        anchor_name = (const char *)ev->data.scalar.anchor;
        n = compose_scalar(c, ev);
        break;
    case YAML_MAPPING_START_EVENT:
        anchor_name = (const char *)ev->data.mapping_start.anchor;
        n = compose_mapping(c, ev, depth);
        break;
    case YAML_SEQUENCE_START_EVENT:
        anchor_name = (const char *)ev->data.sequence_start.anchor;
        n = compose_sequence(c, ev, depth);
        break;
    default:
        fail_at(c, ev->start_mark, "unexpected YAML event%s", "");
        return NULL;
    }
    if (!n) return NULL;
    if (n->weight > Y_MAX_WEIGHT) {
        err_at(c->e, "FrontmatterError", c->path, n->line, n->col,
               "invalid YAML: aliases expand to more than %u nodes", Y_MAX_WEIGHT);
        return NULL;
    }
    /* Anchors become visible once their node is complete: a node cannot
     * contain itself (PyYAML would build a recursive object). */
    if (anchor_name && add_anchor(c, anchor_name, n)) return NULL;
    return n;
}

int ydoc_parse(const char *text, size_t len, int first_line, const char *path, ydoc *out, dlm_err *e)
{
    out->root = NULL;
    out->arena = calloc(1, sizeof *out->arena);
    if (!out->arena) return err_set(e, "MemoryError", "out of memory");
    composer c;
    memset(&c, 0, sizeof c);
    c.arena = out->arena;
    c.path = path;
    c.first_line = first_line;
    c.e = e;
    c.text = text;
    c.text_len = len;
    if (!yaml_parser_initialize(&c.parser)) { ydoc_free(out); return err_set(e, "MemoryError", "out of memory"); }
    yaml_parser_set_input_string(&c.parser, (const unsigned char *)text, len);
    yaml_parser_set_encoding(&c.parser, YAML_UTF8_ENCODING);
    int rc = -1, docs = 0;
    for (;;) {
        yaml_event_t ev;
        if (next_event(&c, &ev)) break;
        yaml_event_type_t t = ev.type;
        if (t == YAML_STREAM_END_EVENT) { yaml_event_delete(&ev); rc = 0; break; }
        if (t == YAML_STREAM_START_EVENT || t == YAML_DOCUMENT_END_EVENT) { yaml_event_delete(&ev); continue; }
        if (t == YAML_DOCUMENT_START_EVENT) {
            if (++docs > 1) {
                fail_at(&c, ev.start_mark, "expected a single document in the stream, but found another document%s", "");
                yaml_event_delete(&ev);
                break;
            }
            yaml_event_delete(&ev);
            continue;
        }
        ynode *n = compose(&c, &ev, 0);
        yaml_event_delete(&ev);
        if (!n) break;
        out->root = n;
    }
    yaml_parser_delete(&c.parser);
    free(c.anchors);
    if (rc) { ydoc_free(out); return -1; }
    return 0;
}

/* ---- queries ------------------------------------------------------------------ */

int ynode_is_str(const ynode *n, const char *s)
{
    return n && n->kind == YN_STR && n->len == strlen(s) && !memcmp(n->text, s, n->len);
}

ynode *ymap_get(const ynode *map, const char *key, ynode **key_out)
{
    if (key_out) *key_out = NULL;
    if (!map || map->kind != YN_MAP) return NULL;
    for (size_t i = 0; i < map->n; i++)
        if (ynode_is_str(map->keys[i], key)) {
            if (key_out) *key_out = map->keys[i];
            return map->vals[i];
        }
    return NULL;
}

const char *ynode_pytype(const ynode *n)
{
    switch (n->kind) {
    case YN_NULL: return "NoneType";
    case YN_BOOL: return "bool";
    case YN_INT: return "int";
    case YN_FLOAT: return "float";
    case YN_STR: return "str";
    case YN_TIMESTAMP: return n->date_only ? "date" : "datetime";
    case YN_SEQ: return "list";
    case YN_MAP: return "dict";
    }
    return "object";
}

void ynode_pystr(const ynode *n, strbuf *sb)
{
    char buf[64];
    switch (n->kind) {
    case YN_NULL: sb_puts(sb, "None"); break;
    case YN_BOOL: sb_puts(sb, n->b ? "True" : "False"); break;
    case YN_INT:
        if (n->big) sb_puts(sb, n->bigtext);
        else sb_printf(sb, "%lld", (long long)n->i);
        break;
    case YN_FLOAT:
        if (isnan(n->f)) sb_puts(sb, "nan");
        else if (isinf(n->f)) sb_puts(sb, n->f > 0 ? "inf" : "-inf");
        else { json_fmt_double(n->f, buf, sizeof buf); sb_puts(sb, buf); }
        break;
    case YN_SEQ: sb_puts(sb, "[...]"); break;
    case YN_MAP: sb_puts(sb, "{...}"); break;
    default: sb_append(sb, n->text, n->len); break;
    }
}

/* ---- edits for migrations ---------------------------------------------------- */

ynode *ymap_clone(ydoc *d, const ynode *map)
{
    ynode *m = ynode_new(d, YN_MAP, map->line, map->col);
    if (!m) return NULL;
    size_t cap = map->n + 4;
    m->keys = aalloc(d->arena, cap * sizeof *m->keys);
    m->vals = aalloc(d->arena, cap * sizeof *m->vals);
    if (!m->keys || !m->vals) return NULL;
    if (map->n) {
        memcpy(m->keys, map->keys, map->n * sizeof *m->keys);
        memcpy(m->vals, map->vals, map->n * sizeof *m->vals);
    }
    m->n = map->n;
    m->weight = map->weight;
    return m;
}

int ymap_set(ydoc *d, ynode *map, ynode *key, ynode *val)
{
    for (size_t i = 0; i < map->n; i++)
        if (key_equal(map->keys[i], key)) { map->vals[i] = val; return 0; }
    ynode **nk = aalloc(d->arena, (map->n + 1) * sizeof *nk);
    ynode **nv = aalloc(d->arena, (map->n + 1) * sizeof *nv);
    if (!nk || !nv) return -1;
    if (map->n) {
        memcpy(nk, map->keys, map->n * sizeof *nk);
        memcpy(nv, map->vals, map->n * sizeof *nv);
    }
    nk[map->n] = key;
    nv[map->n] = val;
    map->keys = nk;
    map->vals = nv;
    map->n++;
    return 0;
}

void ymap_del(ynode *map, const char *key)
{
    for (size_t i = 0; i < map->n; i++)
        if (ynode_is_str(map->keys[i], key)) {
            memmove(map->keys + i, map->keys + i + 1, (map->n - i - 1) * sizeof *map->keys);
            memmove(map->vals + i, map->vals + i + 1, (map->n - i - 1) * sizeof *map->vals);
            map->n--;
            return;
        }
}

int ynode_plain_is_str(const char *s, size_t n)
{
    int b, d;
    if (is_null_text(s, n) || bool_text(s, n, &b) || match_int(s, n) || match_float(s, n) ||
        match_timestamp(s, n, &d) || (n == 2 && !memcmp(s, "<<", 2)) || (n == 1 && s[0] == '='))
        return 0;
    return 1;
}
