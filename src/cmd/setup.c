/* setup — what every command does after parsing its options, and the
 * environment, read once at start-up. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cmd/commands.h"
#include "doc/doc.h"
#include "doc/templates.h"
#include "kern/cpu.h"
#include "kern/kern.h"
#include "store/store.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/progress.h"
#include "weights/base.h"
#include "weights/hub.h"
#include "weights/registry.h"

static int env_true(const char *v)
{
    return v && (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"));
}

/* Every environment variable dlm's libraries act on is read here, once,
 * and handed down; below src/cmd nothing calls getenv (except PATH for
 * finding ollama, which is how exec works). docs/architecture.md lists
 * them. */
int cmd_read_env(dlm_err *e)
{
    const char *v;
    if ((v = getenv("DLM_CPU_LEVEL")) && *v && cpu_cap_level(v))
        return err_set(e, NULL, "DLM_CPU_LEVEL=%s: expected scalar, avx2 or avx512", v);
    if ((v = getenv("DLM_BF16_BACKEND")) && *v) {
        int rc = kern_bf16_force(v);
        if (rc == -1) return err_set(e, NULL, "DLM_BF16_BACKEND=%s: expected fma, avx512bf16, amx or amx-model", v);
        if (rc == -2) return err_set(e, NULL, "DLM_BF16_BACKEND=%s: this CPU cannot run it", v);
    }
    if ((v = getenv("DLM_DECODE")) && *v) {
        if (strcmp(v, "f32") && strcmp(v, "int8")) return err_set(e, NULL, "DLM_DECODE=%s: expected f32 or int8", v);
        kern_set_int8_decode(!strcmp(v, "int8"));
    }
    hub_env he = {.hub_cache = getenv("HF_HUB_CACHE"), .hf_home = getenv("HF_HOME"),
                  .xdg_cache = getenv("XDG_CACHE_HOME"), .home = getenv("HOME"), .endpoint = getenv("HF_ENDPOINT"),
                  .token = getenv("HF_TOKEN"),
                  .offline = env_true(getenv("HF_HUB_OFFLINE")) || env_true(getenv("TRANSFORMERS_OFFLINE"))};
    if (!he.hub_cache || !*he.hub_cache) he.hub_cache = getenv("HUGGINGFACE_HUB_CACHE");
    if (!he.token || !*he.token) he.token = getenv("HUGGING_FACE_HUB_TOKEN");
    hub_set_env(&he);
    base_set_tiny_path(getenv("DLM_TINY"));
    doc_templates_set_dir(getenv("DLM_TEMPLATES"));
    /* test hooks */
    fs_inject_write_failure(getenv("DLM_FAIL_WRITE"));
    fs_inject_remove_failure(getenv("DLM_FAIL_REMOVE"));
    return 0;
}

int cmd_setup(dlm_ctx *ctx, dlm_err *e)
{
    if (ctx->verbose && ctx->quiet) {
        ctx->quiet = 0;
        return err_set(e, NULL, "-v/--verbose and -q/--quiet are mutually exclusive");
    }
    log_set_level(ctx->quiet ? LOG_QUIET : ctx->verbose ? LOG_VERBOSE : LOG_NORMAL);
    const char *hold = getenv("DLM_TEST_HOLD_LOCK_MS"), *nk = getenv("DLM_TEST_NO_KERNEL_LOCK");
    store_lock_test_hooks(hold && *hold ? atoi(hold) : 0, nk && *nk && strcmp(nk, "0"));
    /* test-only: $DLM_TEST_PROGRESS_MIN_S lowers the 2 s a step runs before
     * its progress shows (0: every step shows), so a test sees the lines
     * of a small base; $DLM_TEST_PROGRESS_BAR=1 draws the terminal bar into
     * a file (util/progress.h) */
    const char *pmin = getenv("DLM_TEST_PROGRESS_MIN_S"), *pbar = getenv("DLM_TEST_PROGRESS_BAR");
    if (pmin && *pmin) progress_set_min_seconds(atof(pmin));
    if (pbar && !strcmp(pbar, "1")) progress_set_mode(2);
    return ctx_resolve_home(ctx, e);
}

int cmd_doc_store(dlm_ctx *ctx, const char *path, char *store, size_t cap, dlm_err *e)
{
    if (cmd_setup(ctx, e)) return -1;
    dlm_doc *d = doc_load(path, e);
    if (!d) return -1;
    int rc = store_dir(ctx->home, doc_fm(d)->dlm_id, store, cap, e);
    doc_free(d);
    return rc;
}

int cmd_doc_store_owned(dlm_ctx *ctx, const char *path, char *store, size_t cap, dlm_err *e)
{
    if (cmd_setup(ctx, e)) return -1;
    dlm_doc *d = doc_load(path, e);
    if (!d) return -1;
    int rc = store_dir(ctx->home, doc_fm(d)->dlm_id, store, cap, e);
    char mp[4200];
    snprintf(mp, sizeof mp, "%s/manifest.json", store);
    json_t *m = !rc && fs_is_file(mp) ? manifest_load(mp, e) : NULL;
    if (!rc && fs_is_file(mp) && !m) rc = -1;
    int changed;
    /* a check only: the owner is recorded by train, under the store lock */
    if (m && store_source_check_as(m, path, doc_fm(d)->dlm_id, 0, 0, &changed, NULL, 0, e)) rc = -1;
    json_decref(m);
    doc_free(d);
    return rc;
}

/* 1-based line of the frontmatter key `base_model:` (0 when absent). */
static int base_line(const dlm_doc *d)
{
    size_t len;
    const char *raw = doc_raw(d, &len), *p = raw, *end = raw + len;
    for (int line = 1; p < end; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if ((size_t)(end - p) >= 11 && !strncmp(p, "base_model:", 11)) return line;
        if (!nl) break;
        p = nl + 1;
    }
    return 0;
}

int cmd_check_license(dlm_ctx *ctx, const char *doc_path, const char *base_override, int accept, int record,
                      dlm_err *e)
{
    dlm_doc *d = doc_path ? doc_load(doc_path, e) : NULL;
    if (doc_path && !d) return -1;
    const char *spec = base_override ? base_override : d ? doc_fm(d)->base_model : NULL;
    base_ref b;
    dlm_err e2;
    err_clear(&e2);
    if (!spec || registry_parse_base(spec, &b, &e2) || b.kind != BASE_REGISTRY || !b.entry->requires_acceptance) {
        doc_free(d);
        return 0;
    }
    char store[4096], mp[4200];
    int rc = 0;
    json_t *m = NULL;
    if (d && !store_dir(ctx->home, doc_fm(d)->dlm_id, store, sizeof store, &e2)) {
        snprintf(mp, sizeof mp, "%s/manifest.json", store);
        m = fs_is_file(mp) ? manifest_load(mp, &e2) : NULL;
    }
    if (m && json_is_object(json_object_get(m, "license_acceptance"))) goto out;
    if (accept) {
        if (record && d) {
            /* remember it, as init does, so the next command needs no flag */
            store_lock lk;
            store_license lic = {NULL, b.entry->license_url, b.entry->license, "cli_flag"};
            if (store_create_skeleton(store, e) || store_lock_acquire(store, "train", &lk, e)) { rc = -1; goto out; }
            json_decref(m);
            m = fs_is_file(mp) ? manifest_load(mp, e) : NULL;
            if (!m) {
                char abs[4096];
                if (!realpath(doc_path, abs)) snprintf(abs, sizeof abs, "%s", doc_path);
                m = manifest_new(doc_fm(d)->dlm_id, spec, b.entry->revision, abs, &lic);
            } else {
                json_t *tmp = manifest_new(doc_fm(d)->dlm_id, spec, NULL, NULL, &lic);
                json_object_set(m, "license_acceptance", json_object_get(tmp, "license_acceptance"));
                json_decref(tmp);
            }
            rc = !m || manifest_save(mp, m, e) ? -1 : 0;
            store_lock_release(&lk);
            if (!rc) log_info("license of %s accepted (recorded in %s)", b.entry->hf_id, mp);
        }
        goto out;
    }
    if (d) {
        err_at(e, "GatedModelError", doc_path, base_line(d), 1,
               "base_model %s (%s) is gated and its license was not accepted for this document. License: %s",
               b.entry->key, b.entry->hf_id, b.entry->license_url ? b.entry->license_url : "(unknown)");
        err_hint(e, "read the license, then accept it once for this document: dlm train %s --i-accept-license",
                 doc_path);
    } else {
        registry_check_license(&b, 0, e);
    }
    rc = -1;
out:
    json_decref(m);
    doc_free(d);
    return rc;
}
