/* manifest — <store>/manifest.json (docs/reference/original-spec.md §2.3), schema_version 1.
 *
 * Same fields and JSON shape as the original's pydantic Manifest (sorted
 * keys, indent 2, naive-UTC ISO datetimes with seconds precision), so a
 * store moves between the two tools. Validation is strict like the
 * original's: unknown keys and wrong types make the manifest "corrupt". */
#include "store/store.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/fs.h"
#include "util/json.h"
#include "util/timeutil.h"

static void now_iso(char *buf, size_t cap) { time_iso_utc(time_now(), buf, cap); }

json_t *manifest_new(const char *dlm_id, const char *base_model, const char *base_revision,
                     const char *source_path, const store_license *license)
{
    char now[32];
    now_iso(now, sizeof now);
    json_t *m = json_object();
    if (!m) return NULL;
    json_object_set_new(m, "dlm_id", json_string(dlm_id));
    json_object_set_new(m, "schema_version", json_integer(STORE_MANIFEST_SCHEMA));
    json_object_set_new(m, "created_at", json_string(now));
    json_object_set_new(m, "updated_at", json_string(now));
    json_object_set_new(m, "base_model", json_string(base_model));
    json_object_set_new(m, "base_model_revision", base_revision ? json_string(base_revision) : json_null());
    json_object_set_new(m, "base_model_sha256", json_null());
    json_object_set_new(m, "adapter_version", json_integer(0));
    json_object_set_new(m, "adapter_sha256", json_null());
    json_object_set_new(m, "adapter_config_sha256", json_null());
    json_object_set_new(m, "adapter_versions", json_object());
    json_object_set_new(m, "training_runs", json_array());
    json_object_set_new(m, "exports", json_array());
    json_object_set_new(m, "content_hashes", json_object());
    json_object_set_new(m, "pinned_versions", json_object());
    json_object_set_new(m, "source_path", source_path ? json_string(source_path) : json_null());
    if (license) {
        json_t *l = json_object();
        json_object_set_new(l, "accepted_at", json_string(license->accepted_at ? license->accepted_at : now));
        json_object_set_new(l, "license_url", json_string(license->license_url ? license->license_url : ""));
        json_object_set_new(l, "license_spdx", json_string(license->license_spdx ? license->license_spdx : ""));
        json_object_set_new(l, "via", json_string(license->via ? license->via : "cli_flag"));
        json_object_set_new(m, "license_acceptance", l);
    } else json_object_set_new(m, "license_acceptance", json_null());
    return m;
}

/* ---- validation ---------------------------------------------------------------- */

typedef enum { T_STR, T_STR_N, T_INT, T_NUM_N, T_BOOL, T_TIME, T_TIME_N, T_STRMAP, T_INTMAP, T_ANY } ftype;

typedef struct fspec {
    const char *name;
    ftype type;
    int required;
    int64_t min;      /* T_INT lower bound */
} fspec;

static int iso_like(const char *s)
{
    /* YYYY-MM-DDTHH:MM:SS[.ffffff] (pydantic also takes a space separator) */
    if (strlen(s) < 19) return 0;
    for (int i = 0; i < 19; i++) {
        char c = s[i];
        if (i == 4 || i == 7) { if (c != '-') return 0; }
        else if (i == 10) { if (c != 'T' && c != ' ') return 0; }
        else if (i == 13 || i == 16) { if (c != ':') return 0; }
        else if (c < '0' || c > '9') return 0;
    }
    return 1;
}

static const char *check_field(const json_t *v, const fspec *f)
{
    switch (f->type) {
    case T_STR: return json_is_string(v) && json_string_length(v) > 0 ? NULL : "expected a non-empty string";
    case T_STR_N: return json_is_string(v) || json_is_null(v) ? NULL : "expected a string or null";
    case T_INT:
        if (!json_is_integer(v)) return "expected an integer";
        return json_integer_value(v) >= f->min ? NULL : "integer below its minimum";
    case T_NUM_N: return json_is_number(v) || json_is_null(v) ? NULL : "expected a number or null";
    case T_BOOL: return json_is_boolean(v) ? NULL : "expected a boolean";
    case T_TIME: return json_is_string(v) && iso_like(json_string_value(v)) ? NULL : "expected an ISO-8601 datetime";
    case T_TIME_N:
        return json_is_null(v) || (json_is_string(v) && iso_like(json_string_value(v))) ? NULL
                                                                                      : "expected an ISO-8601 datetime or null";
    case T_STRMAP:
    case T_INTMAP: {
        if (!json_is_object(v)) return "expected an object";
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) {
            if (f->type == T_STRMAP && !json_is_string(x)) return "expected string values";
            if (f->type == T_INTMAP && !json_is_integer(x)) return "expected integer values";
        }
        return NULL;
    }
    case T_ANY: return NULL;
    }
    return "bad field";
}

/* Check obj against specs; returns 0 or fills why ("field: reason"). */
static int check_object(const json_t *obj, const fspec *specs, const char *where, char *why, size_t cap)
{
    if (!json_is_object(obj)) { snprintf(why, cap, "%s: expected an object", where); return -1; }
    for (const fspec *f = specs; f->name; f++) {
        json_t *v = json_object_get(obj, f->name);
        if (!v) {
            if (f->required) { snprintf(why, cap, "%s%s%s: field required", where, *where ? "." : "", f->name); return -1; }
            continue;
        }
        const char *bad = check_field(v, f);
        if (bad) { snprintf(why, cap, "%s%s%s: %s", where, *where ? "." : "", f->name, bad); return -1; }
    }
    const char *k;
    json_t *x;
    json_object_foreach((json_t *)obj, k, x) {
        int known = 0;
        for (const fspec *f = specs; f->name; f++)
            if (!strcmp(f->name, k)) known = 1;
        if (!known) { snprintf(why, cap, "%s%s%s: extra inputs are not permitted", where, *where ? "." : "", k); return -1; }
    }
    return 0;
}

static const fspec RUN_FIELDS[] = {
    {"run_id", T_INT, 1, 1}, {"started_at", T_TIME, 1, 0}, {"ended_at", T_TIME_N, 0, 0},
    {"adapter_version", T_INT, 1, 1}, {"base_model_revision", T_STR_N, 0, 0}, {"seed", T_INT, 1, INT64_MIN},
    {"steps", T_INT, 0, 0}, {"final_train_loss", T_NUM_N, 0, 0}, {"final_val_loss", T_NUM_N, 0, 0},
    {"status", T_STR, 0, 0}, {"pinned_versions", T_STRMAP, 0, 0}, {"summary_path", T_STR_N, 0, 0},
    {"adapter_name", T_STR_N, 0, 0}, {"weight_distribution", T_ANY, 0, 0}, {NULL, 0, 0, 0},
};

static const fspec EXPORT_FIELDS[] = {
    {"exported_at", T_TIME, 1, 0}, {"target", T_STR, 0, 0}, {"quant", T_STR, 1, 0}, {"merged", T_BOOL, 0, 0},
    {"ollama_name", T_STR_N, 0, 0}, {"ollama_version", T_STR_N, 0, 0}, {"llama_cpp_tag", T_STR_N, 0, 0},
    {"base_gguf_sha256", T_STR_N, 0, 0}, {"adapter_gguf_sha256", T_STR_N, 0, 0},
    {"smoke_output_first_line", T_STR_N, 0, 0}, {"adapter_name", T_STR_N, 0, 0}, {"adapter_mix", T_ANY, 0, 0},
    {NULL, 0, 0, 0},
};

static const fspec LICENSE_FIELDS[] = {
    {"accepted_at", T_TIME, 1, 0}, {"license_url", T_STR, 1, 0}, {"license_spdx", T_STR, 1, 0},
    {"via", T_STR, 1, 0}, {NULL, 0, 0, 0},
};

static const fspec TOP_FIELDS[] = {
    {"dlm_id", T_STR, 1, 0}, {"schema_version", T_INT, 0, 0}, {"created_at", T_TIME, 0, 0},
    {"updated_at", T_TIME, 0, 0}, {"base_model", T_STR, 1, 0}, {"base_model_revision", T_STR_N, 0, 0},
    {"base_model_sha256", T_STR_N, 0, 0}, {"adapter_version", T_INT, 0, 0}, {"adapter_sha256", T_STR_N, 0, 0},
    {"adapter_config_sha256", T_STR_N, 0, 0}, {"adapter_versions", T_INTMAP, 0, 0},
    {"training_runs", T_ANY, 0, 0}, {"exports", T_ANY, 0, 0}, {"content_hashes", T_STRMAP, 0, 0},
    {"pinned_versions", T_STRMAP, 0, 0}, {"source_path", T_STR_N, 0, 0}, {"license_acceptance", T_ANY, 0, 0},
    {NULL, 0, 0, 0},
};

static int check_run(const json_t *r, size_t i, char *why, size_t cap)
{
    char where[64];
    snprintf(where, sizeof where, "training_runs.%zu", i);
    if (check_object(r, RUN_FIELDS, where, why, cap)) return -1;
    /* manifest_next_run_id adds 1 to the largest: bounded at 2^53 (what every
     * JSON reader holds exactly), so a hand-edited id cannot overflow it. A
     * seed may be any int, as in the original. */
    if (json_integer_value(json_object_get(r, "run_id")) > (INT64_C(1) << 53)) {
        snprintf(why, cap, "%s.run_id: integer out of range (over 2^53)", where);
        return -1;
    }
    const char *st = jget_str(r, "status");
    if (st && strcmp(st, "running") && strcmp(st, "completed") && strcmp(st, "failed") && strcmp(st, "cancelled")) {
        snprintf(why, cap, "%s.status: expected running, completed, failed or cancelled", where);
        return -1;
    }
    return 0;
}

static int check_export(const json_t *x, size_t i, char *why, size_t cap)
{
    char where[64];
    snprintf(where, sizeof where, "exports.%zu", i);
    return check_object(x, EXPORT_FIELDS, where, why, cap);
}

int manifest_validate(const char *path, const json_t *m, dlm_err *e)
{
    char why[512];
    if (!json_is_object(m))
        return err_at(e, "ManifestCorruptError", path, 0, 0, "manifest is corrupt: top-level must be object");
    json_t *sv = json_object_get(m, "schema_version");
    if (sv && (!json_is_integer(sv) || json_integer_value(sv) != STORE_MANIFEST_SCHEMA)) {
        char found[64];
        if (json_is_integer(sv)) snprintf(found, sizeof found, "%lld", (long long)json_integer_value(sv));
        else snprintf(found, sizeof found, "(not an integer)");
        err_at(e, "ManifestVersionError", path, 0, 0,
               "manifest is corrupt: schema_version %s requires migration to %d before this store can be used",
               found, STORE_MANIFEST_SCHEMA);
        return -1;
    }
    if (check_object(m, TOP_FIELDS, "", why, sizeof why)) goto bad;
    json_t *runs = json_object_get(m, "training_runs"), *exps = json_object_get(m, "exports");
    json_t *lic = json_object_get(m, "license_acceptance");
    if (runs && !json_is_array(runs)) { snprintf(why, sizeof why, "training_runs: expected a list"); goto bad; }
    if (exps && !json_is_array(exps)) { snprintf(why, sizeof why, "exports: expected a list"); goto bad; }
    for (size_t i = 0; runs && i < json_array_size(runs); i++)
        if (check_run(json_array_get(runs, i), i, why, sizeof why)) goto bad;
    for (size_t i = 0; exps && i < json_array_size(exps); i++)
        if (check_export(json_array_get(exps, i), i, why, sizeof why)) goto bad;
    if (lic && !json_is_null(lic) && check_object(lic, LICENSE_FIELDS, "license_acceptance", why, sizeof why)) goto bad;
    return 0;
bad:
    return err_at(e, "ManifestCorruptError", path, 0, 0, "manifest is corrupt: schema violation: %s", why);
}

json_t *manifest_load(const char *path, dlm_err *e)
{
    dlm_err je;
    json_t *m = json_load_path(path, 64u << 20, &je);
    if (!m) {
        if (!strcmp(je.kind, "JSONError"))
            err_at(e, "ManifestCorruptError", path, 0, 0, "manifest is corrupt: invalid JSON at line %d column %d: %s",
                   je.line, je.col, je.msg);
        else
            err_at(e, "ManifestCorruptError", path, 0, 0, "manifest is corrupt: read failed: %s", je.msg);
        return NULL;
    }
    if (manifest_validate(path, m, e)) { json_decref(m); return NULL; }
    return m;
}

int manifest_save(const char *path, json_t *m, dlm_err *e)
{
    char now[32];
    now_iso(now, sizeof now);
    json_object_set_new(m, "updated_at", json_string(now));
    if (manifest_validate(path, m, e)) return -1;
    return json_save_file(path, m, e);
}

int64_t manifest_next_run_id(const json_t *m)
{
    json_t *runs = json_object_get(m, "training_runs");
    int64_t mx = 0;
    for (size_t i = 0; json_is_array(runs) && i < json_array_size(runs); i++) {
        long long id;
        if (!jget_int(json_array_get(runs, i), "run_id", &id) && id > mx) mx = id;
    }
    return mx + 1;
}

int manifest_add_run(json_t *m, json_t *run, dlm_err *e)
{
    char why[512];
    if (!json_object_get(run, "run_id")) json_object_set_new(run, "run_id", json_integer(manifest_next_run_id(m)));
    json_t *runs = json_object_get(m, "training_runs");
    if (check_run(run, json_is_array(runs) ? json_array_size(runs) : 0, why, sizeof why))
        return err_set(e, "ManifestCorruptError", "bad training run record: %s", why);
    if (!json_is_array(runs)) {
        runs = json_array();
        json_object_set_new(m, "training_runs", runs);
    }
    return json_array_append(runs, run) ? err_set(e, "MemoryError", "out of memory") : 0;
}

int manifest_add_export(json_t *m, json_t *exp, dlm_err *e)
{
    char why[512];
    json_t *exps = json_object_get(m, "exports");
    if (check_export(exp, json_is_array(exps) ? json_array_size(exps) : 0, why, sizeof why))
        return err_set(e, "ManifestCorruptError", "bad export record: %s", why);
    if (!json_is_array(exps)) {
        exps = json_array();
        json_object_set_new(m, "exports", exps);
    }
    return json_array_append(exps, exp) ? err_set(e, "MemoryError", "out of memory") : 0;
}

/* ---- which document owns the store --------------------------------------------- */

/* Does the file at path still declare dlm_id id in its frontmatter? A
 * scan for the `dlm_id:` line of the first 64 KiB (the store must not
 * parse documents); quotes around the value are allowed. */
static int file_has_id(const char *path, const char *id)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, "dlm_id:", 7)) continue;
        const char *v = l + 7;
        while (*v == ' ' || *v == '\t' || *v == '"' || *v == '\'') v++;
        return !strncmp(v, id, 26);
    }
    return 0;
}

int store_source_check(json_t *m, const char *doc_path, const char *dlm_id, int same_store, int *changed, char *note,
                       size_t cap, dlm_err *e)
{
    return store_source_check_as(m, doc_path, dlm_id, same_store, 1, changed, note, cap, e);
}

int store_source_check_as(json_t *m, const char *doc_path, const char *dlm_id, int same_store, int can_share,
                          int *changed, char *note, size_t cap, dlm_err *e)
{
    *changed = 0;
    if (note && cap) note[0] = 0;
    char abs[4096];
    if (!realpath(doc_path, abs)) snprintf(abs, sizeof abs, "%s", doc_path);
    const char *rec = json_string_value(json_object_get(m, "source_path"));
    char rabs[4096];
    if (rec && realpath(rec, rabs) && !strcmp(rabs, abs)) return 0;
    if (rec && !strcmp(rec, abs)) return 0;
    if (rec && fs_is_file(rec) && file_has_id(rec, dlm_id)) {
        /* two documents with one dlm_id: a copy */
        if (same_store) {
            if (note) snprintf(note, cap, "note: %s shares the store of %s (dlm_id %s; --same-store)", doc_path, rec, dlm_id);
            return 0;
        }
        err_set(e, "SharedStoreError", "%s has the dlm_id of %s (%s): the two share one store, and this would"
                " write into the store of %s (its versions, replay corpus, exports)", doc_path, rec, dlm_id, rec);
        return err_hint(e, "give %s a store of its own (a new dlm_id, the content kept): dlm init --from %s %s%s",
                        doc_path, doc_path, doc_path,
                        can_share ? "; or write into the shared store on purpose with --same-store" : "");
    }
    /* no owner yet, or the owner moved (its old path is gone or no longer
     * holds this dlm_id): this document owns the store from now on */
    if (rec && note)
        snprintf(note, cap, "note: %s is now the store's document (it was %s, which %s)", abs, rec,
                 fs_is_file(rec) ? "holds another dlm_id now" : "no longer exists");
    json_object_set_new(m, "source_path", json_string(abs));
    *changed = 1;
    return 0;
}
