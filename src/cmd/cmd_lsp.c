/* dlm lsp — the language server for .dlm documents over stdio
 * (src/lsp/lsp.h, docs/editors.md). */
#include <stdio.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "lsp/lsp.h"

typedef struct lsp_args {
    int stdio;
} lsp_args;

static const opt OPTS[] = {
    {"stdio", 0, OPT_FLAG, offsetof(lsp_args, stdio), NULL, "speak over stdin/stdout (the default and only transport)"},
    {0},
};

const cmd_spec spec_lsp = {
    "lsp", "[--stdio]",
    "the language server for .dlm documents (editors: docs/editors.md)",
    "Speaks the Language Server Protocol over stdin/stdout: diagnostics from\n"
    "the parser and schema `dlm show` uses, completion, hover, code actions,\n"
    "and the original dlm-lsp's dlm/listBaseModels, dlm/listTemplates,\n"
    "dlm/documentState requests and dlm/trainingProgress notification.\n"
    "Exit status 0 after shutdown + exit, 1 when the client left without\n"
    "shutdown.",
    OPTS,
};

int cmd_lsp(int argc, char **argv, dlm_ctx *ctx)
{
    lsp_args a = {0};
    char *pos[4];
    int npos;
    if (argc > 8) return cmd_usage_error(&spec_lsp, "too many arguments");
    int r = opts_parse(&spec_lsp, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos) return cmd_usage_error(&spec_lsp, "lsp takes no positional arguments");
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    lsp_options o = {.home = ctx->home};
    int rc = lsp_serve(STDIN_FILENO, STDOUT_FILENO, &o, &e);
    if (rc < 0) return cmd_fail(ctx, &e);
    return rc;
}
