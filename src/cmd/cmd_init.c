/* dlm init — write a new .dlm from a template and create its store. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/commands.h"
#include "doc/doc.h"
#include "doc/templates.h"
#include "weights/base.h"
#include "weights/registry.h"
#include "store/store.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/timeutil.h"
#include "util/ulid.h"

typedef struct init_args {
    const char *base, *template, *from;
    int force, list, json, accept, multimodal, audio;
} init_args;

static const opt init_opts[] = {
    {"base", 0, OPT_STR, offsetof(init_args, base), "KEY", "base model: registry key, hf:org/name[@rev], a path, or tiny (default)"},
    {"template", 0, OPT_STR, offsetof(init_args, template), "NAME", "start from this template (default: default)"},
    {"multimodal", 0, OPT_FLAG, offsetof(init_args, multimodal), NULL, "a document with an ::image:: section on a vision-language base (default paligemma-3b-mix-224)"},
    {"audio", 0, OPT_FLAG, offsetof(init_args, audio), NULL, "a document with an ::audio:: section on an audio-language base (default qwen2-audio-7b-instruct)"},
    {"force", 0, OPT_FLAG, offsetof(init_args, force), NULL, "overwrite an existing file at PATH"},
    {"from", 0, OPT_STR, offsetof(init_args, from), "SRC", "copy the document SRC to PATH with a new dlm_id (its own store); SRC = PATH re-ids in place"},
    {"i-accept-license", 0, OPT_FLAG, offsetof(init_args, accept), NULL, "accept a gated base's license (recorded in the manifest)"},
    {"list-templates", 0, OPT_FLAG, offsetof(init_args, list), NULL, "list the templates and exit (same as dlm templates list)"},
    {"json", 0, OPT_FLAG, offsetof(init_args, json), NULL, "with --list-templates: print JSON"},
    {0},
};

const cmd_spec spec_init = {
    "init",
    "PATH [--base KEY] [--template NAME | --multimodal | --audio] [--force] [--i-accept-license] | --from SRC PATH [--force] | --list-templates [--json]",
    "create a .dlm document and its store",
    "Writes a dlm_version 15 document with a fresh dlm_id (a ULID) and creates\n"
    "$DLM_HOME/store/<dlm_id>/ with its manifest. Every template's training\n"
    "settings suit a short document on the default base tiny, so\n"
    "`dlm train` then `dlm prompt` answers its questions; on a registry base\n"
    "lower training.learning_rate and num_epochs (see the comment in the\n"
    "frontmatter). `dlm templates list` shows the gallery; templates are files\n"
    "(templates/<name>.dlm + index.json; $DLM_TEMPLATES overrides the directory).\n"
    "--from SRC copies a document with a new dlm_id, frontmatter and body byte for\n"
    "byte otherwise, and creates its own store: a copy made with cp shares SRC's\n"
    "store (same dlm_id), which 'dlm train' refuses (docs/dlm-format.md).\n"
    "--multimodal writes the original's vision scaffold instead: an ::image::\n"
    "fence whose path (figures/your-image.png) you replace with a real image,\n"
    "on paligemma-3b-mix-224 (gated: --i-accept-license) unless --base names\n"
    "another vision-language base; docs/images.md says what trains today.\n"
    "--audio writes the original's audio scaffold: an ::audio:: fence\n"
    "(clips/your-clip.wav, with its transcript) on qwen2-audio-7b-instruct;\n"
    "docs/audio.md says what trains today.",
    init_opts,
};

static int list_templates(const dlm_ctx *ctx, const init_args *a)
{
    dlm_err e;
    doc_template_set set;
    if (doc_templates_load(&set, &e)) return cmd_fail(ctx, &e);
    if (a->json) {
        json_t *arr = json_array();
        for (int i = 0; i < set.n; i++)
            json_array_append_new(arr, json_pack("{s:s, s:s}", "name", set.v[i].name, "summary", set.v[i].summary));
        json_t *o = json_pack("{s:s, s:o}", "source", set.source, "templates", arr);
        cmd_print_json(o);
    } else {
        for (int i = 0; i < set.n; i++) printf("%-26s %s\n", set.v[i].name, set.v[i].summary);
    }
    doc_templates_free(&set);
    return EXIT_OK;
}

/* Absolute path of PATH (its directory must exist). */
static int abs_path(const char *path, char *out, size_t cap, dlm_err *e)
{
    char dir[PATH_MAX], real[PATH_MAX];
    fs_dirname(dir, sizeof dir, path);
    if (!realpath(dir, real)) return err_sys(e, "cannot resolve '%s'", dir);
    if (!fs_join(out, cap, real, fs_basename(path))) return err_set(e, NULL, "path too long");
    return 0;
}

/* The offset of the dlm_id value in a document's text: the first line of
 * the frontmatter that starts with `dlm_id:`, its value (quotes allowed);
 * -1 when there is none. */
static long id_offset(const char *txt, size_t len, const char *id)
{
    const char *p = txt, *end = txt + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        if (le - p >= 7 && !strncmp(p, "dlm_id:", 7)) {
            for (const char *v = p + 7; v + 26 <= le; v++)
                if (!strncmp(v, id, 26)) return (long)(v - txt);
            return -1;
        }
        if (!nl) break;
        p = nl + 1;
    }
    return -1;
}

/* dlm init --from SRC PATH: SRC's bytes with a new dlm_id, and a store of
 * its own (issue 30: a copy made with cp shares SRC's store). */
static int init_from(dlm_ctx *ctx, const init_args *a, const char *path)
{
    dlm_err e;
    err_clear(&e);
    char *txt = NULL;
    size_t len = 0;
    if (fs_read_all(a->from, 1u << 26, &txt, &len, &e)) return cmd_fail(ctx, &e);
    dlm_doc *d = doc_parse(a->from, txt, len, &e);
    if (!d) { free(txt); return cmd_fail(ctx, &e); }
    char old[27], base_str[4200];
    snprintf(old, sizeof old, "%s", doc_fm(d)->dlm_id);
    snprintf(base_str, sizeof base_str, "%s", doc_fm(d)->base_model ? doc_fm(d)->base_model : "");
    doc_free(d);
    long at = id_offset(txt, len, old);
    if (at < 0) {
        free(txt);
        err_set(&e, NULL, "%s: no 'dlm_id: %s' line to rewrite", a->from, old);
        return cmd_fail(ctx, &e);
    }
    char id[27];
    ulid_new(id);
    memcpy(txt + at, id, 26);   /* the only bytes that change */
    d = doc_parse(path, txt, len, &e);
    int ok = d && !strcmp(doc_fm(d)->dlm_id, id);
    doc_free(d);
    if (!ok) {
        free(txt);
        if (!e.msg[0]) err_set(&e, NULL, "%s: the new dlm_id did not take", a->from);
        return cmd_fail(ctx, &e);
    }
    char rs[PATH_MAX], rd[PATH_MAX];
    int same = realpath(a->from, rs) && realpath(path, rd) && !strcmp(rs, rd);
    if (!same && fs_exists(path) && !a->force) {
        free(txt);
        err_set(&e, NULL, "%s already exists", path);
        err_hint(&e, "re-run with --force to overwrite it with %s's content and a new dlm_id (or give %s itself a new"
                 " dlm_id: dlm init --from %s %s)", a->from, path, path, path);
        return cmd_fail(ctx, &e);
    }
    char parent[4096], abspath[4200], store[4200];
    fs_dirname(parent, sizeof parent, path);
    if (fs_mkdir_p(parent, &e) || abs_path(path, abspath, sizeof abspath, &e) ||
        store_dir(ctx->home, id, store, sizeof store, &e) || store_create_skeleton(store, &e)) {
        free(txt);
        return cmd_fail(ctx, &e);
    }
    store_lock lk;
    if (store_lock_acquire(store, "init", &lk, &e)) { free(txt); return cmd_fail(ctx, &e); }
    json_t *m = manifest_new(id, base_str, NULL, abspath, NULL);
    char mpath[4300];
    snprintf(mpath, sizeof mpath, "%s/manifest.json", store);
    int rc = !m || manifest_save(mpath, m, &e) || fs_write_atomic(path, txt, len, 0644, &e);
    json_decref(m);
    free(txt);
    store_lock_release(&lk);
    if (rc) {
        dlm_err ignore;
        fs_remove_tree(store, &ignore);
        return cmd_fail(ctx, &e);
    }
    if (!ctx->quiet) {
        printf("init: wrote %s from %s with a new dlm_id (the content is unchanged)\n", path, a->from);
        printf("dlm_id: %s (was %s)\nstore:  %s\n", id, old, store);
    }
    return EXIT_OK;
}
static int init_write(const dlm_ctx *ctx, const char *path, const base_ref *bp, const doc_template *t, const char *tname);

int cmd_init(int argc, char **argv, dlm_ctx *ctx)
{
    init_args a = {0};
    char *pos[64];
    int npos = 0;
    if (argc > 64) return cmd_usage_error(&spec_init, "too many arguments");
    int r = opts_parse(&spec_init, argc, argv, ctx, &a, pos, &npos);
    if (r == 1) return EXIT_OK;
    if (r) return EXIT_USAGE;
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    if (a.list) return list_templates(ctx, &a);
    if (npos != 1) return cmd_usage_error(&spec_init, "init takes exactly one PATH (the .dlm file to create)");
    const char *path = pos[0];
    if (a.from) {
        if (a.base || a.template || a.multimodal || a.audio)
            return cmd_usage_error(&spec_init, "--from copies SRC as it is: no --base, --template, --multimodal or --audio");
        return init_from(ctx, &a, path);
    }

    if (fs_exists(path) && !a.force) {
        err_set(&e, NULL, "%s already exists", path);
        err_hint(&e, "re-run with --force to overwrite it");
        return cmd_fail(ctx, &e);
    }
    if (a.multimodal && a.template)
        return cmd_usage_error(&spec_init, "--multimodal and --template are mutually exclusive (no template has images)");
    if (a.multimodal && a.audio)
        return cmd_usage_error(&spec_init, "--multimodal and --audio are mutually exclusive (each targets a different modality)");
    if (a.audio && a.template)
        return cmd_usage_error(&spec_init, "--audio and --template are mutually exclusive (no template has audio)");
    if (!a.base) a.base = a.multimodal ? "paligemma-3b-mix-224" : a.audio ? "qwen2-audio-7b-instruct" : "tiny";
    base_ref base;
    if (a.multimodal) {
        /* a vision registry row (its kind and license checked here), or a
         * model folder whose config.json is a vision-language model's */
        if (registry_parse_base(a.base, &base, &e)) return cmd_fail(ctx, &e);
        int folder = base.kind == BASE_PATH && base_vl_kind(a.base) > 0;
        if (!folder && (base.kind != BASE_REGISTRY || base.entry->modality != REG_VISION)) {
            err_set(&e, "UsageError", "--multimodal requires a vision-language base; '%s' is not one", a.base);
            err_hint(&e, "pick --base paligemma-3b-mix-224 or qwen2-vl-2b-instruct, or drop --multimodal");
            return cmd_fail(ctx, &e);
        }
        if (!folder && registry_check_license(&base, a.accept, &e)) return cmd_fail(ctx, &e);
    } else if (a.audio) {
        /* likewise the audio row (docs/audio.md) */
        if (registry_parse_base(a.base, &base, &e)) return cmd_fail(ctx, &e);
        int folder = base.kind == BASE_PATH && base_is_audio(a.base);   /* a Qwen2-Audio model folder */
        if (!folder && (base.kind != BASE_REGISTRY || base.entry->modality != REG_AUDIO)) {
            err_set(&e, "UsageError", "--audio requires an audio-language base; '%s' is not one", a.base);
            err_hint(&e, "pick --base qwen2-audio-7b-instruct (or a Qwen2-Audio model folder), or drop --audio");
            return cmd_fail(ctx, &e);
        }
        if (!folder && registry_check_license(&base, a.accept, &e)) return cmd_fail(ctx, &e);
    } else if (registry_parse_base(a.base, &base, &e) || registry_check_trainable(&base, &e) ||
               base_check_runnable(&base, &e) || registry_check_license(&base, a.accept, &e))
        return cmd_fail(ctx, &e);
    if (a.multimodal) return init_write(ctx, path, &base, NULL, "multimodal");
    if (a.audio) return init_write(ctx, path, &base, NULL, "audio");

    doc_template_set set;
    if (doc_templates_load(&set, &e)) return cmd_fail(ctx, &e);
    const char *tname = a.template ? a.template : "default";
    const doc_template *t = doc_templates_find(&set, tname);
    if (!t) {
        strbuf names = STRBUF_INIT;
        const char **cands = calloc((size_t)set.n + 1, sizeof *cands);
        for (int i = 0; i < set.n; i++) {
            sb_printf(&names, "%s%s", i ? ", " : "", set.v[i].name);
            if (cands) cands[i] = set.v[i].name;
        }
        const char *best = cands ? str_closest(tname, cands) : NULL;
        fprintf(stderr, "dlm: error: unknown template '%s'; available: %s\n", tname, sb_str(&names));
        if (best) fprintf(stderr, "hint: did you mean '--template %s'?\n", best);
        else fprintf(stderr, "hint: see 'dlm templates list'\n");
        free(cands);
        sb_free(&names);
        doc_templates_free(&set);
        return EXIT_USAGE;
    }

    int rc = init_write(ctx, path, &base, t, tname);
    doc_templates_free(&set);
    return rc;
}

/* The original's vision scaffold (store/bootstrap.py
 * _write_init_scaffold_multimodal): the placeholder image does not exist,
 * so the first `dlm train` names it. */
static char *multimodal_text(const char *id, const char *base_yaml)
{
    strbuf sb = STRBUF_INIT;
    sb_printf(&sb, "---\ndlm_id: %s\ndlm_version: %d\nbase_model: %s\n---\n\n", id, DOC_SCHEMA_VERSION, base_yaml);
    sb_puts(&sb, "# Your document title\n\n"
                 "Write prose here. It will train via continued pretraining (CPT) loss.\n\n"
                 "::image path=\"figures/your-image.png\" alt=\"short description\"::\n"
                 "Caption text describing the image. Training rows bundle the image\n"
                 "with this caption as `<image>\\n<caption>`.\n\n"
                 "::instruction::\n\n### Q\nWhat is in this image?\n\n### A\nDescribe what the image shows.\n");
    if (sb.oom) { sb_free(&sb); return NULL; }
    return sb.buf;
}

/* The original's audio scaffold (store/bootstrap.py
 * _write_init_scaffold_audio): the placeholder clip does not exist either. */
static char *audio_text(const char *id, const char *base_yaml)
{
    strbuf sb = STRBUF_INIT;
    sb_printf(&sb, "---\ndlm_id: %s\ndlm_version: %d\nbase_model: %s\n---\n\n", id, DOC_SCHEMA_VERSION, base_yaml);
    sb_puts(&sb, "# Your document title\n\n"
                 "Write prose here. It will train via continued pretraining (CPT) loss.\n\n"
                 "::audio path=\"clips/your-clip.wav\" transcript=\"Transcript of the audio clip.\"::\n\n"
                 "::instruction::\n\n### Q\nWhat was said in this recording?\n\n### A\nDescribe what you hear in the audio.\n");
    if (sb.oom) { sb_free(&sb); return NULL; }
    return sb.buf;
}

/* Render the document (template t, or the multimodal scaffold when t is
 * NULL), check it parses, create the store and write both. */
static int init_write(const dlm_ctx *ctx, const char *path, const base_ref *bp, const doc_template *t, const char *tname)
{
    base_ref base = *bp;
    dlm_err e;
    err_clear(&e);
    char id[27], base_str[4200];
    ulid_new(id);
    registry_base_string(&base, base_str, sizeof base_str);
    strbuf quoted = STRBUF_INIT;
    doc_yaml_scalar(&quoted, base_str);
    char *text = NULL;
    int rc = 0;
    if (t) rc = doc_template_render(t, id, sb_str(&quoted), &text, &e);
    else if (!(text = !strcmp(tname, "audio") ? audio_text(id, sb_str(&quoted)) : multimodal_text(id, sb_str(&quoted))))
        rc = err_set(&e, "MemoryError", "out of memory");
    sb_free(&quoted);
    if (rc) return cmd_fail(ctx, &e);

    /* The scaffold must be a valid document before anything is written. */
    dlm_doc *d = doc_parse(path, text, strlen(text), &e);
    if (!d) {
        err_prefix(&e, "template '%s' is not a valid document", tname);
        free(text);
        return cmd_fail(ctx, &e);
    }
    doc_free(d);

    char parent[4096], abspath[4200], store[4200];
    fs_dirname(parent, sizeof parent, path);
    if (fs_mkdir_p(parent, &e) || abs_path(path, abspath, sizeof abspath, &e) ||
        store_dir(ctx->home, id, store, sizeof store, &e) || store_create_skeleton(store, &e)) {
        free(text);
        return cmd_fail(ctx, &e);
    }
    store_lock lk;
    if (store_lock_acquire(store, "init", &lk, &e)) { free(text); return cmd_fail(ctx, &e); }
    store_license lic = {0};
    const store_license *licp = NULL;
    if (base.kind == BASE_REGISTRY && base.entry->requires_acceptance) {
        lic.license_url = base.entry->license_url;
        lic.license_spdx = base.entry->license;
        lic.via = "cli_flag";
        licp = &lic;
    }
    const char *rev = base.kind == BASE_REGISTRY ? base.entry->revision
                    : base.kind == BASE_HF && base.revision[0] ? base.revision : NULL;
    json_t *m = manifest_new(id, base_str, rev, abspath, licp);
    char mpath[4300];
    snprintf(mpath, sizeof mpath, "%s/manifest.json", store);
    rc = !m || manifest_save(mpath, m, &e) || fs_write_atomic(path, text, strlen(text), 0644, &e);
    json_decref(m);
    free(text);
    store_lock_release(&lk);
    if (rc) {
        dlm_err ignore;
        fs_remove_tree(store, &ignore);   /* no half-made store for a document that was not written */
        return cmd_fail(ctx, &e);
    }
    if (!ctx->quiet) {
        printf("init: wrote %s (%s %s, base %s)\n", path, t ? "template" : "scaffold", tname, base_str);
        printf("dlm_id: %s\nstore:  %s\n", id, store);
    }
    return EXIT_OK;
}
