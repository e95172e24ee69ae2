/* dlm push — send a document (packed here) or a pack to a folder, an
 * https:// URL or a Hugging Face Hub repository, optionally signed
 * (src/share/transfer.h, src/share/hf_share.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/commands.h"
#include "share/transfer.h"
#include "util/timeutil.h"

typedef struct push_args {
    int sign, exports, base, logs;
    const char *to, *licensee;
} push_args;

static const opt OPTS[] = {
    {"to", 0, OPT_STR, offsetof(push_args, to), "DEST", "a folder, https://URL or hf:ORG/NAME (required)"},
    {"sign", 0, OPT_FLAG, offsetof(push_args, sign), NULL, "sign with <home>/minisign.key: provenance and a .minisig of the pack"},
    {"include-exports", 0, OPT_FLAG, offsetof(push_args, exports), NULL, "as dlm pack"},
    {"include-base", 0, OPT_FLAG, offsetof(push_args, base), NULL, "as dlm pack"},
    {"include-logs", 0, OPT_FLAG, offsetof(push_args, logs), NULL, "as dlm pack"},
    {"i-am-the-licensee", 0, OPT_STR, offsetof(push_args, licensee), "URL", "as dlm pack"},
    {0},
};

const cmd_spec spec_push = {
    "push", "PATH|PACK --to DIR|https://URL|hf:ORG/NAME [--sign]",
    "send a document (packed first) or a .dlm.pack to a folder, an https:// URL or the Hugging Face Hub",
    "HTTPS: POST application/octet-stream, with the Authorization header taken\n"
    "from $DLM_SHARE_AUTH; the signature goes to URL.minisig. $DLM_SHARE_CA_BUNDLE\n"
    "names a CA bundle other than the system's.\n"
    "hf:ORG/NAME: a Hub model repository (created when missing, public), as the\n"
    "original: adapter.dlm.pack, adapter.dlm.pack.minisig (--sign) and a README.md\n"
    "in one commit on main, through the Hub's commit and LFS APIs. The token is\n"
    "HF_TOKEN (or HUGGING_FACE_HUB_TOKEN), from the environment only; HF_ENDPOINT\n"
    "replaces https://huggingface.co. peer:// is refused (run dlm serve).",
    OPTS,
};

int cmd_push(int argc, char **argv, dlm_ctx *ctx)
{
    push_args a = {0};
    char *pos[64];
    int npos;
    int r = opts_parse(&spec_push, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos != 1) return cmd_usage_error(&spec_push, npos ? "too many arguments" : "push needs a PATH or PACK");
    if (!a.to) return cmd_usage_error(&spec_push, "push needs --to DEST");
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    minisign_key k;
    if (a.sign && cmd_load_signer(ctx, &k, &e)) return cmd_fail(ctx, &e);
    push_opts o = {.path = pos[0], .to = a.to, .home = ctx->home, .include_exports = a.exports, .include_base = a.base,
                   .include_logs = a.logs, .licensee_url = a.licensee, .signer = a.sign ? &k : NULL,
                   .now = time_now(),
                   .http = {.ca_file = getenv("DLM_SHARE_CA_BUNDLE"), .auth = getenv("DLM_SHARE_AUTH")}};
    cmd_pack_limits(&o.limits);
    push_result res;
    int rc = push_run(&o, &res, &e);
    memset(&k, 0, sizeof k);
    if (rc) return cmd_fail(ctx, &e);
    if (!ctx->quiet) {
        printf("pushed %s to %s", res.dlm_id, res.dest);
        if (res.status) printf(" (HTTP %ld)", res.status);
        printf("\n");
        if (res.sig_dest[0]) printf("  signature: %s\n", res.sig_dest);
        if (!strncmp(res.dest, "hf:", 3)) {
            if (res.created) printf("  created the repository %s\n", res.dest + 3);
            if (res.commit[0]) printf("  commit: %s\n", res.commit);
            printf("  install: dlm pull %s\n", res.dest);
        }
    }
    return EXIT_OK;
}
