/* setup — what every command does after parsing its options. */
#include "cmd/commands.h"
#include "util/log.h"

int cmd_setup(dlm_ctx *ctx, dlm_err *e)
{
    if (ctx->verbose && ctx->quiet) {
        ctx->quiet = 0;
        return err_set(e, NULL, "-v/--verbose and -q/--quiet are mutually exclusive");
    }
    log_set_level(ctx->quiet ? LOG_QUIET : ctx->verbose ? LOG_VERBOSE : LOG_NORMAL);
    return ctx_resolve_home(ctx, e);
}
