/* run — the private state of one `dlm train` run, shared by trainer.c (the
 * loop) and commit.c (checkpoints, the version commit, the records). */
#ifndef DLM_RUN_H
#define DLM_RUN_H

#include <stdio.h>
#include <jansson.h>

#include "tokens/chat.h"
#include "tokens/dataset.h"
#include "tokens/replay.h"
#include "doc/doc.h"
#include "run/cpt.h"
#include "run/plan.h"
#include "run/precision.h"
#include "run/prepare.h"
#include "run/probe.h"
#include "weights/model.h"
#include "store/dlmlock.h"
#include "store/metrics.h"
#include "weights/registry.h"
#include "store/store.h"
#include "tokens/tok.h"
#include "decoder/decoder.h"
#include "decoder/lora.h"
#include "grad/optim.h"
#include "run/trainer.h"
#include "util/str.h"

typedef struct run {
    const train_opts *o;
    const train_hooks *h;
    double t0;
    dlm_doc *doc;
    const char *base_spec;
    uint64_t seed;
    int packing;
    char store[4096], manifest_path[4200];
    /* the adapter's tree: <store>/adapter, or <store>/adapter/<name> for a
     * named adapter (versions/, checkpoints/, current.txt); rdir holds its
     * replay/ and dlm.lock: the store itself when flat, adir when named */
    const char *aname;              /* train_opts.adapter: NULL flat */
    char adir[4200], rdir[4200];
    store_lock lk;
    json_t *manifest;
    int64_t run_id;
    int prev_version, version;
    base_ref base;
    char model_path[4096];
    prep P;                         /* tokenizer, base shape, dialect, adapter config, data (run/prepare.h) */
    model *m;
    lora *l;
    float *g, *mom, *vel, *best;    /* gradients, AdamW moments (32-bit only), best weights (adapter layout) */
    struct optim8 *o8;              /* the 8-bit AdamW state (training.optimizer adamw_bnb_8bit/paged_adamw_8bit) */
    prec_choice prec;               /* training.precision as decided for this run (run/precision.h) */
    plan plan;
    plan_in plan_in;                /* what the plan was made from (replan after load) */
    host_info host;
    int threads, started;
    strbuf ckbuf;                   /* checkpoint serialisation, reserved before step 1 */
    int micro_batch, grad_accum, T, steps_per_epoch;   /* the plan's batch shape; T = longest item */
    decoder *dec;
    int32_t *btok, *btgt, *bpos, *bseg;
    /* an audio document (vision/audio_feat.h): every clip's encoder rows in
     * document order (n_aemb rows of d_model), each section's count, the
     * <|AUDIO|> id, and the batch's embed_row buffer */
    float *aemb;
    int n_aemb;
    int32_t *antok, audio_token, *bemb;
    /* a Qwen2-VL base (run/vl_run.h): the images, their features, the
     * batches' splice buffers; vl.images NULL on a text base */
    ds_vl vl;
    ds_image *vl_images;
    float *vl_feat;
    int32_t *brow, *bpos3, *bprefix;   /* bprefix [micro_batch]: PaliGemma's prefix-LM blocks */
    int vl_cached;                  /* images whose features came from the vl-cache */
    int *items;
    optim_config optim;
    int64_t total, start_step, steps_done, t_offset, save_every, eval_every, best_step;
    double first_loss, last_loss, last_val, best_val, last_lr;
    double best_loss;               /* the training loss of the best evaluation's step */
    int have_first;                 /* first_loss is the run's (from step 1, or a checkpoint's progress.json) */
    /* what the committed version is (run_commit): the step whose weights it
     * holds (the best evaluation's after early stopping), that step's loss
     * and validation loss; train's summary, the exit record `dlm status`
     * reads, the manifest, the summary file and metrics' run_results say
     * these (issue 30) */
    int64_t commit_step;
    double commit_loss, commit_val;
    int64_t step_rows;             /* sequences (packed rows) in this rank's micro-batches of the step: the log's "rows" */
    int bad_evals, early, resumed;
    int defer;                      /* --phase all --resume: the checkpoint is the preference phase's */
    lock_facts facts;
    char dlm_sha[65], weights_sha[65], revision[128], started_at[24], data_sig[65];
    char log_path[4096], version_dir[4096];
    FILE *log;
    metrics *met;
    struct tcache *cache;           /* training.cache, unless --no-cache */
    char tok_sha[65];
    /* the preference phase (run/pref.c) */
    int pref;                       /* this run trains preference pairs (DPO or ORPO) */
    pref_set *ps;
    int pref_replay_sections;       /* of ps's pairs, ps->n_replay come from these replayed sections */
    double *ref_c, *ref_r;          /* [n_pairs] the frozen reference's completion log-probs (DPO) */
    int have_ref;                   /* ref_c/ref_r hold values (computed, or read from the checkpoint) */
    float *nll, *scale;             /* [rows·T] per-position NLL and dL/dnll of one pass */
    int *pairs;                     /* [micro_batch] the pass's pair indices */
    double *pass_rc, *pass_rr;      /* [micro_batch] one pass's reference values */
    double rw_chosen, rw_rejected, rw_margin, rw_acc;   /* the last step's means (TRL's rewards/...) */
    /* data-parallel (run/dist.h): this rank's micro-batch gradients, one
     * buffer each (one in all with a single process), and their
     * (loss, tokens) pairs; lead = rank 0, the one that writes */
    float **gpart;
    double *gscal;
    int n_gpart, lead;
    /* training.cpt (run/cpt.h): the schedule chosen; the embed warm-up's
     * gradients ([vocab·C] each; head NULL when tied), allocated only when
     * a step of this run needs them */
    cpt_choice cpt;
    float *emb_g, *head_g;
    float *emb_m, *emb_v;           /* their AdamW moments ([1 or 2][vocab·C], the head's second) */
    float *emb_best;                /* the matrices at the best evaluation (with R->best), same layout */
} run;

/* run/embed.c: training.cpt.embed_warmup_steps trains the adapter's
 * modules_to_save copies of embed_tokens / lm_head (docs/cpt.md) */
int run_embed_alloc(run *R, dlm_err *e);        /* f32 copies, gradients, moments */
void run_embed_zero_grads(run *R);
double run_embed_sumsq(const run *R);           /* Σ g² of both matrices (the clip norm's share) */
void run_embed_step(run *R, double norm, double lr, int64_t step);   /* clip as the step, then AdamW */
void run_embed_keep_best(run *R);               /* a new best evaluation: copy the matrices */
void run_embed_restore_best(run *R);            /* early stopping: back to them */
int run_embed_save(const run *R, const char *dir, dlm_err *e);       /* a checkpoint's embed_state.safetensors */
int run_embed_load(run *R, const char *dir, dlm_err *e);
/* A committed version's modules_to_save (continuing it), if it has any. */
int run_embed_from_version(run *R, const char *vdir, dlm_err *e);

/* run/pref.c */
const char *pref_phase_name(const run *R);   /* "sft", "dpo" or "orpo" */
int pref_prepare(run *R, dlm_err *e);         /* the pairs; NoPreferenceContentError, PriorAdapterRequiredError */
int pref_init_policy(run *R, dlm_err *e);     /* policy = the current version's adapter (fresh when none) */
int pref_reference(run *R, dlm_err *e);       /* the reference log-probs, once (DPO) */
int pref_step(run *R, int64_t step, double *loss, double *gnorm, int64_t *ntok, dlm_err *e);
int pref_save_ref(const run *R, const char *dir, dlm_err *e);
int pref_load_ref(run *R, const char *dir, dlm_err *e);
void pref_free_run(run *R);

/* run/optstate.c: the optimizer of training.optimizer (32-bit or 8-bit
 * AdamW), its buffers, step and checkpoint state */
struct train_state;
int run_optim_is8(const doc_training *tr);
int run_optim_create(run *R, dlm_err *e);
void run_optim_step(run *R, double lr, int64_t t);
void run_optim_fill_state(const run *R, struct train_state *s);
/* Refuses a state of the other kind (ResumeIntegrityError naming both). */
int run_optim_restore(run *R, const struct train_state *st, const char *path, dlm_err *e);
size_t run_optim_state_bytes(const run *R);   /* the whole training_state.bin */
void run_optim_free(run *R);

int run_check_interrupted(run *R, dlm_err *e);
/* `--resume` (need_ckpt) with no checkpoint: ResumeError "nothing to resume:
 * the last run completed as vNNNN" (or "no run has started yet"), with a
 * hint naming a plain train and --continue; 0 otherwise. */
int run_check_resumable(run *R, dlm_err *e);
int run_lock_facts(run *R, dlm_err *e);
int run_start_or_resume(run *R, dlm_err *e);
/* The micro-batches per step (all ranks together) of the newest
 * checkpoint, 0 when none: a resume keeps them whatever the rank count. */
int run_ckpt_grad_accum(run *R);
int run_begin_records(run *R, dlm_err *e);
void run_log_step(run *R, int64_t step, double loss, double grad_norm, double tps, double step_s);
void run_log_eval(run *R, int64_t step, double val);
int run_checkpoint(run *R, int64_t step, dlm_err *e);
int run_commit(run *R, dlm_err *e);
/* run/ptstate.c: the original's training_state.pt (+ .sha256,
 * training_state.rng.json, pinned_versions.json) in a version folder */
int run_write_torch_state(run *R, const char *dir, const struct train_state *s, int use_qlora, dlm_err *e);
void run_end_records(run *R, const char *status);
/* {"type":"memory"} line: the plan's total and the measured peak RSS. */
void run_log_memory(run *R);
void run_free(run *R);

#endif
