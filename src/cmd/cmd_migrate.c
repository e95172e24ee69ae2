/* dlm migrate — bring a .dlm's frontmatter to the current schema version. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/commands.h"
#include "doc/doc.h"
#include "store/store.h"
#include "util/fs.h"

typedef struct migrate_args {
    int dry, no_backup;
} migrate_args;

static const opt migrate_opts[] = {
    {"dry-run", 0, OPT_FLAG, offsetof(migrate_args, dry), NULL, "show what would change; write nothing"},
    {"no-backup", 0, OPT_FLAG, offsetof(migrate_args, no_backup), NULL, "do not keep the original as PATH.bak"},
    {0},
};

const cmd_spec spec_migrate = {
    "migrate",
    "PATH [--dry-run] [--no-backup]",
    "rewrite a .dlm's frontmatter at the current schema version (15)",
    "Older documents are read fine without this (they are migrated in memory).\n"
    "migrate makes it permanent: the original is kept as PATH.bak, the body is\n"
    "kept byte for byte (section ids do not change), and when only the version\n"
    "number changes the rest of the frontmatter, comments included, is kept.",
    migrate_opts,
};

static void print_chain(FILE *f, int from)
{
    for (int v = from; v <= DOC_SCHEMA_VERSION; v++) fprintf(f, "%sv%d", v == from ? "" : " → ", v);
}

int cmd_migrate(int argc, char **argv, dlm_ctx *ctx)
{
    migrate_args a = {0};
    char *pos[64];
    int npos = 0;
    if (argc > 64) return cmd_usage_error(&spec_migrate, "too many arguments");
    int r = opts_parse(&spec_migrate, argc, argv, ctx, &a, pos, &npos);
    if (r == 1) return EXIT_OK;
    if (r) return EXIT_USAGE;
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    if (npos != 1) return cmd_usage_error(&spec_migrate, "migrate takes exactly one PATH");
    const char *path = pos[0];

    doc_migration m;
    if (a.dry) {
        if (doc_migrate_file(path, &m, &e)) return cmd_fail(ctx, &e);
        if (!m.applied) {
            printf("migrate: %s already at v%d (no migrations needed).\n", path, DOC_SCHEMA_VERSION);
            doc_migration_free(&m);
            return EXIT_OK;
        }
        printf("dry-run: %s would migrate ", path);
        print_chain(stdout, m.from_version);
        printf(" (re-run without --dry-run to apply).\n");
        fputs(sb_str(&m.notes), stdout);
        /* the new frontmatter, delimiters included */
        const char *end = strstr(m.text + 4, "\n---");
        size_t n = end ? (size_t)(end - m.text) + 4 : m.text_len;
        printf("new frontmatter:\n%.*s\n", (int)n, m.text);
        doc_migration_free(&m);
        return EXIT_OK;
    }

    /* A document belongs to a store: rewrite it only while holding that
     * store's lock, and re-read it under the lock. */
    dlm_doc *d = doc_load(path, &e);
    if (!d) return cmd_fail(ctx, &e);
    char store[4200];
    store_lock lk = {.held = 0, .fd = -1};
    int rc = store_dir(ctx->home, doc_fm(d)->dlm_id, store, sizeof store, &e);
    doc_free(d);
    if (rc) return cmd_fail(ctx, &e);
    if (store_exists(store) && store_lock_acquire(store, "migrate", &lk, &e)) return cmd_fail(ctx, &e);
    if (doc_migrate_file(path, &m, &e)) { store_lock_release(&lk); return cmd_fail(ctx, &e); }
    if (!m.applied) {
        printf("migrate: %s already at v%d (no migrations needed).\n", path, DOC_SCHEMA_VERSION);
        doc_migration_free(&m);
        store_lock_release(&lk);
        return EXIT_OK;
    }
    char bak[4200];
    rc = 0;
    if (!a.no_backup) {
        if (snprintf(bak, sizeof bak, "%s.bak", path) >= (int)sizeof bak) rc = err_set(&e, NULL, "path too long");
        else rc = fs_copy_file(path, bak, &e);
    }
    if (!rc) rc = fs_write_atomic(path, m.text, m.text_len, 0644, &e);
    store_lock_release(&lk);
    if (rc) { doc_migration_free(&m); return cmd_fail(ctx, &e); }
    if (!a.no_backup) printf("backup:  %s\n", bak);
    fputs(sb_str(&m.notes), stdout);
    printf("migrated: %s ", path);
    print_chain(stdout, m.from_version);
    printf("\n");
    doc_migration_free(&m);
    return EXIT_OK;
}
