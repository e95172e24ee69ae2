/* prepare — see prepare.h. */
#include "run/prepare.h"

#include <stdlib.h>
#include <string.h>

#include "adapter/adapter.h"
#include "run/vl_run.h"
#include "tokens/tok_gguf.h"

int prep_base(prep *P, const char *model_path, const reg_entry *entry, dlm_err *e)
{
    if (tok_load_for_model(model_path, &P->tok, e)) return -1;
    /* the base's shape and bytes from its headers: the plan needs them
     * before a weight is mapped */
    if (plan_base_read(model_path, &P->base, e)) return -1;
    if ((size_t)P->base.cfg.vocab < tok_vocab_size(P->tok))
        return err_set(e, "TokenizerBringupError", "the tokenizer has %zu tokens but the model's embedding only %d rows",
                       tok_vocab_size(P->tok), P->base.cfg.vocab);
    P->dialect = chat_dialect_resolve(P->tok, entry);
    return 0;
}

int prep_adapter(prep *P, const doc_training *tr, dlm_err *e)
{
    memset(&P->lora, 0, sizeof P->lora);
    P->lora.rank = tr->lora_r;
    P->lora.alpha = (float)tr->lora_alpha;
    P->lora.dropout = (float)tr->lora_dropout;
    P->lora.dora = tr->adapter == DOC_ADAPTER_DORA;
    /* qlora: train on 4-bit projections; a base already stored quantized
     * (a Q4_K GGUF) is QLoRA as it is */
    P->qlora = tr->adapter == DOC_ADAPTER_QLORA && P->base.wtype >= 0 && !dtype_is_quant((dtype)P->base.wtype);
    if (adapter_targets((const char *const *)tr->target_modules.v, tr->target_modules.n, tr->target_modules_auto,
                        &P->lora.targets, e))
        return -1;
    /* the names against the base (phi3 fuses q, k, v and gate, up) */
    return lora_targets_resolve(&P->base.cfg, &P->lora.targets, e);
}

void prep_precision(prep *P, int bf16)
{
    P->bf16_base = bf16 && !P->qlora && (P->base.wtype == DT_F32 || P->base.wtype == DT_F16);
}

int prep_data(prep *P, pipeline_in *in, dlm_err *e)
{
    in->tok = P->tok;
    in->dialect = P->dialect;
    if (!in->max_pos) in->max_pos = P->base.cfg.max_pos;
    if (pipeline_build(in, &P->data, e)) return -1;
    P->doc_bytes = pipeline_doc_bytes(in->doc);
    return 0;
}

void prep_plan_inputs(const prep *P, const doc_training *tr, int threads, int cores, uint64_t budget, plan_in *in)
{
    const dataset *ds = P->data.ds;
    memset(in, 0, sizeof *in);
    in->base = P->base;
    if (P->qlora || P->bf16_base) {
        /* qlora (Q4_K) or bf16 (BF16) on a wider base: the projections are
         * converted into owned memory while each source tensor's pages are
         * dropped right after it is converted, so what stays is the
         * converted copy plus the embeddings (an untied head as stored) and
         * at most one source projection in flight; an F16 base's BF16 copy
         * is the same size, an F32 one's halves */
        const dtype to = P->qlora ? DT_Q4_K : DT_BF16;
        plan_base q;
        plan_base_shape(&P->base.cfg, to, P->base.gguf, &q);
        const model_config *c = &P->base.cfg;
        uint64_t src_elem = P->base.wtype == DT_F32 ? 4 : 2;
        uint64_t biggest = (uint64_t)c->n_ff * (uint64_t)c->d_model * src_elem;
        uint64_t proj = q.tensor_bytes > q.embd_bytes ? q.tensor_bytes - q.embd_bytes : 0;
        uint64_t out = c->tied ? 0 : P->base.embd_bytes;
        in->base.tensor_bytes = P->base.embd_bytes + out + proj + biggest;
        in->base.copy_bytes += proj;
        in->base.wtype = to;
    }
    in->lora = P->lora;
    in->optim8 = tr->optimizer == DOC_OPT_ADAMW_BNB_8BIT || tr->optimizer == DOC_OPT_PAGED_ADAMW_8BIT;
    in->seq_len = ds->max_len > 0 ? ds->max_len : 1;
    in->mb = (int)tr->micro_batch_size;
    in->ga = (int)tr->grad_accum;
    in->recompute = tr->recompute == DOC_RECOMPUTE_ON ? 1 : tr->recompute == DOC_RECOMPUTE_OFF ? 0 : -1;
    in->threads = plan_threads(threads > 0 ? threads : (int)tr->threads, cores);
    in->cores = cores;
    /* counted, not measured: doctor and train plan the same bytes */
    in->tokenizer_bytes = tok_mem_bytes(P->tok);
    in->dataset_bytes = pipeline_mem_bytes(&P->data);
    in->other_bytes = P->doc_bytes + PLAN_RECORDS_BYTES;
    in->distinct_tokens = plan_distinct_tokens(ds->tok, ds->n_tok, P->base.cfg.vocab);
    in->budget = budget;
    in->keep_best = ds->n_val > 0;
    if (ds->vl && ds->vl->n_images) {   /* a Qwen2-VL base's images (run/vl_run.h) */
        in->vl_images = ds->vl->n_images;
        in->vl_image_tokens = ds->vl->n_rows;
        in->vl_tower_bytes = vl_run_tower_bytes(&P->base.cfg, ds->vl);
        in->vl_feature_bytes = vl_run_feature_bytes(ds->vl, &P->base.cfg);
    }
    /* training.cpt.embed_warmup_steps (run/embed.c): per matrix (the
     * embedding, and an untied LM head) an f32 trained copy, its gradient
     * and two AdamW moments, 16 bytes per value, + 4 for the best copy */
    if (tr->cpt.embed_warmup_steps > 0)
        in->embed_grad_bytes = (uint64_t)P->base.cfg.vocab * (uint64_t)P->base.cfg.d_model *
                               (in->keep_best ? 20 : 16) * (P->base.cfg.tied ? 1 : 2);
}

void prep_free(prep *P)
{
    pipeline_free(&P->data);
    tok_free(P->tok);
    memset(P, 0, sizeof *P);
}

int prep_pref(const prep *P, const dlm_doc *doc, uint64_t seed, int no_mined, pref_set **out, dlm_err *e)
{
    return prep_pref_replay(P, doc, seed, no_mined, NULL, out, e);
}

int prep_pref_replay(const prep *P, const dlm_doc *doc, uint64_t seed, int no_mined, pref_replay_in *rin,
                     pref_set **out, dlm_err *e)
{
    const doc_frontmatter *fm = doc_fm(doc);
    int seq = fm->training.sequence_len;
    if (P->base.cfg.max_pos > 0 && seq > P->base.cfg.max_pos) seq = P->base.cfg.max_pos;
    ds_opts o = {.seq_len = seq, .seed = seed, .system_prompt = fm->system_prompt, .val_frac = 0.1,
                 .no_mined = no_mined};
    if (!P->data.dialect) {
        err_set(e, "TemplateError", "the base has no chat template dlm can render, so preference pairs cannot be"
                " rendered");
        return err_hint(e, "choose a base with a chat template (e.g. qwen2.5-0.5b-instruct)");
    }
    dlm_doc *rdoc = NULL;
    if (rin && P->data.rp && replay_count(P->data.rp) > 0) {
        int n_doc = 0, *idx = NULL;
        for (int i = 0; i < doc_nsections(doc); i++) {
            const doc_section *s = doc_section_at(doc, i);
            if (s->type == DOC_PREFERENCE && !(no_mined && s->auto_mined)) n_doc += s->n_triples;
        }
        int k = replay_sample_pref(P->data.rp, (const char *const *)P->data.cur_ids, P->data.n_cur, n_doc, no_mined,
                                   rin->seed, rin->run_id, &idx, e);
        if (k < 0) return -1;
        rin->n_sections = k;
        if (k > 0 && !(rdoc = replay_doc(P->data.rp, idx, k, e))) {
            free(idx);
            return -1;
        }
        free(idx);
    }
    int rc = pref_build_replay(doc, rdoc, P->tok, P->data.dialect, &o, out, e);
    doc_free(rdoc);
    return rc;
}

void prep_pref_plan_inputs(const prep *P, const pref_set *ps, plan_in *in)
{
    in->pref_pairs = ps->n_pairs;
    in->embed_grad_bytes = 0;   /* the preference phase ignores training.cpt */
    in->seq_len = ps->max_len > 0 ? ps->max_len : 1;
    in->keep_best = 0;
    /* an untied embedding: the rows the pairs read too (an upper bound) */
    if (in->distinct_tokens > 0)
        in->distinct_tokens += plan_distinct_tokens(ps->tok, ps->n_tok, P->base.cfg.vocab);
}
