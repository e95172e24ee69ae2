/* metrics — per-step training metrics in <store>/metrics.sqlite (WAL), the
 * original's tables (docs/reference/original-spec.md §8): runs, steps, evals. Run start/end writes are
 * hard failures; step rows are batched into transactions that commit at
 * least every few seconds, so a crash loses at most those. */
#ifndef DLM_METRICS_H
#define DLM_METRICS_H

#include <stdint.h>
#include "util/err.h"

typedef struct metrics metrics;

int metrics_open(const char *store, metrics **out, dlm_err *e);
void metrics_close(metrics *m);   /* commits pending rows */
int metrics_run_start(metrics *m, int64_t run_id, const char *started_at, int adapter_version,
                      const char *phase, int64_t seed, dlm_err *e);
int metrics_run_end(metrics *m, int64_t run_id, const char *ended_at, const char *status,
                    int adapter_version, dlm_err *e);
/* A completed run's result (table run_results): the committed step, the
 * steps run, the run's first loss, the committed step's loss and
 * validation loss (NaN: none), whether early stopping ended it. */
int metrics_run_result(metrics *m, int64_t run_id, int64_t committed_step, int64_t steps, double first_loss,
                       double final_loss, double val_loss, int early_stopped, dlm_err *e);
void metrics_step(metrics *m, int64_t run_id, int64_t step, double loss, double lr, double grad_norm,
                  double tokens_per_sec, const char *at);
void metrics_pref_step(metrics *m, int64_t run_id, int64_t step, double chosen, double rejected, double margins,
                       double accuracies);
void metrics_eval(metrics *m, int64_t run_id, int64_t step, double val_loss, const char *at);
void metrics_flush(metrics *m);
/* `train --strict-metrics`: a step/eval row or commit that fails to write
 * makes metrics_check fail (MetricsError); without it the first failure is
 * a warning and the run goes on. */
void metrics_set_strict(metrics *m, int strict);
int metrics_check(const metrics *m, dlm_err *e);

/* Reading, for `dlm metrics`: which rows of a table. Zero/NULL = no filter. */
typedef struct metrics_filter {
    int64_t run_id;       /* one run */
    const char *phase;    /* runs whose phase is this (sft, dpo, orpo, cpt) */
    const char *since;    /* ISO-8601 UTC: rows at or after (runs: started_at) */
    int64_t after_step;   /* steps/evals: step > after_step (with run_id: `metrics watch`) */
    int limit;            /* the last N rows, still printed oldest first */
} metrics_filter;

/* Calls back per row of the chosen table ("steps", "evals" or "runs"),
 * oldest first (by run, then step). With a preference phase (dpo, orpo),
 * steps gain the rewards/... columns. */
typedef void (*metrics_row_fn)(void *ctx, int ncol, const char *const *names, const char *const *vals);
int metrics_query(const char *store, const char *table, const metrics_filter *f, metrics_row_fn fn, void *ctx,
                  dlm_err *e);

#endif
