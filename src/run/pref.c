/* pref — the preference phase of `dlm train`: DPO (sigmoid, hinge, ipo)
 * and ORPO over the document's preference triples, as TRL computes them
 * (docs/reference/original-spec.md §3.7; docs/training.md).
 *
 * A pair is two rows of one pass: its chosen and its rejected sequence
 * (tokens/dataset.h pref_build). A completion's log-probability is minus
 * the sum of its assistant-turn NLL. The loss is a function of those sums,
 * so one forward + one backward per pass suffices: the backward's head
 * calls back with every position's NLL and takes dL/dnll per row
 * (grad/backward.h backward_step_rows).
 *
 * With z = (πc − πr) − (ρc − ρr) (policy and reference log-probs):
 *   sigmoid  −log σ(β z)        hinge  max(0, 1 − β z)
 *   ipo      (z − 1/(2β))², log-probs averaged over completion tokens
 *   orpo     NLL(chosen) − β log σ(log odds(πc) − log odds(πr)), log-probs
 *            averaged, odds(p) = p/(1 − p), no reference; β = hyperparams.alpha
 * A step's loss is the mean over its pairs (ORPO's NLL: the mean over the
 * step's chosen completion tokens). rewards/chosen = β(πc − ρc),
 * rewards/rejected = β(πr − ρr) (ORPO: β πc, β πr), margins their
 * difference, accuracies the share with chosen > rejected. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter/adapter.h"
#include "grad/backward.h"
#include "grad/optim.h"
#include "grad/pref_loss.h"
#include "run/run.h"
#include "util/fs.h"
#include "util/json.h"

#define PREF(R) (&doc_fm((R)->doc)->training.preference)

const char *pref_phase_name(const run *R)
{
    if (!R->pref) return "sft";
    return PREF(R)->method == DOC_PREF_ORPO ? "orpo" : "dpo";
}

static int is_orpo(const run *R) { return PREF(R)->method == DOC_PREF_ORPO; }
/* IPO and ORPO compare per-token averages (TRL), sigmoid/hinge sums */
static double beta_of(const run *R) { return is_orpo(R) ? PREF(R)->hyperparams.alpha : PREF(R)->hyperparams.beta; }

int pref_prepare(run *R, dlm_err *e)
{
    /* past preference sections of the store's replay corpus join the
     * document's (the original's sample_preference_rows), drawn with the
     * seed + the prior version as the SFT replay */
    pref_replay_in rin = {.seed = R->seed + (uint64_t)R->prev_version, .run_id = R->run_id};
    int use_replay = !R->o->no_replay && doc_fm(R->doc)->training.replay.enabled;
    if (prep_pref_replay(&R->P, R->doc, R->seed, R->o->no_mined, use_replay ? &rin : NULL, &R->ps, e)) return -1;
    R->pref_replay_sections = rin.n_sections;
    if (R->ps->n_pairs == R->ps->n_replay && R->ps->n_replay) {
        /* the document has none of its own: replay alone is not a phase */
        err_set(e, "NoPreferenceContentError", "%s has no preference sections: the preference phase has nothing to"
                " train on", R->o->doc_path);
        return err_hint(e, "add a ::preference:: section with ### Prompt / ### Chosen / ### Rejected, or train with"
                        " --phase sft");
    }
    if (R->ps->n_pairs == 0) {
        err_set(e, "NoPreferenceContentError", "%s has no preference sections: the preference phase has nothing to"
                " train on", R->o->doc_path);
        return err_hint(e, "add a ::preference:: section with ### Prompt / ### Chosen / ### Rejected, or train with"
                        " --phase sft");
    }
    if (!is_orpo(R) && PREF(R)->reference == DOC_REF_PRE_ADAPTER && R->prev_version <= 0 && !R->o->resume) {
        err_set(e, "PriorAdapterRequiredError", "--phase dpo requires a prior SFT adapter version on disk; run `dlm"
                " train --phase sft` first");
        if (R->o->phase_all)   /* the SFT phase ran just before and had nothing to train */
            return err_hint(e, "%s has no prose or Q/A for an SFT version to be the DPO reference: set training."
                            "preference.reference: base (or method: orpo), or add prose or ::instruction:: sections",
                            R->o->doc_path);
        return err_hint(e, "run 'dlm train %s --phase sft' first (or --phase all), or set training.preference."
                        "reference: base", R->o->doc_path);
    }
    return 0;
}

int pref_init_policy(run *R, dlm_err *e)
{
    if (lora_init(R->l, R->m, R->seed, e)) return -1;
    if (R->prev_version <= 0) return 0;
    char vdir[4400], vn[16];
    store_version_name(R->prev_version, vn, sizeof vn);
    snprintf(vdir, sizeof vdir, "%s/versions/%s", R->adir, vn);
    lora *prev = NULL;
    if (adapter_load(vdir, R->m, &prev, e)) return -1;
    if (prev->n != R->l->n) {
        lora_free(prev);
        err_set(e, "AdapterMismatchError", "%s has %zu adapter parameters, the document's adapter has %zu", vn,
                prev->n, R->l->n);
        return err_hint(e, "the adapter settings changed since %s: train SFT again with 'dlm train %s --phase sft'",
                        vn, R->o->doc_path);
    }
    memcpy(R->l->w, prev->w, R->l->n * sizeof(float));
    lora_take_embeddings(R->l, prev);   /* modules_to_save stay with the adapter, frozen (docs/cpt.md) */
    lora_free(prev);
    return 0;
}

int pref_reference(run *R, dlm_err *e)
{
    if (is_orpo(R) || R->have_ref) return 0;
    int n = R->ps->n_pairs;
    float *saved = NULL;
    if (PREF(R)->reference == DOC_REF_BASE) {
        /* the base alone: a fresh adapter (B = 0, DoRA magnitudes = the
         * weights' norms) adds exactly nothing */
        saved = malloc(R->l->n * sizeof(float));
        if (!saved) return err_set(e, "MemoryError", "out of memory");
        memcpy(saved, R->l->w, R->l->n * sizeof(float));
        if (lora_init(R->l, R->m, R->seed, e)) { free(saved); return -1; }
    }
    /* the base alone has the base's embedding and head: the adapter's
     * modules_to_save are set aside for the reference pass */
    float *embd = R->l->embd;
    if (saved) R->l->embd = NULL;
    for (int i0 = 0; i0 < n; i0 += R->micro_batch) {
        int c = n - i0 < R->micro_batch ? n - i0 : R->micro_batch;
        for (int i = 0; i < c; i++) R->pairs[i] = i0 + i;
        token_batch b;
        int64_t got;
        pref_fill(R->ps, R->pairs, c, R->T, R->btok, R->btgt, R->bpos, R->bseg, &b);
        decoder_loss(R->dec, &b, R->nll, NULL, &got);
        for (int i = 0; i < c; i++) {
            int k;
            R->ref_c[i0 + i] = pref_row_logp(&b, R->nll, 2 * i, &k);
            R->ref_r[i0 + i] = pref_row_logp(&b, R->nll, 2 * i + 1, &k);
        }
    }
    if (saved) {
        memcpy(R->l->w, saved, R->l->n * sizeof(float));
        free(saved);
    }
    R->l->embd = embd;
    R->have_ref = 1;
    return 0;
}

static pref_kind kind_of(const run *R)
{
    if (is_orpo(R)) return PREF_ORPO;
    return PREF(R)->loss_type == DOC_LOSS_HINGE ? PREF_HINGE : PREF(R)->loss_type == DOC_LOSS_IPO ? PREF_IPO
                                                                                                : PREF_SIGMOID;
}

typedef struct pass_ctx { run *R; int n; double w, nll_w; pref_stats st; } pass_ctx;

/* dL/dnll for every position of one pass (grad/pref_loss.h), the pass's
 * pairs' reference values gathered first */
static void pass_rows(void *ctx, const token_batch *b, const float *nll, float *scale)
{
    pass_ctx *pc = ctx;
    run *R = pc->R;
    for (int i = 0; i < pc->n && !is_orpo(R); i++) {
        R->pass_rc[i] = R->ref_c[R->pairs[i]];
        R->pass_rr[i] = R->ref_r[R->pairs[i]];
    }
    pref_pass(kind_of(R), beta_of(R), b, nll, pc->n, R->pass_rc, R->pass_rr, pc->w, pc->nll_w, scale, &pc->st,
              NULL, NULL);
}

int pref_step(run *R, int64_t step, double *loss, double *gnorm, int64_t *ntok, dlm_err *e)
{
    int spe = R->steps_per_epoch, ep = (int)(step / spe), st = (int)(step % spe);
    int npairs = 0;
    int64_t chosen_tokens = 0;
    for (int mi = 0; mi < R->grad_accum; mi++) {
        int c = pref_micro_pairs(R->ps, R->seed, ep, st, mi, R->micro_batch, R->grad_accum, R->pairs);
        npairs += c;
        for (int i = 0; i < c; i++) chosen_tokens += R->ps->pairs[R->pairs[i]].c.n_loss;
    }
    memset(R->g, 0, R->l->n * sizeof(float));
    *ntok = 0;
    /* ORPO's NLL: the mean over the step's chosen completion tokens */
    pass_ctx pc = {.R = R, .w = npairs ? 1.0 / npairs : 0,
                   .nll_w = is_orpo(R) && chosen_tokens ? 1.0 / (double)chosen_tokens : 0};
    bwd_rows rw = {.fn = pass_rows, .ctx = &pc, .nll = R->nll, .scale = R->scale};
    for (int mi = 0; mi < R->grad_accum && npairs; mi++) {
        int c = pref_micro_pairs(R->ps, R->seed, ep, st, mi, R->micro_batch, R->grad_accum, R->pairs);
        if (c <= 0) continue;
        token_batch b;
        int64_t got;
        pc.n = c;
        pref_fill(R->ps, R->pairs, c, R->T, R->btok, R->btgt, R->bpos, R->bseg, &b);
        backward_step_rows(R->dec, &b, R->g, R->seed, (uint64_t)step * (uint64_t)R->grad_accum + (uint64_t)mi,
                           &rw, &got);
        *ntok += (int64_t)b.B * b.T;
    }
    if (!npairs) return err_set(e, "TrainError", "preference step %lld has no pairs", (long long)step + 1);
    *loss = pc.st.loss;
    R->rw_chosen = pc.st.chosen / npairs;
    R->rw_rejected = pc.st.rejected / npairs;
    R->rw_margin = R->rw_chosen - R->rw_rejected;
    R->rw_acc = pc.st.acc / npairs;
    *gnorm = optim_clip(R->g, R->l->n, R->optim.max_grad_norm);
    double lr = optim_lr_at(&R->optim, step);
    run_optim_step(R, lr, R->t_offset + step + 1);
    R->last_lr = lr;
    return 0;
}

/* reference_logps.json in a checkpoint: the frozen reference's values,
 * written with 17 significant digits, so they read back bit for bit. */
int pref_save_ref(const run *R, const char *dir, dlm_err *e)
{
    if (!R->pref || is_orpo(R) || !R->have_ref) return 0;
    char p[4600];
    snprintf(p, sizeof p, "%s/reference_logps.json", dir);
    json_t *c = json_array(), *r = json_array();
    for (int i = 0; i < R->ps->n_pairs; i++) {
        json_array_append_new(c, json_real(R->ref_c[i]));
        json_array_append_new(r, json_real(R->ref_r[i]));
    }
    json_t *o = json_pack("{s:s, s:i, s:o, s:o}", "reference", doc_pref_reference_names[PREF(R)->reference],
                          "pairs", R->ps->n_pairs, "chosen", c, "rejected", r);
    int rc = json_save_file(p, o, e);
    json_decref(o);
    return rc;
}

int pref_load_ref(run *R, const char *dir, dlm_err *e)
{
    if (!R->pref || is_orpo(R)) return 0;
    char p[4600];
    snprintf(p, sizeof p, "%s/reference_logps.json", dir);
    json_t *o = json_load_path(p, 64u << 20, e);
    if (!o) return err_prefix(e, "the checkpoint's reference log-probs"), -1;
    json_t *c = json_object_get(o, "chosen"), *r = json_object_get(o, "rejected");
    const char *ref = jget_str(o, "reference");
    int n = R->ps->n_pairs, ok = json_is_array(c) && json_is_array(r) && (int)json_array_size(c) == n &&
                                 (int)json_array_size(r) == n && ref &&
                                 !strcmp(ref, doc_pref_reference_names[PREF(R)->reference]);
    for (int i = 0; ok && i < n; i++) {
        json_t *a = json_array_get(c, (size_t)i), *b = json_array_get(r, (size_t)i);
        ok = json_is_number(a) && json_is_number(b);
        if (ok) {
            R->ref_c[i] = json_number_value(a);
            R->ref_r[i] = json_number_value(b);
        }
    }
    json_decref(o);
    if (!ok) {
        err_set(e, "ResumeIntegrityError", "%s does not match this document's %d preference pairs and reference", p, n);
        return err_hint(e, "start over with 'dlm train %s --phase preference --fresh'", R->o->doc_path);
    }
    R->have_ref = 1;
    return 0;
}

void pref_free_run(run *R)
{
    pref_free(R->ps);
    free(R->ref_c);
    free(R->ref_r);
    free(R->nll);
    free(R->scale);
    free(R->pairs);
    free(R->pass_rc);
    free(R->pass_rr);
}
