/* dlm unpack — install a .dlm.pack as a store, after every check passed
 * (src/share/pack.h, docs/share.md). */
#include <stdio.h>
#include <stdlib.h>

#include "cmd/commands.h"
#include "share/pack.h"

typedef struct unpack_args {
    int force;
    const char *out;
} unpack_args;

static const opt OPTS[] = {
    {"force", 0, OPT_FLAG, offsetof(unpack_args, force), NULL, "replace an existing store (and document) of the same dlm_id, and base files in the HF cache that differ"},
    {"out", 'o', OPT_STR, offsetof(unpack_args, out), "DIR", "where the .dlm goes (default: the pack's folder)"},
    {0},
};

const cmd_spec spec_unpack = {
    "unpack", "PACK [--force] [--out DIR] [--home DIR]",
    "install a .dlm.pack: the store under <home>/store/<dlm_id>, the .dlm in --out",
    "Bounded: absolute paths, '..', links, devices, duplicate or oversized members,\n"
    "compression bombs and truncated streams are refused, and every checksum is\n"
    "verified, before anything is installed. With --force the old store is moved\n"
    "aside and put back if the install fails. A pack made with --include-base puts\n"
    "its base into the HF cache first (a differing file there is refused without\n"
    "--force). See docs/share.md.",
    OPTS,
};

/* The bounds, with test overrides ($DLM_TEST_PACK_MAX_MEMBER, _MAX_TOTAL,
 * _MAX_RATIO, _RATIO_FLOOR) so the refusals can be tested with small files. */
void cmd_pack_limits(pack_limits *l)
{
    pack_limits_default(l);
    const char *v;
    if ((v = getenv("DLM_TEST_PACK_MAX_MEMBER"))) l->max_member = strtoull(v, NULL, 10);
    if ((v = getenv("DLM_TEST_PACK_MAX_TOTAL"))) l->max_total = strtoull(v, NULL, 10);
    if ((v = getenv("DLM_TEST_PACK_MAX_RATIO"))) l->max_ratio = strtoull(v, NULL, 10);
    if ((v = getenv("DLM_TEST_PACK_RATIO_FLOOR"))) l->ratio_floor = strtoull(v, NULL, 10);
}

int cmd_unpack(int argc, char **argv, dlm_ctx *ctx)
{
    unpack_args a = {0};
    char *pos[64];
    int npos;
    int r = opts_parse(&spec_unpack, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos != 1) return cmd_usage_error(&spec_unpack, npos ? "too many arguments" : "unpack needs a PACK");
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    unpack_opts o = {.pack_path = pos[0], .home = ctx->home, .out_dir = a.out, .force = a.force};
    cmd_pack_limits(&o.limits);
    unpack_result res;
    if (unpack_run(&o, &res, &e)) return cmd_fail(ctx, &e);
    if (!ctx->quiet)
        printf("unpacked %s (adapter v%04d, %d files%s): store %s, document %s\n", res.dlm_id, res.adapter_version,
               res.n_files, res.replaced ? ", replaced the old store" : "", res.store, res.doc_path);
    if (!ctx->quiet && res.base_files)
        printf("installed the base %s (%d files) into the HF cache %s\n", res.base_repo, res.base_files,
               res.base_cache);
    if (res.base_replaced)
        fprintf(stderr, "warning: --force replaced %d differing file%s of the base %s in the HF cache %s\n",
                res.base_replaced, res.base_replaced == 1 ? "" : "s", res.base_repo, res.base_cache);
    return EXIT_OK;
}
