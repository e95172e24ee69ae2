/* commands — the list of commands, one X(name) per src/cmd/cmd_<name>.c.
 * Adding a command: write cmd_<name>.c defining `const cmd_spec spec_<name>`
 * and `int cmd_<name>(int, char **, dlm_ctx *)`, then add it here. */
#ifndef DLM_COMMANDS_H
#define DLM_COMMANDS_H

#include "cmd/cmd.h"

#define DLM_COMMAND_LIST(X) \
    X(doctor)               \
    X(export)               \
    X(init)                 \
    X(logs)                 \
    X(metrics)              \
    X(migrate)              \
    X(perplexity)           \
    X(prompt)               \
    X(show)                 \
    X(status)               \
    X(tokenize)             \
    X(train)

#define X(name) extern const cmd_spec spec_##name; int cmd_##name(int argc, char **argv, dlm_ctx *ctx);
DLM_COMMAND_LIST(X)
#undef X

/* After opts_parse: apply -v/-q to the logger and resolve the home dir. */
int cmd_setup(dlm_ctx *ctx, dlm_err *e);
/* cmd_setup, then the store folder of the document at path (commands that
 * read a run's records: logs, status, metrics). */
int cmd_doc_store(dlm_ctx *ctx, const char *path, char *store, size_t cap, dlm_err *e);
/* Licence check for a command about to resolve a base: the document's
 * base_model (or base_override) when it is gated needs an acceptance
 * recorded in the document's store manifest (`init`/`train
 * --i-accept-license`) or `accept` now; `record` writes an acceptance given
 * now into the store (train). GatedModelError at the document's
 * base_model line otherwise. doc_path may be NULL (a bare --base). */
int cmd_check_license(dlm_ctx *ctx, const char *doc_path, const char *base_override, int accept, int record,
                      dlm_err *e);

#endif
