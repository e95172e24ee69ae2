/* pipeline — see pipeline.h. */
#include "tokens/pipeline.h"

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
                   .system_prompt = fm->system_prompt, .val_frac = 0.1, .no_mined = in->no_mined,
                   .cache = in->cache, .tok_sha256 = in->tok_sha256, .dialect_name = out->dialect->name,
                   .multi_turn = (int)tr->multi_turn};
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
