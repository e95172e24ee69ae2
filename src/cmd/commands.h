/* commands — the list of commands, one X(name) per src/cmd/cmd_<name>.c.
 * Adding a command: write cmd_<name>.c defining `const cmd_spec spec_<name>`
 * and `int cmd_<name>(int, char **, dlm_ctx *)`, then add it here. */
#ifndef DLM_COMMANDS_H
#define DLM_COMMANDS_H

#include "cmd/cmd.h"

#define DLM_COMMAND_LIST(X) \
    X(api)                  \
    X(cache)                \
    X(completion)           \
    X(doctor)               \
    X(export)               \
    X(harvest)              \
    X(init)                 \
    X(keygen)               \
    X(logs)                 \
    X(lsp)                  \
    X(metrics)              \
    X(migrate)              \
    X(pack)                 \
    X(perplexity)           \
    X(preference)           \
    X(prompt)               \
    X(pull)                 \
    X(push)                 \
    X(repl)                 \
    X(serve)                \
    X(show)                 \
    X(status)               \
    X(synth)                \
    X(templates)            \
    X(tokenize)             \
    X(train)                \
    X(unpack)               \
    X(verify)

#define X(name) extern const cmd_spec spec_##name; int cmd_##name(int argc, char **argv, dlm_ctx *ctx);
DLM_COMMAND_LIST(X)
#undef X

/* At start-up, before any command: hand the environment's settings
 * (DLM_CPU_LEVEL, DLM_BF16_BACKEND, DLM_DECODE, HF_*, DLM_TINY, DLM_TEMPLATES, the
 * DLM_FAIL_WRITE test hook) to the libraries. */
int cmd_read_env(dlm_err *e);
/* After opts_parse: apply -v/-q to the logger and resolve the home dir. */
int cmd_setup(dlm_ctx *ctx, dlm_err *e);
/* cmd_setup, then the store folder of the document at path (commands that
 * read a run's records: logs, status, metrics). */
int cmd_doc_store(dlm_ctx *ctx, const char *path, char *store, size_t cap, dlm_err *e);
/* The same for a command that writes into the store for the document
 * (synth and preference staging, their apply): refused with
 * SharedStoreError when the document is a copy of the store's owner
 * (store_source_check). */
int cmd_doc_store_owned(dlm_ctx *ctx, const char *path, char *store, size_t cap, dlm_err *e);
/* Licence check for a command about to resolve a base: the document's
 * base_model (or base_override) when it is gated needs an acceptance
 * recorded in the document's store manifest (`init`/`train
 * --i-accept-license`) or `accept` now; `record` writes an acceptance given
 * now into the store (train). GatedModelError at the document's
 * base_model line otherwise. doc_path may be NULL (a bare --base). */
int cmd_check_license(dlm_ctx *ctx, const char *doc_path, const char *base_override, int accept, int record,
                      dlm_err *e);

/* Shared by the sharing commands (cmd_unpack.c, cmd_pack.c): the unpack
 * bounds with their test overrides, and <home>/minisign.key. */
struct pack_limits;
struct minisign_key;
void cmd_pack_limits(struct pack_limits *l);
int cmd_load_signer(const dlm_ctx *ctx, struct minisign_key *k, dlm_err *e);

#endif
