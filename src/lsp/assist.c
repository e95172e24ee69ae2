/* assist — textDocument/completion and textDocument/hover.
 *
 * Where the cursor is decides what is offered: in the frontmatter, after
 * `key:` the key's values (registry bases with size and licence, enum
 * values, booleans), else the keys the schema accepts at that nesting level
 * (from doc_schema_keys, so never a key the parser would refuse); in the
 * body, section fences as snippets and, after `::type#`, the adapters
 * training.adapters declares; in an empty document, the templates.
 * Hover explains a key (meaning, default, rule), a base (architecture,
 * size, licence, and whether `dlm doctor` plans it to fit this machine) and
 * a section (its id, its adapter, and whether the store has trained it). */
#include "lsp/lsp_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/templates.h"
#include "store/store.h"
#include "util/json.h"
#include "util/ulid.h"
#include "weights/registry.h"

enum { K_PROPERTY = 10, K_VALUE = 12, K_ENUM = 20, K_SNIPPET = 15, K_MODULE = 9, K_FILE = 17 };

typedef struct cursor {
    int line;              /* 0-based */
    size_t off;            /* byte offset in the text */
    const char *lp;        /* the line */
    size_t ll, col;        /* its length, cursor byte in it */
    fm_outline o;
    int in_fm, in_body;
} cursor;

static int cursor_at(const lsp_doc *d, const json_t *params, cursor *c)
{
    memset(c, 0, sizeof *c);
    const json_t *pos = json_object_get(params, "position");
    if (text_offset(d->text, d->len, pos, &c->off)) return -1;
    c->line = (int)json_integer_value(json_object_get(pos, "line"));
    size_t ls = text_line_start(d->text, d->len, c->line);
    c->lp = d->text + ls;
    c->ll = text_line_len(d->text, d->len, ls);
    c->col = c->off - ls;
    fm_outline_build(d->text, d->len, &c->o);
    c->in_fm = c->o.open_line == 0 && c->line > 0 && (c->o.close_line < 0 || c->line < c->o.close_line);
    c->in_body = c->o.close_line >= 0 && c->line > c->o.close_line;
    return 0;
}

static json_t *item(const char *label, int kind, const char *detail, const char *doc)
{
    json_t *it = json_pack("{s:s, s:i}", "label", label, "kind", kind);
    if (detail) json_object_set_new(it, "detail", json_string(detail));
    if (doc) json_object_set_new(it, "documentation", json_pack("{s:s, s:s}", "kind", "markdown", "value", doc));
    return it;
}

static void fmt_params(int64_t p, char *b, size_t cap)
{
    if (p >= 1000000000) snprintf(b, cap, "%.1fB", (double)p / 1e9);
    else if (p >= 1000000) snprintf(b, cap, "%.0fM", (double)p / 1e6);
    else snprintf(b, cap, "%.0fK", (double)p / 1e3);
}

static json_t *base_items(void)
{
    json_t *items = json_array();
    for (int i = 0; i < registry_count(); i++) {
        const reg_entry *r = registry_at(i);
        char ps[32], detail[256], doc[1024];
        fmt_params(r->params, ps, sizeof ps);
        snprintf(detail, sizeof detail, "%s | %.1f GB | ctx %d | %s%s%s%s", ps, r->size_gb_fp16, r->context_length,
                 r->license ? r->license : "?", r->requires_acceptance ? " (gated)" : "",
                 r->modality ? " | " : "", r->modality ? registry_modality_name(r->modality) : "");
        snprintf(doc, sizeof doc, "**%s**\n\n- HF: `%s`\n- Architecture: %s\n- Parameters: %s\n- Context: %d\n- License: %s%s\n",
                 r->key, r->hf_id ? r->hf_id : "(ships with dlm)", r->architecture ? r->architecture : "?", ps,
                 r->context_length, r->license ? r->license : "?", r->requires_acceptance ? " (gated)" : "");
        json_array_append_new(items, item(r->key, K_VALUE, detail, doc));
    }
    return items;
}

/* The object a key typed at column indent of the cursor's line belongs to:
 * a key above at the same column is a sibling (same parent), the nearest
 * one left of it is the parent (its list item when the line is "- "). */
static void parent_path(const cursor *c, int indent, int item, char *out, size_t cap)
{
    out[0] = 0;
    for (int i = c->o.n - 1; i >= 0; i--) {
        const fm_line *f = &c->o.v[i];
        if (f->line >= c->line || f->indent < 0 || !f->key[0] || f->indent > indent) continue;
        if (f->indent == indent) {
            const char *dot = strrchr(f->path, '.');
            snprintf(out, cap, "%.*s", dot ? (int)(dot - f->path) : 0, f->path);
        } else snprintf(out, cap, "%s%s", f->path, item ? "[]" : "");
        return;
    }
}

typedef struct keys_ctx {
    const char *prefix;
    json_t *items;
} keys_ctx;

static void key_item(void *vctx, const char *key)
{
    keys_ctx *k = vctx;
    size_t pl = strlen(k->prefix);
    if (strncmp(key, k->prefix, pl)) return;
    const char *leaf = key + pl;
    if (!*leaf || strchr(leaf, '.') || strchr(leaf, '[') || strchr(leaf, '*')) return;
    const key_info *ki = keys_find(key);
    char detail[256], doc[1024];
    snprintf(detail, sizeof detail, "%s%s%s", ki ? ki->rule : "", ki && ki->deflt[0] ? "; default " : "",
             ki ? ki->deflt : "");
    snprintf(doc, sizeof doc, "`%s`%s%s%s", key, ki ? ": " : "", ki ? ki->meaning : "",
             ki && ki->extension ? "\n\n*dlm extension: the original DocumentLanguageModel refuses it.*" : "");
    json_t *it = item(leaf, K_PROPERTY, detail, doc);
    char ins[128];
    snprintf(ins, sizeof ins, "%s: ", leaf);
    json_object_set_new(it, "insertText", json_string(ins));
    json_array_append_new(k->items, it);
}

static json_t *fence_items(void)
{
    static const struct { const char *label, *detail, *snippet; } F[] = {
        {"::instruction::", "Supervised fine-tuning Q&A section", "::instruction::\n### Q\n$1\n\n### A\n$2\n"},
        {"::preference::", "DPO/ORPO preference section",
         "::preference::\n### Prompt\n$1\n\n### Chosen\n$2\n\n### Rejected\n$3\n"},
        {"::image::", "Vision-language image section", "::image path=\"$1\" alt=\"$2\"::\n$3\n"},
        {"::audio::", "Audio-language section", "::audio path=\"$1\" transcript=\"$2\"::\n$3\n"},
    };
    json_t *items = json_array();
    for (size_t i = 0; i < sizeof F / sizeof F[0]; i++) {
        json_t *it = item(F[i].label, K_SNIPPET, F[i].detail, NULL);
        json_object_set_new(it, "insertText", json_string(F[i].snippet));
        json_object_set_new(it, "insertTextFormat", json_integer(2));
        json_array_append_new(items, it);
    }
    return items;
}

/* Adapter names declared under training.adapters (from the outline, so it
 * works while the document does not parse). */
static json_t *adapter_items(const cursor *c)
{
    json_t *items = json_array();
    const char *pre = "training.adapters.";
    for (int i = 0; i < c->o.n; i++) {
        const char *p = c->o.v[i].path;
        if (c->o.v[i].key[0] && !strncmp(p, pre, strlen(pre)) && !strchr(p + strlen(pre), '.'))
            json_array_append_new(items, item(p + strlen(pre), K_MODULE, "adapter (training.adapters)", NULL));
    }
    return items;
}

static json_t *template_items(void)
{
    json_t *items = json_array();
    doc_template_set set;
    dlm_err e;
    if (doc_templates_load(&set, &e)) return items;
    char id[27];
    ulid_new(id);
    for (int i = 0; i < set.n; i++) {
        json_t *meta = json_loads(set.v[i].meta, 0, NULL);
        const char *base = meta ? jget_str(meta, "recommended_base") : NULL;
        char *text = NULL;
        if (!doc_template_render(&set.v[i], id, base ? base : "smollm2-135m", &text, &e)) {
            json_t *it = item(set.v[i].name, K_FILE, set.v[i].summary, NULL);
            json_object_set_new(it, "insertText", json_string(text));
            json_array_append_new(items, it);
        }
        free(text);
        json_decref(meta);
    }
    doc_templates_free(&set);
    return items;
}

json_t *lsp_completion(lsp_server *s, lsp_doc *d, const json_t *params)
{
    (void)s;
    cursor c;
    if (cursor_at(d, params, &c)) return (json_t *)-1;
    json_t *items = NULL;
    size_t i = 0;
    while (i < c.col && c.lp[i] == ' ') i++;
    if (d->len == 0 || (c.o.open_line != 0 && c.line == 0 && c.ll == 0)) {
        items = template_items();
    } else if (c.in_fm) {
        const fm_line *f = NULL;
        for (int k = 0; k < c.o.n; k++)
            if (c.o.v[k].line == c.line) f = &c.o.v[k];
        if (f && f->key[0] && c.col > f->key_off + strlen(f->key)) {   /* after "key:": values */
            char sp[256];
            fm_schema_path(f->path, sp, sizeof sp);
            const key_info *ki = keys_find(sp);
            if (!strcmp(sp, "base_model")) items = base_items();
            else if (ki && ki->values) {
                items = json_array();
                for (const char *const *v = ki->values; *v; v++)
                    json_array_append_new(items, item(*v, K_ENUM, ki->meaning, NULL));
            }
        } else {
            int item_line = i + 1 < c.ll && c.lp[i] == '-' && c.lp[i + 1] == ' ';
            int indent = (int)i;
            if (item_line) {
                indent = (int)i + 2;
                while ((size_t)indent < c.col && c.lp[indent] == ' ') indent++;
            }
            char parent[256], sp[256], prefix[300];
            parent_path(&c, indent, item_line, parent, sizeof parent);
            fm_schema_path(parent, sp, sizeof sp);
            if (!strcmp(sp, "training.adapters")) items = json_array();   /* names are the author's */
            else {
                snprintf(prefix, sizeof prefix, "%s%s", sp, sp[0] ? "." : "");
                keys_ctx k = {prefix, json_array()};
                doc_schema_keys(key_item, &k);
                items = k.items;
            }
        }
    } else if (c.in_body) {
        const char *hash = NULL;
        if (c.col >= 2 && c.lp[0] == ':' && c.lp[1] == ':') hash = memchr(c.lp, '#', c.col);
        if (hash) items = adapter_items(&c);
        else if (i == c.col || (c.col >= 1 && c.lp[i] == ':')) items = fence_items();
    }
    fm_outline_free(&c.o);
    if (!items) return json_null();
    return json_pack("{s:b, s:o}", "isIncomplete", 0, "items", items);
}

/* ---- hover ------------------------------------------------------------------ */

static json_t *markdown(const char *md, json_t *range)
{
    json_t *h = json_pack("{s:{s:s, s:s}}", "contents", "kind", "markdown", "value", md);
    if (range) json_object_set_new(h, "range", range);
    return h;
}

static void base_md(lsp_server *s, const char *key, strbuf *sb)
{
    const reg_entry *r = registry_lookup(key);
    if (!strncmp(key, "hf:", 3)) {
        sb_printf(sb, "**Custom HF model:** `%s`\n", key + 3);
        return;
    }
    if (!r) {
        sb_printf(sb, "**Unknown base model:** `%s`\n\nNot found in the registry.", key);
        return;
    }
    char ps[32];
    fmt_params(r->params, ps, sizeof ps);
    int fits = lsp_base_fits(s, key);
    sb_printf(sb,
              "### %s\n\n| Property | Value |\n|----------|-------|\n| HF ID | `%s` |\n| Architecture | %s |\n"
              "| Parameters | %s |\n| FP16 Size | %.1f GB |\n| Context | %d tokens |\n| Modality | %s |\n"
              "| License | %s%s |\n| Fits this machine | %s |\n",
              r->key, r->hf_id ? r->hf_id : "(ships with dlm)", r->architecture ? r->architecture : "?", ps,
              r->size_gb_fp16, r->context_length, registry_modality_name(r->modality), r->license ? r->license : "?",
              r->requires_acceptance ? " (gated)" : "",
              fits > 0 ? "yes (`dlm doctor` plan, default settings)" : fits == 0 ? "no (`dlm doctor` has the plan)" : "not trainable by dlm");
}

/* Is the section's id among the store's trained content hashes? */
static int section_trained(lsp_server *s, const dlm_doc *p, const char *id)
{
    if (!s->opt.home) return -1;
    char store[4096], mp[4200];
    dlm_err e;
    if (store_dir(s->opt.home, doc_fm(p)->dlm_id, store, sizeof store, &e)) return -1;
    snprintf(mp, sizeof mp, "%s/manifest.json", store);
    json_t *m = json_load_file(mp, 0, NULL);
    if (!m) return -1;
    int r = json_object_get(json_object_get(m, "content_hashes"), id) != NULL;
    json_decref(m);
    return r;
}

json_t *lsp_hover(lsp_server *s, lsp_doc *d, const json_t *params)
{
    cursor c;
    if (cursor_at(d, params, &c)) return (json_t *)-1;
    json_t *h = NULL;
    strbuf sb = STRBUF_INIT;
    if (c.in_fm) {
        const fm_line *f = NULL;
        for (int k = 0; k < c.o.n; k++)
            if (c.o.v[k].line == c.line && c.o.v[k].key[0]) f = &c.o.v[k];
        if (f) {
            char sp[256];
            fm_schema_path(f->path, sp, sizeof sp);
            if (!strcmp(sp, "base_model") && c.col >= f->val_off && f->val_off < c.ll) {
                char key[512];
                size_t n = c.ll - f->val_off;
                snprintf(key, sizeof key, "%.*s", (int)n, c.lp + f->val_off);
                for (char *q = key + strlen(key); q > key && (q[-1] == ' ' || q[-1] == '"' || q[-1] == '\''); q--) q[-1] = 0;
                base_md(s, key[0] == '"' || key[0] == '\'' ? key + 1 : key, &sb);
            } else {
                const key_info *ki = keys_find(sp);
                if (ki) {
                    sb_printf(&sb, "**`%s`**: %s\n\n- default: %s\n- rule: %s\n", f->path, ki->meaning,
                              ki->deflt[0] ? ki->deflt : "(object)", ki->rule);
                    if (ki->extension) sb_puts(&sb, "\n*dlm extension: the original DocumentLanguageModel refuses it.*\n");
                }
            }
            if (sb.len)
                h = markdown(sb.buf, text_range(d->text, d->len, c.line, f->key_off, c.line, c.ll));
        }
    } else if (c.in_body && d->parsed) {
        const doc_section *sec = NULL;
        for (int i = 0; i < doc_nsections(d->parsed); i++) {
            const doc_section *x = doc_section_at(d->parsed, i);
            if (x->source_file) continue;
            if (x->line - 1 <= c.line) sec = x;
        }
        if (sec) {
            sb_printf(&sb, "**Section** `%s`%s%s%s\n\n- id: `%s`\n", doc_section_type_name(sec->type),
                      sec->adapter ? " → adapter `" : "", sec->adapter ? sec->adapter : "", sec->adapter ? "`" : "",
                      sec->id);
            if (sec->type == DOC_INSTRUCTION) sb_printf(&sb, "- %d question/answer pair(s)\n", sec->n_pairs);
            if (sec->type == DOC_PREFERENCE) sb_printf(&sb, "- %d preference triple(s)\n", sec->n_triples);
            int t = section_trained(s, d->parsed, sec->id);
            sb_printf(&sb, "- %s\n", t > 0 ? "in the adapter's training data (trained by an earlier run)"
                                   : t == 0 ? "not trained yet: the next `dlm train` adds it"
                                            : "no store yet: `dlm train` has not run on this document");
            h = markdown(sb.buf, NULL);
        }
    }
    sb_free(&sb);
    fm_outline_free(&c.o);
    return h ? h : json_null();
}
