/* write — a document back to text.
 *
 * An untouched document is its normalised text, byte for byte. An edited
 * one keeps its frontmatter text verbatim and regenerates the body: each
 * section is its fence line, its marker lines, then its content lines, with
 * nothing in between, so every kept section keeps exactly its content and
 * therefore its id (the original's serializer adds a blank line between
 * sections, which changes the previous section's id). The result is parsed
 * again and compared section by section before anyone sees it. */
#include "doc/doc_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util/fs.h"
#include "util/json.h"

static int attr_ok(const char *v)
{
    for (const char *p = v; *p; p++)
        if (*p == '"' || *p == '\n' || (unsigned char)*p >= 0x80) return 0;
    return 1;
}

static int marker_ok(const char *v)
{
    return v && !strchr(v, '"') && !strchr(v, '\n');
}

static int emit_section(const doc_section *s, int first, strbuf *out, dlm_err *e)
{
    const char *tn = doc_section_type_name(s->type);
    if (s->adapter && (s->type == DOC_IMAGE || s->type == DOC_AUDIO))
        return err_set(e, "FenceError", "a media section cannot carry an adapter suffix");
    if (s->type == DOC_IMAGE || s->type == DOC_AUDIO) {
        const char *other = s->type == DOC_IMAGE ? s->media_alt : s->media_transcript;
        if (!s->media_path || !attr_ok(s->media_path) || (other && !attr_ok(other)) ||
            (s->type == DOC_AUDIO && !other))
            return err_set(e, "FenceError",
                           "%s section attributes must be ASCII without '\"' or newlines (path%s required)", tn,
                           s->type == DOC_AUDIO ? " and transcript" : "");
        sb_printf(out, "::%s path=\"%s\"", tn, s->media_path);
        if (other) sb_printf(out, " %s=\"%s\"", s->type == DOC_IMAGE ? "alt" : "transcript", other);
        sb_puts(out, "::");
    } else if (s->type != DOC_PROSE || !first || s->fenced || s->adapter) {
        sb_printf(out, "::%s%s%s::", tn, s->adapter ? "#" : "", s->adapter ? s->adapter : "");
    } else {
        /* leading implicit prose: no fence line */
        sb_append(out, s->content, s->content_len);
        return 0;
    }
    if (s->type == DOC_INSTRUCTION || s->type == DOC_PREFERENCE) {
        if (s->auto_harvest) {
            if (!marker_ok(s->harvest_source ? s->harvest_source : ""))
                return err_set(e, "FenceError", "marker values cannot contain '\"' or newlines");
            sb_printf(out, "\n<!-- dlm-auto-harvest: source=\"%s\" -->", s->harvest_source ? s->harvest_source : "");
        }
        if (s->auto_mined && s->type == DOC_PREFERENCE) {
            /* Scores keep their spelling when read from a file; new ones are
             * written as Python's repr(float). */
            char c1[40], c2[40];
            if (s->judge_score_chosen_text) snprintf(c1, sizeof c1, "%s", s->judge_score_chosen_text);
            else json_fmt_double(s->judge_score_chosen, c1, sizeof c1);
            if (s->judge_score_rejected_text) snprintf(c2, sizeof c2, "%s", s->judge_score_rejected_text);
            else json_fmt_double(s->judge_score_rejected, c2, sizeof c2);
            if (!marker_ok(s->judge_name) || !marker_ok(c1) || !marker_ok(c2) || !marker_ok(s->mined_at))
                return err_set(e, "FenceError", "auto-mined marker values missing or contain '\"' or newlines");
            sb_printf(out, "\n<!-- dlm-auto-mined: judge_name=\"%s\" judge_score_chosen=\"%s\" "
                           "judge_score_rejected=\"%s\" mined_at=\"%s\" mined_run_id=\"%lld\" -->",
                      s->judge_name, c1, c2, s->mined_at, (long long)s->mined_run_id);
        }
        if (s->auto_synth && s->type == DOC_INSTRUCTION) {
            if (!marker_ok(s->synth_teacher) || !marker_ok(s->synth_strategy) || !marker_ok(s->synth_at) ||
                !marker_ok(s->source_section_id))
                return err_set(e, "FenceError", "auto-synth marker values missing or contain '\"' or newlines");
            sb_printf(out, "\n<!-- dlm-auto-synth: synth_teacher=\"%s\" synth_strategy=\"%s\" synth_at=\"%s\" "
                           "source_section_id=\"%s\" -->",
                      s->synth_teacher, s->synth_strategy, s->synth_at, s->source_section_id);
        }
    }
    if (s->content_len) {
        sb_putc(out, '\n');
        sb_append(out, s->content, s->content_len);
    }
    return 0;
}

int doc_emit_body(const doc_section *secs, int n, strbuf *out, dlm_err *e)
{
    for (int i = 0; i < n; i++) {
        if (i) sb_putc(out, '\n');
        if (emit_section(&secs[i], i == 0, out, e)) return -1;
    }
    return out->oom ? err_set(e, "MemoryError", "out of memory") : 0;
}

static int same_str(const char *a, const char *b)
{
    if (!a || !b) return a == b;
    return !strcmp(a, b);
}

static int same_section(const doc_section *a, const doc_section *b)
{
    return a->type == b->type && same_str(a->adapter, b->adapter) && a->content_len == b->content_len &&
           !memcmp(a->content, b->content, a->content_len) && same_str(a->media_path, b->media_path) &&
           same_str(a->media_alt, b->media_alt) && same_str(a->media_transcript, b->media_transcript) &&
           a->auto_harvest == b->auto_harvest && same_str(a->harvest_source, b->harvest_source) &&
           a->auto_mined == b->auto_mined && same_str(a->judge_name, b->judge_name) &&
           same_str(a->mined_at, b->mined_at) && a->mined_run_id == b->mined_run_id &&
           a->auto_synth == b->auto_synth && same_str(a->synth_teacher, b->synth_teacher) &&
           same_str(a->synth_strategy, b->synth_strategy) && same_str(a->synth_at, b->synth_at) &&
           same_str(a->source_section_id, b->source_section_id);
}

int doc_serialize(const dlm_doc *d, strbuf *out, dlm_err *e)
{
    if (d->scoped)   /* doc_scope_adapter dropped the other adapters' sections */
        return err_set(e, "DocError", "%s: a document scoped to adapter '%s' cannot be written", d->path, d->scoped);
    /* sections synthesized from training.sources live in memory only */
    for (int i = 0; i < d->n; i++)
        if (d->sections[i].source_file)
            return err_set(e, "DocError", "%s: a document with expanded training.sources cannot be written", d->path);
    if (!d->dirty) {
        sb_append(out, d->text, d->text_len);
        return out->oom ? err_set(e, "MemoryError", "out of memory") : 0;
    }
    strbuf sb = STRBUF_INIT;
    sb_append(&sb, d->text, d->fm_end);
    sb_putc(&sb, '\n');
    if (d->n) {
        sb_putc(&sb, '\n');
        if (doc_emit_body(d->sections, d->n, &sb, e)) { sb_free(&sb); return -1; }
        sb_putc(&sb, '\n');
    }
    if (sb.oom) { sb_free(&sb); return err_set(e, "MemoryError", "out of memory"); }
    /* Verify: the text must read back as exactly these sections. */
    dlm_err pe;
    dlm_doc *chk = doc_parse(d->path, sb.buf, sb.len, &pe);
    if (!chk) {
        err_set(e, "FenceError", "the edited document does not parse back: %s", pe.msg);
        sb_free(&sb);
        return -1;
    }
    int ok = chk->n == d->n;
    int bad = -1;
    for (int i = 0; ok && i < d->n; i++)
        if (!same_section(&chk->sections[i], &d->sections[i])) { ok = 0; bad = i; }
    doc_free(chk);
    if (!ok) {
        sb_free(&sb);
        if (bad >= 0)
            return err_set(e, "FenceError",
                           "section %d cannot be written faithfully (a fence-like line outside a ``` block, "
                           "or markers in its content?)", bad + 1);
        return err_set(e, "FenceError", "the edited document reads back with a different number of sections");
    }
    sb_append(out, sb.buf, sb.len);
    sb_free(&sb);
    return out->oom ? err_set(e, "MemoryError", "out of memory") : 0;
}

int doc_write(const dlm_doc *d, const char *path, dlm_err *e)
{
    strbuf sb = STRBUF_INIT;
    if (doc_serialize(d, &sb, e)) { sb_free(&sb); return -1; }
    int r = fs_write_atomic(path, sb.buf ? sb.buf : "", sb.len, 0644, e);
    sb_free(&sb);
    return r;
}
