/* dlm logs — the latest training run's log: the console log of a detached
 * run (what it would have printed), else the run's JSONL log rendered as
 * lines. -f follows it until the run is no longer running. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "doc/doc.h"
#include "store/store.h"
#include "run/heartbeat.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/str.h"

typedef struct logs_args {
    int follow, jsonl;
} logs_args;

static const opt OPTS[] = {
    {"follow", 'f', OPT_FLAG, offsetof(logs_args, follow), NULL, "keep printing new lines until the run is no longer running"},
    {"jsonl", 0, OPT_FLAG, offsetof(logs_args, jsonl), NULL, "the machine log (one JSON object per line) as written"},
    {0},
};

const cmd_spec spec_logs = {
    "logs", "PATH [-f] [--jsonl]",
    "print (and follow) the latest training run's log",
    "A detached run's console log (<store>/logs/train-*.console.log) is printed as is;\n"
    "a foreground run's JSONL log (<store>/logs/train-NNNNNN-*.jsonl) is rendered one\n"
    "line per event. --jsonl prints the JSONL log itself.",
    OPTS,
};

/* The newest logs/train-*.jsonl (runs recorded before run records existed). */
static int newest_jsonl(const char *store, char *out, size_t cap)
{
    char dir[4200], **names;
    snprintf(dir, sizeof dir, "%s/logs", store);
    int n = fs_is_dir(dir) ? fs_list_dir(dir, &names, NULL) : 0;
    int found = 0;
    for (int i = 0; i < n; i++)
        if (!strncmp(names[i], "train-", 6) && str_endswith(names[i], ".jsonl")) {
            snprintf(out, cap, "%s/%s", dir, names[i]); /* sorted: the last one wins */
            found = 1;
        }
    if (n > 0) fs_free_list(names, n);
    return found ? 0 : -1;
}

static void render(const char *line)
{
    json_t *j = json_loads(line, 0, NULL);
    const char *type = j ? jget_str(j, "type") : NULL;
    if (!type) {
        printf("%s\n", line);
        json_decref(j);
        return;
    }
    long long step = 0, total = 0, v = 0;
    double loss = NAN, x = NAN;
    char a[32], b[32];
    jget_int(j, "step", &step);
    if (!strcmp(type, "banner") || !strcmp(type, "resume")) {
        long long mb = 0, ga = 0, seq = 0, plan = 0, rid = 0, start = 0;
        jget_int(j, "run_id", &rid);
        jget_int(j, "total_steps", &total);
        jget_int(j, "micro_batch_size", &mb);
        jget_int(j, "grad_accum", &ga);
        jget_int(j, "seq_len", &seq);
        jget_int(j, "plan_bytes", &plan);
        jget_int(j, "start_step", &start);
        const char *base = jget_str(j, "base_model");
        if (!strcmp(type, "resume"))
            printf("run %lld resumed at step %lld of %lld\n", rid, start, total);
        else
            printf("run %lld: base %s, %lld steps of micro_batch_size %lld x grad_accum %lld, sequence %lld,"
                   " memory plan %s\n", rid, base ? base : "?", total, mb, ga, seq,
                   str_human_size((unsigned long long)plan, a, sizeof a));
    } else if (!strcmp(type, "step")) {
        jget_int(j, "total", &total);
        jget_num(j, "loss", &loss);
        jget_num(j, "tokens_per_sec", &x);
        double lr = NAN;
        jget_num(j, "lr", &lr);
        printf("step %lld/%lld loss %.4f lr %.2e %.0f tok/s\n", step, total, loss, lr, x);
    } else if (!strcmp(type, "eval")) {
        jget_num(j, "val_loss", &loss);
        printf("eval at step %lld: val_loss %.4f\n", step, loss);
    } else if (!strcmp(type, "checkpoint")) {
        const char *p = jget_str(j, "path");
        printf("checkpoint at step %lld: %s\n", step, p ? p : "");
    } else if (!strcmp(type, "memory")) {
        long long pb = 0, pk = 0;
        jget_int(j, "plan_bytes", &pb);
        jget_int(j, "peak_rss_bytes", &pk);
        printf("memory: planned %s, peak RSS %s\n", str_human_size((unsigned long long)pb, a, sizeof a),
               str_human_size((unsigned long long)pk, b, sizeof b));
    } else if (!strcmp(type, "run_complete")) {
        jget_int(j, "version", &v);
        jget_int(j, "steps", &step);
        printf("completed: v%04lld after %lld steps\n", v, step);
    } else if (!strncmp(type, "run_", 4)) {
        printf("%s at step %lld\n", type + 4, step);
    } else {
        printf("%s\n", line);
    }
    json_decref(j);
}

/* Print from *off to the end of path; JSONL is rendered line by line (a
 * partial last line waits for its newline). Returns bytes consumed. */
static size_t pump(const char *path, off_t *off, int jsonl_render)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    if (lseek(fd, *off, SEEK_SET) < 0) { close(fd); return 0; }
    char pend[1 << 16];
    size_t np = 0, total = 0;
    char buf[1 << 15];
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        if (!jsonl_render) {
            fwrite(buf, 1, (size_t)r, stdout);
            total += (size_t)r;
            continue;
        }
        for (ssize_t i = 0; i < r; i++) {
            if (buf[i] == '\n') {
                pend[np] = 0;
                render(pend);
                total += np + 1;
                np = 0;
            } else if (np < sizeof pend - 1) {
                pend[np++] = buf[i];
            } else {
                /* an absurdly long line: print what we have, raw */
                fwrite(pend, 1, np, stdout);
                total += np;
                np = 0;
            }
        }
    }
    close(fd);
    *off += (off_t)total;
    fflush(stdout);
    return total;
}

int cmd_logs(int argc, char **argv, dlm_ctx *ctx)
{
    logs_args a = {0};
    char *pos[64];
    int npos;
    int r = opts_parse(&spec_logs, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos != 1) return cmd_usage_error(&spec_logs, "logs needs exactly one PATH (a .dlm file)");
    dlm_err e;
    err_clear(&e);
    char store[4096];
    if (cmd_doc_store(ctx, pos[0], store, sizeof store, &e)) return cmd_fail(ctx, &e);
    run_report rep;
    if (hb_read(store, &rep, &e)) return cmd_fail(ctx, &e);
    char path[4200];
    int render_jsonl = 1;
    if (!a.jsonl && rep.console[0] && fs_is_file(rep.console)) {
        snprintf(path, sizeof path, "%s", rep.console);
        render_jsonl = 0;
    } else if (rep.log[0] && fs_is_file(rep.log)) {
        snprintf(path, sizeof path, "%s", rep.log);
    } else if (rep.state == RUN_FINISHED) {
        /* it ended before it opened a log (a refusal, a bad base): the exit record says why */
        printf("run %lld %s (exit %d): %s\n", (long long)rep.run_id, rep.status, rep.exit_code, rep.message);
        return EXIT_OK;
    } else if (rep.state == RUN_RUNNING && a.follow) {
        path[0] = 0; /* the run has not opened its log yet: wait for it below */
    } else if (rep.state == RUN_NONE && newest_jsonl(store, path, sizeof path) == 0) {
        /* a run from before run records existed */
    } else {
        err_set(&e, "NoRunError", "no training log for %s yet", pos[0]);
        err_hint(&e, "train with 'dlm train %s' (or --detach)", pos[0]);
        return cmd_fail(ctx, &e);
    }
    if (a.jsonl) render_jsonl = 0;
    off_t off = 0;
    if (path[0]) pump(path, &off, render_jsonl);
    if (!a.follow) return EXIT_OK;
    int linger = 0;
    for (;;) {
        run_report now;
        if (hb_read(store, &now, NULL)) break;
        if (!path[0]) {
            /* pick the log up as soon as the run names it */
            if (now.console[0] && fs_is_file(now.console)) { snprintf(path, sizeof path, "%s", now.console); render_jsonl = 0; }
            else if (now.log[0] && fs_is_file(now.log)) snprintf(path, sizeof path, "%s", now.log);
        }
        size_t got = path[0] ? pump(path, &off, render_jsonl) : 0;
        if (now.state != RUN_RUNNING && !got) {
            /* the exit record comes a moment before the process prints its
             * last lines and exits: wait (a little) for the pid to go */
            int alive = 0;
            hb_pid_start(now.pid, &alive);
            if (!alive || ++linger > 50) {
                if (path[0]) pump(path, &off, render_jsonl);
                break;
            }
        }
        if (!got) usleep(200 * 1000);
    }
    return EXIT_OK;
}
