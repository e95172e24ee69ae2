/* setup — what every command does after parsing its options. */
#include "cmd/commands.h"
#include "doc/doc.h"
#include "store/store.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

int cmd_setup(dlm_ctx *ctx, dlm_err *e)
{
    if (ctx->verbose && ctx->quiet) {
        ctx->quiet = 0;
        return err_set(e, NULL, "-v/--verbose and -q/--quiet are mutually exclusive");
    }
    log_set_level(ctx->quiet ? LOG_QUIET : ctx->verbose ? LOG_VERBOSE : LOG_NORMAL);
    const char *hold = getenv("DLM_TEST_HOLD_LOCK_MS"), *nk = getenv("DLM_TEST_NO_KERNEL_LOCK");
    store_lock_test_hooks(hold && *hold ? atoi(hold) : 0, nk && *nk && strcmp(nk, "0"));
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
