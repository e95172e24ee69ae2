/* srcrules — the rule languages of source directives: the glob dialect, the
 * default-exclude list, `.dlm/ignore` and `.dlm/training.yaml` (spec §1.9).
 * Everything here reads untrusted bytes from the user's tree: lengths come
 * from the buffers, never from the content. */
#include "doc/doc_internal.h"
#include "doc/sources.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/log.h"

const char *const src_default_excludes[] = {
    ".git/**", ".hg/**", ".svn/**", ".env", ".env.*", "**/.env", "**/.env.*", "**/id_rsa", "**/id_ed25519",
    "**/*.pem", "**/*.key", "**/secrets.*", "**/__pycache__/**", "**/*.pyc", "**/*.pyo", ".venv/**", "venv/**",
    ".tox/**", "node_modules/**", "**/*.min.js", "**/*.min.css", "**/*.map", "target/**", "**/*.rlib",
    "**/*.class", "**/*.jar", "**/*.o", "**/*.so", "**/*.dylib", "**/*.dll", "build/**", "dist/**",
    "__generated__/**", "generated/**", "**/package-lock.json", "**/yarn.lock", "**/pnpm-lock.yaml",
    "**/Cargo.lock", "**/uv.lock", "**/poetry.lock", "**/Pipfile.lock", "**/*.ico", "**/*.pdf", "**/*.zip",
    "**/*.tar", "**/*.gz", "**/*.xz", "**/*.bz2", "**/*.7z", "**/*.wasm", ".dlm/**", "**/.dlm/**", NULL,
};

/* ---- glob ------------------------------------------------------------------ */

enum { G_LIT, G_ONE, G_STAR, G_ANY };

/* The original translates the glob to a Python regex and full-matches it;
 * `**` becomes `.*`, which does not match '\n' (no DOTALL). A DP over the
 * token list gives the same verdicts without backtracking. */
int src_glob_match(const char *pat, const char *s)
{
    size_t n = strlen(s);
    unsigned char stackbuf[2][512];
    unsigned char *cur = stackbuf[0], *nxt = stackbuf[1], *heap = NULL;
    if (n + 1 > sizeof stackbuf[0]) {
        heap = malloc(2 * (n + 1));
        if (!heap) return 0;
        cur = heap;
        nxt = heap + n + 1;
    }
    memset(cur, 0, n + 1);
    cur[0] = 1;
    for (size_t i = 0; pat[i];) {
        int op;
        char lit = 0;
        if (pat[i] == '*' && pat[i + 1] == '*') {
            op = G_ANY;
            i += 2;
            if (pat[i] == '/') i++;
        } else if (pat[i] == '*') {
            op = G_STAR;
            i++;
        } else if (pat[i] == '?') {
            op = G_ONE;
            i++;
        } else {
            op = G_LIT;
            lit = pat[i++];
        }
        int any = 0;
        for (size_t j = 0; j <= n; j++) {
            unsigned char v = 0;
            switch (op) {
            case G_LIT: v = j > 0 && cur[j - 1] && s[j - 1] == lit; break;
            case G_ONE: v = j > 0 && cur[j - 1] && s[j - 1] != '/'; break;
            case G_STAR: v = cur[j] || (j > 0 && nxt[j - 1] && s[j - 1] != '/'); break;
            case G_ANY: v = cur[j] || (j > 0 && nxt[j - 1] && s[j - 1] != '\n'); break;
            }
            nxt[j] = v;
            any |= v;
        }
        unsigned char *t = cur;
        cur = nxt;
        nxt = t;
        if (!any) break;
    }
    int r = cur[n];
    free(heap);
    return r;
}

/* ---- .dlm/ignore --------------------------------------------------------------- */

void src_ignore_free(src_ignore_rule *r, int n)
{
    for (int i = 0; i < n; i++) free(r[i].pattern);
    free(r);
}

int src_ignore_parse(const char *label, const char *text, size_t len, src_ignore_rule **out)
{
    *out = NULL;
    int n = 0, cap = 0;
    src_ignore_rule *v = NULL;
    size_t p = 0;
    int lineno = 0;
    /* str.splitlines(): the text is already LF-normalised by the reader */
    while (p < len) {
        const char *nl = memchr(text + p, '\n', len - p);
        size_t e = nl ? (size_t)(nl - text) : len;
        lineno++;
        size_t b = p;
        p = nl ? e + 1 : len;
        while (e > b && (text[e - 1] == ' ' || text[e - 1] == '\t' || text[e - 1] == '\r' || text[e - 1] == '\v' ||
                         text[e - 1] == '\f'))
            e--;
        if (e == b) continue;
        size_t l = b;
        while (l < e && (text[l] == ' ' || text[l] == '\t' || text[l] == '\v' || text[l] == '\f')) l++;
        if (text[l] == '#') continue;
        src_ignore_rule r = {0};
        r.line = lineno;
        if (text[b] == '!') { r.negate = 1; b++; }
        if (b == e) { log_warn("%s:%d: bare '!' with no pattern; skipping", label, lineno); continue; }
        if (text[b] == '/') { r.anchored = 1; b++; }
        if (b == e) { log_warn("%s:%d: bare '/' with no pattern; skipping", label, lineno); continue; }
        if (text[e - 1] == '/') { r.dir_only = 1; e--; }
        if (b == e) { log_warn("%s:%d: pattern reduced to empty; skipping", label, lineno); continue; }
        if (memchr(text + b, 0, e - b)) { log_warn("%s:%d: NUL in pattern; skipping", label, lineno); continue; }
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            src_ignore_rule *nv = realloc(v, (size_t)cap * sizeof *nv);
            if (!nv) { src_ignore_free(v, n); return -1; }
            v = nv;
        }
        r.pattern = str_ndup(text + b, e - b);
        if (!r.pattern) { src_ignore_free(v, n); return -1; }
        v[n++] = r;
    }
    *out = v;
    return n;
}

int src_ignore_match(const src_ignore_rule *r, const char *relpath, int is_dir)
{
    int full = 0;
    if (r->anchored) full = src_glob_match(r->pattern, relpath);
    else
        for (const char *c = relpath; c && !full; c = strchr(c, '/') ? strchr(c, '/') + 1 : NULL)
            full = src_glob_match(r->pattern, c);
    if (full && (!r->dir_only || is_dir)) return 1;
    if (r->dir_only && !r->anchored) {
        /* a file is covered when an ancestor directory component matches */
        char comp[4096];
        const char *c = relpath;
        for (;;) {
            const char *sl = strchr(c, '/');
            if (!sl && !is_dir) break;
            size_t k = sl ? (size_t)(sl - c) : strlen(c);
            if (k < sizeof comp) {
                memcpy(comp, c, k);
                comp[k] = 0;
                if (src_glob_match(r->pattern, comp)) return 1;
            }
            if (!sl) break;
            c = sl + 1;
        }
    }
    return 0;
}

/* ---- .dlm/training.yaml ---------------------------------------------------------- */

void src_yaml_free(src_yaml *y)
{
    for (int i = 0; i < y->include.n; i++) free(y->include.v[i]);
    free(y->include.v);
    for (int i = 0; i < y->exclude.n; i++) free(y->exclude.v[i]);
    free(y->exclude.v);
    for (int i = 0; i < y->n_metadata; i++) { free(y->metadata[i].key); free(y->metadata[i].val); }
    free(y->metadata);
    for (int i = 0; i < y->n_weights; i++) { free(y->weights[i].key); free(y->weights[i].val); }
    free(y->weights);
    memset(y, 0, sizeof *y);
}

static int yerr(dlm_err *e, const char *label, const ynode *n, const char *fmt, const char *what)
{
    return err_at(e, "SchemaValidationError", label, n ? n->line : 0, n ? n->col : 0, fmt, what);
}

static int y_strlist(const char *label, const ynode *v, const char *key, doc_strlist *out, dlm_err *e)
{
    if (v->kind != YN_SEQ) return yerr(e, label, v, "%s: Input should be a valid tuple", key);
    out->v = calloc(v->n ? v->n : 1, sizeof(char *));
    if (!out->v) return err_set(e, "MemoryError", "out of memory");
    for (size_t i = 0; i < v->n; i++) {
        const ynode *it = v->vals[i];
        if (it->kind != YN_STR) return yerr(e, label, it, "%s: Input should be a valid string", key);
        if (memchr(it->text, 0, it->len)) return yerr(e, label, it, "%s: NUL in pattern", key);
        out->v[out->n] = str_ndup(it->text, it->len);
        if (!out->v[out->n]) return err_set(e, "MemoryError", "out of memory");
        out->n++;
    }
    return 0;
}

static int y_str(const ynode *n, char **out)
{
    if (n->kind != YN_STR || memchr(n->text, 0, n->len)) return -1;
    *out = str_ndup(n->text, n->len);
    return *out ? 0 : -1;
}

static int y_bool(const ynode *v, int *out)
{
    /* pydantic's lax bool */
    if (v->kind == YN_BOOL) { *out = v->b; return 0; }
    if (v->kind == YN_INT && !v->big && (v->i == 0 || v->i == 1)) { *out = (int)v->i; return 0; }
    if (v->kind == YN_STR) {
        static const char *const t[] = {"1", "on", "t", "true", "y", "yes", NULL};
        static const char *const f[] = {"0", "off", "f", "false", "n", "no", NULL};
        for (int i = 0; t[i]; i++) if (v->len == strlen(t[i]) && !strncasecmp(v->text, t[i], v->len)) { *out = 1; return 0; }
        for (int i = 0; f[i]; i++) if (v->len == strlen(f[i]) && !strncasecmp(v->text, f[i], v->len)) { *out = 0; return 0; }
    }
    return -1;
}

static int y_float(const ynode *v, double *out)
{
    if (v->kind == YN_FLOAT) { *out = v->f; return 0; }
    if (v->kind == YN_INT) { *out = v->big ? strtod(v->bigtext, NULL) : (double)v->i; return 0; }
    if (v->kind == YN_BOOL) { *out = v->b; return 0; }
    if (v->kind == YN_STR && v->len && v->len < 64) {
        char buf[64];
        memcpy(buf, v->text, v->len);
        buf[v->len] = 0;
        char *end;
        errno = 0;
        double d = strtod(buf, &end);
        while (*end == ' ') end++;
        if (end != buf && !*end) { *out = d; return 0; }
    }
    return -1;
}

static int yaml_fill(const char *label, const ynode *root, src_yaml *y, dlm_err *e)
{
    for (size_t i = 0; i < root->n; i++) {
        const ynode *k = root->keys[i], *v = root->vals[i];
        if (k->kind != YN_STR) return yerr(e, label, k, "%s: keys must be strings", "[key]");
        char key[64];
        size_t kl = k->len < sizeof key - 1 ? k->len : sizeof key - 1;
        memcpy(key, k->text, kl);
        key[kl] = 0;
        if (kl != k->len) return yerr(e, label, k, "%s: Extra inputs are not permitted", "[key]");
        if (!strcmp(key, "dlm_training_version")) {
            if (v->kind != YN_INT || v->big || v->i != 1)
                return yerr(e, label, v, "%s: Input should be 1", key);
        } else if (!strcmp(key, "include")) {
            if (y_strlist(label, v, key, &y->include, e)) return -1;
        } else if (!strcmp(key, "exclude")) {
            if (y_strlist(label, v, key, &y->exclude, e)) return -1;
        } else if (!strcmp(key, "exclude_defaults")) {
            if (y_bool(v, &y->exclude_defaults)) return yerr(e, label, v, "%s: Input should be a valid boolean", key);
        } else if (!strcmp(key, "metadata")) {
            if (v->kind != YN_MAP) return yerr(e, label, v, "%s: Input should be a valid dictionary", key);
            y->metadata = calloc(v->n ? v->n : 1, sizeof *y->metadata);
            if (!y->metadata) return err_set(e, "MemoryError", "out of memory");
            for (size_t j = 0; j < v->n; j++) {
                src_kv *kv = &y->metadata[y->n_metadata];
                if (y_str(v->keys[j], &kv->key)) return yerr(e, label, v->keys[j], "%s: keys must be strings", key);
                y->n_metadata++;
                if (y_str(v->vals[j], &kv->val)) return yerr(e, label, v->vals[j], "%s: Input should be a valid string", key);
            }
        } else if (!strcmp(key, "weights")) {
            if (v->kind != YN_MAP) return yerr(e, label, v, "%s: Input should be a valid dictionary", key);
            size_t total = 0;
            for (size_t j = 0; j < v->n; j++) {
                if (v->vals[j]->kind != YN_MAP) return yerr(e, label, v->vals[j], "%s: Input should be a valid dictionary", key);
                total += v->vals[j]->n;
            }
            y->weights = calloc(total ? total : 1, sizeof *y->weights);
            if (!y->weights) return err_set(e, "MemoryError", "out of memory");
            for (size_t j = 0; j < v->n; j++) {
                const ynode *inner = v->vals[j];
                for (size_t m = 0; m < inner->n; m++) {
                    src_weight *w = &y->weights[y->n_weights];
                    if (y_str(v->keys[j], &w->key)) return yerr(e, label, v->keys[j], "%s: keys must be strings", key);
                    y->n_weights++;
                    if (y_str(inner->keys[m], &w->val)) return yerr(e, label, inner->keys[m], "%s: keys must be strings", key);
                    if (y_float(inner->vals[m], &w->w))
                        return yerr(e, label, inner->vals[m], "%s: Input should be a valid number", key);
                    if (w->w < 0) return yerr(e, label, inner->vals[m], "%s: weights must be >= 0", key);
                }
            }
        } else {
            return err_at(e, "SchemaValidationError", label, k->line, k->col, "%s: Extra inputs are not permitted", key);
        }
    }
    return 0;
}

int src_yaml_parse(const char *label, const char *text, size_t len, src_yaml *y, dlm_err *e)
{
    memset(y, 0, sizeof *y);
    y->exclude_defaults = 1;
    size_t i = 0;
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) i++;
    if (i == len) return 0;                     /* empty file = {} */
    ydoc d = {0};
    if (ydoc_parse(text, len, 1, label, &d, e)) return -1;
    int rc = 0;
    if (!d.root || d.root->kind == YN_NULL) rc = 0;
    else if (d.root->kind != YN_MAP)
        rc = err_at(e, "SchemaValidationError", label, d.root->line, d.root->col,
                    "top-level must be a mapping, got %s", ynode_pytype(d.root));
    else rc = yaml_fill(label, d.root, y, e);
    ydoc_free(&d);
    if (rc) src_yaml_free(y);
    return rc;
}
