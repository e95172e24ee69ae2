/* dlm verify — who signed a pack, and does it hold what it claims
 * (src/share/provenance.h). Exit 0 verified, 1 missing or broken, 2
 * untrusted signer, 3 bad signature. */
#include <stdio.h>

#include "cmd/commands.h"
#include "share/provenance.h"

typedef struct verify_args {
    int tofu;
    const char *keys;
} verify_args;

static const opt OPTS[] = {
    {"trust-on-first-use", 0, OPT_FLAG, offsetof(verify_args, tofu), NULL, "record an unknown signer's key as trusted"},
    {"trusted-keys-dir", 0, OPT_STR, offsetof(verify_args, keys), "DIR", "trusted keys (default: <home>/trusted-keys)"},
    {0},
};

const cmd_spec spec_verify = {
    "verify", "PACK [--trust-on-first-use]",
    "check a pack's checksums, provenance and signature",
    "Exit codes: 0 verified, 1 provenance missing or broken (including an adapter\n"
    "whose hash differs from the claim), 2 untrusted signer, 3 bad signature.\n"
    "Trusted keys are minisign public keys in <home>/trusted-keys/*.pub.",
    OPTS,
};

int cmd_verify(int argc, char **argv, dlm_ctx *ctx)
{
    verify_args a = {0};
    char *pos[64];
    int npos;
    int r = opts_parse(&spec_verify, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos != 1) return cmd_usage_error(&spec_verify, npos ? "too many arguments" : "verify needs a PACK");
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    char keys[4200];
    snprintf(keys, sizeof keys, "%s/trusted-keys", ctx->home);
    verify_opts o = {.pack_path = pos[0], .trusted_dir = a.keys ? a.keys : keys, .trust_on_first_use = a.tofu};
    cmd_pack_limits(&o.limits);
    verify_result res;
    int v = verify_pack(&o, &res, &e);
    if (v != VERIFY_OK) {
        e.code = v;
        return cmd_fail(ctx, &e);
    }
    if (!ctx->quiet) {
        printf("verified: %s signed by key %s at %s (adapter %.12s…)\n", pos[0], res.signer_id, res.signed_at,
               res.adapter_sha256[0] ? res.adapter_sha256 : "none");
        for (int i = 0; i < res.n_named && i < 8; i++) printf("  adapter %s… matches its claim\n", res.named[i]);
        if (res.recorded) printf("  trusted on first use: recorded %s\n", res.key_file);
        else printf("  trusted key: %s\n", res.key_file);
    }
    return EXIT_OK;
}
