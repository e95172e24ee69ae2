/* dlm pull — fetch a pack (path, https://, peer:// or hf:ORG/NAME), check its
 * signature against the trusted keys, unpack it (src/share/transfer.h). */
#include <stdio.h>
#include <stdlib.h>

#include "cmd/commands.h"
#include "share/transfer.h"

typedef struct pull_args {
    int force;
    const char *out;
} pull_args;

static const opt OPTS[] = {
    {"out", 'o', OPT_STR, offsetof(pull_args, out), "DIR", "where the .dlm goes (default: the current folder)"},
    {"force", 0, OPT_FLAG, offsetof(pull_args, force), NULL, "replace an existing store (and document)"},
    {0},
};

const cmd_spec spec_pull = {
    "pull", "SOURCE [--out DIR] [--force]",
    "fetch a pack from a file, https://, peer:// or hf:ORG/NAME, check its signature, unpack it",
    "SOURCE is a .dlm.pack, an https:// URL (URL.minisig is fetched too when\n"
    "there is one) or the peer://HOST:PORT/<dlm_id>?token=... URL that `dlm serve`\n"
    "printed, or hf:ORG/NAME: the adapter.dlm.pack (and adapter.dlm.pack.minisig)\n"
    "of a Hugging Face Hub model repository's main branch, as `dlm push --to hf:`\n"
    "and the original put them there (HF_TOKEN for a private one; HF_ENDPOINT).\n"
    "A signature by a trusted key (<home>/trusted-keys/*.pub) is\n"
    "reported as verified, by another key as unverified (a warning); a bad\n"
    "signature is refused. Unsigned packs install with a note.",
    OPTS,
};

int cmd_pull(int argc, char **argv, dlm_ctx *ctx)
{
    pull_args a = {.out = "."};
    char *pos[64];
    int npos;
    int r = opts_parse(&spec_pull, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos != 1) return cmd_usage_error(&spec_pull, npos ? "too many arguments" : "pull needs a SOURCE");
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    char keys[4200];
    snprintf(keys, sizeof keys, "%s/trusted-keys", ctx->home);
    pull_opts o = {.source = pos[0], .home = ctx->home, .out_dir = a.out, .force = a.force, .trusted_dir = keys,
                   .http = {.ca_file = getenv("DLM_SHARE_CA_BUNDLE"), .auth = getenv("DLM_SHARE_AUTH")}};
    cmd_pack_limits(&o.limits);
    pull_result res;
    if (pull_run(&o, &res, &e)) return cmd_fail(ctx, &e);
    if (res.sig == PULL_UNVERIFIED)
        fprintf(stderr, "dlm: warning: unverified signature: %s\n", res.sig_note);
    if (!ctx->quiet) {
        if (res.sig == PULL_VERIFIED) printf("signature: verified (key %s)\n", res.signer_id);
        else if (res.sig == PULL_UNVERIFIED) printf("signature: unverified (key %s is not trusted)\n", res.signer_id);
        else printf("signature: none (unsigned pack)\n");
        printf("pulled %s (adapter v%04d, %d files): store %s, document %s\n", res.u.dlm_id, res.u.adapter_version,
               res.u.n_files, res.u.store, res.u.doc_path);
    }
    return EXIT_OK;
}
