/* grow — see grow.h. */
#include "doc/grow.h"
#include "doc/doc_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/json.h"
#include "util/timeutil.h"

/* Check the edited text: it parses, the sections listed in keep[] (indexes
 * into d) come first in order with the same ids, and exactly n_new more
 * follow. */
static int verify(const dlm_doc *d, const strbuf *text, const int *keep, int n_keep, int n_new, dlm_err *e)
{
    dlm_err pe;
    dlm_doc *chk = doc_parse(d->path, text->buf ? text->buf : "", text->len, &pe);
    if (!chk) return err_set(e, pe.kind[0] ? pe.kind : "FenceError", "the edited document does not parse: %s", pe.msg);
    int ok = chk->n == n_keep + n_new;
    for (int i = 0; ok && i < n_keep; i++)
        ok = chk->sections[i].type == d->sections[keep[i]].type && !strcmp(chk->sections[i].id, d->sections[keep[i]].id);
    doc_free(chk);
    if (!ok) return err_set(e, "FenceError", "the edited document would change sections it does not touch");
    return 0;
}

int doc_grow_append(const dlm_doc *d, const doc_section *secs, int n, strbuf *out, dlm_err *e)
{
    strbuf sb = STRBUF_INIT;
    sb_append(&sb, d->text, d->text_len);
    if (n > 0) {
        if (d->text_len && d->text[d->text_len - 1] != '\n') sb_putc(&sb, '\n');
        /* A document with no body yet gets the blank line after `---`
         * that a hand-written one has. */
        if (d->n == 0 && sb.len == d->fm_end + 1) sb_putc(&sb, '\n');
        /* Emitting them as one body puts nothing between two of them, as
         * write.c does; the first is never emitted as implicit prose. */
        doc_section *tmp = calloc((size_t)n + 1, sizeof *tmp);
        if (!tmp) { sb_free(&sb); return err_set(e, "MemoryError", "out of memory"); }
        tmp[0].type = DOC_INSTRUCTION;   /* a placeholder so secs[0] is never "first" */
        tmp[0].content = "";
        memcpy(tmp + 1, secs, (size_t)n * sizeof *tmp);
        strbuf body = STRBUF_INIT;
        int r = doc_emit_body(tmp, n + 1, &body, e);
        free(tmp);
        if (r) { sb_free(&body); sb_free(&sb); return -1; }
        /* drop the placeholder's "::instruction::\n" */
        const char *nl = memchr(body.buf, '\n', body.len);
        size_t skip = nl ? (size_t)(nl - body.buf) + 1 : body.len;
        sb_append(&sb, body.buf + skip, body.len - skip);
        sb_free(&body);
        sb_putc(&sb, '\n');
    }
    if (sb.oom) { sb_free(&sb); return err_set(e, "MemoryError", "out of memory"); }
    int *keep = malloc(((size_t)d->n + 1) * sizeof *keep);
    if (!keep) { sb_free(&sb); return err_set(e, "MemoryError", "out of memory"); }
    for (int i = 0; i < d->n; i++) keep[i] = i;
    int r = verify(d, &sb, keep, d->n, n, e);
    free(keep);
    if (r) { sb_free(&sb); return -1; }
    sb_append(out, sb.buf ? sb.buf : "", sb.len);
    sb_free(&sb);
    return out->oom ? err_set(e, "MemoryError", "out of memory") : 0;
}

/* Byte offset of the start of 1-based line `line` of text (text_len past the end). */
static size_t line_off(const char *t, size_t len, int line)
{
    size_t off = 0;
    for (int l = 1; l < line && off < len; l++) {
        const char *nl = memchr(t + off, '\n', len - off);
        if (!nl) return len;
        off = (size_t)(nl - t) + 1;
    }
    return off;
}

int doc_grow_remove(const dlm_doc *d, const unsigned char *drop, strbuf *out, int *removed, dlm_err *e)
{
    *removed = 0;
    int *keep = malloc(((size_t)d->n + 1) * sizeof *keep);
    if (!keep) return err_set(e, "MemoryError", "out of memory");
    int nk = 0;
    strbuf sb = STRBUF_INIT;
    size_t copied = 0;
    for (int i = 0; i < d->n; i++) {
        if (!drop[i]) { keep[nk++] = i; continue; }
        if (!d->sections[i].fenced) {
            free(keep);
            sb_free(&sb);
            return err_set(e, "ValueError", "section %d (line %d) has no fence line and cannot be removed", i + 1,
                           d->sections[i].line);
        }
        size_t a = line_off(d->text, d->text_len, d->sections[i].line);
        size_t b = i + 1 < d->n ? line_off(d->text, d->text_len, d->sections[i + 1].line) : d->text_len;
        if (a < copied) a = copied;
        sb_append(&sb, d->text + copied, a - copied);
        copied = b > a ? b : a;
        (*removed)++;
    }
    sb_append(&sb, d->text + copied, d->text_len - copied);
    if (sb.oom) { free(keep); sb_free(&sb); return err_set(e, "MemoryError", "out of memory"); }
    int r = verify(d, &sb, keep, nk, 0, e);
    free(keep);
    if (r) { sb_free(&sb); return -1; }
    sb_append(out, sb.buf ? sb.buf : "", sb.len);
    sb_free(&sb);
    return out->oom ? err_set(e, "MemoryError", "out of memory") : 0;
}

int doc_grow_write(const char *path, const strbuf *text, dlm_err *e)
{
    return fs_write_atomic(path, text->buf ? text->buf : "", text->len, 0644, e);
}

/* [s, s+n) stripped of Python's str.strip() whitespace (ASCII set). */
static void strip(const char **s, size_t *n)
{
    while (*n && isspace((unsigned char)**s)) { (*s)++; (*n)--; }
    while (*n && isspace((unsigned char)(*s)[*n - 1])) (*n)--;
}

/* A body must be non-empty and have no line that the section grammar would
 * read as structure: `### ...` headers, `::fence::` lines, ``` fences
 * (an odd count would swallow the next section). */
static int body_ok(const char *what, const char *v, strbuf *out, dlm_err *e)
{
    size_t n = strlen(v);
    strip(&v, &n);
    if (!n) return err_set(e, "ValueError", "%s is empty", what);
    int fences = 0;
    for (size_t i = 0; i < n;) {
        const char *l = v + i;
        const char *nl = memchr(l, '\n', n - i);
        size_t ln = nl ? (size_t)(nl - l) : n - i;
        size_t k = 0;
        while (k < ln && isspace((unsigned char)l[k])) k++;
        if (ln - k >= 3 && !strncmp(l + k, "###", 3))
            return err_set(e, "ValueError", "%s has a line starting with ### (it would read as a header)", what);
        if (ln >= 4 && l[0] == ':' && l[1] == ':' && l[ln - 1] == ':' && l[ln - 2] == ':')
            return err_set(e, "ValueError", "%s has a line that reads as a section fence", what);
        if (ln >= 3 && !strncmp(l, "```", 3)) fences++;
        i += ln + 1;
    }
    if (fences % 2) return err_set(e, "ValueError", "%s has an unclosed ``` code block", what);
    sb_append(out, v, n);
    return 0;
}

int doc_grow_qa_content(strbuf *out, const char *q, const char *a, int probe, dlm_err *e)
{
    strbuf sb = STRBUF_INIT;
    sb_puts(&sb, probe ? "### Q !probe\n" : "### Q\n");
    if (body_ok("question", q, &sb, e)) { sb_free(&sb); return -1; }
    sb_puts(&sb, "\n### A\n");
    if (body_ok("answer", a, &sb, e)) { sb_free(&sb); return -1; }
    sb_append(out, sb.buf, sb.len);
    sb_free(&sb);
    return out->oom ? err_set(e, "MemoryError", "out of memory") : 0;
}

int doc_grow_pref_content(strbuf *out, const char *prompt, const char *chosen, const char *rejected, dlm_err *e)
{
    strbuf sb = STRBUF_INIT;
    sb_puts(&sb, "### Prompt\n");
    if (body_ok("prompt", prompt, &sb, e)) goto bad;
    sb_puts(&sb, "\n### Chosen\n");
    if (body_ok("chosen answer", chosen, &sb, e)) goto bad;
    sb_puts(&sb, "\n### Rejected\n");
    if (body_ok("rejected answer", rejected, &sb, e)) goto bad;
    sb_append(out, sb.buf, sb.len);
    sb_free(&sb);
    return out->oom ? err_set(e, "MemoryError", "out of memory") : 0;
bad:
    sb_free(&sb);
    return -1;
}

static int eq_stripped(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    strip(&a, &na);
    strip(&b, &nb);
    return na == nb && !memcmp(a, b, na);
}

int doc_grow_has_pair(const dlm_doc *d, const char *q, const char *a)
{
    for (int i = 0; i < d->n; i++) {
        const doc_section *s = &d->sections[i];
        if (s->type != DOC_INSTRUCTION) continue;
        for (int k = 0; k < s->n_pairs; k++)
            if (eq_stripped(s->pairs[k].question, q) && eq_stripped(s->pairs[k].answer, a)) return 1;
    }
    return 0;
}

int doc_grow_has_triple(const dlm_doc *d, const char *p, const char *c, const char *r)
{
    for (int i = 0; i < d->n; i++) {
        const doc_section *s = &d->sections[i];
        if (s->type != DOC_PREFERENCE) continue;
        for (int k = 0; k < s->n_triples; k++)
            if (eq_stripped(s->triples[k].prompt, p) && eq_stripped(s->triples[k].chosen, c) &&
                eq_stripped(s->triples[k].rejected, r))
                return 1;
    }
    return 0;
}

/* ---- staging ------------------------------------------------------------------ */

int doc_grow_item_section(const json_t *item, const char *kind, doc_section *s, strbuf *content, dlm_err *e)
{
    memset(s, 0, sizeof *s);
    if (!json_is_object(item)) return err_set(e, "PendingError", "a pending item is not an object");
    if (!strcmp(kind, "synth")) {
        const char *q = jget_str(item, "question"), *a = jget_str(item, "answer");
        s->synth_teacher = (char *)jget_str(item, "synth_teacher");
        s->synth_strategy = (char *)jget_str(item, "synth_strategy");
        s->synth_at = (char *)jget_str(item, "synth_at");
        s->source_section_id = (char *)jget_str(item, "source_section_id");
        if (!q || !a || !s->synth_teacher || !s->synth_strategy || !s->synth_at || !s->source_section_id)
            return err_set(e, "PendingError", "a pending synth item lacks question, answer or a marker field");
        if (doc_grow_qa_content(content, q, a, 0, e)) return -1;
        s->type = DOC_INSTRUCTION;
        s->auto_synth = 1;
    } else {
        const char *p = jget_str(item, "prompt"), *c = jget_str(item, "chosen"), *r = jget_str(item, "rejected");
        long long run;
        s->judge_name = (char *)jget_str(item, "judge_name");
        s->mined_at = (char *)jget_str(item, "mined_at");
        if (!p || !c || !r || !s->judge_name || !s->mined_at || jget_num(item, "judge_score_chosen", &s->judge_score_chosen) ||
            jget_num(item, "judge_score_rejected", &s->judge_score_rejected) || jget_int(item, "mined_run_id", &run) ||
            run < 1)
            return err_set(e, "PendingError", "a pending preference item lacks prompt, chosen, rejected or a marker field");
        s->mined_run_id = run;
        if (doc_grow_pref_content(content, p, c, r, e)) return -1;
        s->type = DOC_PREFERENCE;
        s->auto_mined = 1;
    }
    s->content = content->buf;
    s->content_len = content->len;
    return 0;
}

json_t *doc_grow_pending_load(const char *path, const char *kind, dlm_err *e)
{
    err_clear(e);
    if (!fs_exists(path)) return NULL;
    json_t *j = json_load_path(path, 256u << 20, e);
    if (!j) return NULL;
    const char *k = jget_str(j, "kind");
    if (!k || strcmp(k, kind) || !json_is_array(json_object_get(j, "items"))) {
        json_decref(j);
        err_set(e, "PendingError", "%s is not a pending %s file", path, kind);
        err_hint(e, "delete it to start over");
        return NULL;
    }
    return j;
}

int doc_grow_pending_save(const char *path, const char *kind, const char *dlm_id, json_t *items, dlm_err *e)
{
    if (!json_array_size(items)) {
        if (fs_exists(path) && unlink(path)) return err_sys(e, "cannot remove %s", path);
        return 0;
    }
    char dir[4096];
    fs_dirname(dir, sizeof dir, path);
    if (fs_mkdir_p(dir, e)) return -1;
    char now[32];
    time_iso_utc(time_now(), now, sizeof now);
    json_t *j = json_pack("{s:s, s:s, s:s, s:O}", "kind", kind, "dlm_id", dlm_id, "created_at", now, "items", items);
    if (!j) return err_set(e, "MemoryError", "out of memory");
    int r = json_save_file(path, j, e);
    json_decref(j);
    return r;
}
