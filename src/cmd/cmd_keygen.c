/* dlm keygen — a minisign key pair for signing packs (src/share/sign.h). */
#include <stdio.h>
#include <sodium.h>

#include "cmd/commands.h"
#include "share/sign.h"
#include "util/fs.h"

typedef struct keygen_args {
    const char *dir;
} keygen_args;

static const opt OPTS[] = {
    {"dir", 0, OPT_STR, offsetof(keygen_args, dir), "DIR", "write the keys here (default: the dlm home)"},
    {0},
};

const cmd_spec spec_keygen = {
    "keygen", "[--dir DIR]",
    "make a minisign key pair for `dlm pack --sign` and `dlm push --sign`",
    "Writes minisign.key (secret, mode 0600, unencrypted like `minisign -G -W`)\n"
    "and minisign.pub. Never replaces an existing key. Give minisign.pub to the\n"
    "people who verify your packs (they put it in <home>/trusted-keys/).",
    OPTS,
};

int cmd_keygen(int argc, char **argv, dlm_ctx *ctx)
{
    keygen_args a = {0};
    char *pos[64];
    int npos;
    int r = opts_parse(&spec_keygen, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos) return cmd_usage_error(&spec_keygen, "keygen takes no arguments");
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    const char *dir = a.dir ? a.dir : ctx->home;
    char sk[4200], pk[4200];
    snprintf(sk, sizeof sk, "%s/minisign.key", dir);
    snprintf(pk, sizeof pk, "%s/minisign.pub", dir);
    if (fs_exists(pk)) {
        err_set(&e, "KeyExistsError", "%s already exists", pk);
        err_hint(&e, "keep the key you have, or move both files away first to make a new one");
        return cmd_fail(ctx, &e);
    }
    if (fs_mkdir_p(dir, &e)) return cmd_fail(ctx, &e);
    minisign_key k;
    minisign_pub p;
    minisign_keygen(&k);
    minisign_key_pub(&k, &p);
    int bad = minisign_write_secret(sk, &k, &e) || minisign_write_public(pk, &p, &e);
    sodium_memzero(&k, sizeof k);
    if (bad) return cmd_fail(ctx, &e);
    char id[17], b64[128];
    minisign_id_hex(p.key_id, id);
    minisign_pub_b64(&p, b64, sizeof b64);
    if (!ctx->quiet) printf("key %s\n  secret: %s (0600)\n  public: %s\n  %s\n", id, sk, pk, b64);
    return EXIT_OK;
}
