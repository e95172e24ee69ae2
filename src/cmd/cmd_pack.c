/* dlm pack — a document, its store and its history in one file
 * (src/share/pack.h, docs/share.md). */
#include <stdio.h>
#include <string.h>

#include "cmd/commands.h"
#include "share/pack.h"
#include "share/sign.h"
#include "util/str.h"
#include "util/timeutil.h"

typedef struct pack_args {
    int exports, base, logs, sign;
    const char *out, *licensee;
} pack_args;

static const opt OPTS[] = {
    {"out", 'o', OPT_STR, offsetof(pack_args, out), "FILE", "write the pack here (default: <PATH>.pack next to the document)"},
    {"include-exports", 0, OPT_FLAG, offsetof(pack_args, exports), NULL, "also pack store/exports/ (GGUF files)"},
    {"include-base", 0, OPT_FLAG, offsetof(pack_args, base), NULL, "also pack the base's HF snapshot as base/ (and store/cache/); a base the registry does not call redistributable needs --i-am-the-licensee"},
    {"include-logs", 0, OPT_FLAG, offsetof(pack_args, logs), NULL, "also pack store/logs/"},
    {"i-am-the-licensee", 0, OPT_STR, offsetof(pack_args, licensee), "URL", "the base licence you accepted (for --include-base)"},
    {"sign", 0, OPT_FLAG, offsetof(pack_args, sign), NULL, "sign provenance.json with <home>/minisign.key (see dlm keygen)"},
    {0},
};

const cmd_spec spec_pack = {
    "pack", "PATH [--out FILE] [--sign] [--include-exports] [--include-logs] [--include-base [--i-am-the-licensee URL]]",
    "pack a document and its store into one .dlm.pack file",
    "A tar stream compressed with zstd (level 10): the .dlm, the store (without\n"
    "exports/, cache/, logs/ unless asked), PACK_HEADER.json, manifest.json,\n"
    "CHECKSUMS.sha256 and provenance.json. The same store packs to the same bytes.\n"
    "--include-base adds the base's files from the HF cache (config.json, tokenizer\n"
    "files, safetensors) under base/, which unpack installs into the HF cache.\n"
    "Taken under the store lock. See docs/share.md.",
    OPTS,
};

/* Shared by pack and push: load <home>/minisign.key. */
int cmd_load_signer(const dlm_ctx *ctx, minisign_key *k, dlm_err *e)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/minisign.key", ctx->home);
    if (minisign_load_secret(p, k, e)) {
        if (!strcmp(e->kind, "") || strstr(e->msg, "cannot open")) err_hint(e, "make a key pair with `dlm keygen`");
        return -1;
    }
    return 0;
}

int cmd_pack(int argc, char **argv, dlm_ctx *ctx)
{
    pack_args a = {0};
    char *pos[64];
    int npos;
    int r = opts_parse(&spec_pack, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos != 1) return cmd_usage_error(&spec_pack, npos ? "too many arguments" : "pack needs a PATH");
    if (a.licensee && !a.base) return cmd_usage_error(&spec_pack, "--i-am-the-licensee only applies with --include-base");
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    minisign_key k;
    if (a.sign && cmd_load_signer(ctx, &k, &e)) return cmd_fail(ctx, &e);
    pack_opts o = {.doc_path = pos[0], .home = ctx->home, .out = a.out, .include_exports = a.exports,
                   .include_base = a.base, .include_logs = a.logs, .licensee_url = a.licensee,
                   .signer = a.sign ? &k : NULL, .now = time_now()};
    pack_result res;
    int rc = pack_write(&o, &res, &e);
    memset(&k, 0, sizeof k);
    if (rc) return cmd_fail(ctx, &e);
    if (!ctx->quiet) {
        char hin[32], hout[32];
        printf("packed %s (adapter v%04d, %d files, %s → %s%s) to %s\n", res.dlm_id, res.adapter_version, res.n_files,
               str_human_size(res.bytes_in, hin, sizeof hin), str_human_size(res.bytes_out, hout, sizeof hout),
               res.signed_ ? ", signed" : "", res.path);
    }
    return EXIT_OK;
}
