/* trainer — `dlm train`: a document in, a committed adapter version out.
 *
 *   parse → store + lock → base → tokenizer → replay sample → dataset →
 *   memory plan (OOM guard, before weights are touched) → adapter init or
 *   resume → steps (checkpoints every save_steps, evals, early stopping) →
 *   commit adapter/versions/vNNNN (PEFT files + training_state.bin) →
 *   current.txt → replay corpus, manifest, dlm.lock, metrics, summary.
 *
 * The library prints nothing; progress goes through the hooks, so the
 * command layer owns the terminal. */
#ifndef DLM_TRAINER_H
#define DLM_TRAINER_H

#include <stddef.h>
#include <stdint.h>
#include "store/dlmlock.h"
#include "util/err.h"

typedef enum { PHASE_LOADING, PHASE_TRAINING, PHASE_EVALUATING, PHASE_SAVING, PHASE_DONE } train_phase;
/* "loading", "training", "evaluating", "saving", "done" */
const char *train_phase_name(train_phase p);

typedef struct train_progress {
    train_phase phase;
    int64_t step, total;          /* optimizer steps */
    double loss, val_loss;        /* val_loss NaN when none yet */
    double lr, tokens_per_sec, elapsed, eta;
    int version;                  /* committed version (PHASE_DONE) */
    int64_t run_id;               /* 0 until the store is open */
    const char *log_path;         /* the run's JSONL log, NULL until it is open */
    const char *run_phase;        /* "sft", "dpo", "orpo" */
    const char *adapter;          /* the training.adapters name trained, NULL for the document's one adapter */
    double rewards_margin, rewards_accuracy;   /* preference phases: the step's means (NaN before) */
} train_progress;

/* How a run ended, for the exit record (`finished` hook). */
typedef struct train_outcome {
    const char *status;           /* "completed", "failed", "cancelled" */
    int exit_code;                /* what `dlm train` exits with */
    const dlm_err *err;           /* the error when failed, else NULL */
    int version;                  /* committed version, 0 none */
    int64_t steps, total;
    const struct train_result *result;   /* what train_summary formats (completed SFT runs) */
} train_outcome;

/* Early stopping and evaluation (the original's EarlyStoppingCallback with
 * patience 3, threshold 0, and its eval cadence). */
#define EARLY_STOP_PATIENCE 3
#define EVAL_EVERY_STEPS 50

typedef struct train_hooks {
    void *ctx;
    void (*progress)(void *ctx, const train_progress *p);
    void (*note)(void *ctx, const char *msg);          /* a plain line for the user */
    int (*should_stop)(void *ctx);                     /* SIGINT/SIGTERM: finish step, checkpoint, stop */
    /* The store is locked for this run: run files (pid, heartbeat) may be
     * written under store from now on. */
    void (*started)(void *ctx, const char *store, int64_t run_id);
    /* The run is over; called while the store is still locked, so nothing
     * can start in between (only after `started`). */
    void (*finished)(void *ctx, const train_outcome *o);
} train_hooks;

/* Which phase a train_run trains (`dlm train --phase`; `all` is the
 * command running SFT, then the preference phase). */
typedef enum { TRAIN_SFT = 0, TRAIN_PREFERENCE } train_which;

typedef struct train_opts {
    const char *doc_path;
    train_which phase;
    int phase_all;                  /* part of --phase all: an SFT run under --resume steps aside for a
                                     * preference checkpoint; the SFT note knows the preference phase follows */
    const char *home;               /* resolved DLM home */
    int resume, fresh;              /* mutually exclusive (checked by the command) */
    int need_ckpt;                  /* with resume (`--resume`): a checkpoint must be there; without it
                                     * (`--continue`, --watch's retrains) no checkpoint continues the
                                     * current version (its weights and optimizer state, a new schedule) */
    int64_t max_steps;              /* 0 = from epochs */
    int64_t seed;                   /* -1 = the document's training.seed */
    int threads;                    /* 0 = training.threads or all cores */
    lock_mode lock;
    int no_replay;
    uint64_t max_memory;            /* 0 = host budget */
    int force;                      /* train even if the plan says it does not fit */
    const char *base_override;      /* NULL = the document's base_model */
    int offline;                    /* no downloads */
    int no_mined;                   /* leave auto-mined preference sections out */
    int no_cache;                   /* tokenize every section (training.cache off for this run) */
    int same_store;                 /* --same-store: train a store another document (same dlm_id) owns */
    int strict_metrics;             /* a metrics.sqlite row that cannot be written fails the run */
    const char *adapter;            /* a name of training.adapters: train that adapter on its routed sections
                                     * into adapter/<name>/ (required when the document declares adapters) */
    /* sections this run adds to the document in memory, after those of the
     * file (`dlm train --listen-rpc`: the cycle's injected probes, fields as
     * doc_append_section reads them); the file is not written. injected:
     * their record for training_run.json ("injected_probes"), or NULL. */
    const struct doc_section *extra;
    int n_extra;
    const struct json_t *injected;
    /* Test hooks (the command layer reads them from the environment):
     * die like a killed process right after this step and its checkpoint;
     * sleep this long after each step so a test can signal a run mid-way. */
    int64_t test_crash_after_step;
    int test_step_delay_ms;
    int test_eval_every;            /* evaluate every N steps instead of the cadence (a test of early
                                     * stopping in a few steps) */
} train_opts;

typedef struct train_result {
    int version;                    /* committed version, 0 when none */
    int no_op;                      /* nothing to train */
    int deferred;                   /* --resume found a preference checkpoint: this SFT run did nothing */
    const char *phase;              /* "sft", "dpo" or "orpo" */
    double rewards_margin, rewards_accuracy;   /* preference: the last step's rewards/margins, accuracies */
    int cancelled;                  /* stopped by a signal after a checkpoint */
    int early_stopped;
    int64_t steps, total;           /* steps run (an early stop ends before total) */
    int64_t committed_step;         /* the step whose weights the version holds (the best evaluation's
                                     * after early stopping) */
    double first_loss;              /* the run's first step's loss (a resumed run's too) */
    double final_loss, val_loss;    /* the committed step's loss and validation loss (NaN: none) */
    double seconds;
    /* SFT: the validation split (issue 30): the fraction used (0 none),
     * the rows held out of training, the document's rows */
    double val_frac;
    int held_out, rows;
    int64_t run_id;
    char log_path[4096];
    char version_dir[4096];
} train_result;

int train_run(const train_opts *o, const train_hooks *h, train_result *r, dlm_err *e);

/* The summary line of a completed SFT run, one text for `dlm train`'s last
 * line and the exit record `dlm status` shows:
 *   "trained v0001: 60 steps, loss 6.343 → 0.437 (val 4.514)"
 *   "trained v0001: stopped early at step 525 of 1500, committed step 375: loss 6.343 → 0.712 (val 5.243)"
 *   "trained v0001: 1500 steps, committed step 1350 (the best validation loss): loss ..." (the patience
 *     ran out at the last evaluation)
 *   "... (no validation: every row trained)" */
void train_summary(const train_result *r, char *out, size_t cap);

#endif
