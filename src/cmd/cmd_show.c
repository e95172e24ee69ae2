/* dlm show — a document's frontmatter (defaults filled in), its sections,
 * and the state of its store. `--json` is documented in docs/show-json.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/commands.h"
#include "doc/doc.h"
#include "doc/sources.h"
#include "store/store.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/str.h"
#include "util/timeutil.h"

typedef struct show_args {
    int json, sources;
} show_args;
static const char *g_home;

static const opt show_opts[] = {
    {"json", 0, OPT_FLAG, offsetof(show_args, json), NULL, "machine-readable output (docs/show-json.md)"},
    {"sources", 0, OPT_FLAG, offsetof(show_args, sources), NULL, "list every file of training.sources with its verdict (docs/sources.md)"},
    {0},
};

const cmd_spec spec_show = {
    "show",
    "PATH [--json] [--sources]",
    "show a .dlm's settings, sections and store",
    "Parse errors exit 1 with the located message (file:line:col).",
    show_opts,
};

static json_t *section_json(const doc_section *s)
{
    json_t *o = json_object();
    json_object_set_new(o, "type", json_string(doc_section_type_name(s->type)));
    json_object_set_new(o, "adapter", s->adapter ? json_string(s->adapter) : json_null());
    json_object_set_new(o, "id", json_string(s->id));
    json_object_set_new(o, "line", json_integer(s->line));
    json_object_set_new(o, "chars", json_integer((json_int_t)s->content_len));
    json_object_set_new(o, "pairs", s->type == DOC_INSTRUCTION ? json_integer(s->n_pairs) : json_null());
    int probes = 0;
    for (int i = 0; i < s->n_pairs; i++) probes += s->pairs[i].probe;
    json_object_set_new(o, "probes", s->type == DOC_INSTRUCTION ? json_integer(probes) : json_null());
    json_object_set_new(o, "triples", s->type == DOC_PREFERENCE ? json_integer(s->n_triples) : json_null());
    if (s->type == DOC_IMAGE || s->type == DOC_AUDIO) {
        json_t *m = json_object();
        json_object_set_new(m, "path", json_string(s->media_path));
        if (s->type == DOC_IMAGE) json_object_set_new(m, "alt", s->media_alt ? json_string(s->media_alt) : json_null());
        else json_object_set_new(m, "transcript", json_string(s->media_transcript ? s->media_transcript : ""));
        json_object_set_new(o, "media", m);
    } else json_object_set_new(o, "media", json_null());
    json_t *prov = json_object();
    if (s->auto_harvest) json_object_set_new(prov, "harvest", json_pack("{s:s}", "source", s->harvest_source));
    if (s->auto_mined)
        json_object_set_new(prov, "mined", json_pack("{s:s, s:f, s:f, s:s, s:I}", "judge_name", s->judge_name,
                                                     "judge_score_chosen", s->judge_score_chosen,
                                                     "judge_score_rejected", s->judge_score_rejected, "mined_at",
                                                     s->mined_at, "mined_run_id", (json_int_t)s->mined_run_id));
    if (s->auto_synth)
        json_object_set_new(prov, "synth", json_pack("{s:s, s:s, s:s, s:s}", "synth_teacher", s->synth_teacher,
                                                     "synth_strategy", s->synth_strategy, "synth_at", s->synth_at,
                                                     "source_section_id", s->source_section_id));
    if (json_object_size(prov)) json_object_set_new(o, "provenance", prov);
    else { json_decref(prov); json_object_set_new(o, "provenance", json_null()); }
    return o;
}

/* The store object; *manifest_err set when the manifest is unreadable. */
static json_t *store_json(const char *home, const char *id, dlm_err *e, int *failed)
{
    char dir[4200], mpath[4300];
    *failed = 0;
    json_t *o = json_object();
    if (store_dir(home, id, dir, sizeof dir, e)) { *failed = 1; return o; }
    snprintf(mpath, sizeof mpath, "%s/manifest.json", dir);
    int init = store_exists(dir);
    json_object_set_new(o, "initialized", json_boolean(init));
    json_object_set_new(o, "path", json_string(dir));
    json_t *m = NULL;
    if (init && !(m = manifest_load(mpath, e))) { *failed = 1; return o; }
    int cur = fs_is_dir(dir) ? store_current_version(dir, e) : 0;
    if (cur < 0) { *failed = 1; json_decref(m); return o; }
    json_object_set_new(o, "adapter_version", json_integer(cur));
    int *vs = NULL;
    int nv = fs_is_dir(dir) ? store_versions(dir, &vs, e) : 0;
    json_t *va = json_array();
    char name[16];
    for (int i = 0; i < nv; i++) {
        store_version_name(vs[i], name, sizeof name);
        json_array_append_new(va, json_string(name));
    }
    free(vs);
    json_object_set_new(o, "versions", va);
    json_t *runs = m ? json_object_get(m, "training_runs") : NULL;
    size_t nr = json_is_array(runs) ? json_array_size(runs) : 0;
    json_object_set_new(o, "training_runs", json_pack("{s:I, s:O}", "count", (json_int_t)nr, "last",
                                                      nr ? json_array_get(runs, nr - 1) : json_null()));
    json_t *ex = m ? json_object_get(m, "exports") : NULL;
    json_object_set_new(o, "exports", json_integer(json_is_array(ex) ? (json_int_t)json_array_size(ex) : 0));
    json_object_set_new(o, "size_bytes", json_integer((json_int_t)store_size(dir)));
    json_object_set_new(o, "base_model", m && jget_str(m, "base_model") ? json_string(jget_str(m, "base_model")) : json_null());
    json_object_set_new(o, "created_at", m && jget_str(m, "created_at") ? json_string(jget_str(m, "created_at")) : json_null());
    json_object_set_new(o, "updated_at", m && jget_str(m, "updated_at") ? json_string(jget_str(m, "updated_at")) : json_null());
    store_lock_info li;
    int lr = store_lock_read(dir, &li);
    if (lr == 1) {
        char when[32];
        time_iso_utc(li.since, when, sizeof when);
        json_object_set_new(o, "lock", json_pack("{s:I, s:s, s:s, s:o, s:o, s:b}", "pid", (json_int_t)li.pid, "host",
                                                 li.host, "since", when, "command",
                                                 li.command[0] ? json_string(li.command) : json_null(), "alive",
                                                 li.alive < 0 ? json_null() : json_boolean(li.alive), "kernel",
                                                 li.kernel));
    } else if (lr < 0) json_object_set_new(o, "lock", json_pack("{s:b}", "unreadable", 1));
    else json_object_set_new(o, "lock", json_null());
    json_decref(m);
    return o;
}

/* Human view of the frontmatter: one dotted key per line. */
static void print_flat(const json_t *v, const char *prefix)
{
    if (json_is_object(v) && json_object_size(v)) {
        size_t n = json_object_size(v), k = 0;
        const char **keys = malloc(n * sizeof *keys);
        if (!keys) return;
        const char *key;
        json_t *x;
        json_object_foreach((json_t *)v, key, x) keys[k++] = key;
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++)
                if (strcmp(keys[i], keys[j]) > 0) { const char *t = keys[i]; keys[i] = keys[j]; keys[j] = t; }
        for (size_t i = 0; i < n; i++) {
            char p[512];
            snprintf(p, sizeof p, "%s%s%s", prefix, *prefix ? "." : "", keys[i]);
            print_flat(json_object_get(v, keys[i]), p);
        }
        free(keys);
        return;
    }
    strbuf sb = STRBUF_INIT;
    json_write(&sb, v, JW_SPACED);
    printf("  %-44s %s\n", prefix, sb_str(&sb));
    sb_free(&sb);
}

/* training.sources: the directives, and what the current version trained on
 * (its training_run.json "sources" record). */
static void print_sources(const dlm_doc *d)
{
    const doc_training *t = &doc_fm(d)->training;
    if (!t->n_sources) return;
    printf("  sources      %d directive(s), policy %s ('dlm show --sources' lists every file)\n", t->n_sources,
           doc_sources_policy_names[t->sources_policy]);
    dlm_err e;
    char store[4096], p[4200];
    if (store_dir(g_home, doc_fm(d)->dlm_id, store, sizeof store, &e)) return;
    int v = store_current_version(store, &e);
    if (v <= 0) return;
    snprintf(p, sizeof p, "%s/adapter/versions/v%04d/training_run.json", store, v);
    json_t *run = json_load_file(p, 0, NULL);
    json_t *src = run ? json_object_get(run, "sources") : NULL;
    json_t *dirs = src ? json_object_get(src, "directives") : NULL;
    size_t i;
    json_t *dj;
    json_array_foreach(dirs, i, dj) {
        char hs[32];
        long long files = json_integer_value(json_object_get(dj, "files"));
        long long bytes = json_integer_value(json_object_get(dj, "bytes"));
        long long sk = 0;
        const char *k;
        json_t *n;
        json_object_foreach(json_object_get(dj, "skipped"), k, n) sk += json_integer_value(n);
        printf("               v%04d: %s: %lld file(s), %s, %lld skipped\n", v,
               json_string_value(json_object_get(dj, "path")), files,
               str_human_size((unsigned long long)bytes, hs, sizeof hs), sk);
    }
    json_decref(run);
}

static void print_human(const dlm_doc *d, const json_t *fm, const json_t *st)
{
    const doc_frontmatter *f = doc_fm(d);
    int counts[5] = {0};
    for (int i = 0; i < doc_nsections(d); i++) counts[doc_section_at(d, i)->type]++;
    printf("%s\n", doc_path(d));
    printf("  dlm_id       %s\n", f->dlm_id);
    printf("  base_model   %s\n", f->base_model);
    if (f->source_version != DOC_SCHEMA_VERSION)
        printf("  dlm_version  %d (file says %d; 'dlm migrate' rewrites it)\n", f->dlm_version, f->source_version);
    else printf("  dlm_version  %d\n", f->dlm_version);
    printf("  sections     %d (%d prose, %d instruction, %d preference, %d image, %d audio)\n\n", doc_nsections(d),
           counts[0], counts[1], counts[2], counts[3], counts[4]);
    print_sources(d);
    printf("frontmatter (defaults filled in):\n");
    print_flat(fm, "");
    printf("\nsections:\n  %3s %5s  %-11s %-10s %-16s  %s\n", "#", "line", "type", "adapter", "id", "content");
    for (int i = 0; i < doc_nsections(d); i++) {
        const doc_section *s = doc_section_at(d, i);
        char what[160];
        if (s->type == DOC_INSTRUCTION) {
            int probes = 0;
            for (int k = 0; k < s->n_pairs; k++) probes += s->pairs[k].probe;
            snprintf(what, sizeof what, "%d Q/A pair%s%s", s->n_pairs, s->n_pairs == 1 ? "" : "s",
                     probes ? " (with probes)" : "");
        } else if (s->type == DOC_PREFERENCE)
            snprintf(what, sizeof what, "%d preference triple%s", s->n_triples, s->n_triples == 1 ? "" : "s");
        else if (s->type == DOC_IMAGE || s->type == DOC_AUDIO)
            snprintf(what, sizeof what, "%s", s->media_path);
        else snprintf(what, sizeof what, "%zu chars", s->content_len);
        printf("  %3d %5d  %-11s %-10s %-16s  %s%s%s%s\n", i + 1, s->line, doc_section_type_name(s->type),
               s->adapter ? s->adapter : "-", s->id, what, s->auto_harvest ? " [harvested]" : "",
               s->auto_mined ? " [mined]" : "", s->auto_synth ? " [synthesized]" : "");
    }
    printf("\nstore: %s\n", jget_str(st, "path") ? jget_str(st, "path") : "?");
    int init = json_is_true(json_object_get(st, "initialized"));
    if (!init) {
        printf("  not initialized (run 'dlm init' or 'dlm train')\n");
        return;
    }
    long long av = 0, ex = 0, size = 0;
    jget_int(st, "adapter_version", &av);
    jget_int(st, "exports", &ex);
    jget_int(st, "size_bytes", &size);
    json_t *vs = json_object_get(st, "versions");
    if (av) printf("  adapter      v%04lld (%zu version%s on disk)\n", av, json_array_size(vs), json_array_size(vs) == 1 ? "" : "s");
    else printf("  adapter      none yet (%zu version%s on disk)\n", json_array_size(vs), json_array_size(vs) == 1 ? "" : "s");
    long long nr = 0;
    json_t *runs = json_object_get(st, "training_runs");
    jget_int(runs, "count", &nr);
    printf("  runs         %lld\n", nr);
    printf("  exports      %lld\n", ex);
    char hs[32];
    printf("  size         %s\n", str_human_size((unsigned long long)size, hs, sizeof hs));
    json_t *lk = json_object_get(st, "lock");
    if (json_is_null(lk) || !lk) printf("  lock         free\n");
    else if (json_object_get(lk, "unreadable")) printf("  lock         present but unreadable\n");
    else {
        long long pid = 0;
        jget_int(lk, "pid", &pid);
        const char *cmd = jget_str(lk, "command");
        json_t *alive = json_object_get(lk, "alive");
        printf("  lock         held by PID %lld%s%s%s since %s UTC%s\n", pid, cmd ? " (dlm " : "", cmd ? cmd : "",
               cmd ? ")" : "", jget_str(lk, "since"), !json_is_false(alive) ? ""
               : json_is_true(json_object_get(lk, "kernel")) ? " [released: the process died; the next command takes it over]"
                                                             : " [stale: the process is gone]");
    }
}

int cmd_show(int argc, char **argv, dlm_ctx *ctx)
{
    show_args a = {0};
    char *pos[64];
    int npos = 0;
    if (argc > 64) return cmd_usage_error(&spec_show, "too many arguments");
    int r = opts_parse(&spec_show, argc, argv, ctx, &a, pos, &npos);
    if (r == 1) return EXIT_OK;
    if (r) return EXIT_USAGE;
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    if (npos != 1) return cmd_usage_error(&spec_show, "show takes exactly one PATH");
    g_home = ctx->home;
    if (a.sources) return srcview_print(pos[0], NULL, a.json, &e) ? cmd_fail(ctx, &e) : EXIT_OK;
    dlm_doc *d = doc_load(pos[0], &e);
    if (!d) return cmd_fail(ctx, &e);
    int failed;
    json_t *st = store_json(ctx->home, doc_fm(d)->dlm_id, &e, &failed);
    if (failed) {
        json_decref(st);
        doc_free(d);
        return cmd_fail(ctx, &e);
    }
    json_t *fm = doc_frontmatter_json(d);
    if (a.json) {
        json_t *secs = json_array();
        for (int i = 0; i < doc_nsections(d); i++) json_array_append_new(secs, section_json(doc_section_at(d, i)));
        json_t *o = json_object();
        json_object_set_new(o, "path", json_string(doc_path(d)));
        json_object_set_new(o, "dlm_id", json_string(doc_fm(d)->dlm_id));
        json_object_set_new(o, "source_version", json_integer(doc_fm(d)->source_version));
        json_object_set_new(o, "frontmatter", json_incref(fm));
        json_object_set_new(o, "sections", secs);
        json_object_set_new(o, "store", json_incref(st));
        json_object_set_new(o, "adapters", adapters_view_json(d, ctx->home));
        json_object_set_new(o, "gate", adapters_view_gate_json(d, ctx->home));
        cmd_print_json(o);
    } else {
        print_human(d, fm, st);
        json_t *av = adapters_view_json(d, ctx->home), *gv = adapters_view_gate_json(d, ctx->home);
        adapters_view_print(av, gv);
        json_decref(av);
        json_decref(gv);
    }
    json_decref(fm);
    json_decref(st);
    doc_free(d);
    return EXIT_OK;
}
