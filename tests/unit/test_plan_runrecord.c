/* The run record (src/run/heartbeat.h) as `dlm status` reads it:
 * running (this process), finished (the exit record of the same run),
 * died (the pid is gone, or reused by another process), the exit record a
 * second signal writes, and damaged files (an error, never a crash). */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "run/heartbeat.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/timeutil.h"

static void put(const char *path, const char *text)
{
    CHECK(fs_write_atomic(path, text, strlen(text), 0644, NULL) == 0);
}

int main(void)
{
    const char *store = check_tmpdir("runrecord");
    char p[4200], text[1024];
    dlm_err e;
    run_report r;

    /* nothing recorded */
    CHECK_INT(hb_read(store, &r, &e), 0);
    CHECK_INT(r.state, RUN_NONE);
    CHECK_STR(hb_state_name(r.state), "none");

    /* a run in this process */
    heartbeat *h = NULL;
    hb_opts o = {"/docs/tutor.dlm", "/store/logs/c.console.log", 1};
    double t0 = time_now();
    CHECK(hb_start(store, 7, &o, &h, &e) == 0);
    snprintf(p, sizeof p, "%s/run/run.pid", store);
    char *pid_txt;
    size_t n;
    CHECK(fs_read_all(p, 64, &pid_txt, &n, &e) == 0);
    CHECK_INT(atol(pid_txt), (long)getpid());
    free(pid_txt);
    CHECK_INT(hb_read(store, &r, &e), 0);
    CHECK_INT(r.state, RUN_RUNNING);
    CHECK_INT(r.pid, (long)getpid());
    CHECK_INT(r.run_id, 7);
    CHECK_STR(r.phase, "loading");
    CHECK_STR(r.doc, "/docs/tutor.dlm");
    CHECK_STR(r.console, "/store/logs/c.console.log");
    CHECK(r.detached);
    CHECK(isnan(r.loss));
    /* written between t0 and now, however long a loaded machine took */
    CHECK(r.age >= 0 && r.age <= time_now() - t0 + 0.002);
    train_progress pr = {.phase = PHASE_TRAINING, .step = 3, .total = 10, .loss = 2.5, .val_loss = NAN, .lr = 1e-4,
                         .tokens_per_sec = 123.0, .elapsed = 4.0, .eta = 8.0, .run_id = 7,
                         .log_path = "/store/logs/x.jsonl", .run_phase = "sft", .rewards_margin = NAN,
                         .rewards_accuracy = NAN};
    hb_update(h, &pr);
    CHECK_INT(hb_read(store, &r, &e), 0);
    CHECK_STR(r.phase, "training");
    CHECK_INT(r.step, 3);
    CHECK_INT(r.total, 10);
    CHECK_NEAR(r.loss, 2.5, 1e-12);
    CHECK_NEAR(r.tokens_per_sec, 123.0, 1e-9);
    CHECK_NEAR(r.eta, 8.0, 1e-9);
    CHECK(isnan(r.val_loss));
    CHECK_STR(r.log, "/store/logs/x.jsonl");
    hb_set_stopping(h);
    CHECK_INT(hb_read(store, &r, &e), 0);
    CHECK(r.stopping);

    /* the exit record of this run: finished */
    train_outcome oc = {"cancelled", 130, NULL, 0, 4, 10, NULL};
    CHECK(hb_finish(h, &oc, "cancelled after \"step\" 4\nof 10", &e) == 0);
    hb_free(h);
    CHECK_INT(hb_read(store, &r, &e), 0);
    CHECK_INT(r.state, RUN_FINISHED);
    CHECK_STR(r.status, "cancelled");
    CHECK_INT(r.exit_code, 130);
    CHECK_STR(r.message, "cancelled after \"step\" 4\nof 10"); /* escaped and read back */
    CHECK_INT(r.step, 4);
    CHECK_STR(r.phase, "done");

    /* a new run takes over: the old exit record goes */
    CHECK(hb_start(store, 8, &o, &h, &e) == 0);
    CHECK_INT(hb_read(store, &r, &e), 0);
    CHECK_INT(r.state, RUN_RUNNING);
    CHECK_INT(r.run_id, 8);
    /* a second signal: the prepared record, written with bare syscalls */
    hb_exit_now(SIGTERM);
    CHECK_INT(hb_read(store, &r, &e), 0);
    CHECK_INT(r.state, RUN_FINISHED);
    CHECK_STR(r.status, "cancelled");
    CHECK_INT(r.exit_code, 128 + SIGTERM);
    CHECK(strstr(r.message, "second signal") != NULL);
    hb_free(h);

    /* a pid that is gone and left no exit record: died */
    pid_t c = fork();
    if (c == 0) _exit(0);
    waitpid(c, NULL, 0);
    snprintf(p, sizeof p, "%s/run/exit.json", store);
    unlink(p);
    snprintf(p, sizeof p, "%s/run/heartbeat.json", store);
    snprintf(text, sizeof text, "{\"pid\": %d, \"run_id\": 9, \"phase\": \"training\", \"step\": 5, \"total\": 9,"
                                " \"updated_unix\": 1.0, \"loss\": 1.5}", (int)c);
    put(p, text);
    CHECK_INT(hb_read(store, &r, &e), 0);
    CHECK_INT(r.state, RUN_DIED);
    CHECK_INT(r.step, 5);
    CHECK(r.age > 1e6);
    /* our own pid but another start time: the pid was reused, the run died */
    uint64_t st = hb_pid_start(getpid(), NULL);
    CHECK(st > 0);
    snprintf(text, sizeof text, "{\"pid\": %d, \"pid_start\": %llu, \"run_id\": 9}", (int)getpid(),
             (unsigned long long)st + 1);
    put(p, text);
    CHECK_INT(hb_read(store, &r, &e), 0);
    CHECK_INT(r.state, RUN_DIED);
    snprintf(text, sizeof text, "{\"pid\": %d, \"pid_start\": %llu, \"run_id\": 9}", (int)getpid(),
             (unsigned long long)st);
    put(p, text);
    CHECK_INT(hb_read(store, &r, &e), 0);
    CHECK_INT(r.state, RUN_RUNNING);
    /* an exit record of another run does not finish this one */
    snprintf(p, sizeof p, "%s/run/exit.json", store);
    put(p, "{\"run_id\": 3, \"status\": \"completed\", \"exit_code\": 0}");
    CHECK_INT(hb_read(store, &r, &e), 0);
    CHECK_INT(r.state, RUN_RUNNING);
    /* damaged files: an error or a sane default, never a crash */
    put(p, "{\"run_id\": \"9\", \"status\": 5, \"message\": [1]}");
    CHECK_INT(hb_read(store, &r, &e), 0);
    CHECK_INT(r.state, RUN_RUNNING);
    snprintf(p, sizeof p, "%s/run/heartbeat.json", store);
    put(p, "{\"pid\": ");
    CHECK_INT(hb_read(store, &r, &e), -1);
    put(p, "[1, 2, 3]");
    CHECK_INT(hb_read(store, &r, &e), 0);
    CHECK_INT(r.state, RUN_DIED); /* no pid: nothing alive to point at */
    CHECK_INT(hb_pid_start(-5, NULL), 0);
    CHECK_INT(hb_pid_start(0, NULL), 0);
    return check_done();
}
