/* rpc_cycle — `dlm train --listen-rpc`: the probes one cycle drained, as the
 * sections the run adds (api/inject.h), their record for training_run.json
 * and the audit log <store>/logs/rpc-injected.jsonl (the original's
 * append_injected_probes_audit: one line per probe with the run and version
 * it fed, or null when the cycle trained nothing). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/inject.h"
#include "cmd/cmd.h"
#include "util/fs.h"
#include "util/json.h"

void rpc_batch_free(rpc_batch *b)
{
    for (int i = 0; i < b->n; i++) {
        inject_probe_clear(&b->p[i]);
        sb_free(&b->content[i]);
        sb_free(&b->source[i]);
        free(b->why[i]);
    }
    free(b->p);
    free(b->secs);
    free(b->kept);
    free(b->content);
    free(b->source);
    free(b->ok);
    free(b->why);
    json_decref(b->record);
    memset(b, 0, sizeof *b);
}

int rpc_batch_add(rpc_batch *b, inject_probe *p, int n, dlm_err *e)
{
    if (!n) return 0;
    int total = b->n + n;
#define GROW(f) do { void *q_ = realloc(b->f, (size_t)total * sizeof *b->f); if (!q_) goto oom; b->f = q_; } while (0)
    GROW(p);
    GROW(secs);
    GROW(kept);
    GROW(content);
    GROW(source);
    GROW(ok);
    GROW(why);
#undef GROW
    for (int i = 0; i < n; i++) {
        int k = b->n + i;
        b->p[k] = p[i];
        memset(&p[i], 0, sizeof p[i]);
        b->content[k] = (strbuf)STRBUF_INIT;
        b->source[k] = (strbuf)STRBUF_INIT;
        b->why[k] = NULL;
        b->ok[k] = 0;
        if (inject_probe_content(&b->p[k], &b->content[k], &b->source[k])) goto oom;
    }
    /* sections point into the strbufs: set after every realloc */
    for (int k = 0; k < total; k++) {
        doc_section *s = &b->secs[k];
        memset(s, 0, sizeof *s);
        s->type = DOC_INSTRUCTION;
        s->content = b->content[k].buf;
        s->content_len = b->content[k].len;
        s->auto_harvest = 1;
        s->harvest_source = b->source[k].buf;
    }
    b->n = total;
    return 0;
oom:
    for (int i = 0; i < n; i++) inject_probe_clear(&p[i]);
    return err_set(e, "MemoryError", "out of memory");
}

int rpc_batch_settle(rpc_batch *b, dlm_err *e)
{
    json_decref(b->record);
    b->record = json_array();
    b->n_kept = 0;
    if (!b->record) return err_set(e, "MemoryError", "out of memory");
    for (int i = 0; i < b->n; i++) {
        if (!b->ok[i]) continue;
        b->kept[b->n_kept++] = b->secs[i];
        char id[17];
        doc_section_id(DOC_INSTRUCTION, b->content[i].buf, b->content[i].len, id);
        json_t *tags = json_array();
        for (int t = 0; t < b->p[i].n_tags; t++) json_array_append_new(tags, json_string(b->p[i].tags[t]));
        json_array_append_new(b->record, json_pack("{s:s, s:s, s:o, s:s, s:s, s:s, s:s}", "prompt", b->p[i].prompt,
                                                   "reference", b->p[i].reference, "tags", tags, "source_addr",
                                                   b->p[i].source_addr, "accepted_at", b->p[i].accepted_at,
                                                   "section_id", id, "harvest_source", b->source[i].buf));
    }
    return 0;
}

int rpc_batch_audit(const rpc_batch *b, const char *store, int64_t run_id, int version, dlm_err *e)
{
    if (!b->n) return 0;
    char dir[4200], path[4300];
    snprintf(dir, sizeof dir, "%s/logs", store);
    snprintf(path, sizeof path, "%s/rpc-injected.jsonl", dir);
    if (fs_mkdir_p(dir, e)) return -1;
    char *old = NULL;
    size_t olen = 0;
    if (fs_is_file(path) && fs_read_all(path, (size_t)1 << 30, &old, &olen, e)) return -1;
    strbuf sb = STRBUF_INIT;
    if (olen) sb_append(&sb, old, olen);
    if (olen && old[olen - 1] != '\n') sb_putc(&sb, '\n');
    free(old);
    for (int i = 0; i < b->n; i++) {
        json_t *tags = json_array();
        for (int t = 0; t < b->p[i].n_tags; t++) json_array_append_new(tags, json_string(b->p[i].tags[t]));
        int trained = b->ok[i] && run_id > 0;
        json_t *r = json_pack("{s:s, s:s, s:o, s:s, s:s, s:o, s:o}", "prompt", b->p[i].prompt, "reference",
                              b->p[i].reference, "tags", tags, "source_addr", b->p[i].source_addr, "accepted_at",
                              b->p[i].accepted_at, "run_id", trained ? json_integer(run_id) : json_null(),
                              "adapter_version", trained ? json_integer(version) : json_null());
        if (r && !b->ok[i]) json_object_set_new(r, "refused", json_string(b->why[i] ? b->why[i] : "refused"));
        char *line = r ? json_dumps(r, JSON_COMPACT) : NULL;
        json_decref(r);
        if (!line) {
            sb_free(&sb);
            return err_set(e, "MemoryError", "out of memory");
        }
        sb_puts(&sb, line);
        sb_putc(&sb, '\n');
        free(line);
    }
    int rc = sb.oom ? err_set(e, "MemoryError", "out of memory") : fs_write_atomic(path, sb.buf, sb.len, 0644, e);
    sb_free(&sb);
    return rc;
}
