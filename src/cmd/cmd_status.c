/* dlm status — the latest training run of a document, from its run record
 * (src/run/heartbeat.h): running, finished (completed / failed /
 * cancelled) or died (the pid is gone and left no exit record). Report
 * only: it never starts, stops or repairs anything. `--json` fields are in
 * docs/runs.md. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "doc/doc.h"
#include "store/store.h"
#include "run/heartbeat.h"
#include "util/json.h"
#include "util/str.h"
#include "util/timeutil.h"

typedef struct status_args {
    int json, watch;
    double interval;
} status_args;

static const opt OPTS[] = {
    {"json", 0, OPT_FLAG, offsetof(status_args, json), NULL, "machine-readable output (docs/runs.md); one line per change with --watch"},
    {"watch", 0, OPT_FLAG, offsetof(status_args, watch), NULL, "keep reporting until the run is no longer running"},
    {"interval", 0, OPT_DOUBLE, offsetof(status_args, interval), "S", "seconds between looks with --watch (default 2)"},
    {0},
};

const cmd_spec spec_status = {
    "status", "PATH [--json] [--watch [--interval S]]",
    "report the latest training run of a document (running, finished, died)",
    "Reads <store>/run/ (run.pid, heartbeat.json, exit.json). A running run rewrites its\n"
    "heartbeat after every step and at least every 5 s: an old heartbeat means a stuck\n"
    "or stopped process. 'died' means the process is gone without an exit record\n"
    "(killed, out of memory, power loss): its newest checkpoint, if it wrote one, is kept\n"
    "and 'dlm train PATH --resume' continues it. Exit status 0 whenever a report is made.",
    OPTS,
};

/* A heartbeat older than this while the pid lives: stopped or stuck. */
#define STALE_S (3.0 * HB_PERIOD)

/* The store lock a dead run left behind where the filesystem has no kernel
 * locks (report only: dlm train names it too, and removing it is the
 * user's call). A kernel-held lock of a dead run is free: the next command
 * takes it over by itself. */
static int stale_lock(const run_report *r, const char *store, char *path, size_t cap)
{
    store_lock_info li;
    if (r->state != RUN_DIED || store_lock_read(store, &li) != 1 || li.alive != 0 || li.kernel || li.pid != r->pid)
        return 0;
    snprintf(path, cap, "%s/.lock", store);
    return 1;
}

static json_t *numj(double d) { return isfinite(d) ? json_real(d) : json_null(); }

static json_t *report_json(const run_report *r, const char *store)
{
    json_t *o = json_object();
    json_object_set_new(o, "state", json_string(hb_state_name(r->state)));
    json_object_set_new(o, "store", json_string(store));
    if (r->state == RUN_NONE) return o;
    json_object_set_new(o, "run_id", json_integer((json_int_t)r->run_id));
    json_object_set_new(o, "pid", json_integer(r->pid));
    json_object_set_new(o, "detached", json_boolean(r->detached));
    json_object_set_new(o, "phase", json_string(r->phase));
    json_object_set_new(o, "step", json_integer((json_int_t)r->step));
    json_object_set_new(o, "total", json_integer((json_int_t)r->total));
    json_object_set_new(o, "loss", numj(r->loss));
    json_object_set_new(o, "val_loss", numj(r->val_loss));
    json_object_set_new(o, "tokens_per_sec", numj(r->tokens_per_sec));
    json_object_set_new(o, "elapsed_s", numj(r->elapsed));
    json_object_set_new(o, "eta_s", r->state == RUN_RUNNING ? numj(r->eta) : json_null());
    json_object_set_new(o, "heartbeat_age_s", numj(r->age));
    json_object_set_new(o, "stale", json_boolean(r->state == RUN_RUNNING && r->age > STALE_S));
    json_object_set_new(o, "stopping", json_boolean(r->stopping));
    json_object_set_new(o, "started_at", json_string(r->started_at));
    json_object_set_new(o, "updated_at", json_string(r->updated_at));
    json_object_set_new(o, "log", r->log[0] ? json_string(r->log) : json_null());
    json_object_set_new(o, "console", r->console[0] ? json_string(r->console) : json_null());
    json_object_set_new(o, "doc", json_string(r->doc));
    if (r->state == RUN_FINISHED) {
        json_object_set_new(o, "status", json_string(r->status));
        json_object_set_new(o, "exit_code", json_integer(r->exit_code));
        json_object_set_new(o, "message", json_string(r->message));
        json_object_set_new(o, "version", r->version ? json_integer(r->version) : json_null());
        json_object_set_new(o, "ended_at", r->ended_at[0] ? json_string(r->ended_at) : json_null());
        /* what the version holds: train's summary numbers */
        json_object_set_new(o, "committed_step", r->committed_step ? json_integer((json_int_t)r->committed_step) : json_null());
        json_object_set_new(o, "early_stopped", json_boolean(r->early_stopped));
        json_object_set_new(o, "first_loss", numj(r->first_loss));
        json_object_set_new(o, "final_loss", numj(r->final_loss));
    } else {
        json_object_set_new(o, "status", r->state == RUN_DIED ? json_string("died") : json_null());
    }
    if (r->state == RUN_DIED) {
        char ck[4400];
        int64_t cs = hb_newest_checkpoint(store, ck, sizeof ck);
        json_object_set_new(o, "checkpoint_step", cs ? json_integer((json_int_t)cs) : json_null());
        json_object_set_new(o, "checkpoint", cs ? json_string(ck) : json_null());
    }
    store_lock_info li;
    if (store_lock_read(store, &li) == 1) {
        char when[32];
        time_iso_utc(li.since, when, sizeof when);
        json_object_set_new(o, "lock", json_pack("{s:I, s:s, s:s, s:o, s:o, s:b}", "pid", (json_int_t)li.pid, "host",
                                                 li.host, "since", when, "command",
                                                 li.command[0] ? json_string(li.command) : json_null(), "alive",
                                                 li.alive < 0 ? json_null() : json_boolean(li.alive), "kernel",
                                                 li.kernel));
    } else {
        json_object_set_new(o, "lock", json_null());
    }
    char lk[4200];
    json_object_set_new(o, "stale_lock", stale_lock(r, store, lk, sizeof lk) ? json_string(lk) : json_null());
    return o;
}

static void print_text(const run_report *r, const char *path, const char *store)
{
    char age[32] = "?", eta[32], el[32];
    if (isfinite(r->age)) time_fmt_duration(r->age, age, sizeof age);
    if (r->state == RUN_NONE) {
        printf("no training run recorded for %s (store %s)\n", path, store);
        return;
    }
    const char *how = r->detached ? "detached" : "foreground";
    switch (r->state) {
    case RUN_RUNNING:
        printf("run %lld (%s, pid %ld): running%s — %s, step %lld/%lld", (long long)r->run_id, how, r->pid,
               r->stopping ? ", stopping after this step" : "", r->phase, (long long)r->step, (long long)r->total);
        if (r->total > 0) printf(" (%.0f%%)", 100.0 * (double)r->step / (double)r->total);
        printf("\n");
        break;
    case RUN_FINISHED:
        printf("run %lld (%s): %s", (long long)r->run_id, how, r->status);
        if (r->version && r->committed_step && r->committed_step != r->step)   /* the best evaluation's weights */
            printf(", v%04d committed at step %lld (%s after step %lld/%lld) (exit %d)\n", r->version,
                   (long long)r->committed_step, r->step < r->total ? "stopped early" : "the best evaluation",
                   (long long)r->step, (long long)r->total, r->exit_code);
        else {
            if (r->version) printf(", v%04d committed", r->version);
            printf(" after step %lld/%lld (exit %d)\n", (long long)r->step, (long long)r->total, r->exit_code);
        }
        if (r->message[0]) printf("  %s\n", r->message);
        break;
    default:
        printf("run %lld (%s, pid %ld): died — the process is gone and left no exit record\n", (long long)r->run_id,
               how, r->pid);
        printf("  last seen %s ago at step %lld/%lld (%s)%s\n", age, (long long)r->step, (long long)r->total, r->phase,
               r->stopping ? " after a stop request" : "");
        char ck[4400];
        int64_t cs = hb_newest_checkpoint(store, ck, sizeof ck);
        if (cs) printf("  its checkpoint at step %lld is kept (%s): dlm train %s --resume\n", (long long)cs, ck, path);
        else printf("  it died before its first checkpoint: nothing to resume; 'dlm train %s' starts it over\n", path);
        char lk[4200];
        if (stale_lock(r, store, lk, sizeof lk)) printf("  it left its store lock: rm %s\n", lk);
        break;
    }
    if (r->state == RUN_FINISHED && isfinite(r->first_loss) && isfinite(r->final_loss)) {
        /* a committed run: its message is train's summary line (the
         * committed step, its losses, the run's first loss) */
    } else if (isfinite(r->loss)) {
        printf("  loss %.4f", r->loss);
        if (isfinite(r->val_loss)) printf(", val %.4f", r->val_loss);
        if (isfinite(r->tokens_per_sec) && r->tokens_per_sec > 0) printf(", %.0f tok/s", r->tokens_per_sec);
        if (r->state == RUN_RUNNING && isfinite(r->eta) && r->eta > 0) {
            time_fmt_duration(r->eta, eta, sizeof eta);
            printf(", ETA %s", eta);
        }
        printf("\n");
    }
    if (isfinite(r->elapsed)) time_fmt_duration(r->elapsed, el, sizeof el);
    else snprintf(el, sizeof el, "?");
    printf("  started %s, elapsed %s, heartbeat %s ago%s\n", r->started_at, el, age,
           r->state == RUN_RUNNING && r->age > STALE_S ? " (stale: stopped or stuck?)" : "");
    store_lock_info li;
    if (store_lock_read(store, &li) == 1 && li.alive == 1 && li.pid != r->pid) {
        char when[32];
        time_iso_utc(li.since, when, sizeof when);
        printf("  store locked by PID %ld (dlm %s) since %s UTC\n", li.pid, li.command[0] ? li.command : "?", when);
    }
    if (r->log[0]) printf("  log: %s\n", r->log);
    if (r->console[0]) printf("  console: %s\n", r->console);
}

int cmd_status(int argc, char **argv, dlm_ctx *ctx)
{
    status_args a = {.interval = 2.0};
    char *pos[64];
    int npos;
    int r = opts_parse(&spec_status, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos != 1) return cmd_usage_error(&spec_status, "status needs exactly one PATH (a .dlm file)");
    if (!(a.interval >= 0.1 && a.interval <= 3600)) return cmd_usage_error(&spec_status, "--interval must be 0.1..3600");
    dlm_err e;
    err_clear(&e);
    char store[4096];
    if (cmd_doc_store(ctx, pos[0], store, sizeof store, &e)) return cmd_fail(ctx, &e);
    int tty = isatty(1);
    run_report last;
    memset(&last, 0, sizeof last);
    for (int first = 1;; first = 0) {
        run_report rep;
        if (hb_read(store, &rep, &e)) return cmd_fail(ctx, &e);
        int changed = first || rep.state != last.state || rep.step != last.step || strcmp(rep.phase, last.phase) ||
                      rep.stopping != last.stopping;
        if (!a.watch || changed || (tty && !a.json)) {
            if (a.json) {
                json_t *j = report_json(&rep, store);
                strbuf sb = STRBUF_INIT;
                json_write(&sb, j, JW_SORT | (a.watch ? JW_COMPACT : 0));
                printf("%s\n", sb_str(&sb));
                sb_free(&sb);
                json_decref(j);
            } else {
                if (a.watch && tty) printf("\033[H\033[J");
                else if (!first) printf("\n");
                print_text(&rep, pos[0], store);
            }
            fflush(stdout);
        }
        last = rep;
        if (!a.watch || rep.state != RUN_RUNNING) break;
        usleep((useconds_t)(a.interval * 1e6));
    }
    return EXIT_OK;
}
