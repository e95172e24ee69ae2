/* trainer — see trainer.h. This file is the run's spine; the version
 * commit, checkpoints and records are in train/commit.c. */
#include "run/trainer.h"

#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tokens/replay.h"
#include "run/cpt.h"
#include "run/plan.h"
#include "run/probe.h"
#include "run/vl_run.h"
#include "run/dist.h"
#include "kern/cpu.h"
#include "kern/kern.h"
#include "media/audio.h"
#include "media/ingest.h"
#include "vision/audio_feat.h"
#include "weights/base.h"
#include "store/metrics.h"
#include "store/store.h"
#include "adapter/adapter.h"
#include "grad/backward.h"
#include "tokens/tcache.h"
#include "tokens/tok_gguf.h"
#include "grad/optim.h"
#include "run/run.h"
#include "adapter/state.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/json.h"
#include "util/log.h"
#include "util/timeutil.h"

void train_summary(const train_result *r, char *out, size_t cap)
{
    char val[48] = "";
    if (isfinite(r->val_loss)) snprintf(val, sizeof val, " (val %.3f)", r->val_loss);
    else snprintf(val, sizeof val, " (no validation: every row trained)");
    if (r->committed_step != r->steps && r->steps >= r->total)   /* the patience ran out at the last evaluation */
        snprintf(out, cap, "trained v%04d: %lld steps, committed step %lld (the best validation loss): loss %.3f → %.3f%s",
                 r->version, (long long)r->steps, (long long)r->committed_step, r->first_loss, r->final_loss, val);
    else if (r->committed_step != r->steps)
        snprintf(out, cap, "trained v%04d: stopped early at step %lld of %lld, committed step %lld: loss %.3f → %.3f%s",
                 r->version, (long long)r->steps, (long long)r->total, (long long)r->committed_step, r->first_loss,
                 r->final_loss, val);
    else
        snprintf(out, cap, "trained v%04d: %lld steps, loss %.3f → %.3f%s", r->version, (long long)r->steps,
                 r->first_loss, r->final_loss, val);
}

const char *train_phase_name(train_phase p)
{
    switch (p) {
    case PHASE_LOADING: return "loading";
    case PHASE_TRAINING: return "training";
    case PHASE_EVALUATING: return "evaluating";
    case PHASE_SAVING: return "saving";
    default: return "done";
    }
}

static void note(run *R, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(run *R, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (R->h && R->h->note) R->h->note(R->h->ctx, buf);
}

static void progress(run *R, train_phase ph, int64_t step, double loss, double lr, double tps)
{
    if (!R->h || !R->h->progress) return;
    train_progress p = {.phase = ph, .step = step, .total = R->total, .loss = loss, .val_loss = R->last_val, .lr = lr,
                        .tokens_per_sec = tps, .elapsed = time_mono() - R->t0, .version = R->version,
                        .run_id = R->run_id, .log_path = R->log_path[0] ? R->log_path : NULL,
                        .run_phase = pref_phase_name(R), .adapter = R->aname, .rewards_margin = R->pref ? R->rw_margin : NAN,
                        .rewards_accuracy = R->pref ? R->rw_acc : NAN};
    if (step > R->start_step && step < R->total) p.eta = p.elapsed / (double)(step - R->start_step) * (double)(R->total - step);
    R->h->progress(R->h->ctx, &p);
}

/* ---- setup ----------------------------------------------------------------- */

/* What the validation split did, and every row it holds out (up to 20 here;
 * the run log's banner and `dlm doctor PATH --json` list all): a row is
 * never held out of training silently. */
static void note_split(run *R)
{
    char line[512];
    pipeline_split_line(&R->P.data, line, sizeof line);
    note(R, "%s", line);
    held_row *h = NULL;
    int n = pipeline_held_out(&R->P.data, R->doc, &h);
    for (int i = 0; i < n && i < 20; i++) {
        held_desc d;
        char buf[1024];
        pipeline_held_describe(R->doc, &h[i], &d);
        pipeline_held_format(&d, buf, sizeof buf);
        note(R, "  held out: %s", buf);
    }
    if (n > 20) note(R, "  ... and %d more ('dlm doctor %s --json' lists every one)", n - 20, R->o->doc_path);
    if (n > 0)
        note(R, "  to train on every row: write training.val_frac: 0 in the frontmatter (no validation loss, no early"
                " stopping)");
    free(h);
}

static int open_store(run *R, dlm_err *e)
{
    const doc_frontmatter *fm = doc_fm(R->doc);
    if (store_dir(R->o->home, fm->dlm_id, R->store, sizeof R->store, e)) return -1;
    if (store_adapter_dir(R->store, R->aname, R->adir, sizeof R->adir, e)) return -1;
    snprintf(R->rdir, sizeof R->rdir, "%s", R->aname ? R->adir : R->store);
    if (!R->lead) { /* other ranks only read what rank 0 created and locked */
        snprintf(R->manifest_path, sizeof R->manifest_path, "%s/manifest.json", R->store);
        R->manifest = manifest_load(R->manifest_path, e);
        if (!R->manifest) return -1;
        R->run_id = manifest_next_run_id(R->manifest);
        R->prev_version = store_current_version_of(R->store, R->aname, NULL);
        return 0;
    }
    if (store_create_skeleton(R->store, e)) return -1;
    if (R->aname && fs_mkdir_p(R->adir, e)) return -1;
    snprintf(R->manifest_path, sizeof R->manifest_path, "%s/manifest.json", R->store);
    if (store_lock_acquire(R->store, "train", &R->lk, e)) return -1;
    if (fs_exists(R->manifest_path)) {
        R->manifest = manifest_load(R->manifest_path, e);
        if (!R->manifest) return -1;
        /* a copied document shares the dlm_id: which one owns the store */
        int changed;
        char sn[9000];
        if (store_source_check(R->manifest, R->o->doc_path, fm->dlm_id, R->o->same_store, &changed, sn, sizeof sn, e))
            return -1;
        if (sn[0]) note(R, "%s", sn);
        if (changed && manifest_save(R->manifest_path, R->manifest, e)) return -1;
    } else {
        /* train without init: create the manifest, as the original does */
        char abs[4096];
        if (!realpath(R->o->doc_path, abs)) snprintf(abs, sizeof abs, "%s", R->o->doc_path);
        R->manifest = manifest_new(fm->dlm_id, R->base_spec, NULL, abs, NULL);
        if (!R->manifest || manifest_save(R->manifest_path, R->manifest, e)) return -1;
    }
    R->run_id = manifest_next_run_id(R->manifest);
    R->prev_version = store_current_version_of(R->store, R->aname, NULL);
    /* before the run record exists: `dlm status` keeps saying what the last
     * run did */
    if (run_check_resumable(R, e)) return -1;
    if (R->h && R->h->started) R->h->started(R->h->ctx, R->store, R->run_id);
    R->started = 1;
    return 0;
}

static int load_base(run *R, dlm_err *e)
{
    hub_opts ho;
    if (hub_opts_init(&ho, e)) return -1;
    if (R->o->offline) ho.offline = 1;
    if (base_resolve(R->base_spec, &ho, &R->base, R->model_path, sizeof R->model_path, e)) return -1;
    return prep_base(&R->P, R->model_path, R->base.entry, e);
}

/* Every clip's encoder rows through the feature cache (vision/audio_feat.h),
 * into R's table in document order. */
static int audio_features(run *R, int *hits, dlm_err *e)
{
    hub_opts ho;
    if (hub_opts_init(&ho, e)) return -1;
    if (R->o->offline) ho.offline = 1;
    if (base_resolve(R->base_spec, &ho, &R->base, R->model_path, sizeof R->model_path, e)) return -1;
    audio_feat af;
    if (audio_feat_open(&af, R->model_path, e)) return -1;
    int rc = 0, ar = doc_fm(R->doc)->training.audio.auto_resample, ns = doc_nsections(R->doc);
    R->audio_token = af.audio_token;
    R->antok = calloc((size_t)ns + 1, sizeof *R->antok);
    if (!R->antok) rc = err_set(e, "MemoryError", "out of memory");
    for (int i = 0; i < ns && !rc; i++) {
        const doc_section *s = doc_section_at(R->doc, i);
        if (s->type != DOC_AUDIO) continue;
        float *x = NULL;
        int n = 0, hit = 0;
        dlm_err ie;
        err_clear(&ie);
        rc = audio_feat_blob(&af, R->store, s->media_blob_sha, AUDIO_MAX_SECONDS, ar, &x, &n, &hit, &ie);
        if (rc) {   /* named by the section's line, as ingestion names its errors */
            err_at(e, ie.kind[0] ? ie.kind : "AudioError", R->o->doc_path, s->line, 1, "audio '%s': %s", s->media_path,
                   ie.msg);
            if (ie.hint[0]) err_hint(e, "%s", ie.hint);
        }
        *hits += hit;
        if (!rc) {
            float *t = realloc(R->aemb, ((size_t)R->n_aemb + (size_t)n) * (size_t)af.width * sizeof *t);
            if (!t) rc = err_set(e, "MemoryError", "out of memory");
            else {
                memcpy(t + (size_t)R->n_aemb * af.width, x, (size_t)n * af.width * sizeof *t);
                R->aemb = t;
                R->n_aemb += n;
                R->antok[i] = n;
            }
        }
        free(x);
    }
    audio_feat_close(&af);
    return rc;
}

static int build_data(run *R, dlm_err *e)
{
    const doc_training *tr = &doc_fm(R->doc)->training;
    if (tr->cache.enabled && !R->o->no_cache) {
        /* a section's tokens are a function of the key tcache_key builds;
         * a hit gives exactly what tokenizing gives */
        if (tok_source_sha256(R->model_path, R->tok_sha, e) || tcache_open(R->store, &R->cache, e)) return -1;
    }
    pipeline_in in = {.audio_ntok = R->antok, .audio_token = R->audio_token, .cache = R->cache, .tok_sha256 = R->tok_sha, .doc = R->doc, .store = R->store, .replay_store = R->rdir, .manifest = R->manifest, .seed = R->seed,
                      .no_replay = R->o->no_replay, .prev_version = R->prev_version, .run_id = R->run_id,
                      .no_mined = R->o->no_mined, .vl = R->P.base.cfg.vl ? &R->vl : NULL};
    return prep_data(&R->P, &in, e);
}

/* The OOM guard: runs after the tokenizer and the dataset, before a weight
 * is mapped or hashed and before any training buffer exists. */
static int plan_memory(run *R, dlm_err *e)
{
    plan_in in;
    prep_plan_inputs(&R->P, &doc_fm(R->doc)->training, R->o->threads, R->host.cores_usable,
                     R->o->max_memory ? R->o->max_memory : R->host.budget, &in);
    if (R->pref) prep_pref_plan_inputs(&R->P, R->ps, &in);
    if (R->n_aemb && prep_audio_plan(R->model_path, R->n_aemb, &in, e)) return -1;
    in.ranks = dist_size();
    R->plan_in = in;
    if (plan_make(&in, &R->plan) && !R->o->force) {
        char need[32], bud[32], rec[32];
        str_human_size(R->plan.total, need, sizeof need);
        str_human_size(in.budget, bud, sizeof bud);
        const char *from = R->o->max_memory ? "--max-memory" : R->host.budget_from;
        err_set(e, "OOMError", "training needs %s but the budget is %s (%s): %s", need, bud, from, R->plan.reason);
        if (R->plan.rec_seq) {
            str_human_size(R->plan.rec_total, rec, sizeof rec);
            return err_hint(e, "write in the frontmatter: training: {micro_batch_size: %d, grad_accum: %d,"
                            " sequence_len: %d, recompute: on} (needs %s); or raise --max-memory; --force tries"
                            " anyway", R->plan.rec_mb, R->plan.rec_ga, R->plan.rec_seq, rec);
        }
        if (R->plan.q4k_total && R->plan.q4k_total <= in.budget)
            return err_hint(e, "train on a Q4_K GGUF of the base (--base PATH.gguf), or free memory; --force tries"
                            " anyway");
        return err_hint(e, "choose a smaller base or free memory; 'dlm doctor %s' shows the plan; --force tries"
                        " anyway", R->o->doc_path);
    }
    if (!R->plan.fits) log_warn("the memory plan does not fit (%s); --force: trying anyway", R->plan.reason);
    R->micro_batch = R->plan.mb;
    /* N ranks with grad_accum g make one step of N·g micro-batches */
    R->grad_accum = R->plan.ga * dist_size();
    return 0;
}

/* The loader and the header reader agree on every dimension the plan used;
 * if a file ever makes them differ, plan again with the loaded config so
 * the buffers stay what the plan says. */
static int replan_if_needed(run *R, dlm_err *e)
{
    const model_config *a = &R->P.base.cfg, *b = &R->m->cfg;
    if (a->n_layer == b->n_layer && a->d_model == b->d_model && a->n_ff == b->n_ff && a->n_head == b->n_head &&
        a->n_kv_head == b->n_kv_head && a->head_dim == b->head_dim && a->vocab == b->vocab && a->tied == b->tied)
        return 0;
    R->plan_in.base.cfg = *b;
    plan p;
    plan_compute(&R->plan_in, R->plan.mb, R->plan.ga, R->plan.recompute, &p);
    if (!p.fits && R->plan.fits && !R->o->force) {
        char need[32];
        str_human_size(p.total, need, sizeof need);
        return err_set(e, "OOMError", "the loaded model needs %s, more than the budget", need);
    }
    memcpy(R->plan.items, p.items, sizeof p.items);
    R->plan.n_items = p.n_items;
    R->plan.total = p.total;
    return 0;
}

/* ---- the loop -------------------------------------------------------------- */

/* A batch's audio rows take the clips' encoder rows (tokens/dataset.h's
 * dataset_fill_audio; the decoder splice of decoder/decoder.h). */
static int splice_audio(run *R, const int *items, int c, token_batch *b, dlm_err *e)
{
    if (!R->n_aemb || !dataset_fill_audio(R->P.data.ds, items, c, R->aemb, R->n_aemb, R->bemb, b)) return 0;
    return decoder_batch_check(&R->m->cfg, b, e);
}

static int64_t step_items(run *R, int64_t step, int micro, int *items)
{
    int spe = R->steps_per_epoch;
    return dataset_micro_items(R->P.data.ds, R->seed, (int)(step / spe), (int)(step % spe), micro, R->micro_batch, R->grad_accum, items);
}

/* One optimizer step. Each micro-batch's gradient is computed into a
 * zeroed buffer of its own and the step gradient is 0 + g0 + g1 + ... in
 * micro-batch order (dist_allreduce_sum), so a rank holding micro-batches
 * [r·g, r·g+g) of N·g adds exactly what one process adds: the bytes do not
 * depend on how many ranks share the step (docs/mpi.md). */
static int do_step(run *R, int64_t step, double *loss, double *gnorm, int64_t *ntok, dlm_err *e)
{
    if (R->pref) return pref_step(R, step, loss, gnorm, ntok, e);
    int64_t total_loss = 0;
    R->step_rows = 0;
    for (int mi = 0; mi < R->grad_accum; mi++) {
        int c = (int)step_items(R, step, mi, R->items);
        for (int i = 0; i < c; i++) total_loss += R->P.data.ds->items[R->items[i]].n_loss;
    }
    size_t n = R->l->n;
    int per = R->grad_accum / dist_size(), m0 = dist_rank() * per, one = dist_size() == 1;
    double acc[2] = {0, 0};
    memset(R->g, 0, n * sizeof(float));
    /* training.cpt.embed_warmup_steps: in steps 1..N the embedding and the
     * head train too (run/embed.c) */
    int emb = cpt_embed_step(&R->cpt, step) && R->emb_g;
    full_grads eg = {.tok_embd = R->emb_g, .output = R->head_g};
    if (emb) run_embed_zero_grads(R);
    for (int k = 0; k < per && total_loss > 0; k++) {
        int mi = m0 + k;
        float *gm = R->gpart[one ? 0 : k];
        double *sc = R->gscal + (one ? 0 : 2 * k);
        memset(gm, 0, n * sizeof(float));
        sc[0] = sc[1] = 0;
        int c = (int)step_items(R, step, mi, R->items);
        if (c > 0) {
            token_batch b;
            int64_t nl, got;
            if (vl_run_fill(R, R->items, c, &b, &nl))
                return err_set(e, "TrainError", "batch does not fit its buffers");
            if (splice_audio(R, R->items, c, &b, e)) return -1;
            R->step_rows += b.B;
            sc[0] = backward_step(R->dec, &b, gm, emb ? &eg : NULL, 1.0f / (float)total_loss, R->seed,
                                  (uint64_t)step * (uint64_t)R->grad_accum + (uint64_t)mi, &got);
            sc[1] = (double)b.B * b.T;
        }
        if (one) { /* stream: the same order without a buffer per micro-batch */
            for (size_t i = 0; i < n; i++) R->g[i] += gm[i];
            acc[0] += sc[0];
            acc[1] += sc[1];
        }
    }
    if (!one && total_loss > 0 &&
        dist_allreduce_sum(R->g, (const float *const *)R->gpart, per, n, acc, R->gscal, 2, e))
        return -1;
    *ntok = (int64_t)acc[1];
    *loss = total_loss ? acc[0] / (double)total_loss : 0;
    /* one clip over every trained parameter, as torch's clip_grad_norm_ */
    *gnorm = optim_clip_extra(R->g, R->l->n, R->optim.max_grad_norm, emb ? run_embed_sumsq(R) : 0.0);
    double lr = optim_lr_at(&R->optim, step);
    run_optim_step(R, lr, R->t_offset + step + 1);   /* training.optimizer: 32- or 8-bit AdamW (run/optstate.c) */
    if (emb) run_embed_step(R, *gnorm, lr, step);
    R->last_lr = lr;
    return 0;
}

static double evaluate(run *R)
{
    if (R->pref || !R->P.data.ds->n_val) return NAN;
    double sum = 0;
    int64_t tot = 0;
    for (int i = 0; i < R->P.data.ds->n_val; i += R->micro_batch) {
        int c = R->P.data.ds->n_val - i < R->micro_batch ? R->P.data.ds->n_val - i : R->micro_batch;
        token_batch b;
        int64_t nl, got;
        vl_run_fill(R, R->P.data.ds->val + i, c, &b, &nl);
        if (splice_audio(R, R->P.data.ds->val + i, c, &b, NULL)) return NAN;
        sum += decoder_loss(R->dec, &b, NULL, NULL, &got);
        tot += got;
    }
    return tot ? sum / (double)tot : NAN;
}

static int setup_adapter(run *R, dlm_err *e)
{
    const doc_training *tr = &doc_fm(R->doc)->training;
    if (prep_adapter(&R->P, tr, e)) return -1;
    /* without training.adapters a `#name` suffix has no adapter of its own:
     * the section trains the one adapter, as in the original's dlm train */
    for (int i = 0; !tr->adapters && i < doc_nsections(R->doc); i++) {
        const doc_section *s = doc_section_at(R->doc, i);
        if (s->adapter) {
            note(R, "note: %s:%d: the suffix '#%s' names no adapter (training.adapters is not declared); the section"
                    " trains the document's one adapter", R->o->doc_path, s->line, s->adapter);
            break;
        }
    }
    return 0;
}

static int allocate(run *R, dlm_err *e)
{
    if (lora_create(&R->m->cfg, &R->P.lora, &R->l, e)) return -1;
    size_t n = R->l->n;
    R->g = calloc(n, sizeof(float));
    if (run_optim_create(R, e)) return -1;   /* the moments of training.optimizer (run/optstate.c) */
    R->best = R->P.data.ds->n_val && !R->pref ? calloc(n, sizeof(float)) : NULL;
    R->T = R->pref ? R->ps->max_len : R->P.data.ds->max_len;
    /* a preference pass holds a pair per micro-batch slot: chosen and rejected rows */
    int rows = R->pref ? 2 * R->micro_batch : R->micro_batch;
    size_t bt = (size_t)rows * (size_t)R->T;
    R->btok = malloc(bt * sizeof(int32_t));
    R->btgt = malloc(bt * sizeof(int32_t));
    R->bpos = malloc(bt * sizeof(int32_t));
    R->bseg = malloc(bt * sizeof(int32_t));
    if (R->n_aemb && !(R->bemb = malloc(bt * sizeof(int32_t)))) return err_set(e, "OOMError", "cannot allocate the batch");
    if (R->P.data.ds->vl) {   /* a Qwen2-VL base: the splice of each batch */
        R->brow = malloc(bt * sizeof(int32_t));
        R->bpos3 = malloc(3 * bt * sizeof(int32_t));
        R->bprefix = calloc((size_t)rows, sizeof(int32_t));
        if (!R->brow || !R->bpos3 || !R->bprefix) return err_set(e, "OOMError", "cannot allocate the image batch buffers");
        memset(R->brow, 0, bt * sizeof(int32_t));
        memset(R->bpos3, 0, 3 * bt * sizeof(int32_t));
    }
    R->items = malloc((size_t)R->micro_batch * sizeof(int));
    R->n_gpart = dist_size() == 1 ? 1 : R->grad_accum / dist_size();
    R->gpart = calloc((size_t)R->n_gpart, sizeof(float *));
    R->gscal = calloc((size_t)R->n_gpart * 2, sizeof(double));
    for (int i = 0; R->gpart && i < R->n_gpart; i++)
        if (!(R->gpart[i] = calloc(n, sizeof(float)))) return err_set(e, "OOMError", "cannot allocate the micro-batch gradients");
    if (!R->gpart || !R->gscal) return err_set(e, "OOMError", "cannot allocate the micro-batch gradients");
    size_t ck = run_optim_state_bytes(R);
    if (R->pref) {
        R->ref_c = calloc((size_t)R->ps->n_pairs, sizeof(double));
        R->ref_r = calloc((size_t)R->ps->n_pairs, sizeof(double));
        R->nll = calloc(bt, sizeof(float));
        R->scale = calloc(bt, sizeof(float));
        R->pairs = calloc((size_t)R->micro_batch, sizeof(int));
        R->pass_rc = calloc((size_t)R->micro_batch, sizeof(double));
        R->pass_rr = calloc((size_t)R->micro_batch, sizeof(double));
        if (!R->ref_c || !R->ref_r || !R->nll || !R->scale || !R->pairs || !R->pass_rc || !R->pass_rr)
            return err_set(e, "OOMError", "cannot allocate the preference buffers");
    }
    if (!R->g || (R->P.data.ds->n_val && !R->pref && !R->best) || !R->btok || !R->btgt || !R->bpos ||
        !R->bseg || !R->items || sb_reserve(&R->ckbuf, ck))
        return err_set(e, "OOMError", "cannot allocate the adapter's training buffers (%zu MiB)", (n * 16 + ck) >> 20);
    /* Touch every page now: with overcommit, memory is really taken on
     * first write, and that must happen before step 1, not halfway through
     * a checkpoint. */
    memset(R->g, 0, n * sizeof(float));
    if (R->best) memset(R->best, 0, n * sizeof(float));
    memset(R->ckbuf.buf, 0, ck);
    memset(R->btok, 0, bt * sizeof(int32_t));
    memset(R->btgt, 0, bt * sizeof(int32_t));
    memset(R->bpos, 0, bt * sizeof(int32_t));
    memset(R->bseg, 0, bt * sizeof(int32_t));
    /* training.cpt.embed_warmup_steps: the adapter's trained copies of the
     * embedding and head, their gradients and moments, and their
     * best-evaluation copy (run/embed.c) */
    if (!R->pref && doc_fm(R->doc)->training.cpt.embed_warmup_steps > 0 && run_embed_alloc(R, e)) return -1;
    /* training.cpt.embed_warmup_steps: the head's weight gradient too */
    decoder_opts fo = {.B = rows, .T = R->T, .recompute = R->plan.recompute,
                       .head_grad = !R->pref && doc_fm(R->doc)->training.cpt.embed_warmup_steps > 0};
    if (decoder_create(R->m, R->l, &fo, &R->dec, e)) {
        err_prefix(e, "the memory plan fits but the allocation failed");
        return -1;
    }
    return 0;
}

int train_run(const train_opts *o, const train_hooks *h, train_result *res, dlm_err *e)
{
    memset(res, 0, sizeof *res);
    run *R = calloc(1, sizeof *R);
    if (!R) return err_set(e, "MemoryError", "out of memory");
    R->o = o;
    /* the whole run, pool jobs included, flushes denormals (kern.h): the
     * step time must not depend on the weights' scale (issue 16); the mode
     * is the caller's again on return */
    unsigned fpm = kern_fp_flush_enter();
    /* Under MPI rank 0 leads: it alone locks the store, talks to the user
     * and writes checkpoints, versions, logs, metrics and dlm.lock; the
     * other ranks compute their share of each step (docs/mpi.md). */
    R->lead = dist_rank() == 0;
    R->h = R->lead ? h : NULL;
    R->t0 = time_mono();
    R->last_val = NAN;
    int rc = -1;
    R->doc = doc_load(o->doc_path, e);
    if (!R->doc) goto out;
    for (int i = 0; i < o->n_extra; i++)   /* before training.sources expand: an append re-parses the text */
        if (doc_append_section(R->doc, &o->extra[i], e)) goto out;
    /* a vision-language base takes image files from training.sources as
     * image sections; a text base skips them (doc/sources.h) */
    int vl = 0, al = 0, vl_kind = 0;
    {
        const char *spec0 = o->base_override ? o->base_override : doc_fm(R->doc)->base_model;
        vl_kind = base_vl_kind(spec0);   /* Qwen2-VL trains; other vision rows stop after ingestion */
        vl = vl_kind != 0;
        al = base_is_audio(spec0);   /* audio clips likewise (docs/audio.md) */
    }
    if (doc_expand_sources_media(R->doc, vl, al, e)) goto out;   /* training.sources → sections (doc/sources.h) */
    /* named adapters (§3.9): this run sees only the sections routed to its
     * adapter, with that adapter's LoRA config (doc/route.c) */
    if (o->adapter || doc_fm(R->doc)->training.adapters) {
        if (!o->adapter) {
            err_set(e, "UnknownAdapterError", "%s declares training.adapters: name the adapter to train", o->doc_path);
            err_hint(e, "dlm train %s trains every adapter in order; --adapter NAME trains one", o->doc_path);
            goto out;
        }
        if (doc_scope_adapter(R->doc, o->adapter, e)) goto out;
        R->aname = o->adapter;
    }
    const doc_frontmatter *fm = doc_fm(R->doc);
    const doc_training *tr = &fm->training;
    R->base_spec = o->base_override ? o->base_override : fm->base_model;
    R->seed = o->seed >= 0 ? (uint64_t)o->seed : (uint64_t)tr->seed;
    R->packing = tr->packing;
    for (int i = 0; i < doc_nsections(R->doc); i++) {
        const doc_section *s = doc_section_at(R->doc, i);
        if (s->type == DOC_IMAGE && !vl) {
            err_at(e, "ModalityError", o->doc_path, s->line, 1, "image section '%s' needs a vision-language base; %s is not one",
                   s->media_path, R->base_spec);
            err_hint(e, "set base_model: qwen2-vl-2b-instruct (dlm init --multimodal --base qwen2-vl-2b-instruct), or remove"
                        " the section");
            goto out;
        }
        if (s->type == DOC_AUDIO && !al) {
            err_at(e, "ModalityError", o->doc_path, s->line, 1, "audio section '%s' needs an audio-language base; %s is not one",
                   s->media_path, R->base_spec);
            err_hint(e, "set base_model: qwen2-audio-7b-instruct (dlm init --audio), or remove the section");
            goto out;
        }
    }
    probe_host(&R->host, NULL);
    {   /* training.precision: the numerics of this run (run/precision.h) */
        prec_cpu pc;
        precision_cpu_probe(&pc);
        if (precision_decide(tr->precision, &pc, &R->prec, e)) {
            size_t rl;
            const char *raw = doc_raw(R->doc, &rl);
            int line = precision_key_line(raw, rl);
            if (line) {
                char kind[sizeof e->kind], msg[sizeof e->msg], hint[sizeof e->hint];
                snprintf(kind, sizeof kind, "%s", e->kind);
                snprintf(msg, sizeof msg, "%s", e->msg);
                snprintf(hint, sizeof hint, "%s", e->hint);
                err_at(e, kind, o->doc_path, line, 3, "%s", msg);
                err_hint(e, "%s", hint);
            }
            goto out;
        }
    }
    R->threads = plan_threads(o->threads > 0 ? o->threads : (int)tr->threads, R->host.cores_usable);
    kern_init(R->threads);   /* its per-thread scratch is the plan's "runtime" item */
    progress(R, PHASE_LOADING, 0, NAN, 0, 0);
    /* the others read the store after rank 0 has created and locked it */
    if (!R->lead) (void)dist_bcast_flag(1);
    if (open_store(R, e) || (R->lead && run_check_interrupted(R, e))) goto out;
    if (R->lead) (void)dist_bcast_flag(1);
    if (vl && media_count_images(R->doc)) {
        /* the images are checked and stored (docs/images.md); Qwen2-VL
         * trains on them, the other vision towers are not built yet */
        media_ingest_stats ms;
        if (R->lead && media_ingest_images(R->doc, R->store, &ms, e)) goto out;
        if (vl_kind == VL_QWEN2 || vl_kind == VL_PALI) goto images_in;
        err_set(e, "ModalityError", "%s: %d image(s) checked and in the blob store (%d new); training on images with %s "
                "is not built yet", o->doc_path, media_count_images(R->doc), R->lead ? ms.written : 0, R->base_spec);
        err_hint(e, "docs/images.md says what works today: Qwen2-VL bases (qwen2-vl-2b-instruct) train on images");
        goto out;
    }
images_in:
    if (al && media_count_audio(R->doc)) {
        /* the clips are checked, stored and their waveforms cached, then
         * every clip's encoder rows computed (or read from the feature
         * cache): the dataset splices them at its <|AUDIO|> runs
         * (docs/audio.md) */
        media_ingest_stats ms = {0};
        media_audio_opts ao = {AUDIO_RATE, AUDIO_MAX_SECONDS, tr->audio.auto_resample};
        /* every rank computes the clips' rows (from the store rank 0 filled) */
        if (R->lead && media_ingest_audio(R->doc, R->store, &ao, &ms, e)) goto out;
        if (!R->lead && media_ingest_audio(R->doc, NULL, &ao, &ms, e)) goto out;
        int hits = 0;
        if (audio_features(R, &hits, e)) goto out;
        log_info("%d audio clip(s): %d new in the blob store, %d encoder rows (%d clip(s) from the feature cache)",
                 media_count_audio(R->doc), ms.written, R->n_aemb, hits);
    }
    if (R->defer) {
        res->no_op = res->deferred = 1;
        rc = 0;
        goto out;
    }
    if (load_base(R, e)) goto out;
    if (vl_run_grids(R, e)) goto out;   /* a Qwen2-VL base: each image's grid, before its tokens */
    if (R->P.base.cfg.vl && !vl_kind) {
        /* a hf: base found to be vision-language once fetched */
        err_set(e, "ModalityError", "%s is a vision-language model: give it as a folder path or a registry key",
                R->base_spec);
        err_hint(e, "dlm decides how to read images before it fetches a hf: base (docs/images.md)");
        goto out;
    }
    if (setup_adapter(R, e) || build_data(R, e)) goto out;
    prep_precision(&R->P, R->prec.bf16);
    R->pref = o->phase == TRAIN_PREFERENCE;
    if (R->pref && dist_size() > 1) {
        err_set(e, "MPIError", "the preference phase runs in one process (%d ranks were started)", dist_size());
        err_hint(e, "train the preference phase without mpirun: dlm train %s --phase preference", o->doc_path);
        goto out;
    }
    if (!R->pref && tr->cpt.embed_warmup_steps > 0 && run_optim_is8(tr)) {
        /* bitsandbytes would keep 8-bit block-wise state for the two whole
         * matrices; grad/optim8.h holds the adapter's layout only */
        /* the key's line in the frontmatter, for the error's file:line */
        char *txt = NULL;
        size_t len = 0;
        int line = 1, at = 0;
        if (!fs_read_all(o->doc_path, 1u << 26, &txt, &len, NULL)) {
            const char *k = strstr(txt, "embed_warmup_steps");
            for (const char *c = txt; k && c < k; c++) line += *c == '\n';
            at = k != NULL;
        }
        free(txt);
        err_at(e, "ConfigError", o->doc_path, at ? line : 1, 1, "training.cpt.embed_warmup_steps trains the embedding"
               " and LM head with 32-bit AdamW only; training.optimizer is %s", doc_optimizer_names[tr->optimizer]);
        err_hint(e, "set training.optimizer: adamw_torch, or training.cpt.embed_warmup_steps: 0");
        goto out;
    }
    if (R->pref) {
        if (pref_prepare(R, e)) goto out;
        if (R->ps->n_truncated)
            note(R, "note: %d preference pair(s) are longer than sequence_len: their completions are cut",
                 R->ps->n_truncated);
    } else if (R->P.data.ds->n_train == 0) {
        res->no_op = 1;
        note(R, "nothing to train: the document has no prose or Q/A text%s",
             R->P.data.ds->n_pref_triples ? " (preference sections wait for the preference phase)" : "");
        rc = 0;
        goto out;
    }
    if (!R->pref) note_split(R);
    if (!R->pref && R->P.data.ds->n_pref_triples && !o->phase_all)
        note(R, "note: %d preference triple(s) are kept for the preference phase; this run trains prose and Q/A (SFT)",
             R->P.data.ds->n_pref_triples);
    if (!R->pref && R->P.data.ds->train_loss_tokens < 500)
        log_warn("the document has only %lld trainable tokens (fewer than 500): expect memorisation, not learning",
                 (long long)R->P.data.ds->train_loss_tokens);
    /* the OOM guard first: nothing of the weights is mapped, hashed or
     * allocated before the plan says the run fits */
    if (plan_memory(R, e)) goto out;
    /* hosts may differ: every rank takes rank 0's batch shape (the bytes
     * depend on it), each having checked that it fits its own memory */
    R->micro_batch = R->plan.mb = dist_bcast_flag(R->micro_batch);
    R->grad_accum = dist_bcast_flag(R->grad_accum);
    if (run_lock_facts(R, e)) goto out;   /* dlm.lock records the world size too */
    if (R->lead && dlmlock_check(R->rdir, o->doc_path, &R->facts, o->lock, e)) goto out;
    if (model_load(R->model_path, &R->m, e) || replan_if_needed(R, e)) goto out;
    if (vl_run_features(R, e)) goto out;   /* the frozen tower, once per image (run/vl_run.h) */
    if (R->vl.n_images)
        note(R, "images: %d, %lld image tokens; features of %d from the vl-cache, %d computed", R->vl.n_images,
             (long long)R->vl.n_rows, R->vl_cached, R->vl.n_images - R->vl_cached);
    if (R->P.qlora) {
        if (model_quantize_projections(R->m, DT_Q4_K, e)) goto out;
        note(R, "qlora: the base's projections are trained as Q4_K (quantized in memory; for repeated runs a Q4_K"
                " GGUF base from 'dlm export' saves the conversion)");
    }
    if (R->P.bf16_base) {   /* bf16: the frozen projections as bf16, converted once (kern rounds at packing otherwise) */
        if (model_bf16_projections(R->m, e)) goto out;
        note(R, "bf16: the base's %s projections are kept as BF16 (converted once, in memory)",
             dtype_name((dtype)R->P.base.wtype));
    }
    /* A resume keeps the checkpoint's micro-batches per step, shared by
     * however many ranks continue it (N = 2 → 1 gives the same bytes). */
    if (o->resume) {
        int ga = run_ckpt_grad_accum(R);
        if (ga > 0 && ga != R->grad_accum && ga % dist_size() == 0) {
            note(R, "resume: %d micro-batches per step as the checkpoint, %d per rank on %d rank(s)", ga,
                 ga / dist_size(), dist_size());
            R->grad_accum = ga;
        }
    }
    if (allocate(R, e)) goto out;

    /* schedule */
    if (R->pref) {
        int per = R->micro_batch * R->grad_accum;
        R->steps_per_epoch = (R->ps->n_pairs + per - 1) / per;
        R->total = (int64_t)R->steps_per_epoch * tr->preference.hyperparams.num_epochs;
    } else {
        R->steps_per_epoch = dataset_steps_per_epoch(R->P.data.ds, R->micro_batch, R->grad_accum);
        R->total = (int64_t)R->steps_per_epoch * tr->num_epochs;
    }
    if (o->max_steps > 0 && o->max_steps < R->total) R->total = o->max_steps;
    /* the document's schedule, or training.cpt's DAPT one (run/cpt.h) */
    cpt_choose(tr, R->pref ? NULL : R->P.data.ds, &R->cpt);
    cpt_sft_optim(tr, &R->cpt, R->total, &R->optim);
    if (R->pref) {
        /* TRL's DPOConfig/ORPOConfig over TrainingArguments' defaults: linear
         * decay, no warmup, no weight decay; the phase's own learning rate.
         * training.cpt is not read there. */
        R->cpt.dapt = 0;
        R->cpt.embed_warmup_steps = 0;
        R->optim.lr = tr->preference.hyperparams.learning_rate;
        R->optim.weight_decay = 0;
        R->optim.warmup_ratio = 0;
        R->optim.min_lr_ratio = 0;
        R->optim.sched = SCHED_LINEAR;
    } else if (R->cpt.dapt)
        note(R, "cpt: DAPT schedule (%s; %.0f%% of the train rows are prose): cosine to a floor of %g x lr, "
                "warmup %lld of %lld steps", R->cpt.setting, 100.0 * R->cpt.fraction, R->optim.min_lr_ratio,
             (long long)optim_warmup_steps(&R->optim), (long long)R->total);
    R->save_every = tr->save_steps > 0 ? tr->save_steps : (R->total / 4 > 1 ? R->total / 4 : 1);
    /* the original's cadence (train/trainer.py _default_eval_steps): four
     * evaluations over a --max-steps run, else one every 50 steps, so that
     * early stopping (patience 3) can stop a run to num_epochs */
    R->eval_every = o->max_steps > 0 ? (R->total / 4 > 1 ? R->total / 4 : 1) : EVAL_EVERY_STEPS;
    if (o->test_eval_every > 0) R->eval_every = o->test_eval_every;
    R->best_val = INFINITY;
    R->best_loss = NAN;

    if (run_start_or_resume(R, e)) goto out;
    if (cpt_embed_step(&R->cpt, R->start_step)) {   /* a step of this run takes the embedding gradients */
        if (dist_size() > 1) {
            err_set(e, "MPIError", "training.cpt.embed_warmup_steps runs in one process (%d ranks were started)",
                    dist_size());
            err_hint(e, "train without mpirun, or set training.cpt.embed_warmup_steps: 0");
            goto out;
        }
        note(R, "cpt: embed warm-up: steps 1..%lld train the embedding and LM head%s with the LoRA weights (saved as"
                " modules_to_save; frozen afterwards)", (long long)R->cpt.embed_warmup_steps,
             R->m->cfg.tied ? " (tied: one matrix)" : "");
    }
    /* from here on every GEMM runs in the run's numerics (kern.h); reset at out */
    kern_set_bf16(R->prec.bf16);
    /* the frozen reference, once, before the first step (a resumed run read
     * it from the checkpoint) */
    if (R->pref && pref_reference(R, e)) goto out;
    if (R->lead && run_begin_records(R, e)) goto out;

    /* a stop requested while loading: nothing new to save */
    if (dist_bcast_flag(R->h && R->h->should_stop && R->h->should_stop(R->h->ctx))) {
        res->cancelled = 1;
        if (R->lead) run_end_records(R, "cancelled");
        note(R, "cancelled before step %lld; %s", (long long)R->start_step + 1,
             R->start_step ? "the checkpoint is unchanged" : "nothing was trained");
        rc = 0;
        goto out;
    }
    note(R, "precision: %s", R->prec.how);
    /* the first step of a big model takes minutes: say that it started */
    progress(R, PHASE_TRAINING, R->start_step, NAN, 0, 0);
    int64_t tokens = 0;
    double t_last = time_mono();
    for (int64_t step = R->start_step; step < R->total; step++) {
        double loss = 0, gn = 0;
        int64_t nt = 0;
        if (do_step(R, step, &loss, &gn, &nt, e)) goto out_fail;
        if (!isfinite(loss)) {
            err_set(e, "NaNLossError", "the loss became %g at step %lld", loss, (long long)step + 1);
            err_hint(e, "lower training.learning_rate; the last checkpoint is kept");
            goto out_fail;
        }
        if (!R->have_first) {   /* the run's first loss: a resumed run kept it in progress.json */
            R->first_loss = loss;
            R->have_first = 1;
        }
        R->last_loss = loss;
        tokens += nt;
        double now = time_mono(), dt = now - t_last > 1e-9 ? now - t_last : 1e-9, tps = (double)nt / dt;
        t_last = now;
        R->steps_done = step + 1;
        if (R->lead) run_log_step(R, step + 1, loss, gn, tps, dt);
        if (R->lead && metrics_check(R->met, e)) goto out_fail;   /* --strict-metrics */
        progress(R, PHASE_TRAINING, step + 1, loss, R->last_lr, tps);
        if ((step + 1) % R->eval_every == 0 || step + 1 == R->total) {
            if (R->P.data.ds->n_val && !R->pref) {
                progress(R, PHASE_EVALUATING, step + 1, loss, R->last_lr, tps);
                /* every rank holds the same weights: rank 0 evaluates, the
                 * others take its figure (early stopping agrees) */
                R->last_val = dist_bcast_f64(R->lead ? evaluate(R) : 0);
                if (R->lead) run_log_eval(R, step + 1, R->last_val);
                if (R->lead && metrics_check(R->met, e)) goto out_fail;
                /* transformers' EarlyStoppingCallback, threshold 0: a
                 * strictly lower loss is an improvement, anything else
                 * counts against the patience; at the patience the run
                 * stops and commits the best evaluation's weights */
                if (R->last_val < R->best_val) {
                    R->best_val = R->last_val;
                    R->best_step = step + 1;
                    R->best_loss = loss;
                    R->bad_evals = 0;
                    memcpy(R->best, R->l->w, R->l->n * sizeof(float));
                    run_embed_keep_best(R);
                } else if (++R->bad_evals >= EARLY_STOP_PATIENCE) {
                    if (step + 1 < R->total)
                        note(R, "early stop at step %lld of %lld: the validation loss has not improved for %d"
                                " evaluations (best %.4f at step %lld, whose weights are committed)",
                             (long long)step + 1, (long long)R->total, EARLY_STOP_PATIENCE, R->best_val,
                             (long long)R->best_step);
                    else
                        note(R, "the validation loss has not improved for %d evaluations: the best (%.4f at step"
                                " %lld) is committed", EARLY_STOP_PATIENCE, R->best_val, (long long)R->best_step);
                    R->early = 1;
                    break;
                }
            }
        }
        int stop = dist_bcast_flag(R->h && R->h->should_stop && R->h->should_stop(R->h->ctx));
        if (step + 1 < R->total && ((step + 1) % R->save_every == 0 || stop)) {
            progress(R, PHASE_SAVING, step + 1, loss, R->last_lr, tps);
            if (R->lead && run_checkpoint(R, step + 1, e)) goto out_fail;
        }
        /* Test hook: die like a killed process right after this step (and
         * its checkpoint), to prove that --resume recovers exactly. */
        if (o->test_crash_after_step > 0 && step + 1 == o->test_crash_after_step) raise(SIGKILL);
        /* Test hook: slow steps down so a test can signal a run mid-way
         * (timing only; the numbers are untouched). */
        if (o->test_step_delay_ms > 0 && o->test_step_delay_ms <= 60000) usleep((useconds_t)o->test_step_delay_ms * 1000u);
        if (stop && step + 1 < R->total) {
            res->cancelled = 1;
            if (R->lead) run_end_records(R, "cancelled");
            note(R, "cancelled after step %lld/%lld; checkpoint saved: continue with 'dlm train %s --resume'",
                 (long long)(step + 1), (long long)R->total, o->doc_path);
            rc = 0;
            goto out;
        }
    }
    (void)tokens;
    progress(R, PHASE_SAVING, R->steps_done, R->last_loss, R->last_lr, 0);
    if (R->lead && run_commit(R, e)) goto out_fail;
    if (R->lead && R->cache) {   /* training.cache's bounds, after the run that used it */
        const doc_training *trc = &doc_fm(R->doc)->training;
        dlm_err pe;
        err_clear(&pe);
        int64_t removed, freed;
        if (tcache_prune(R->store, (double)trc->cache.prune_older_than_days * 86400.0, trc->cache.max_bytes, &removed,
                         &freed, &pe))
            note(R, "warning: tokenization cache not pruned: %s", pe.msg);
    }
    if (R->lead) run_log_memory(R);
    rc = 0;
    goto out;
out_fail:
    if (R->lead) run_end_records(R, "failed");
out:
    if (!rc || R->version) {
        res->version = R->version;
        res->steps = R->steps_done;
        res->total = R->total;
        res->first_loss = R->first_loss;
        /* what the version holds (run_commit): the best evaluation's step
         * after early stopping, else the last step */
        res->committed_step = R->version ? R->commit_step : R->steps_done;
        res->final_loss = R->version ? R->commit_loss : R->last_loss;
        res->val_loss = R->version ? R->commit_val
                        : R->P.data.ds && R->P.data.ds->n_val && !R->pref ? R->last_val : NAN;
        res->early_stopped = R->early;
        if (R->P.data.ds && !R->pref) {
            const dataset *ds = R->P.data.ds;
            res->val_frac = ds->n_val ? ds->val_frac : 0;
            res->held_out = ds->val_text_rows + ds->val_msg_rows;
            res->rows = ds->rows_prose + ds->rows_instr + ds->rows_image;
        }
        res->run_id = R->run_id;
        res->phase = pref_phase_name(R);
        res->rewards_margin = R->rw_margin;
        res->rewards_accuracy = R->rw_acc;
        snprintf(res->log_path, sizeof res->log_path, "%s", R->log_path);
        snprintf(res->version_dir, sizeof res->version_dir, "%s", R->version_dir);
    }
    kern_set_bf16(0);
    res->seconds = time_mono() - R->t0;
    if (R->started && h && h->finished) {
        train_outcome out = {.status = rc ? "failed" : res->cancelled ? "cancelled" : "completed",
                             .exit_code = rc ? (e->code ? e->code : 1) : res->cancelled ? 130 : 0,
                             .err = rc ? e : NULL, .version = R->version, .steps = R->steps_done, .total = R->total,
                             .result = res};
        h->finished(h->ctx, &out);
    }
    for (int i = 0; R->gpart && i < R->n_gpart; i++) free(R->gpart[i]);
    free(R->gpart);
    free(R->gscal);
    run_free(R);
    kern_fp_flush_leave(fpm);
    return rc;
}
