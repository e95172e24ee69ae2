/* grow_cmd — see grow_cmd.h. */
#include "cmd/grow_cmd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/commands.h"
#include "doc/grow.h"
#include "util/json.h"
#include "util/str.h"

void grow_pending_path(const char *store, const char *tool, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s/pending.json", store, tool);
}

void grow_first_line(const char *s, char *buf, size_t cap)
{
    if (!s) s = "";
    size_t n = strcspn(s, "\n");
    if (n >= cap) n = cap - 1;
    memcpy(buf, s, n);
    buf[n] = 0;
}

/* 1 when the document already holds the item's pair or triple. */
static int item_present(const dlm_doc *d, const json_t *it, const char *tool)
{
    if (!strcmp(tool, "preference")) {
        const char *p = jget_str(it, "prompt"), *c = jget_str(it, "chosen"), *r = jget_str(it, "rejected");
        return p && c && r && doc_grow_has_triple(d, p, c, r);
    }
    const char *q = jget_str(it, "question"), *a = jget_str(it, "answer");
    return doc_grow_has_pair(d, q ? q : "", a ? a : "");
}

int grow_write_items(const char *path, json_t *items, const char *tool, int *written, dlm_err *e)
{
    *written = 0;
    dlm_doc *d = doc_load(path, e);
    if (!d) return -1;
    size_t n = json_array_size(items);
    doc_section *secs = calloc(n + 1, sizeof *secs);
    strbuf *bodies = calloc(n + 1, sizeof *bodies);
    int rc = -1, k = 0;
    if (!secs || !bodies) { err_set(e, "MemoryError", "out of memory"); goto out; }
    for (size_t i = 0; i < n; i++) {
        json_t *it = json_array_get(items, i);
        if (item_present(d, it, tool)) continue;
        if (doc_grow_item_section(it, tool, &secs[k], &bodies[k], e)) goto out;
        k++;
    }
    strbuf sb = STRBUF_INIT;
    if (k && (doc_grow_append(d, secs, k, &sb, e) || doc_grow_write(path, &sb, e))) { sb_free(&sb); goto out; }
    sb_free(&sb);
    *written = k;
    rc = 0;
out:
    for (size_t i = 0; bodies && i < n; i++) sb_free(&bodies[i]);
    free(bodies);
    free(secs);
    doc_free(d);
    return rc;
}

int grow_stage_items(const char *pend, const char *tool, const char *dlm_id, json_t *items, int *total, dlm_err *e)
{
    json_t *old = doc_grow_pending_load(pend, tool, e);
    if (!old && e->msg[0]) return -1;
    json_t *all = old ? json_incref(json_object_get(old, "items")) : json_array();
    json_array_extend(all, items);
    int r = doc_grow_pending_save(pend, tool, dlm_id, all, e);
    *total = (int)json_array_size(all);
    json_decref(all);
    json_decref(old);
    return r;
}

int grow_cmd_apply(dlm_ctx *ctx, const char *path, const char *tool, const char *what)
{
    dlm_err e;
    err_clear(&e);
    char store[4096], pend[4200];
    if (cmd_doc_store_owned(ctx, path, store, sizeof store, &e)) return cmd_fail(ctx, &e);
    grow_pending_path(store, tool, pend, sizeof pend);
    json_t *j = doc_grow_pending_load(pend, tool, &e);
    if (!j) {
        if (e.msg[0]) return cmd_fail(ctx, &e);
        printf("%s: nothing staged for %s\n", tool, path);
        return EXIT_USAGE;
    }
    int w;
    json_t *none = json_array();
    int rc = grow_write_items(path, json_object_get(j, "items"), tool, &w, &e) || doc_grow_pending_save(pend, tool, "", none, &e);
    json_decref(none);
    json_decref(j);
    if (rc) return cmd_fail(ctx, &e);
    printf("%s: wrote %d %s section%s to %s\n", tool, w, what, w == 1 ? "" : "s", path);
    return EXIT_OK;
}

int grow_cmd_list(dlm_ctx *ctx, const char *path, int json, const char *tool, const char *what, const char *key,
                  grow_entry_fn entry, grow_describe_fn describe)
{
    dlm_err e;
    err_clear(&e);
    char store[4096], pend[4200];
    if (cmd_doc_store(ctx, path, store, sizeof store, &e)) return cmd_fail(ctx, &e);
    grow_pending_path(store, tool, pend, sizeof pend);
    dlm_doc *d = doc_load(path, &e);
    if (!d) return cmd_fail(ctx, &e);
    json_t *j = doc_grow_pending_load(pend, tool, &e);
    if (!j && e.msg[0]) { doc_free(d); return cmd_fail(ctx, &e); }
    json_t *items = j ? json_incref(json_object_get(j, "items")) : json_array();
    json_t *written = json_array(), *w;
    for (int i = 0; i < doc_nsections(d); i++)
        if ((w = entry(doc_section_at(d, i)))) json_array_append_new(written, w);
    if (json) {
        json_t *o = json_pack("{s:O, s:O}", "pending", items, "written", written);
        cmd_print_json(o);
    } else {
        printf("pending (%s): %zu\n", pend, json_array_size(items));
        size_t i;
        json_t *it;
        json_array_foreach(items, i, it) {
            char first[100];
            grow_first_line(jget_str(it, key), first, sizeof first);
            printf("  %zu. %s\n", i + 1, first);
        }
        printf("written (%s sections in %s): %zu\n", what, path, json_array_size(written));
        json_array_foreach(written, i, it) {
            char text[600];
            describe(it, text, sizeof text);
            printf("  line %lld  %s  %s\n", (long long)json_integer_value(json_object_get(it, "line")),
                   jget_str(it, "section_id"), text);
        }
    }
    json_decref(items);
    json_decref(written);
    json_decref(j);
    doc_free(d);
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
