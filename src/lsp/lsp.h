/* lsp — `dlm lsp`: the Language Server Protocol over stdio for .dlm
 * documents (docs/editors.md).
 *
 *   lsp_options o = {.home = ctx->home};
 *   int code = lsp_serve(0, 1, &o, &e);   // until `exit`: 0 after shutdown, 1 without
 *
 * The server is single-threaded: requests are answered in arrival order,
 * and a $/cancelRequest that arrives before its request is dispatched
 * answers it with RequestCancelled (-32800). Between messages it polls the
 * open documents' stores for a running `dlm train` and sends the
 * dlm/trainingProgress notification of the original dlm-lsp. */
#ifndef DLM_LSP_H
#define DLM_LSP_H

#include <stddef.h>
#include "util/err.h"

typedef struct lsp_options {
    const char *home;          /* the dlm home (stores), resolved by the command layer */
    int poll_ms;               /* progress polling period; 0 = 1000 */
} lsp_options;

/* Serve on file descriptors in/out until `exit` or end of input. Returns
 * the exit code the protocol asks for (0 when shutdown came first, else 1);
 * -1 with e on an I/O failure. */
int lsp_serve(int in, int out, const lsp_options *o, dlm_err *e);

/* The same dispatcher without a file descriptor, for the fuzz target and
 * the unit test: feed raw bytes (framed or not); everything the server
 * would send goes to sink. Returns 1 once `exit` was received. */
typedef struct lsp_server lsp_server;
typedef void (*lsp_sink_fn)(void *ctx, const char *framed, size_t len);
lsp_server *lsp_server_new(const lsp_options *o, lsp_sink_fn sink, void *sink_ctx);
int lsp_server_feed(lsp_server *s, const void *bytes, size_t n);
/* Exit code once `exit` was received (see lsp_serve). */
int lsp_server_exit_code(const lsp_server *s);
void lsp_server_free(lsp_server *s);

#endif
