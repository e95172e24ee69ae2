/* diag — textDocument/publishDiagnostics from the parser and schema the CLI
 * uses (src/doc), at the positions the CLI prints.
 *
 * The parser stops at the first error. To report more than one, the text is
 * re-parsed with the offending part blanked (its characters removed, its
 * line breaks kept, so every later position stays where it was):
 *   - a schema error: the key's line and the lines nested under it;
 *   - a YAML or version error, or a missing required key: the whole
 *     frontmatter is replaced by a minimal valid one, so the body is still
 *     checked;
 *   - a body error: the section it is in, up to the next fence line.
 * An unterminated code block, a missing frontmatter or an error without a
 * line ends the search. The schema joins all its errors into the first
 * one's message ("a: ...; b: ..."); each is reported at its own key and
 * the joined message is cut back to its own part.
 *
 * After a parse, checks the parser leaves to later commands: an unknown
 * base key (warning, as the original dlm-lsp), training.sources paths
 * that do not exist (error: `dlm train` refuses them), keys that are dlm
 * extensions (information: the original refuses them) and an old
 * dlm_version (information: `dlm migrate` rewrites it). */
#include "lsp/lsp_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "weights/registry.h"

#define MAX_ROUNDS 64

enum { SEV_ERROR = 1, SEV_WARNING = 2, SEV_INFO = 3 };

static int is_blank_line(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t') return 0;
    return 1;
}

static int leading_spaces(const char *p, size_t n)
{
    int i = 0;
    while ((size_t)i < n && p[i] == ' ') i++;
    return i;
}

/* A section fence line: "::type...::" (the body parser decides the rest). */
static int is_fence(const char *p, size_t n)
{
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
    return n >= 4 && p[0] == ':' && p[1] == ':' && p[n - 1] == ':' && p[n - 2] == ':';
}

/* Remove the characters of 0-based lines [l0, l1) of *t, keeping their line
 * breaks. Returns 1 when something was removed. */
static int blank_lines(char *t, size_t *len, int l0, int l1)
{
    size_t a = text_line_start(t, *len, l0), b = text_line_start(t, *len, l1);
    size_t o = a;
    int changed = 0;
    for (size_t i = a; i < b; i++) {
        if (t[i] == '\n' || t[i] == '\r') t[o++] = t[i];
        else changed = 1;
    }
    memmove(t + o, t + b, *len - b);
    *len -= b - o;
    t[*len] = 0;
    return changed;
}

/* Replace the frontmatter between 0-based lines open and close with a
 * minimal valid one (same number of lines). 0 when there is no room. */
static int stub_frontmatter(char **t, size_t *len, int open, int close)
{
    if (close - open - 1 < 2) return 0;
    blank_lines(*t, len, open + 1, close);
    const char *stub[2] = {"dlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3", "base_model: tiny"};
    for (int k = 0; k < 2; k++) {
        size_t at = text_line_start(*t, *len, open + 1 + k), n = strlen(stub[k]);
        char *nt = realloc(*t, *len + n + 1);
        if (!nt) return 0;
        *t = nt;
        memmove(nt + at + n, nt + at, *len - at + 1);
        memcpy(nt + at, stub[k], n);
        *len += n;
    }
    return 1;
}

/* A diagnostic at 0-based line l, code-point column col (1-based; 0 = the
 * line start): the range covers the token there (the whole line from
 * column 1). */
static json_t *mk(const char *t, size_t len, int l, int col, int sev, const char *code, const char *msg,
                  json_t *data)
{
    size_t off = text_line_start(t, len, l), ll = text_line_len(t, len, off);
    const char *p = t + off;
    size_t b0 = col > 1 ? text_col_to_bytes(p, ll, col) : 0, b1 = ll;
    if (col > 1) {
        b1 = b0;
        while (b1 < ll && !strchr(" \t:,{}[]", p[b1])) b1++;
        if (b1 == b0) b1 = ll;
    }
    json_t *dg = json_pack("{s:o, s:i, s:s, s:s}", "range", text_range(t, len, l, b0, l, b1), "severity", sev,
                           "source", "dlm", "message", msg);
    if (code && code[0]) json_object_set_new(dg, "code", json_string(code));
    if (data) json_object_set_new(dg, "data", data);
    return dg;
}

/* "training.sources.0.pathh" → parent schema path "training.sources[]", leaf "pathh". */
static void split_loc(const char *loc, char *parent, size_t pcap, char *leaf, size_t lcap)
{
    const char *dot = strrchr(loc, '.');
    snprintf(leaf, lcap, "%s", dot ? dot + 1 : loc);
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%.*s", dot ? (int)(dot - loc) : 0, loc);
    /* list indexes read as [] */
    char out[512];
    size_t o = 0;
    for (char *c = strtok(tmp, "."); c && o < sizeof out - 8; c = strtok(NULL, ".")) {
        int num = c[0] != 0;
        for (const char *q = c; *q; q++)
            if (*q < '0' || *q > '9') num = 0;
        int w = snprintf(out + o, sizeof out - o, "%s%s", num ? "" : (o ? "." : ""), num ? "[]" : c);
        if (w < 0 || (size_t)w >= sizeof out - o) break;
        o += (size_t)w;
    }
    out[o] = 0;
    fm_schema_path(out, parent, pcap);
}

/* An unknown key's message gets the did-you-mean, and data for the quick fix. */
static void did_you_mean(json_t *dg)
{
    const char *msg = json_string_value(json_object_get(dg, "message"));
    const char *tail = ": Extra inputs are not permitted";
    const char *at = strstr(msg, tail);
    /* the first line alone: the schema's own hint (a dotted path, for the
     * CLI) follows it, and is replaced by the key's leaf the quick fix writes */
    const char *nl = strchr(msg, '\n');
    size_t first = nl ? (size_t)(nl - msg) : strlen(msg);
    if (!at || (size_t)(at - msg) + strlen(tail) != first || memchr(msg, ';', first)) return;
    char loc[512], parent[512], leaf[128], sug[64];
    snprintf(loc, sizeof loc, "%.*s", (int)(at - msg), msg);
    split_loc(loc, parent, sizeof parent, leaf, sizeof leaf);
    if (!keys_suggest(parent, leaf, sug, sizeof sug)) return;
    char *m = NULL;
    if (asprintf(&m, "%.*s\nhint: did you mean '%s'?", (int)first, msg, sug) < 0) return;
    json_object_set_new(dg, "message", json_string(m));
    json_object_set_new(dg, "data", json_pack("{s:s, s:s}", "replace", leaf, "with", sug));
    free(m);
}

static void add_err(json_t *arr, const char *t, size_t len, const dlm_err *e)
{
    int l = e->line > 0 ? e->line - 1 : 0, col = e->col;
    if (e->line <= 0) {   /* an encoding error: "... at byte N ..." */
        const char *b = strstr(e->msg, "at byte ");
        if (b) {
            size_t at = strtoull(b + 8, NULL, 10);
            if (at > len) at = len;
            l = 0;
            size_t ls = 0;
            for (size_t i = 0; i < at; i++)
                if (t[i] == '\n') { l++; ls = i + 1; }
            col = 1;
            for (size_t i = ls; i < at; i++)
                if (((unsigned char)t[i] & 0xC0) != 0x80) col++;
        }
    }
    char *m = NULL;
    if (e->hint[0] ? asprintf(&m, "%s\nhint: %s", e->msg, e->hint) : asprintf(&m, "%s", e->msg)) {}
    json_array_append_new(arr, mk(t, len, l, col, SEV_ERROR, e->kind, m ? m : e->msg, NULL));
    free(m);
}

/* The schema's joined message "a: x; b: y" cut back to "a: x" when the next
 * diagnostic, found after a's line was blanked, is "b: y". */
static void trim_joined(json_t *arr, size_t first)
{
    for (size_t i = first; i + 1 < json_array_size(arr); i++) {
        json_t *a = json_array_get(arr, i), *b = json_array_get(arr, i + 1);
        const char *ma = json_string_value(json_object_get(a, "message"));
        const char *mb = json_string_value(json_object_get(b, "message"));
        size_t la = strlen(ma), lb = strlen(mb);
        if (la > lb + 2 && !strcmp(ma + la - lb, mb) && !strncmp(ma + la - lb - 2, "; ", 2)) {
            char *cut = strndup(ma, la - lb - 2);
            if (cut) json_object_set_new(a, "message", json_string(cut));
            free(cut);
        }
    }
}

/* Parse text, recovering as the header says. Returns the last parse (NULL
 * when none succeeded); *stubbed when the frontmatter was replaced. */
static dlm_doc *collect(const char *label, const char *text, size_t len, json_t *arr, int *clean, char *first,
                        size_t firstcap, int *stubbed)
{
    fm_outline o;
    fm_outline_build(text, len, &o);
    char *w = malloc(len + 1);
    if (!w) { fm_outline_free(&o); return NULL; }
    memcpy(w, text, len);
    w[len] = 0;
    size_t wl = len;
    int nl = text_nlines(text, len);
    unsigned char *bl = calloc((size_t)nl + 1, 1);   /* lines this function blanked */
    if (!bl) { free(w); fm_outline_free(&o); return NULL; }
    *stubbed = 0;
    *clean = 0;
    first[0] = 0;
    dlm_doc *p = NULL;
    char last[4096] = "";
    int last_line = -1;
    for (int round = 0; round < MAX_ROUNDS; round++) {
        dlm_err e;
        err_clear(&e);
        p = doc_parse(label, w, wl, &e);
        if (p) {
            *clean = round == 0;
            break;
        }
        if (round == 0) err_format(&e, first, firstcap);
        if (e.line == last_line && !strcmp(e.msg, last)) break;   /* no progress */
        snprintf(last, sizeof last, "%s", e.msg);
        last_line = e.line;
        int l = e.line - 1;
        int schema = !strcmp(e.kind, "SchemaValidationError") && l > 0 && l < o.close_line &&
                     !strstr(e.msg, "Field required");
        /* the block under a key: the lines after it indented deeper (in the
         * original text, so what this function blanked still counts) */
        int end = l + 1, artefact = 0;
        if (schema) {
            size_t off = text_line_start(text, len, l);
            int ind = leading_spaces(text + off, text_line_len(text, len, off));
            int n_sub = 0, n_bl = 0;
            for (; end < o.close_line; end++) {
                size_t so = text_line_start(text, len, end), sl = text_line_len(text, len, so);
                if (is_blank_line(text + so, sl)) continue;
                if (leading_spaces(text + so, sl) <= ind) break;
                n_sub++;
                n_bl += bl[end];
            }
            /* a key whose block was all blanked here is an error of ours, not the author's */
            artefact = n_sub > 0 && n_bl == n_sub;
        }
        const char *req = strstr(e.msg, ": Field required");
        if (req && round > 0) {   /* a required key this function blanked */
            char loc[256];
            snprintf(loc, sizeof loc, "%.*s", (int)(req - e.msg), e.msg);
            const fm_line *f = fm_outline_find(&o, loc);
            if (f && bl[f->line]) artefact = 1;
        }
        if (!artefact) add_err(arr, text, len, &e);
        if (e.line <= 0 || o.open_line != 0 || o.close_line < 0) break;
        if (l <= o.close_line) {
            if (*stubbed) break;
            if (schema) {
                for (int k = l; k < end && k < nl; k++) bl[k] = 1;
                if (blank_lines(w, &wl, l, end)) continue;
            }
            if (!stub_frontmatter(&w, &wl, o.open_line, o.close_line)) break;
            *stubbed = 1;
            continue;
        }
        if (strstr(e.msg, "unterminated")) break;
        /* line starts of w, once: the search below walks lines both ways */
        int n = text_nlines(w, wl);
        size_t *ix = malloc((size_t)n * sizeof *ix);
        if (!ix) break;
        size_t at = 0;
        for (int k = 0; k < n; k++) {
            ix[k] = at;
            at += text_line_len(w, wl, at);
            if (at + 1 < wl && w[at] == '\r' && w[at + 1] == '\n') at++;
            at++;
        }
        int start = l < n ? l : n - 1;
        for (; start > o.close_line + 1; start--)
            if (is_fence(w + ix[start], text_line_len(w, wl, ix[start]))) break;
        end = l + 1;
        for (; end < n; end++)
            if (is_fence(w + ix[end], text_line_len(w, wl, ix[end]))) break;
        free(ix);
        if (!blank_lines(w, &wl, start, end)) break;
    }
    free(w);
    free(bl);
    fm_outline_free(&o);
    return p;
}

static void check_base(json_t *arr, const char *t, size_t len, const fm_outline *o, const doc_frontmatter *fm)
{
    base_ref b;
    dlm_err e;
    err_clear(&e);
    if (!fm->base_model || !registry_parse_base(fm->base_model, &b, &e)) return;
    if (strcmp(e.kind, "UnknownBaseModelError")) return;
    const fm_line *f = fm_outline_find(o, "base_model");
    int l = f ? f->line : 0;
    json_t *sugg = json_array();
    const char *s[5];
    int n = registry_suggest(fm->base_model, s, 5);
    for (int i = 0; i < n; i++) json_array_append_new(sugg, json_string(s[i]));
    char *m = NULL;
    if (asprintf(&m, "Unknown base model '%s'. Not found in the registry.%s%s", fm->base_model,
                 e.hint[0] ? "\nhint: " : "", e.hint) < 0)
        m = NULL;
    size_t off = text_line_start(t, len, l), ll = text_line_len(t, len, off);
    json_t *dg = json_pack("{s:o, s:i, s:s, s:s, s:s, s:{s:o}}", "range",
                           text_range(t, len, l, f ? f->val_off : 0, l, ll), "severity", SEV_WARNING, "source",
                           "dlm", "code", "UnknownBaseModelError", "message", m ? m : e.msg, "data", "suggestions",
                           sugg);
    json_array_append_new(arr, dg);
    free(m);
}

static void check_sources(json_t *arr, const char *t, size_t len, const char *path, const doc_frontmatter *fm)
{
    if (!path) return;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    for (int i = 0; i < fm->training.n_sources; i++) {
        const doc_source *src = &fm->training.sources[i];
        if (!src->path) continue;
        char full[8200];
        if (src->path[0] == '~') {   /* "~" and "~user" from the password database, as doc/sources.c */
            const char *sl = strchr(src->path, '/');
            size_t k = sl ? (size_t)(sl - src->path) : strlen(src->path);
            char name[256];
            struct passwd *pw = NULL;
            if (k == 1) pw = getpwuid(getuid());
            else if (k - 1 < sizeof name) {
                memcpy(name, src->path + 1, k - 1);
                name[k - 1] = 0;
                pw = getpwnam(name);
            }
            if (!pw || !pw->pw_dir) continue;   /* `dlm train` says it cannot expand it */
            snprintf(full, sizeof full, "%s%s", pw->pw_dir, src->path + k);
        } else if (src->path[0] == '/') snprintf(full, sizeof full, "%s", src->path);
        else snprintf(full, sizeof full, "%s/%s", dir, src->path);
        struct stat sb;
        if (!stat(full, &sb)) continue;
        char msg[8400];
        snprintf(msg, sizeof msg,
                 "directive path %s: path does not exist\nhint: fix `path:` in training.sources, or remove the "
                 "directive",
                 full);
        json_array_append_new(arr, mk(t, len, src->line > 0 ? src->line - 1 : 0, 0, SEV_ERROR,
                                      "DirectivePathError", msg, NULL));
    }
}

static void check_extensions(json_t *arr, const char *t, size_t len, const fm_outline *o, const dlm_doc *p)
{
    for (int i = 0; i < o->n; i++) {
        const fm_line *f = &o->v[i];
        if (!f->key[0]) continue;
        char sp[256];
        fm_schema_path(f->path, sp, sizeof sp);
        const key_info *k = keys_find(sp);
        size_t off = text_line_start(t, len, f->line), ll = text_line_len(t, len, off);
        int ext_value = !strcmp(sp, "training.lr_scheduler") && ll - f->val_off >= 13 &&
                        !strncmp(t + off + f->val_off, "cosine_min_lr", 13);
        if (!(k && k->extension) && !ext_value) continue;
        char msg[512];
        if (ext_value)
            snprintf(msg, sizeof msg, "lr_scheduler: cosine_min_lr is a dlm extension: the original "
                                      "DocumentLanguageModel refuses this value");
        else
            snprintf(msg, sizeof msg, "%s is a dlm extension: the original DocumentLanguageModel refuses it "
                                      "(Extra inputs are not permitted)", f->path);
        json_array_append_new(arr, json_pack("{s:o, s:i, s:s, s:s, s:s}", "range",
                                             text_range(t, len, f->line, f->key_off, f->line, ll), "severity",
                                             SEV_INFO, "source", "dlm", "code", "DlmExtension", "message", msg));
    }
    const doc_frontmatter *fm = doc_fm(p);
    const fm_line *f = fm_outline_find(o, "dlm_version");
    if (f && fm->source_version < DOC_SCHEMA_VERSION) {   /* absent reads as 1, but is no old document */
        int l = f->line;
        char msg[256];
        snprintf(msg, sizeof msg, "dlm_version %d is older than %d; `dlm migrate` rewrites the document", fm->source_version,
                 DOC_SCHEMA_VERSION);
        size_t off = text_line_start(t, len, l);
        json_array_append_new(arr, json_pack("{s:o, s:i, s:s, s:s, s:s, s:{s:i}}", "range",
                                             text_range(t, len, l, 0, l, text_line_len(t, len, off)), "severity",
                                             SEV_INFO, "source", "dlm", "code", "OldSchemaVersion", "message", msg,
                                             "data", "from_version", fm->source_version));
    }
}

json_t *lsp_diagnostics_of(const char *path, const char *text, size_t len, dlm_doc **parsed, int *clean,
                           char *first, size_t firstcap)
{
    json_t *arr = json_array();
    int stubbed = 0;
    if (is_blank_line(text, len)) {   /* an empty buffer: a new file, nothing to say yet */
        *parsed = NULL;
        *clean = 0;
        first[0] = 0;
        return arr;
    }
    dlm_doc *p = collect(path ? path : "<text>", text, len, arr, clean, first, firstcap, &stubbed);
    trim_joined(arr, 0);
    for (size_t i = 0; i < json_array_size(arr); i++) did_you_mean(json_array_get(arr, i));
    if (p && stubbed) {
        doc_free(p);
        p = NULL;
    }
    if (p) {
        fm_outline o;
        fm_outline_build(text, len, &o);
        check_base(arr, text, len, &o, doc_fm(p));
        check_sources(arr, text, len, path, doc_fm(p));
        check_extensions(arr, text, len, &o, p);
        fm_outline_free(&o);
    }
    *parsed = p;
    return arr;
}

void lsp_diagnose(lsp_server *s, lsp_doc *d)
{
    doc_free(d->parsed);
    json_decref(d->diags);
    d->diags = lsp_diagnostics_of(d->path, d->text, d->len, &d->parsed, &d->clean, d->error, sizeof d->error);
    lsp_notify(s, "textDocument/publishDiagnostics",
               json_pack("{s:s, s:I, s:O}", "uri", d->uri, "version", (json_int_t)d->version, "diagnostics",
                         d->diags));
}
