/* grow_cmd — see grow_cmd.h. */
#include "cmd/grow_cmd.h"

#include <stdio.h>
#include <stdlib.h>

#include "cmd/commands.h"
#include "doc/grow.h"
#include "util/str.h"

void grow_pending_path(const char *store, const char *tool, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s/pending.json", store, tool);
}

int grow_cmd_apply(dlm_ctx *ctx, const char *path, const char *tool, const char *what, grow_write_fn write_items)
{
    dlm_err e;
    err_clear(&e);
    char store[4096], pend[4200];
    if (cmd_doc_store(ctx, path, store, sizeof store, &e)) return cmd_fail(ctx, &e);
    grow_pending_path(store, tool, pend, sizeof pend);
    json_t *j = doc_grow_pending_load(pend, tool, &e);
    if (!j) {
        if (e.msg[0]) return cmd_fail(ctx, &e);
        printf("%s: nothing staged for %s\n", tool, path);
        return EXIT_USAGE;
    }
    int w;
    json_t *none = json_array();
    int rc = write_items(path, json_object_get(j, "items"), &w, &e) || doc_grow_pending_save(pend, tool, "", none, &e);
    json_decref(none);
    json_decref(j);
    if (rc) return cmd_fail(ctx, &e);
    printf("%s: wrote %d %s section%s to %s\n", tool, w, what, w == 1 ? "" : "s", path);
    return EXIT_OK;
}

int grow_cmd_revert(dlm_ctx *ctx, const char *path, const char *tool, const char *what, grow_pick_fn pick)
{
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    dlm_doc *d = doc_load(path, &e);
    if (!d) return cmd_fail(ctx, &e);
    int n = doc_nsections(d), k = 0;
    unsigned char *drop = calloc((size_t)n + 1, 1);
    for (int i = 0; drop && i < n; i++)
        if (pick(doc_section_at(d, i))) drop[i] = 1, k++;
    if (!k) {
        free(drop);
        doc_free(d);
        printf("%s: no %s sections in %s: nothing to revert\n", tool, what, path);
        return EXIT_USAGE;
    }
    strbuf sb = STRBUF_INIT;
    int removed;
    int rc = doc_grow_remove(d, drop, &sb, &removed, &e) || doc_grow_write(path, &sb, &e);
    sb_free(&sb);
    free(drop);
    doc_free(d);
    if (rc) return cmd_fail(ctx, &e);
    printf("%s: removed %d %s section%s from %s\n", tool, removed, what, removed == 1 ? "" : "s", path);
    return EXIT_OK;
}
