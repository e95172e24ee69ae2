/* pipeline — see pipeline.h. */
#include "tokens/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const chat_dialect *chat_dialect_resolve(const tok *t, const reg_entry *entry)
{
    const char *tmpl = tok_chat_template(t);
    const chat_dialect *d = tmpl ? chat_dialect_detect(tmpl) : NULL;
    if (!d && entry && entry->dialect) d = chat_dialect_find(entry->dialect);
    else if (entry && entry->dialect) d = chat_dialect_refine(d, entry->dialect);
    return d;
}

int pipeline_build(const pipeline_in *in, pipeline *out, dlm_err *e)
{
    memset(out, 0, sizeof *out);
    const doc_frontmatter *fm = doc_fm(in->doc);
    const doc_training *tr = &fm->training;
    int n = doc_nsections(in->doc), n_instr = 0;
    /* new sections = ids the manifest has not seen */
    json_t *seen = in->manifest ? json_object_get(in->manifest, "content_hashes") : NULL;
    out->cur_ids = calloc((size_t)(n ? n : 1), sizeof *out->cur_ids);
    if (!out->cur_ids) return err_set(e, "MemoryError", "out of memory");
    out->n_cur = n;
    for (int i = 0; i < n; i++) {
        const doc_section *s = doc_section_at(in->doc, i);
        out->cur_ids[i] = s->id;
        if (!json_object_get(seen, s->id)) out->n_new++;
        n_instr += s->type == DOC_INSTRUCTION;
    }
    out->dialect = in->dialect;
    if (n_instr && !out->dialect) {
        err_set(e, "TokenizerBringupError", "the base has no chat template dlm can render, so Q/A sections cannot be trained");
        return err_hint(e, "use a base with a ChatML or Llama-3 chat template, or write the Q/A as prose");
    }
    if (!out->dialect) out->dialect = chat_dialect_find("chatml");
    if (replay_open(in->replay_store ? in->replay_store : in->store, &out->rp, e)) return -1;
    if (!in->no_replay && tr->replay.enabled && replay_count(out->rp) > 0) {
        int *idx = NULL;
        int k = replay_sample(out->rp, (const char *const *)out->cur_ids, n, out->n_new,
                              in->seed + (uint64_t)in->prev_version, in->run_id, &idx, e);
        if (k < 0) return -1;
        out->n_replay = k;
        if (k > 0) {
            out->rdoc = replay_doc(out->rp, idx, k, e);
            if (!out->rdoc) {
                free(idx);
                return -1;
            }
        }
        free(idx);
    }
    int seq = tr->sequence_len;
    if (in->max_pos > 0 && seq > in->max_pos) seq = in->max_pos;
    ds_opts dso = {.seq_len = seq, .loss_on_all = tr->loss_on == DOC_LOSS_ON_ALL, .seed = in->seed,
                   .system_prompt = fm->system_prompt, .val_frac = tr->val_frac, .no_mined = in->no_mined,
                   .cache = in->cache, .tok_sha256 = in->tok_sha256, .dialect_name = out->dialect->name,
                   .multi_turn = (int)tr->multi_turn, .vl = in->vl};
    return dataset_build(in->doc, out->rdoc, in->tok, out->dialect, &dso, &out->ds, e);
}

void pipeline_free(pipeline *p)
{
    dataset_free(p->ds);
    doc_free(p->rdoc);
    replay_free(p->rp);
    free(p->cur_ids);
    memset(p, 0, sizeof *p);
}

uint64_t pipeline_doc_bytes(const dlm_doc *d)
{
    if (!d) return 0;
    size_t raw = 0;
    doc_raw(d, &raw);
    uint64_t b = raw;
    for (int i = 0; i < doc_nsections(d); i++) b += sizeof(doc_section) + doc_section_at(d, i)->content_len + 1;
    return b;
}

uint64_t pipeline_mem_bytes(const pipeline *p)
{
    uint64_t b = pipeline_doc_bytes(p->rdoc) + (uint64_t)p->n_cur * sizeof *p->cur_ids;
    const dataset *d = p->ds;
    if (d)
        b += sizeof *d + (uint64_t)d->cap_tok * 2 * sizeof(int32_t) + (uint64_t)d->cap_items * sizeof(ds_item) +
             (uint64_t)(d->n_items + 1) * 3 * sizeof(int);   /* train, val, perm */
    return b;
}

int pipeline_held_out(const pipeline *p, const dlm_doc *doc, held_row **out)
{
    *out = NULL;
    const dataset *d = p->ds;
    if (!d || !d->n_val) return 0;
    held_row *h = malloc((size_t)d->n_val * sizeof *h);
    if (!h) return -1;
    int n = 0;
    const ds_item *prev = NULL;
    for (int i = 0; i < d->n_val; i++) {
        const ds_item *it = &d->items[d->val[i]];
        if (prev && prev->row == it->row && !strcmp(prev->sid, it->sid)) continue;   /* another window */
        prev = it;
        for (int k = 0; k < doc_nsections(doc); k++)
            if (!strcmp(doc_section_at(doc, k)->id, it->sid)) {
                h[n].s = doc_section_at(doc, k);
                h[n++].row = it->row;
                break;
            }
    }
    *out = h;
    return n;
}

/* the first words of a text on one line, cut with "..." */
static void excerpt(const char *s, char *out, size_t cap)
{
    size_t o = 0, lim = cap > 4 ? cap - 4 : 0;
    int sp = 0;
    while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r') s++;
    for (; *s && o < lim; s++) {
        if (*s == '\n' || *s == '\t' || *s == '\r' || *s == ' ') { sp = 1; continue; }
        if (sp && o) out[o++] = ' ';
        sp = 0;
        if (o < lim) out[o++] = *s;
    }
    /* never end inside a UTF-8 sequence */
    while (o > 0 && ((unsigned char)out[o - 1] & 0xC0) == 0x80) o--;
    if (o > 0 && ((unsigned char)out[o - 1] & 0xC0) == 0xC0) o--;
    if (*s) { memcpy(out + o, "...", 3); o += 3; }
    out[o] = 0;
}

void pipeline_held_describe(const dlm_doc *doc, const held_row *h, held_desc *d)
{
    const doc_section *s = h->s;
    d->file = s->source_file ? s->source_file : doc_path(doc);
    if (s->type == DOC_INSTRUCTION && h->row < s->n_pairs) {
        d->kind = "Q";
        d->line = s->pairs[h->row].q_line;
        excerpt(s->pairs[h->row].question, d->text, sizeof d->text);
    } else {
        d->kind = "prose";
        d->line = s->source_file ? 0 : (s->content_line ? s->content_line : s->line);
        excerpt(s->content, d->text, sizeof d->text);
    }
}

void pipeline_held_format(const held_desc *d, char *out, size_t cap)
{
    if (d->line > 0) snprintf(out, cap, "%s:%d: %s \"%s\"", d->file, d->line, d->kind, d->text);
    else snprintf(out, cap, "%s (training.sources): %s \"%s\"", d->file, d->kind, d->text);
}

static const char *split_none(const dataset *d)
{
    if (d->n_val) return NULL;
    if (d->val_off_small) return "small document";
    if (d->val_frac <= 0) return "training.val_frac is 0";
    if (d->val_all_in) return "every row fell into the split";
    return "no row fell into the split";
}

json_t *pipeline_split_json(const pipeline *p, const dlm_doc *doc)
{
    const dataset *d = p->ds;
    held_row *h = NULL;
    int n = d ? pipeline_held_out(p, doc, &h) : 0;
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        held_desc hd;
        pipeline_held_describe(doc, &h[i], &hd);
        json_array_append_new(arr, json_pack("{s:s, s:i, s:s, s:s}", "file", hd.file, "line", hd.line, "kind", hd.kind,
                                             "text", hd.text));
    }
    free(h);
    const char *none = d ? split_none(d) : "no dataset";
    return json_pack("{s:f, s:i, s:i, s:o, s:o}", "fraction", d ? d->val_frac : 0.0, "rows",
                     d ? d->rows_prose + d->rows_instr + d->rows_image : 0, "min_rows", DS_VAL_MIN_ROWS, "held_out", arr, "none",
                     none ? json_string(none) : json_null());
}

void pipeline_split_line(const pipeline *p, char *out, size_t cap)
{
    const dataset *d = p->ds;
    int rows = d->rows_prose + d->rows_instr + d->rows_image;
    if (d->val_off_small)
        snprintf(out, cap, "validation: none: the document has %d row%s (fewer than %d), every row trains; no"
                 " validation loss, no early stopping (training.val_frac: 0.1 holds out 10%%)", rows,
                 rows == 1 ? "" : "s", DS_VAL_MIN_ROWS);
    else if (d->val_frac <= 0)
        snprintf(out, cap, "validation: none (training.val_frac: 0): every row trains; no validation loss, no early"
                 " stopping");
    else if (!d->n_val && d->val_all_in)
        snprintf(out, cap, "validation: none: all %d rows fell into the %g split, so every row trains; no validation"
                 " loss, no early stopping", rows, d->val_frac);
    else if (!d->n_val)
        snprintf(out, cap, "validation: none: no row of %d fell into the %g split; every row trains, no validation"
                 " loss, no early stopping", rows, d->val_frac);
    else {
        int held = d->val_text_rows + d->val_msg_rows;
        snprintf(out, cap, "validation: %d of %d rows held out (training.val_frac %g): they are not trained", held,
                 rows, d->val_frac);
    }
}
