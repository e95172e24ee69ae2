/* dlm cache — the tokenization cache of a document's store
 * (<store>/tokenized-cache, see src/tokens/tcache.h):
 *   show   entries, bytes, ages and the document's training.cache settings
 *   prune  entries unused for --older-than DUR (default
 *          training.cache.prune_older_than_days), then the oldest until
 *          the total fits training.cache.max_bytes
 *   clear  everything (asks on a terminal unless --force) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "doc/doc.h"
#include "store/store.h"
#include "tokens/tcache.h"
#include "util/json.h"
#include "util/str.h"
#include "util/timeutil.h"

typedef struct cache_args {
    int json, force;
    const char *older;
} cache_args;

static const opt OPTS[] = {
    {"json", 0, OPT_FLAG, offsetof(cache_args, json), NULL, "show: machine-readable output"},
    {"older-than", 0, OPT_STR, offsetof(cache_args, older), "DUR", "prune: entries unused this long (30d, 12h, 45m, 10s)"},
    {"force", 0, OPT_FLAG, offsetof(cache_args, force), NULL, "clear: do not ask"},
    {0},
};

const cmd_spec spec_cache = {
    "cache", "show|prune|clear PATH [--json] [--older-than DUR] [--force]",
    "inspect, prune or clear a document's tokenization cache",
    "The cache keeps tokenized sections in <store>/tokenized-cache, keyed by the\n"
    "tokenizer file, chat dialect, system prompt, loss_on, sequence_len and the\n"
    "section's content (docs/sources.md).",
    OPTS,
};

/* "30d" / "12h" / "45m" / "10s" → seconds; -1 when malformed. */
static double parse_dur(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0 || end[0] == 0 || end[1] != 0) return -1;
    switch (end[0]) {
    case 'd': return v * 86400;
    case 'h': return v * 3600;
    case 'm': return v * 60;
    case 's': return v;
    default: return -1;
    }
}

int cmd_cache(int argc, char **argv, dlm_ctx *ctx)
{
    cache_args a = {0};
    char *pos[64];
    int npos;
    if (argc > 64) return cmd_usage_error(&spec_cache, "too many arguments");
    int r = opts_parse(&spec_cache, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos != 2) return cmd_usage_error(&spec_cache, "cache needs a subcommand (show, prune, clear) and a PATH");
    const char *sub = pos[0];
    if (strcmp(sub, "show") && strcmp(sub, "prune") && strcmp(sub, "clear"))
        return cmd_usage_error(&spec_cache, "unknown subcommand '%s' (show, prune, clear)", sub);
    double older = -1;
    if (a.older && (strcmp(sub, "prune") || (older = parse_dur(a.older)) < 0))
        return cmd_usage_error(&spec_cache, strcmp(sub, "prune") ? "--older-than is for prune"
                                                                 : "--older-than expects 30d, 12h, 45m or 10s, got '%s'",
                               a.older);
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    dlm_doc *d = doc_load(pos[1], &e);
    if (!d) return cmd_fail(ctx, &e);
    char store[4096];
    int rc = store_dir(ctx->home, doc_fm(d)->dlm_id, store, sizeof store, &e);
    const doc_training *t = &doc_fm(d)->training;
    int enabled = t->cache.enabled;
    int64_t max_bytes = t->cache.max_bytes, days = t->cache.prune_older_than_days;
    doc_free(d);
    if (rc) return cmd_fail(ctx, &e);
    if (!strcmp(sub, "show")) {
        tcache_stats st;
        if (tcache_stat(store, &st, &e)) return cmd_fail(ctx, &e);
        double now = (double)time(NULL);
        if (a.json) {
            json_t *o = json_pack("{s:s, s:I, s:I, s:o, s:o, s:{s:b, s:I, s:I}}", "path",
                                  store, "entries", (json_int_t)st.entries, "bytes", (json_int_t)st.bytes,
                                  "oldest_age_s", st.entries ? json_real(now - st.oldest) : json_null(), "newest_age_s",
                                  st.entries ? json_real(now - st.newest) : json_null(), "settings", "enabled", enabled,
                                  "max_bytes", (json_int_t)max_bytes, "prune_older_than_days", (json_int_t)days);
            cmd_print_json(o);
        } else {
            char hs[32], hm[32], a1[32] = "-", a2[32] = "-";
            if (st.entries) {
                time_fmt_duration(now - st.oldest, a1, sizeof a1);
                time_fmt_duration(now - st.newest, a2, sizeof a2);
            }
            printf("%s/%s\n  entries      %lld\n  size         %s (cap %s)\n  last used    oldest %s ago, newest %s ago\n"
                   "  enabled      %s\n  prune after  %lld days unused\n",
                   store, TCACHE_DIR, (long long)st.entries, str_human_size((unsigned long long)st.bytes, hs, sizeof hs),
                   str_human_size((unsigned long long)max_bytes, hm, sizeof hm), a1, a2, enabled ? "yes" : "no",
                   (long long)days);
        }
        return EXIT_OK;
    }
    if (!strcmp(sub, "prune")) {
        int64_t removed, freed;
        if (older < 0) older = (double)days * 86400;
        if (tcache_prune(store, older, max_bytes, &removed, &freed, &e)) return cmd_fail(ctx, &e);
        char hs[32];
        printf("pruned %lld entr%s (%s)\n", (long long)removed, removed == 1 ? "y" : "ies",
               str_human_size((unsigned long long)freed, hs, sizeof hs));
        return EXIT_OK;
    }
    if (!a.force) {
        if (!isatty(0)) {
            err_set(&e, NULL, "clear needs confirmation");
            err_hint(&e, "pass --force to clear without asking");
            return cmd_fail(ctx, &e);
        }
        fprintf(stderr, "clear the tokenization cache in %s? [y/N] ", store);
        char line[16];
        if (!fgets(line, sizeof line, stdin) || (line[0] != 'y' && line[0] != 'Y')) {
            fprintf(stderr, "nothing cleared\n");
            return EXIT_OK;
        }
    }
    if (tcache_clear(store, &e)) return cmd_fail(ctx, &e);
    printf("cleared %s/%s\n", store, TCACHE_DIR);
    return EXIT_OK;
}
