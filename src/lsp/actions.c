/* actions — textDocument/codeAction, workspace/executeCommand, the original
 * dlm-lsp's custom requests (dlm/listBaseModels, dlm/listTemplates,
 * dlm/documentState: same names and fields; documentState adds the store,
 * its versions and the last run) and the dlm/trainingProgress notification.
 *
 * Quick fixes answer the diagnostics of diag.c by their code: an unknown key
 * gets its did-you-mean, an unknown base the registry's close keys, an old
 * dlm_version the real migration (doc_migrate_file, the code `dlm migrate`
 * runs) as one edit. Source actions add a training.sources entry and set
 * the base, as the original's dlm.addSourceDirective / dlm.setBaseModel
 * commands do (which are served too: the server sends workspace/applyEdit). */
#include "lsp/lsp_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "doc/templates.h"
#include "run/doctor.h"
#include "run/probe.h"
#include "store/store.h"
#include "util/fs.h"
#include "util/json.h"
#include "weights/registry.h"

/* ---- edits ------------------------------------------------------------------ */

static json_t *edit_for(const char *uri, json_t *range, const char *text)
{
    return json_pack("{s:{s:[{s:o, s:s}]}}", "changes", uri, "range", range, "newText", text);
}

static json_t *line_edit(const lsp_doc *d, int line, size_t b0, size_t b1, const char *text)
{
    return edit_for(d->uri, text_range(d->text, d->len, line, b0, line, b1), text);
}

/* base_model: KEY on its line (or a new line after dlm_id / the opener). */
static json_t *set_base_edit(const lsp_doc *d, const char *key)
{
    fm_outline o;
    fm_outline_build(d->text, d->len, &o);
    json_t *ed = NULL;
    const fm_line *f = fm_outline_find(&o, "base_model");
    if (f) {
        size_t off = text_line_start(d->text, d->len, f->line);
        char *t = NULL;
        if (asprintf(&t, "base_model: %s", key) >= 0)
            ed = line_edit(d, f->line, f->key_off, text_line_len(d->text, d->len, off), t);
        free(t);
    } else if (o.open_line == 0) {
        const fm_line *id = fm_outline_find(&o, "dlm_id");
        int at = id ? id->line + 1 : 1;
        char *t = NULL;
        if (asprintf(&t, "base_model: %s\n", key) >= 0) ed = line_edit(d, at, 0, 0, t);
        free(t);
    }
    fm_outline_free(&o);
    return ed;
}

/* A training.sources entry for rel, after the last one, else a new
 * sources: under training:, else a new training: block. */
static json_t *add_source_edit(const lsp_doc *d, const char *rel)
{
    fm_outline o;
    fm_outline_build(d->text, d->len, &o);
    json_t *ed = NULL;
    char *t = NULL;
    const fm_line *src = fm_outline_find(&o, "training.sources");
    const fm_line *tr = fm_outline_find(&o, "training");
    if (o.open_line != 0 || o.close_line < 0) goto out;
    if (src) {
        int last = src->line, ind = src->indent + 2;
        for (int i = 0; i < o.n; i++) {
            const fm_line *f = &o.v[i];
            if (f->line > src->line && !strncmp(f->path, "training.sources[]", 18)) last = f->line;
            else if (f->line > src->line && f->indent >= 0 && f->indent <= src->indent) break;
        }
        if (asprintf(&t, "%*s- path: %s\n%*s  include: ['**/*']\n", ind, "", rel, ind, "") < 0) t = NULL;
        if (t) ed = line_edit(d, last + 1, 0, 0, t);
    } else if (tr) {
        if (asprintf(&t, "  sources:\n    - path: %s\n      include: ['**/*']\n", rel) < 0) t = NULL;
        if (t) ed = line_edit(d, tr->line + 1, 0, 0, t);
    } else {
        if (asprintf(&t, "training:\n  sources:\n    - path: %s\n      include: ['**/*']\n", rel) < 0) t = NULL;
        if (t) ed = line_edit(d, o.close_line, 0, 0, t);
    }
out:
    free(t);
    fm_outline_free(&o);
    return ed;
}

/* The whole document migrated as `dlm migrate` would write it. */
static json_t *migrate_edit(const lsp_doc *d)
{
    char tmp[] = "/tmp/dlm-lsp-migrate-XXXXXX.dlm";
    int fd = mkstemps(tmp, 4);
    if (fd < 0) return NULL;
    json_t *ed = NULL;
    size_t w = 0;
    while (w < d->len) {
        ssize_t k = write(fd, d->text + w, d->len - w);
        if (k <= 0) break;
        w += (size_t)k;
    }
    close(fd);
    doc_migration m;
    dlm_err e;
    memset(&m, 0, sizeof m);
    if (w == d->len && !doc_migrate_file(tmp, &m, &e) && m.applied && m.text) {
        int nl = text_nlines(d->text, d->len);
        size_t ls = text_line_start(d->text, d->len, nl - 1);
        ed = edit_for(d->uri, text_range(d->text, d->len, 0, 0, nl - 1, text_line_len(d->text, d->len, ls)), m.text);
    }
    doc_migration_free(&m);
    unlink(tmp);
    return ed;
}

static json_t *action(const char *title, const char *kind, json_t *diag, json_t *edit)
{
    json_t *a = json_pack("{s:s, s:s}", "title", title, "kind", kind);
    if (diag) json_object_set_new(a, "diagnostics", json_pack("[O]", diag));
    if (edit) json_object_set_new(a, "edit", edit);
    return a;
}

json_t *lsp_code_actions(lsp_server *s, lsp_doc *d, const json_t *params)
{
    (void)s;
    json_t *out = json_array();
    json_t *diags = json_object_get(json_object_get(params, "context"), "diagnostics");
    size_t i;
    json_t *dg;
    int migrate_offered = 0;
    json_array_foreach(diags, i, dg) {
        const char *code = json_string_value(json_object_get(dg, "code"));
        json_t *data = json_object_get(dg, "data");
        if (!code) continue;
        if (json_is_string(json_object_get(data, "with"))) {   /* unknown key: did you mean */
            const char *from = json_string_value(json_object_get(data, "replace"));
            const char *to = json_string_value(json_object_get(data, "with"));
            char title[256];
            snprintf(title, sizeof title, "Replace '%s' with '%s'", from ? from : "?", to);
            json_t *range = json_object_get(dg, "range");
            if (range)
                json_array_append_new(out, action(title, "quickfix", dg,
                                                  edit_for(d->uri, json_deep_copy(range), to)));
        } else if (!strcmp(code, "UnknownBaseModelError")) {
            json_t *sg = json_object_get(data, "suggestions");
            size_t k;
            json_t *v;
            json_array_foreach(sg, k, v) {
                char title[256];
                snprintf(title, sizeof title, "Change to '%s'", json_string_value(v));
                json_t *ed = set_base_edit(d, json_string_value(v));
                if (ed) json_array_append_new(out, action(title, "quickfix", dg, ed));
            }
        } else if (!strcmp(code, "OldSchemaVersion") && !migrate_offered) {
            json_t *ed = migrate_edit(d);
            char title[64];
            snprintf(title, sizeof title, "Migrate schema to v%d", DOC_SCHEMA_VERSION);
            if (ed) json_array_append_new(out, action(title, "quickfix", dg, ed));
            migrate_offered = 1;
        } else if (!strcmp(code, "SchemaValidationError")) {
            const char *msg = json_string_value(json_object_get(dg, "message"));
            if (msg && str_startswith(msg, "base_model: Field required")) {
                json_t *ed = set_base_edit(d, "smollm2-135m");
                if (ed) json_array_append_new(out, action("Set base_model to 'smollm2-135m'", "quickfix", dg, ed));
            }
        }
    }
    /* source actions, whatever the cursor is on */
    if (d->parsed && doc_fm(d->parsed)->source_version < DOC_SCHEMA_VERSION && !migrate_offered &&
        memmem(d->text, d->len, "dlm_version", 11)) {
        json_t *ed = migrate_edit(d);
        char title[64];
        snprintf(title, sizeof title, "Migrate schema to v%d", DOC_SCHEMA_VERSION);
        if (ed) json_array_append_new(out, action(title, "source", NULL, ed));
    }
    json_t *ed = add_source_edit(d, ".");
    if (ed) json_array_append_new(out, action("Add a training.sources entry", "source", NULL, ed));
    return out;
}

/* ---- custom requests ------------------------------------------------------------------ */

json_t *lsp_base_spec(const char *key)
{
    const reg_entry *r = key ? registry_lookup(key) : NULL;
    if (!r) return json_null();
    return json_pack("{s:s, s:s?, s:I, s:f, s:i, s:s, s:s?, s:b}", "key", r->key, "hf_id", r->hf_id, "params",
                     (json_int_t)r->params, "size_gb_fp16", r->size_gb_fp16, "context_length", r->context_length,
                     "modality", registry_modality_name(r->modality), "license_spdx", r->license,
                     "requires_acceptance", r->requires_acceptance);
}

json_t *lsp_list_base_models(void)
{
    json_t *a = json_array();
    for (int i = 0; i < registry_count(); i++) json_array_append_new(a, lsp_base_spec(registry_at(i)->key));
    return a;
}

json_t *lsp_list_templates(void)
{
    json_t *a = json_array();
    doc_template_set set;
    dlm_err e;
    if (doc_templates_load(&set, &e)) return a;
    static const char *const F[] = {"name", "title", "domain_tags", "recommended_base", "summary", "sample_prompts"};
    for (int i = 0; i < set.n; i++) {
        json_t *m = json_loads(set.v[i].meta, 0, NULL);
        json_t *o = json_object();
        for (size_t k = 0; k < sizeof F / sizeof F[0]; k++) {
            json_t *v = json_object_get(m, F[k]);
            json_object_set(o, F[k], v ? v : (k == 2 || k == 5 ? json_array() : json_null()));
        }
        if (!json_is_string(json_object_get(o, "name"))) json_object_set_new(o, "name", json_string(set.v[i].name));
        json_array_append_new(a, o);
        json_decref(m);
    }
    doc_templates_free(&set);
    return a;
}

int lsp_base_fits(lsp_server *s, const char *key)
{
    if (!s->opt.home) return -1;   /* no dlm home: no host plan either */
    if (!s->host_probed) {
        s->host_probed = 1;
        host_info h;
        probe_host(&h, s->opt.home);
        doctor_row rows[128];
        int n = doctor_plan_registry(&h, 0, rows, 128);
        s->fits = calloc((size_t)(n > 0 ? n : 1), sizeof *s->fits);
        for (int i = 0; s->fits && i < n; i++) {
            s->fits[i].key = rows[i].entry->key;
            s->fits[i].fits = rows[i].trainable ? rows[i].fits : -1;
        }
        s->nfits = s->fits ? n : 0;
    }
    for (int i = 0; i < s->nfits; i++)
        if (!strcmp(s->fits[i].key, key)) return s->fits[i].fits;
    return -1;
}

static int doc_store(lsp_server *s, const lsp_doc *d, char *store, size_t cap)
{
    dlm_err e;
    if (!s->opt.home || !d->parsed) return -1;
    return store_dir(s->opt.home, doc_fm(d->parsed)->dlm_id, store, cap, &e);
}

json_t *lsp_document_state(lsp_server *s, const char *uri)
{
    lsp_doc *d = lsp_doc_find(s, uri);
    if (!d) return json_null();
    if (!d->clean || !d->parsed) return json_pack("{s:s, s:s}", "uri", uri, "error", d->error[0] ? d->error : "empty document");
    const doc_frontmatter *fm = doc_fm(d->parsed);
    json_t *counts = json_object();
    for (int i = 0; i < doc_nsections(d->parsed); i++) {
        const char *t = doc_section_type_name(doc_section_at(d->parsed, i)->type);
        json_object_set_new(counts, t, json_integer(json_integer_value(json_object_get(counts, t)) + 1));
    }
    json_t *st = json_pack("{s:s, s:s, s:i, s:s, s:o, s:o}", "uri", uri, "dlm_id", fm->dlm_id, "dlm_version",
                           fm->dlm_version, "base_model", fm->base_model, "base_model_spec",
                           lsp_base_spec(fm->base_model), "section_counts", counts);
    /* dlm's additions: the store, its adapter versions and the last run */
    char store[4096];
    json_t *versions = json_array(), *last = json_null(), *sp = json_null();
    if (!doc_store(s, d, store, sizeof store) && store_exists(store)) {
        sp = json_string(store);
        dlm_err e;
        int *v = NULL;
        int n = store_versions(store, &v, &e);
        for (int i = 0; i < n; i++) json_array_append_new(versions, json_integer(v[i]));
        free(v);
        char mp[4200];
        snprintf(mp, sizeof mp, "%s/manifest.json", store);
        json_t *m = json_load_file(mp, 0, NULL);
        json_t *runs = json_object_get(m, "training_runs");
        if (json_array_size(runs)) {
            json_decref(last);
            last = json_deep_copy(json_array_get(runs, json_array_size(runs) - 1));
        }
        json_decref(m);
        run_report r;
        if (!hb_read(store, &r, &e) && r.state == RUN_RUNNING)
            json_object_set_new(st, "running", json_pack("{s:I, s:I, s:I, s:s}", "run_id", (json_int_t)r.run_id, "step",
                                                         (json_int_t)r.step, "total_steps", (json_int_t)r.total,
                                                         "phase", r.phase));
    }
    json_object_set_new(st, "store", sp);
    json_object_set_new(st, "versions", versions);
    json_object_set_new(st, "last_run", last);
    return st;
}

void lsp_poll_progress(lsp_server *s)
{
    for (int i = 0; i < s->ndocs; i++) {
        lsp_doc *d = &s->docs[i];
        char store[4096];
        if (doc_store(s, d, store, sizeof store)) continue;   /* a run writes run/ before its manifest */
        run_report r;
        dlm_err e;
        if (hb_read(store, &r, &e) || r.state != RUN_RUNNING) continue;
        if (r.run_id == d->progress_run && r.step == d->progress_step) continue;
        d->progress_run = r.run_id;
        d->progress_step = r.step;
        json_t *p = json_pack("{s:I, s:I, s:I, s:s}", "run_id", (json_int_t)r.run_id, "step", (json_int_t)r.step,
                              "total_steps", (json_int_t)r.total, "phase", r.phase);
        if (!isnan(r.loss)) json_object_set_new(p, "loss", json_real(r.loss));
        /* adapter_name: a named adapter's; left out for a document's one
         * adapter, as the original leaves out its None fields */
        if (r.adapter[0]) json_object_set_new(p, "adapter_name", json_string(r.adapter));
        lsp_notify(s, "dlm/trainingProgress", p);
    }
}

/* ---- commands ------------------------------------------------------------------ */

/* The document a command's arguments name: [uri, ...] or {"uri": ...}. */
static const char *arg_str(const json_t *args, size_t i, const char *key)
{
    if (json_is_array(args)) return json_string_value(json_array_get(args, i));
    if (json_is_object(args)) return json_string_value(json_object_get(args, key));
    return NULL;
}

static void apply_edit(lsp_server *s, const char *label, json_t *edit)
{
    lsp_send(s, json_pack("{s:I, s:s, s:{s:s, s:o}}", "id", (json_int_t)++s->next_id, "method",
                          "workspace/applyEdit", "params", "label", label, "edit", edit));
}

int lsp_execute(lsp_server *s, const char *command, const json_t *args, json_t **result, const char **msg)
{
    *result = json_null();
    if (!strcmp(command, "dlm/listBaseModels")) {
        *result = lsp_list_base_models();
        return 0;
    }
    if (!strcmp(command, "dlm/listTemplates")) {
        *result = lsp_list_templates();
        return 0;
    }
    const char *uri = arg_str(args, 0, "uri");
    if (!strcmp(command, "dlm/documentState")) {
        if (!uri) return 0;   /* the original answers null */
        *result = lsp_document_state(s, uri);
        return 0;
    }
    int set_base = !strcmp(command, "dlm.setBaseModel"), add_src = !strcmp(command, "dlm.addSourceDirective");
    if (set_base || add_src) {
        const char *v = arg_str(args, 1, set_base ? "base_model" : "path");
        if (!uri || !v) {
            *msg = set_base ? "dlm.setBaseModel needs [uri, base_model_key]" : "dlm.addSourceDirective needs [uri, relative_path]";
            return RPC_INVALID_PARAMS;
        }
        lsp_doc *d = lsp_doc_find(s, uri);
        if (!d) return 0;
        json_t *ed = set_base ? set_base_edit(d, v) : add_source_edit(d, v);
        if (ed) apply_edit(s, command, ed);
        return 0;
    }
    *msg = "unknown command";
    return RPC_INVALID_PARAMS;
}
