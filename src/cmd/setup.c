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
#include "weights/base.h"
#include "weights/hub.h"

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
    return 0;
}

int cmd_setup(dlm_ctx *ctx, dlm_err *e)
{
    if (ctx->verbose && ctx->quiet) {
        ctx->quiet = 0;
        return err_set(e, NULL, "-v/--verbose and -q/--quiet are mutually exclusive");
    }
    log_set_level(ctx->quiet ? LOG_QUIET : ctx->verbose ? LOG_VERBOSE : LOG_NORMAL);
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
