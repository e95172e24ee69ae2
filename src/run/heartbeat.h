/* heartbeat — a training run's live record, for `dlm status` and `dlm logs`.
 *
 *   <store>/run/run.pid         "PID\n", written once the run holds the store lock
 *   <store>/run/heartbeat.json  phase, step, total, loss, tokens/s, ETA, times, log
 *                               paths; rewritten after every step (at most 4 times
 *                               a second) and by a timer thread at least every
 *                               HB_PERIOD seconds, so its age tells a live process
 *                               from a hung or dead one
 *   <store>/run/exit.json       how the run ended: status (completed / failed /
 *                               cancelled), exit code, message, version committed
 *
 * Every file is replaced atomically (fs_write_atomic), so a reader never sees
 * half of one. A run that ends without exit.json (SIGKILL, the OOM killer, a
 * power cut) is recognised by its pid being gone — or reused: heartbeat.json
 * records the pid's start time from /proc too.
 *
 * The writer side is driven by the command layer's train hooks; it prints
 * nothing. The reader side (hb_read) is what `status` and `logs` use; it
 * never changes anything. */
#ifndef DLM_HEARTBEAT_H
#define DLM_HEARTBEAT_H

#include <stddef.h>
#include <stdint.h>
#include "run/trainer.h"
#include "util/err.h"

#define HB_PERIOD 5          /* seconds between timer rewrites (the contract is <= 10) */
#define HB_MIN_GAP 0.25      /* seconds between per-step rewrites */

typedef struct heartbeat heartbeat;

typedef struct hb_opts {
    const char *doc_path;    /* the document (absolute when possible) */
    const char *console;     /* console log of a detached run; NULL in the foreground */
    int detached;
} hb_opts;

/* Take over <store>/run for this run: remove a previous exit record, write
 * run.pid and a first heartbeat (phase loading), start the timer thread,
 * and prepare the exit record hb_exit_now writes. */
int hb_start(const char *store, int64_t run_id, const hb_opts *o, heartbeat **out, dlm_err *e);
/* A progress event from the trainer. */
void hb_update(heartbeat *h, const train_progress *p);
/* The first SIGINT/SIGTERM arrived: the run is finishing its step. */
void hb_set_stopping(heartbeat *h);
/* Write exit.json (message: the error text or a summary) and stop the
 * timer. The heartbeat file stays as the last state. */
int hb_finish(heartbeat *h, const train_outcome *o, const char *message, dlm_err *e);
void hb_free(heartbeat *h);

/* Async-signal-safe: a second signal stops the run at once; write the exit
 * record prepared by hb_start (status cancelled, exit code 128 + sig) with
 * bare system calls. No-op when no heartbeat was started. */
void hb_exit_now(int sig);

/* ---- reading ------------------------------------------------------------------ */

typedef enum { RUN_NONE = 0, RUN_RUNNING, RUN_FINISHED, RUN_DIED } run_state;

typedef struct run_report {
    run_state state;
    long pid;
    int64_t run_id;
    char phase[16];                 /* loading / training / evaluating / saving / done */
    int64_t step, total;
    double loss, val_loss, lr, tokens_per_sec, elapsed, eta;   /* NaN when unknown */
    double updated_unix, age;       /* last heartbeat (epoch seconds), its age */
    char started_at[32], updated_at[32];
    char log[4096], console[4096], doc[4096];
    char adapter[128];              /* adapter_name: the training.adapters name, "" for the one adapter */
    int detached, stopping;
    /* the exit record (state RUN_FINISHED) */
    char status[16];
    int exit_code, version;
    char message[2048], ended_at[32];
    /* a completed SFT run: the committed step (the best evaluation's after
     * early stopping), the run's first loss, the committed step's loss; its
     * validation loss is val_loss (NaN / 0 when not recorded) */
    int64_t committed_step;
    int early_stopped;
    double first_loss, final_loss;
} run_report;

/* Read <store>/run. A store with no run record gives RUN_NONE (0 returned). */
int hb_read(const char *store, run_report *r, dlm_err *e);
const char *hb_state_name(run_state s);
/* The newest checkpoint of a store (<store>/adapter/checkpoints/step-N):
 * its step (0 none) and, when out is given, its path. */
int64_t hb_newest_checkpoint(const char *store, char *out, size_t cap);
/* Start time of a process (clock ticks after boot, /proc/PID/stat field 22)
 * and whether it is alive (not a zombie). 0 / 0 when unknown or gone. */
uint64_t hb_pid_start(long pid, int *alive);

#endif
