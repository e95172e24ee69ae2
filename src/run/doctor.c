/* doctor — see doctor.h. The document path takes the same steps as
 * `dlm train` (run/prepare.h: base, tokenizer, dialect, adapter, data
 * pipeline with the store's replay sample, plan inputs), minus the store
 * writes, so that `dlm doctor PATH` shows the plan `dlm train PATH` will
 * make. */
#include "run/doctor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "media/ingest.h"
#include "run/vl_run.h"
#include "run/prepare.h"
#include "store/store.h"
#include "util/fs.h"
#include "util/json.h"
#include "weights/base.h"
#include "weights/hub.h"
#include "media/audio.h"
#include "media/ingest.h"
#include "vision/qwen2audio.h"

/* What a document of typical size costs when we cannot tokenize it. */
#define TYPICAL_DATASET (1u << 20)
#define TYPICAL_DISTINCT 4096

static int replay_sections(const char *home, const char *dlm_id, const char *adapter)
{
    char store[4096], ad[4200], p[4300];
    if (store_dir(home, dlm_id, store, sizeof store, NULL)) return 0;
    if (store_adapter_dir(store, adapter, ad, sizeof ad, NULL)) return 0;
    snprintf(p, sizeof p, "%s/replay/index.json", adapter ? ad : store);
    if (!fs_is_file(p)) return 0;
    json_t *j = json_load_path(p, 64u << 20, NULL);
    int n = json_is_array(j) ? (int)json_array_size(j) : 0;
    json_decref(j);
    return n;
}

static void fill_common(doctor_doc *o, const doc_training *tr, const host_info *h, uint64_t max_memory)
{
    plan_in *in = &o->in;
    in->mb = (int)tr->micro_batch_size;
    in->ga = (int)tr->grad_accum;
    in->recompute = tr->recompute == DOC_RECOMPUTE_ON ? 1 : tr->recompute == DOC_RECOMPUTE_OFF ? 0 : -1;
    in->threads = plan_threads((int)tr->threads, h->cores_usable);
    in->cores = h->cores_usable;
    in->optim8 = tr->optimizer == DOC_OPT_ADAMW_BNB_8BIT || tr->optimizer == DOC_OPT_PAGED_ADAMW_8BIT;
    o->budget = max_memory ? max_memory : h->budget;
    o->budget_from = max_memory ? "--max-memory" : h->budget_from;
    in->budget = o->budget;
}

/* What the run would see of the store, read-only: which sections earlier
 * versions trained, the version before the run and the run's id, so the
 * replay sample is the one `dlm train` will draw. */
static json_t *store_view(const char *home, const char *dlm_id, const char *adapter, char *store, size_t cap,
                          int *prev_version, int64_t *run_id)
{
    *prev_version = 0;
    *run_id = 1;
    if (store_dir(home, dlm_id, store, cap, NULL)) {
        store[0] = 0;
        return NULL;
    }
    char p[4200];
    snprintf(p, sizeof p, "%s/manifest.json", store);
    json_t *m = fs_is_file(p) ? manifest_load(p, NULL) : NULL;
    if (m) *run_id = manifest_next_run_id(m);
    int v = store_current_version_of(store, adapter, NULL);
    *prev_version = v > 0 ? v : 0;
    return m;
}

/* A base planned from its registry shape: the images' grids from their
 * files (the shape's processor), their features and the tower. */
static int plan_images(dlm_doc *doc, const model_config *c, plan_in *in, dlm_err *e)
{
    if (!c->vl) return 0;
    media_ingest_stats ms;
    ds_image *images = NULL;
    ds_vl vl;
    int rc = media_ingest_images(doc, NULL, &ms, e) || vl_grids(doc, c, NULL, &images, &vl, e) ? -1 : 0;
    if (!rc && vl.n_images) {
        in->vl_images = vl.n_images;
        in->vl_image_tokens = vl.n_rows;
        in->vl_tower_bytes = vl_run_tower_bytes(c, &vl);
        in->vl_feature_bytes = vl_run_feature_bytes(&vl, c);
    }
    free(images);
    return rc;
}

int doctor_plan_document(const char *doc_path, const char *home, const host_info *h, uint64_t max_memory,
                         const char *adapter, doctor_doc *o, dlm_err *e)
{
    memset(o, 0, sizeof *o);
    prep P;
    memset(&P, 0, sizeof P);
    json_t *manifest = NULL;
    dlm_doc *doc = doc_load(doc_path, e);
    if (!doc) return -1;
    /* training.sources (doc/sources.h); a Qwen2-VL base takes its image files as sections, and an audio
     * row its clips with sidecars, as train does */
    int vlk = base_vl_kind(doc_fm(doc)->base_model);
    int al = base_is_audio(doc_fm(doc)->base_model);
    if (doc_expand_sources_media(doc, vlk == VL_QWEN2, al, e)) { doc_free(doc); return -1; }
    /* as the trainer (run/trainer.c): the adapter's sections and LoRA config */
    if (adapter && doc_scope_adapter(doc, adapter, e)) { doc_free(doc); return -1; }
    if (adapter) snprintf(o->adapter, sizeof o->adapter, "%s", adapter);
    const doc_frontmatter *fm = doc_fm(doc);
    const doc_training *tr = &fm->training;
    snprintf(o->base_spec, sizeof o->base_spec, "%s", fm->base_model ? fm->base_model : "");
    o->seq_cfg = tr->sequence_len;
    o->prec_asked = tr->precision ? doc_precision_names[tr->precision] : "null";
    {
        prec_cpu pc;
        dlm_err pe;
        precision_cpu_probe(&pc);
        if (precision_decide(tr->precision, &pc, &o->prec, &pe))
            snprintf(o->prec_refused, sizeof o->prec_refused, "%s (hint: %s)", pe.msg, pe.hint);
    }
    o->replay_sections = replay_sections(home, fm->dlm_id, adapter);
    plan_in *in = &o->in;
    fill_common(o, tr, h, max_memory);
    int rc = -1;
    hub_opts ho;
    base_ref ref;
    if (hub_opts_init(&ho, e)) goto out;
    ho.offline = 1; /* doctor never downloads */
    dlm_err e2;
    err_clear(&e2);
    if (base_resolve(o->base_spec, &ho, &ref, o->model_path, sizeof o->model_path, &e2)) {
        /* not on this machine: a registry base can still be planned from its shape */
        model_config c;
        if (registry_parse_base(o->base_spec, &ref, NULL) || ref.kind != BASE_REGISTRY ||
            doctor_known_shape(ref.entry->key, &c)) {
            *e = e2;
            goto out;
        }
        o->model_path[0] = 0;
        plan_base_shape(&c, DT_BF16, 0, &P.base);
        if (prep_adapter(&P, tr, e) || plan_images(doc, &c, in, e)) goto out;
        in->base = P.base;
        in->lora = P.lora;
        in->seq_len = tr->sequence_len < c.max_pos ? tr->sequence_len : c.max_pos;
        in->tokenizer_bytes = plan_tokenizer_estimate(c.vocab, c.vocab);
        in->dataset_bytes = TYPICAL_DATASET;
        in->distinct_tokens = TYPICAL_DISTINCT;
        in->keep_best = 1;
        o->fits = plan_make(in, &o->p) == 0;
        rc = 0;
        goto out;
    }
    /* from the files: the very steps `dlm train` takes (run/prepare.h) */
    o->from_files = 1;
    char store[4096], adir[4200] = "";
    pipeline_in pin = {.doc = doc, .seed = (uint64_t)tr->seed};
    manifest = store_view(home, fm->dlm_id, adapter, store, sizeof store, &pin.prev_version, &pin.run_id);
    pin.store = store;
    if (adapter && store[0] && store_adapter_dir(store, adapter, adir, sizeof adir, NULL) == 0)
        pin.replay_store = adir;   /* a named adapter's replay corpus is its own */
    pin.manifest = manifest;
    ds_image *images = NULL;
    ds_vl vl;
    if (prep_base(&P, o->model_path, ref.entry, e) || prep_adapter(&P, tr, e)) goto out;
    if (P.base.cfg.vl) {   /* the images' grids from their files, nothing stored (run/vl_run.h) */
        media_ingest_stats ms;
        if (media_ingest_images(doc, NULL, &ms, e) || vl_grids(doc, &P.base.cfg, NULL, &images, &vl, e)) {
            free(images);
            goto out;
        }
        pin.vl = &vl;
    }
    if (al && media_count_audio(doc)) {
        if (prep_audio_counts(doc, o->model_path, tr->audio.auto_resample, &o->audio, e)) { free(images); goto out; }
        pin.audio_ntok = o->audio.ntok;
        pin.audio_token = P.base.cfg.audio_token;
    }
    int prc = prep_data(&P, &pin, e);
    free(o->audio.ntok);   /* the counts stay; the dataset has its rows */
    o->audio.ntok = NULL;
    if (prc) { free(images); goto out; }
    const dataset *ds = P.data.ds;
    o->n_train = ds->n_train;
    o->n_val = ds->n_val;
    pipeline_split_line(&P.data, o->split_line, sizeof o->split_line);
    o->split = pipeline_split_json(&P.data, doc);
    o->tokens = ds->n_tok;
    o->loss_tokens = ds->train_loss_tokens;
    o->qlora = P.qlora;
    prep_precision(&P, !o->prec_refused[0] && o->prec.bf16);
    prep_plan_inputs(&P, tr, 0, h->cores_usable, o->budget, in);
    free(images);   /* prep_plan_inputs counted them */
    P.data.ds->vl = NULL;
    if (o->audio.clips && prep_audio_plan(o->model_path, o->audio.tokens, in, e)) goto out;
    o->fits = plan_make(in, &o->p) == 0;
    /* the schedule train chooses (run/cpt.h), over the document's epochs */
    cpt_choose(tr, ds, &o->cpt);
    int mb = o->p.mb > 0 ? o->p.mb : 1, ga = o->p.ga > 0 ? o->p.ga : 1;
    cpt_sft_optim(tr, &o->cpt, (int64_t)dataset_steps_per_epoch(ds, mb, ga) * tr->num_epochs, &o->optim);
    o->tag_dropped = ds->rows_weight_dropped;
    o->tag_extra = ds->rows_weight_extra;
    /* the preference phase: two rows per pair, the longest pair sequence,
     * the reference pass in the same buffers (run/pref.c) */
    for (int i = 0; i < doc_nsections(doc); i++)
        if (doc_section_at(doc, i)->type == DOC_PREFERENCE) o->pref_triples += doc_section_at(doc, i)->n_triples;
    o->pref_enabled = tr->preference.enabled_explicit ? tr->preference.enabled : o->pref_triples > 0;
    if (o->pref_triples && o->pref_enabled) {
        pref_set *ps = NULL;
        if (prep_pref(&P, doc, (uint64_t)tr->seed, 0, &ps, e)) goto out;
        o->pref_planned = 1;
        o->pref_method = tr->preference.method == DOC_PREF_ORPO ? "orpo" : "dpo";
        o->pref_pairs = ps->n_pairs;
        o->pref_in = *in;
        prep_pref_plan_inputs(&P, ps, &o->pref_in);
        pref_free(ps);
        o->pref_fits = plan_make(&o->pref_in, &o->pref_p) == 0;
    }
    rc = 0;
out:
    json_decref(manifest);
    prep_free(&P);
    doc_free(doc);
    return rc;
}

/* ---- every registry base -------------------------------------------------------- */

static int local_shape(const reg_entry *r, plan_base *b)
{
    hub_opts ho;
    if (hub_opts_init(&ho, NULL)) return -1;
    ho.offline = 1;
    char cfg[4200], dir[4200];
    if (hub_resolve_file(&ho, r->hf_id, r->revision, "config.json", cfg, sizeof cfg, NULL)) return -1;
    fs_dirname(dir, sizeof dir, cfg);
    return plan_base_read(dir, b, NULL);
}

/* An audio row: its encoder from the downloaded config.json, else
 * Qwen2-Audio-7B's; the tower's own bytes as stored are in the base's. */
static void plan_audio_encoder(const reg_entry *r, int have_local, plan_in *in, doctor_row *row)
{
    qwen2audio_cfg qc;
    hub_opts ho;
    char cfg[4200];
    if (!have_local || hub_opts_init(&ho, NULL) ||
        (ho.offline = 1, hub_resolve_file(&ho, r->hf_id, r->revision, "config.json", cfg, sizeof cfg, NULL)) ||
        qwen2audio_cfg_load(cfg, &qc, NULL))
        qwen2audio_cfg_7b(&qc);
    qwen2audio_plan_bytes(&qc, &in->audio_encoder_bytes, &in->audio_scratch_bytes);
    row->audio_encoder = in->audio_encoder_bytes;
    row->audio_scratch = in->audio_scratch_bytes;
    row->audio_tokens = qwen2audio_out_len(2 * qc.max_pos);
    /* audio_cache.c's .npz of 30 s at 16 kHz (headers: 22 + 2·(30 + 12) + 16 + 128 bytes), audio_feat.c's entry */
    row->audio_wave_cache = (uint64_t)AUDIO_RATE * 30 * 4 + 250;
    row->audio_feat_cache = 16 + (uint64_t)row->audio_tokens * (uint64_t)qc.text_hidden * 4;
}

int doctor_plan_registry(const host_info *h, uint64_t max_memory, doctor_row *rows, int cap)
{
    doc_training tr;
    doc_training_defaults(&tr);
    int n = 0;
    for (int i = 0; i < registry_count() && n < cap; i++) {
        const reg_entry *r = registry_at(i);
        doctor_row *row = &rows[n++];
        memset(row, 0, sizeof *row);
        row->entry = r;
        plan_base local;
        model_config c;
        int have_local = 0;
        if (r->modality != REG_TEXT && !base_arch_supported(r->architecture)) {
            snprintf(row->note, sizeof row->note, "%s base: dlm trains text bases, Qwen2-VL, PaliGemma and Qwen2-Audio only",
                     registry_modality_name(r->modality));
            continue;
        }
        if (!r->hf_id) {
            /* tiny: the embedded base */
            char p[4096];
            if (base_tiny_path(p, sizeof p, NULL) || plan_base_read(p, &local, NULL)) {
                snprintf(row->note, sizeof row->note, "the embedded base is not installed");
                continue;
            }
            have_local = 1;
        } else if (!base_arch_supported(r->architecture)) {
            snprintf(row->note, sizeof row->note, "architecture %s is not one dlm runs (llama, mistral, qwen2, qwen3, olmo2, smollm3)",
                     r->architecture);
            continue;
        } else if (local_shape(r, &local) == 0) {
            have_local = 1;
        } else if (doctor_known_shape(r->key, &c)) {
            snprintf(row->note, sizeof row->note, "shape unknown until downloaded");
            continue;
        }
        row->trainable = 1;
        row->from_files = have_local;
        if (have_local) c = local.cfg;
        snprintf(row->note, sizeof row->note, "%s", have_local ? "planned from the downloaded files"
                                                              : "planned from the registry shape (not downloaded)");
        doctor_doc d;
        memset(&d, 0, sizeof d);
        fill_common(&d, &tr, h, max_memory);
        plan_in *in = &d.in;
        in->lora.rank = tr.lora_r;
        in->lora.alpha = (float)tr.lora_alpha;
        in->lora.dropout = (float)tr.lora_dropout;
        in->lora.targets = LM_ATTN | LM_NAME_AUTO;   /* phi3: its four modules */
        lora_targets_resolve(&c, &in->lora.targets, NULL);
        int ctx = r->context_length_effective > 0 ? r->context_length_effective : r->context_length;
        if (ctx <= 0 || ctx > c.max_pos) ctx = c.max_pos;
        row->seq = in->seq_len = tr.sequence_len < ctx ? tr.sequence_len : ctx;
        in->tokenizer_bytes = plan_tokenizer_estimate(c.vocab, c.vocab);
        in->dataset_bytes = TYPICAL_DATASET;
        in->distinct_tokens = TYPICAL_DISTINCT;
        in->keep_best = 1;
        in->vl_tower_bytes = doctor_pali_tower_bytes(&c);   /* paligemma: the tower while it computes features */
        /* as published (or as downloaded), then as Q8_0 and Q4_K GGUFs: the
         * first that fits says whether the base must stay quantized */
        if (r->modality == REG_AUDIO) plan_audio_encoder(r, have_local, in, row);
        struct { int type, gguf; } tries[3] = {{DT_BF16, 0}, {DT_Q8_0, 1}, {DT_Q4_K, 1}};
        for (int t = 0; t < 3; t++) {
            if (t == 0 && have_local) in->base = local;
            else plan_base_shape(&c, (dtype)tries[t].type, tries[t].gguf, &in->base);
            row->wtype = in->base.wtype >= 0 ? in->base.wtype : tries[t].type;
            row->gguf = in->base.gguf == 1;
            row->fits = plan_make(in, &row->p) == 0;
            if (row->fits) break;
        }
    }
    return n;
}
