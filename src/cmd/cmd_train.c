/* dlm train — see src/run/trainer.h for what a run does. This file owns
 * the terminal: flags, the live progress line, signals, the last line. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/inject.h"
#include "cmd/commands.h"
#include "doc/doc.h"
#include "doc/pystr.h"
#include "store/store.h"
#include "run/gate_run.h"
#include "run/heartbeat.h"
#include "run/inert.h"
#include "run/trainer.h"
#include "run/dist.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/log.h"
#include "util/str.h"
#include "util/timeutil.h"

typedef struct train_args {
    int no_mined, no_cache, same_store, resume, cont, fresh, max_steps, seed, threads, update, ignore, strict, no_replay, force, json, offline, detach, dry_run, watch, watch_max_steps, watch_debounce_ms, recursive, no_recursive, rescaffold, accept, strict_metrics;
    int max_cycles, rpc_public;
    const char *max_memory, *base, *name, *policy, *phase, *adapter, *listen_rpc;
    opt_list include, exclude;
} train_args;

static const opt OPTS[] = {
    {"phase", 0, OPT_STR, offsetof(train_args, phase), "sft|preference|all",
     "sft, the preference phase (DPO/ORPO on ::preference:: sections), or both (default all)"},
    {"adapter", 0, OPT_STR, offsetof(train_args, adapter), "NAME", "train only this adapter of training.adapters (default: all, in order)"},
    {"resume", 0, OPT_FLAG, offsetof(train_args, resume), NULL, "continue the interrupted run exactly (from its checkpoint)"},
    {"continue", 0, OPT_FLAG, offsetof(train_args, cont), NULL, "train the current version further: the interrupted run's checkpoint, else the version's weights and optimizer state for a new run"},
    {"fresh", 0, OPT_FLAG, offsetof(train_args, fresh), NULL, "start a new adapter from the base (drops a leftover checkpoint)"},
    {"max-steps", 0, OPT_INT, offsetof(train_args, max_steps), "N", "stop after N optimizer steps"},
    {"seed", 0, OPT_INT, offsetof(train_args, seed), "N", "override training.seed"},
    {"threads", 0, OPT_THREADS, offsetof(train_args, threads), "N", "compute threads (default: training.threads or all cores)"},
    {"base", 0, OPT_STR, offsetof(train_args, base), "BASE", "override base_model for this run"},
    {"no-replay", 0, OPT_FLAG, offsetof(train_args, no_replay), NULL, "train on the current document only"},
    {"no-cache", 0, OPT_FLAG, offsetof(train_args, no_cache), NULL, "tokenize every section (do not read or write training.cache)"},
    {"strict-metrics", 0, OPT_FLAG, offsetof(train_args, strict_metrics), NULL, "a metrics.sqlite row that cannot be written fails the run (default: warn, train on)"},
    {"no-mined", 0, OPT_FLAG, offsetof(train_args, no_mined), NULL, "leave out auto-mined preference sections (dlm preference mine)"},
    {"max-memory", 0, OPT_STR, offsetof(train_args, max_memory), "SIZE", "memory budget, e.g. 8G (default: available RAM)"},
    {"force", 0, OPT_FLAG, offsetof(train_args, force), NULL, "train even when the memory plan does not fit"},
    {"update-lock", 0, OPT_FLAG, offsetof(train_args, update), NULL, "skip the dlm.lock check and rewrite it"},
    {"ignore-lock", 0, OPT_FLAG, offsetof(train_args, ignore), NULL, "skip the dlm.lock check, do not write it"},
    {"strict-lock", 0, OPT_FLAG, offsetof(train_args, strict), NULL, "lock warnings become errors"},
    {"offline", 0, OPT_FLAG, offsetof(train_args, offline), NULL, "never download the base"},
    {"same-store", 0, OPT_FLAG, offsetof(train_args, same_store), NULL, "train even when another document with this dlm_id (a copy) owns the store"},
    {"i-accept-license", 0, OPT_FLAG, offsetof(train_args, accept), NULL, "accept a gated base's license (recorded in the store)"},
    {"json", 0, OPT_FLAG, offsetof(train_args, json), NULL, "print the result as JSON on stdout"},
    {"detach", 0, OPT_FLAG, offsetof(train_args, detach), NULL, "run in the background (own session, log in the store); see 'dlm status'"},
    {"watch", 0, OPT_FLAG, offsetof(train_args, watch), NULL, "after the run, retrain (resume mode) whenever an edit adds new sections"},
    {"watch-max-steps", 0, OPT_INT, offsetof(train_args, watch_max_steps), "N", "--watch, --listen-rpc: steps per retrain (default 100)"},
    {"watch-debounce-ms", 0, OPT_INT, offsetof(train_args, watch_debounce_ms), "MS", "--watch, --listen-rpc: quiet time before a retrain (default 400)"},
    {"listen-rpc", 0, OPT_STR, offsetof(train_args, listen_rpc), "HOST:PORT",
     "after the run, take probes over HTTP (POST /rpc, token DLM_PROBE_TOKEN) and retrain on them; needs --watch or --max-cycles"},
    {"max-cycles", 0, OPT_INT, offsetof(train_args, max_cycles), "N", "--listen-rpc: stop after N retrain cycles"},
    {"i-know-this-is-public", 0, OPT_FLAG, offsetof(train_args, rpc_public), NULL,
     "--listen-rpc: allow a non-loopback address (anyone who has the token can add training data)"},
    {"dry-run", 0, OPT_FLAG, offsetof(train_args, dry_run), NULL, "list what training.sources would train (every file, its verdict) and stop"},
    {"include", 0, OPT_LIST, offsetof(train_args, include), "GLOB", "DIR mode, first run: files to train on (repeatable)"},
    {"exclude", 0, OPT_LIST, offsetof(train_args, exclude), "GLOB", "DIR mode, first run: files to leave out (repeatable)"},
    {"recursive", 'r', OPT_FLAG, offsetof(train_args, recursive), NULL, "DIR mode: default include is every file below DIR (default)"},
    {"no-recursive", 'R', OPT_FLAG, offsetof(train_args, no_recursive), NULL, "DIR mode: default include is DIR's own files only"},
    {"name", 0, OPT_STR, offsetof(train_args, name), "NAME", "DIR mode: the document DIR/.dlm/NAME.dlm (default corpus)"},
    {"policy", 0, OPT_STR, offsetof(train_args, policy), "POLICY", "DIR mode, first run: sources_policy strict (default) or permissive"},
    {"rescaffold", 0, OPT_FLAG, offsetof(train_args, rescaffold), NULL, "DIR mode: rewrite DIR/.dlm/NAME.dlm from the flags (same dlm_id)"},
    {0},
};

const cmd_spec spec_train = {
    "train", "PATH|DIR [--adapter NAME] [--phase sft|preference|all] [--resume | --continue | --fresh] [--max-steps N] [--seed N] [--threads N] [--max-memory SIZE] [--detach] [--dry-run]",
    "train a LoRA adapter on the document and commit it as the next version",
    "Each run trains on every prose and Q&A section plus a replay sample of sections\n"
    "earlier versions saw, checkpoints every training.save_steps, and commits\n"
    "adapter/versions/vNNNN in PEFT's format. Ctrl-C finishes the step, saves a\n"
    "checkpoint and stops (a second Ctrl-C stops at once); 'dlm train PATH --resume'\n"
    "continues bit-exactly (with no checkpoint it says so and exits 1; --continue then\n"
    "trains the current version further). SIGTERM does the same. Before loading the weights the\n"
    "memory plan (see 'dlm doctor PATH') must fit the budget: available RAM, the\n"
    "cgroup limit, or --max-memory; OOMError names what to write in the frontmatter.\n"
    "--detach runs in its own session (survives logout), logging into the store;\n"
    "'dlm status PATH' and 'dlm logs PATH -f' follow it.\n"
    "A DIR trains on a codebase: the first run writes DIR/.dlm/corpus.dlm (needs --base)\n"
    "with one training.sources directive for DIR; later runs reuse it. --dry-run lists\n"
    "every file with its verdict (docs/sources.md).\n"
    "--phase all (the default) trains SFT, then, when the document has preference\n"
    "sections and training.preference.enabled is not false, the preference phase\n"
    "(DPO or ORPO, training.preference) as a second version; see docs/training.md.\n"
    "A document that declares training.adapters trains each named adapter on the\n"
    "sections routed to it, in declaration order, into adapter/<name>/versions/vNNNN;\n"
    "--adapter NAME trains one (docs/adapters.md).\n"
    "--listen-rpc HOST:PORT --max-cycles N (the original's probe-injection loop, for\n"
    "dlm-sway): after the run, wait for probes POSTed to http://HOST:PORT/rpc with\n"
    "'Authorization: Bearer $DLM_PROBE_TOKEN', and retrain on each batch as\n"
    "'### Q !probe' sections (resume mode, <= --watch-max-steps) until N cycles ran;\n"
    "loopback only unless --i-know-this-is-public (docs/training.md).",
    OPTS,
};

/* named adapters one `dlm train` trains (a document with more is refused) */
#define MAX_NAMED 256

static volatile sig_atomic_t g_stop;
static void on_signal(int sig)
{
    if (g_stop) { /* a second signal: record it and leave now */
        hb_exit_now(sig);
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    g_stop = 1;
}

typedef struct view {
    int tty, quiet;
    double last_print;
    int64_t last_step;
    int dirty;
    /* the run record (src/run/heartbeat.h) */
    heartbeat *hb;
    hb_opts hbo;
    int stop_seen;
    inject_server *rpc;     /* --listen-rpc: replies tell the running cycle's ETA */
    int notify_fd;          /* --detach: tells the waiting parent that the run started, -1 none */
    int resume;             /* --resume: a died run's checkpoint is resumed, not kept aside */
} view;

static void clear_line(view *v)
{
    if (v->tty && v->dirty) { fputs("\r\033[K", stderr); v->dirty = 0; }
}

static void on_note(void *ctx, const char *msg)
{
    view *v = ctx;
    if (v->quiet) return;
    clear_line(v);
    fprintf(stderr, "%s\n", msg);
}

static void on_progress(void *ctx, const train_progress *p)
{
    view *v = ctx;
    hb_update(v->hb, p);
    if (v->rpc && p->eta > 0) inject_set_eta(v->rpc, (int)ceil(p->eta));
    if (v->quiet) return;
    char eta[32] = "", val[32] = "";
    if (p->eta > 0) { strcpy(eta, " ETA "); time_fmt_duration(p->eta, eta + 5, sizeof eta - 5); }
    if (isfinite(p->val_loss)) snprintf(val, sizeof val, "  val %.4f", p->val_loss);
    char rw[64] = "";
    const char *rp = p->run_phase && strcmp(p->run_phase, "sft") ? p->run_phase : NULL;
    if (isfinite(p->rewards_margin))
        snprintf(rw, sizeof rw, "  margin %.4f acc %.2f", p->rewards_margin, p->rewards_accuracy);
    if (p->phase == PHASE_LOADING) {
        if (!v->tty) fprintf(stderr, "loading base and document...\n");
        return;
    }
    if (p->phase == PHASE_TRAINING && !isfinite(p->loss)) {
        /* the loop starts: no loss yet */
        if (!v->tty) fprintf(stderr, "training from step %lld of %lld...\n", (long long)p->step + 1, (long long)p->total);
        v->last_print = time_mono();
        return;
    }
    if (v->tty) {
        fprintf(stderr, "\r\033[K  %s%s%s step %lld/%lld  loss %.4f%s%s  lr %.2e  %.0f tok/s%s",
                rp ? rp : "", rp ? " " : "",
                train_phase_name(p->phase), (long long)p->step, (long long)p->total, p->loss, val, rw, p->lr,
                p->tokens_per_sec, eta);
        v->dirty = 1;
        return;
    }
    /* plain lines: about 20 per run, and at least every 10 s */
    double now = time_mono();
    int64_t every = p->total / 20 > 1 ? p->total / 20 : 1;
    if (p->phase != PHASE_TRAINING) return;
    if (p->step == p->total || p->step - v->last_step >= every || now - v->last_print >= 10) {
        fprintf(stderr, "%s%sstep %lld/%lld loss %.4f%s%s lr %.2e %.0f tok/s%s\n",
                rp ? rp : "", rp ? " " : "",
                (long long)p->step, (long long)p->total, p->loss, val, rw, p->lr, p->tokens_per_sec, eta);
        v->last_print = now;
        v->last_step = p->step;
    }
}

static int should_stop(void *ctx)
{
    view *v = ctx;
    if (g_stop && !v->stop_seen) {
        v->stop_seen = 1;
        hb_set_stopping(v->hb);
    }
    return g_stop != 0;
}

static void inert_note(void *ctx, const char *note)
{
    (void)ctx;
    log_warn("note: %s", note);
}

static void on_started(void *ctx, const char *store, int64_t run_id)
{
    view *v = ctx;
    dlm_err e;
    err_clear(&e);
    /* the run record a killed run left: say where it stopped before this
     * run replaces it */
    run_report prev;
    if (!hb_read(store, &prev, &e) && prev.state == RUN_DIED) {
        char ck[4400];
        int64_t cs = hb_newest_checkpoint(store, ck, sizeof ck);
        if (cs && v->resume)
            log_warn("the previous run (run %lld, PID %ld) died at step %lld/%lld; resuming from its checkpoint at step %lld (%s)",
                     (long long)prev.run_id, prev.pid, (long long)prev.step, (long long)prev.total, (long long)cs, ck);
        else if (cs)
            log_warn("the previous run (run %lld, PID %ld) died at step %lld/%lld; its checkpoint at step %lld is kept (%s)",
                     (long long)prev.run_id, prev.pid, (long long)prev.step, (long long)prev.total, (long long)cs, ck);
        else
            log_warn("the previous run (run %lld, PID %ld) died at step %lld/%lld, before its first checkpoint",
                     (long long)prev.run_id, prev.pid, (long long)prev.step, (long long)prev.total);
    }
    err_clear(&e);
    if (hb_start(store, run_id, &v->hbo, &v->hb, &e)) log_warn("no run record for 'dlm status': %s", e.msg);
    if (v->notify_fd >= 0) {
        char line[64];
        int n = snprintf(line, sizeof line, "S%lld\n", (long long)run_id);
        if (write(v->notify_fd, line, (size_t)n) != n) { /* the parent is gone: nothing to tell */ }
        close(v->notify_fd);
        v->notify_fd = -1;
    }
}

static void on_finished(void *ctx, const train_outcome *o)
{
    view *v = ctx;
    char msg[6000] = "";
    if (o->err) {
        err_format(o->err, msg, sizeof msg);
        if (o->err->kind[0] && !strstr(msg, o->err->kind)) {
            char tmp[6000];
            snprintf(tmp, sizeof tmp, "%s: %s", o->err->kind, msg);
            snprintf(msg, sizeof msg, "%s", tmp);
        }
    } else if (!strcmp(o->status, "completed") && !o->version) {
        snprintf(msg, sizeof msg, "nothing to train");
    } else if (!strcmp(o->status, "completed") && o->result && o->result->phase && !strcmp(o->result->phase, "sft")) {
        train_summary(o->result, msg, sizeof msg);   /* the line train prints last */
    } else if (!strcmp(o->status, "completed")) {
        snprintf(msg, sizeof msg, "trained v%04d in %lld steps", o->version, (long long)o->steps);
    } else {
        snprintf(msg, sizeof msg, "cancelled after step %lld of %lld; continue with --resume", (long long)o->steps,
                 (long long)o->total);
    }
    dlm_err e;
    err_clear(&e);
    if (v->hb && hb_finish(v->hb, o, msg, &e)) log_warn("exit record not written: %s", e.msg);
}

/* --detach: fork twice into a new session whose stdin is /dev/null and
 * whose stdout/stderr append to a console log in the store, then wait for
 * the run to take its store lock (or fail before) and report. Returns -1
 * in the detached process (which goes on to train), or the parent's exit
 * code. */
static int detach(const char *doc_path, dlm_ctx *ctx, view *v, char *console, size_t cap)
{
    dlm_err e;
    err_clear(&e);
    dlm_doc *d = doc_load(doc_path, &e);
    if (!d) return cmd_fail(ctx, &e);
    char store[4096], stamp[24];
    int rc = store_dir(ctx->home, doc_fm(d)->dlm_id, store, sizeof store, &e);
    doc_free(d);
    if (rc) return cmd_fail(ctx, &e);
    snprintf(console, cap, "%s/logs", store);
    if (fs_mkdir_p(console, &e)) return cmd_fail(ctx, &e);
    time_stamp_utc(time_now(), stamp, sizeof stamp);
    snprintf(console, cap, "%s/logs/train-%s-%d.console.log", store, stamp, (int)getpid());
    int fds[2];
    if (pipe(fds) != 0) { err_sys(&e, "cannot create a pipe"); return cmd_fail(ctx, &e); }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) { err_sys(&e, "cannot fork"); return cmd_fail(ctx, &e); }
    if (pid == 0) {
        /* the intermediate: a new session (no controlling terminal, so no
         * SIGHUP when the terminal goes), then fork again so the run is not
         * a session leader and can never reacquire a terminal */
        close(fds[0]);
        if (setsid() < 0) _exit(1);
        pid_t g = fork();
        if (g < 0) _exit(1);
        if (g > 0) _exit(0);
        int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
        int out = open(console, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (in < 0 || out < 0) _exit(1);
        dup2(in, 0);
        dup2(out, 1);
        dup2(out, 2);
        close(in);
        close(out);
        signal(SIGHUP, SIG_IGN);
        v->tty = 0;
        v->notify_fd = fds[1];
        v->hbo.console = console;
        v->hbo.detached = 1;
        return -1;
    }
    close(fds[1]);
    int st;
    waitpid(pid, &st, 0);
    /* "S<run id>" once the run holds the store; "E<code>\n<message>" when it
     * failed before that; nothing (EOF) if it died */
    char buf[8192];
    size_t n = 0;
    for (;;) {
        ssize_t r = read(fds[0], buf + n, sizeof buf - 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        n += (size_t)r;
        if (n >= sizeof buf - 1) break;
    }
    close(fds[0]);
    buf[n] = 0;
    if (buf[0] == 'S') {
        printf("training in the background: run %lld\n", atoll(buf + 1));
        if (!ctx->quiet)
            fprintf(stderr, "follow it:  dlm status %s --watch\n            dlm logs %s -f\nconsole log: %s\n"
                            "stop it (checkpoint kept): kill $(cat %s/run/run.pid)\n",
                    doc_path, doc_path, console, store);
        return EXIT_OK;
    }
    if (buf[0] == 'E') {
        char *nl = strchr(buf, '\n');
        fprintf(stderr, "%s", nl ? nl + 1 : "dlm: error: the detached run failed\n");
        int code = atoi(buf + 1);
        return code > 0 ? code : EXIT_FAIL;
    }
    fprintf(stderr, "dlm: error: the detached run exited before it started; see %s\n", console);
    return EXIT_FAIL;
}


/* The last line(s) of a run that ended with the preference phase: both
 * versions when --phase all trained two. */
static int print_pref(const train_result *res, const train_result *sft, int json, dlm_ctx *ctx)
{
    if (res->cancelled) return EXIT_INTERRUPTED;
    char dur[32];
    time_fmt_duration(res->seconds + (sft ? sft->seconds : 0), dur, sizeof dur);
    if (json) {
        json_t *j = json_pack("{s:i, s:s, s:I, s:f, s:f, s:f, s:f, s:s, s:s}", "version", res->version, "phase",
                              res->phase, "steps", (json_int_t)res->steps, "first_loss", res->first_loss,
                              "final_loss", res->final_loss, "rewards_margins", res->rewards_margin,
                              "rewards_accuracies", res->rewards_accuracy, "adapter_dir", res->version_dir, "log",
                              res->log_path);
        if (sft) json_object_set_new(j, "sft_version", json_integer(sft->version));
        cmd_print_json(j);
        return EXIT_OK;
    }
    if (sft)
        printf("trained v%04d (sft: %lld steps, loss %.3f → %.3f) and v%04d (%s: %lld steps, loss %.3f → %.3f,"
               " margin %.3f), %s\n", sft->version, (long long)sft->steps, sft->first_loss, sft->final_loss,
               res->version, res->phase, (long long)res->steps, res->first_loss, res->final_loss,
               res->rewards_margin, dur);
    else
        printf("trained v%04d (%s): %lld steps, loss %.3f → %.3f, margin %.3f, %s\n", res->version, res->phase,
               (long long)res->steps, res->first_loss, res->final_loss, res->rewards_margin, dur);
    if (!ctx->quiet) fprintf(stderr, "adapter: %s\nlog: %s\n", res->version_dir, res->log_path);
    return EXIT_OK;
}

/* "/N" for a cycle's progress line */
static const char *cyc_of(int n)
{
    static char buf[24];
    snprintf(buf, sizeof buf, "/%d", n);
    return buf;
}

/* --listen-rpc ends: stop answering; probes nobody trained are said */
static int rpc_end(inject_server *rpc, rpc_batch *b, int code)
{
    if (!rpc) return code;
    int left = inject_depth(rpc) + b->n;
    if (left) log_warn("rpc: %d injected probe(s) not trained: the loop stopped before a cycle took them", left);
    inject_stop(rpc);
    rpc_batch_free(b);
    return code;
}

int cmd_train(int argc, char **argv, dlm_ctx *ctx)
{
    train_args a = {.seed = -1, .watch_max_steps = 100, .watch_debounce_ms = 400};
    char *pos[64];
    int npos;
    int r = opts_parse(&spec_train, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos != 1) return cmd_usage_error(&spec_train, "train needs exactly one PATH (a .dlm file or a directory)");
    if (a.recursive && a.no_recursive) return cmd_usage_error(&spec_train, "-r/--recursive and -R/--no-recursive are mutually exclusive");
    if (a.policy && strcmp(a.policy, "strict") && strcmp(a.policy, "permissive"))
        return cmd_usage_error(&spec_train, "--policy expects strict or permissive, got '%s'", a.policy);
    if (a.resume + a.cont + a.fresh > 1)
        return cmd_usage_error(&spec_train, "--resume, --continue and --fresh are mutually exclusive");
    if (a.update + a.ignore + a.strict > 1)
        return cmd_usage_error(&spec_train, "--strict-lock / --update-lock / --ignore-lock are mutually exclusive");
    if (a.max_steps < 0) return cmd_usage_error(&spec_train, "--max-steps must be >= 0");
    if (a.watch && (a.detach || a.dry_run)) return cmd_usage_error(&spec_train, "--watch runs in the foreground, without --detach/--dry-run");
    if (a.watch_max_steps < 1 || a.watch_debounce_ms < 0)
        return cmd_usage_error(&spec_train, "--watch-max-steps must be >= 1 and --watch-debounce-ms >= 0");
    /* --listen-rpc: the original's gates and messages (exit 2), then dlm's:
     * --max-cycles and --i-know-this-is-public do nothing alone, so they
     * are refused alone; the address is loopback unless opted in */
    char rpc_host[256] = "";
    int rpc_port = 0;
    const char *rpc_token = NULL;
    char token_buf[1024];
    if (a.max_cycles < 0) return cmd_usage_error(&spec_train, "--max-cycles must be >= 0");
    if (!a.listen_rpc && (a.max_cycles || a.rpc_public))
        return cmd_usage_error(&spec_train, "--max-cycles and --i-know-this-is-public are options of --listen-rpc HOST:PORT");
    if (a.listen_rpc) {
        if (!a.watch && a.max_cycles <= 0)
            return cmd_usage_error(&spec_train, "--listen-rpc requires --watch or --max-cycles N (the probe queue needs a drain cadence)");
        if (a.detach || a.dry_run) return cmd_usage_error(&spec_train, "--listen-rpc runs in the foreground, without --detach/--dry-run");
        if (a.phase && !strcmp(a.phase, "preference"))
            return cmd_usage_error(&spec_train, "--listen-rpc trains probes as Q/A pairs (the SFT phase); --phase preference would never train them");
        const char *t = getenv("DLM_PROBE_TOKEN");
        const char *tb = t ? t : "", *te = tb + strlen(tb);
        py_strip(&tb, &te);
        if (te == tb) return cmd_usage_error(&spec_train, "--listen-rpc needs a bearer token; export DLM_PROBE_TOKEN=<secret>");
        if ((size_t)(te - tb) >= sizeof token_buf) return cmd_usage_error(&spec_train, "DLM_PROBE_TOKEN is longer than %zu bytes", sizeof token_buf - 1);
        memcpy(token_buf, tb, (size_t)(te - tb));
        token_buf[te - tb] = 0;
        rpc_token = token_buf;
        dlm_err pe;
        if (inject_parse_listen(a.listen_rpc, rpc_host, sizeof rpc_host, &rpc_port, &pe))
            return cmd_usage_error(&spec_train, "%s", pe.msg);
        if (inject_host_is_loopback(rpc_host) && a.rpc_public)
            return cmd_usage_error(&spec_train, "--i-know-this-is-public opens a non-loopback --listen-rpc address; %s is loopback",
                                   rpc_host);
        if (!inject_host_is_loopback(rpc_host) && !a.rpc_public)
            return cmd_usage_error(&spec_train, "--listen-rpc %s is not a loopback address: anyone who reaches it with the token "
                                                "adds training data; use 127.0.0.1, or add --i-know-this-is-public", a.listen_rpc);
    }
    int ph_sft = 1, ph_pref = 1;
    if (a.phase && !strcmp(a.phase, "sft")) ph_pref = 0;
    else if (a.phase && !strcmp(a.phase, "preference")) ph_sft = 0;
    else if (a.phase && strcmp(a.phase, "all"))
        return cmd_usage_error(&spec_train, "--phase expects sft, preference or all, got '%s'", a.phase);
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    /* DIR mode: find or write DIR/.dlm/<name>.dlm, then train it */
    char scaffold_path[4400];
    const char *base_override = a.base;
    if (fs_is_dir(pos[0])) {
        scaffold_opts so = {.base = a.base, .name = a.name, .include = &a.include, .exclude = &a.exclude,
                            .recursive = !a.no_recursive, .policy_strict = !a.policy || !strcmp(a.policy, "strict"),
                            .rescaffold = a.rescaffold, .dry_run = a.dry_run};
        int made;
        if (scaffold_train_target(pos[0], &so, scaffold_path, sizeof scaffold_path, &made, &e)) return cmd_fail(ctx, &e);
        if (!made && (a.include.n || a.exclude.n || a.policy || a.recursive || a.no_recursive || a.base))
            log_warn("%s exists: --base/--include/--exclude/--policy/-r/-R apply to a new scaffold only; "
                     "pass --rescaffold to rewrite it", scaffold_path);
        if (made == 2) {   /* --dry-run: shown as the scaffold a real run writes, then removed */
            char shown[4400];
            fs_dirname(shown, sizeof shown, scaffold_path);
            snprintf(shown + strlen(shown), sizeof shown - strlen(shown), "/%s.dlm", a.name ? a.name : SCAFFOLD_DEFAULT_NAME);
            if (!ctx->quiet)
                fprintf(stderr, "dry run: %s would be %s; nothing is written\n", shown,
                        a.rescaffold ? "rewritten" : "scaffolded");
            int bad = srcview_print(scaffold_path, shown, a.json, &e);
            scaffold_discard(scaffold_path);
            return bad ? cmd_fail(ctx, &e) : EXIT_OK;
        }
        if (!ctx->quiet) fprintf(stderr, "%s %s\n", made ? "scaffolded" : "using", scaffold_path);
        pos[0] = scaffold_path;
        base_override = NULL;     /* the scaffold carries the base */
    } else if (a.include.n || a.exclude.n || a.name || a.policy || a.rescaffold || a.recursive || a.no_recursive) {
        return cmd_usage_error(&spec_train, "--include/--exclude/--name/--policy/--rescaffold/-r/-R need a DIR");
    }
    if (a.dry_run) return srcview_print(pos[0], NULL, a.json, &e) ? cmd_fail(ctx, &e) : EXIT_OK;
    if (cmd_check_license(ctx, pos[0], a.base, a.accept, 1, &e)) return cmd_fail(ctx, &e);
    /* the adapters this command trains: the document's one, or the named
     * ones of training.adapters in declaration order (--adapter: one) */
    char names[MAX_NAMED][33];   /* a local, as the options are: the command stays reentrant */
    int n_names = 0, gate_enabled = 0;
    {   /* keys the document sets that dlm does not act on yet: said, not ignored */
        dlm_doc *nd = doc_load(pos[0], &e);
        if (!nd) return cmd_fail(ctx, &e);
        run_inert_notes(&doc_fm(nd)->training, inert_note, NULL);
        const doc_training *tr = &doc_fm(nd)->training;
        if (a.adapter && doc_adapter_index(doc_fm(nd), a.adapter) < 0) {
            dlm_doc *tmp = nd;
            nd = NULL;
            doc_scope_adapter(tmp, a.adapter, &e);   /* only for its UnknownAdapterError */
            doc_free(tmp);
            return cmd_fail(ctx, &e);
        }
        for (int i = 0; tr->adapters && i < tr->n_adapters && n_names < MAX_NAMED; i++)
            if (!a.adapter || !strcmp(a.adapter, tr->adapters[i].name))
                snprintf(names[n_names++], sizeof names[0], "%s", tr->adapters[i].name);
        int too_many = tr->n_adapters > MAX_NAMED;
        gate_enabled = tr->gate.enabled;
        doc_free(nd);
        if (too_many) {
            err_set(&e, "SchemaValidationError", "%s declares more than %d adapters", pos[0], MAX_NAMED);
            return cmd_fail(ctx, &e);
        }
        if (n_names > 1 && (a.watch || a.listen_rpc))
            return cmd_usage_error(&spec_train, "--watch and --listen-rpc train one adapter: add --adapter NAME");
    }
    unsigned long long maxmem = 0;
    if (a.max_memory && str_parse_size(a.max_memory, &maxmem))
        return cmd_usage_error(&spec_train, "--max-memory expects a size like 8G or 512M, got '%s'", a.max_memory);

    /* under mpirun (Open MPI or a PMI launcher): join the job; rank 0 leads */
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMI_SIZE") || getenv("PMIX_RANK")) {
        if (dist_init(&argc, &argv, &e)) return cmd_fail(ctx, &e);
        atexit(dist_finalize);
        if (dist_size() > 1 && (a.watch || a.detach || a.listen_rpc))
            return cmd_usage_error(&spec_train, "--watch, --listen-rpc and --detach run one process; under mpirun run the job in the foreground");
    }
    /* the test hooks are read here, the one place that reads the environment;
     * DLM_TEST_CRASH_RANK=R limits the crash to one rank of an MPI job */
    const char *crash = getenv("DLM_TEST_CRASH_AFTER_STEP"), *delay = getenv("DLM_TEST_STEP_DELAY_MS"),
               *crash_rank = getenv("DLM_TEST_CRASH_RANK"), *eval_every = getenv("DLM_TEST_EVAL_EVERY");
    if (crash && crash_rank && atoi(crash_rank) != dist_rank()) crash = NULL;
    train_opts o = {.doc_path = pos[0], .home = ctx->home, .resume = a.resume || a.cont, .need_ckpt = a.resume,
                    .fresh = a.fresh,
                    .max_steps = a.max_steps, .seed = a.seed, .threads = a.threads,
                    .lock = a.update ? LOCK_UPDATE : a.ignore ? LOCK_IGNORE : a.strict ? LOCK_STRICT : LOCK_DEFAULT,
                    .no_replay = a.no_replay, .max_memory = maxmem, .force = a.force, .base_override = base_override,
                    .offline = a.offline, .test_crash_after_step = crash ? atoll(crash) : 0,
                    .test_step_delay_ms = delay ? atoi(delay) : 0,
                    .test_eval_every = eval_every ? atoi(eval_every) : 0, .no_mined = a.no_mined, .no_cache = a.no_cache,
                    .same_store = a.same_store, .strict_metrics = a.strict_metrics};
    view v;
    memset(&v, 0, sizeof v);
    v.tty = isatty(2);
    v.quiet = ctx->quiet;
    v.notify_fd = -1;
    v.resume = a.resume || a.cont;
    char abs_doc[4096], console[4400];
    if (!realpath(pos[0], abs_doc)) snprintf(abs_doc, sizeof abs_doc, "%s", pos[0]);
    v.hbo.doc_path = abs_doc;
    if (a.detach) {
        int dr = detach(pos[0], ctx, &v, console, sizeof console);
        if (dr >= 0) return dr;
    }
    /* --listen-rpc: listen before the first run (a taken port fails now,
     * not after it; probes sent during it wait for the first cycle) */
    inject_server *rpc = NULL;
    rpc_batch batch;
    memset(&batch, 0, sizeof batch);
    char rpc_store[4096] = "";
    int rpc_reported = 0;       /* the last cycle whose end was said */
    if (a.listen_rpc) {
        inject_server_opts io = {.host = rpc_host, .port = rpc_port, .token = rpc_token};
        rpc = inject_start(&io, &e);
        sodium_memzero(token_buf, sizeof token_buf);
        if (!rpc) return cmd_fail(ctx, &e);
        v.rpc = rpc;
        int port = inject_port(rpc);
        if (a.json) {
            cmd_print_json(json_pack("{s:{s:s, s:i, s:s, s:i, s:i}}", "rpc", "host", rpc_host, "port", port, "path", "/rpc",
                                     "queue_capacity", INJECT_QUEUE_CAP, "max_cycles", a.max_cycles));
            fflush(stdout);
        }
        fprintf(stderr, "rpc: listening on %s:%d (queue capacity %d)\n", rpc_host, port, INJECT_QUEUE_CAP);
    }
    train_hooks h = {.ctx = &v, .progress = on_progress, .note = on_note, .should_stop = should_stop,
                     .started = on_started, .finished = on_finished};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* the terminal going away stops a foreground run like Ctrl-C (step,
     * checkpoint, cancelled); a detached run ignores SIGHUP */
    if (!a.detach) sigaction(SIGHUP, &sa, NULL);
    /* --phase all: does the document want the preference phase? */
    int both = ph_sft && ph_pref, pref_wanted = !both, ph_pref0 = ph_pref, ai = 0;
    train_result res, sft_res;
    int have_sft = 0, cycle = 0, n_nothing = 0;
next_adapter:
    o.adapter = n_names ? names[ai] : NULL;
    o.resume = a.resume || a.cont;   /* the preference phase of the previous adapter cleared them */
    o.need_ckpt = a.resume;
    o.fresh = a.fresh;
    ph_pref = ph_pref0;
    if (n_names > 1 && !ctx->quiet && !a.json) fprintf(stderr, "adapter %s (%d/%d)\n", names[ai], ai + 1, n_names);
    if (both) {
        dlm_doc *d = doc_load(pos[0], &e);
        if (!d) return cmd_fail(ctx, &e);
        int triples = 0;
        for (int i = 0; i < doc_nsections(d); i++)
            if (doc_section_at(d, i)->type == DOC_PREFERENCE && !(a.no_mined && doc_section_at(d, i)->auto_mined) &&
                (!o.adapter || doc_section_routes_to(doc_fm(d), doc_section_at(d, i), o.adapter)))
                triples += doc_section_at(d, i)->n_triples;
        const doc_training *tr = &doc_fm(d)->training;
        /* enabled: as written, else on when the document has preference sections (spec §3.1 step 5) */
        int enabled = tr->preference.enabled_explicit ? tr->preference.enabled : triples > 0;
        pref_wanted = enabled && triples > 0;
        if (triples && !enabled && !ctx->quiet)
            fprintf(stderr, "note: %d preference triple(s) skipped: training.preference.enabled is false; to train"
                            " them write in the frontmatter:\n  training:\n    preference:\n      enabled: true\n",
                    triples);
        doc_free(d);
        if (!pref_wanted) ph_pref = 0;
    }
    memset(&sft_res, 0, sizeof sft_res);
    o.phase_all = both;
again:
    have_sft = 0;
    if (ph_sft) {
        o.phase = TRAIN_SFT;
        r = train_run(&o, &h, &res, &e);
        clear_line(&v);
        hb_free(v.hb);
        v.hb = NULL;
        if (!r && !res.no_op && !res.cancelled) { sft_res = res; have_sft = 1; }
        if (!r && res.deferred && !ph_pref && !ctx->quiet)
            fprintf(stderr, "note: the checkpoint belongs to the preference phase; continue it with 'dlm train %s"
                            " --phase preference --resume'\n", pos[0]);
        if (!r && ph_pref && !res.cancelled) {
            if (have_sft && !ctx->quiet && !a.json)
                fprintf(stderr, "sft: v%04d (%lld steps); next: the preference phase\n", res.version,
                        (long long)res.steps);
            /* the preference phase starts from what SFT just committed;
             * a --resume found no SFT work left to resume */
            if (!res.deferred) o.resume = 0;
            o.fresh = 0;
            o.phase = TRAIN_PREFERENCE;
            o.injected = NULL;   /* the probes are Q/A: SFT's version records them */
            r = train_run(&o, &h, &res, &e);
            clear_line(&v);
            hb_free(v.hb);
            v.hb = NULL;
        }
    } else {
        o.phase = TRAIN_PREFERENCE;
        o.injected = NULL;
        r = train_run(&o, &h, &res, &e);
        clear_line(&v);
        hb_free(v.hb);
        v.hb = NULL;
    }
    if (r && n_names > 1 && !a.adapter && a.resume && !strcmp(e.kind, "ResumeError") &&
        !strncmp(e.msg, "nothing to resume", 17)) {
        /* --resume over named adapters: the ones with nothing to resume are
         * said and passed; only when none has a checkpoint is it an error */
        if (!ctx->quiet) fprintf(stderr, "adapter %s: %s\n", names[ai], e.msg);
        n_nothing++;
        if (n_nothing < n_names) {
            err_clear(&e);
            r = 0;
            res.no_op = 1;
            goto adapter_done;
        }
        err_set(&e, "ResumeError", "nothing to resume: no adapter of %s has a checkpoint", pos[0]);
        err_hint(&e, "'dlm train %s' trains new versions; --continue trains the current ones further", pos[0]);
    }
    if (r && v.notify_fd >= 0) {
        /* failed before the run started: tell the waiting parent why */
        char line[8192];
        int n = snprintf(line, sizeof line, "E%d\n", e.code ? e.code : EXIT_FAIL);
        FILE *f = fmemopen(line + n, sizeof line - (size_t)n, "w");
        if (f) {
            err_print(f, &e, ctx->verbose);
            fclose(f);
        }
        if (write(v.notify_fd, line, strlen(line)) < 0) { /* the parent is gone */ }
        close(v.notify_fd);
        v.notify_fd = -1;
    }
    if (r) {
        int code = cmd_fail(ctx, &e);
        /* under MPI the other ranks wait for this one: end them all */
        if (dist_size() > 1) dist_abort(code);
        return code;
    }
    if (dist_rank() != 0) return res.cancelled ? EXIT_INTERRUPTED : EXIT_OK;
    if (res.no_op) goto adapter_done;
    if (strcmp(res.phase, "sft")) {
        if (o.adapter && !a.json) printf("adapter %s: ", o.adapter);
        int pr = print_pref(&res, have_sft ? &sft_res : NULL, a.json, ctx);
        if (pr != EXIT_OK) return pr;
        if (!a.watch && !rpc) goto adapter_done;
        goto watch;
    }
    if (res.cancelled) return EXIT_INTERRUPTED;
    char dur[32], line[512];
    time_fmt_duration(res.seconds, dur, sizeof dur);
    train_summary(&res, line, sizeof line);
    if (a.json) {
        json_t *j = json_pack("{s:i, s:I, s:f, s:f, s:o, s:f, s:s, s:s, s:b}", "version", res.version, "steps",
                              (json_int_t)res.steps, "first_loss", res.first_loss, "final_loss", res.final_loss,
                              "val_loss", isfinite(res.val_loss) ? json_real(res.val_loss) : json_null(), "seconds",
                              res.seconds, "adapter_dir", res.version_dir, "log", res.log_path, "early_stopped",
                              res.early_stopped);
        json_object_set_new(j, "committed_step", json_integer((json_int_t)res.committed_step));
        json_object_set_new(j, "total_steps", json_integer((json_int_t)res.total));
        if (o.adapter) json_object_set_new(j, "adapter", json_string(o.adapter));
        if (rpc && cycle) {
            json_object_set_new(j, "cycle", json_integer(cycle));
            json_object_set_new(j, "max_cycles", json_integer(a.max_cycles));
            json_object_set_new(j, "injected_probes", json_integer(batch.n_kept));
        }
        json_object_set_new(j, "val_frac", json_real(res.val_frac));
        json_object_set_new(j, "held_out_rows", json_integer(res.held_out));
        json_object_set_new(j, "rows", json_integer(res.rows));
        cmd_print_json(j);
    } else {
        if (o.adapter) printf("adapter %s: ", o.adapter);
        printf("%s, %s\n", line, dur);
        if (!ctx->quiet) fprintf(stderr, "adapter: %s\nlog: %s\n", res.version_dir, res.log_path);
    }
    if (res.steps > 1 && res.final_loss > 0.95 * res.first_loss)
        log_warn("the loss fell less than 5%% (%.3f → %.3f): the adapter learned little. Try more epochs"
                 " (training.num_epochs), a higher training.learning_rate, or more Q&A pairs in the document",
                 res.first_loss, res.final_loss);
adapter_done:
    /* the next named adapter: same flags, its own tree (a --resume
     * continues each adapter's own checkpoint or version) */
    if (ai + 1 < n_names) {
        ai++;
        goto next_adapter;
    }
    /* training.gate: after every adapter of the document, the router
     * (src/run/gate_run.h); it depends on the document and the base only */
    if (n_names > 1 && !a.adapter && gate_enabled && !res.cancelled && !cycle) {
        gate_run_result gr;
        if (gate_run(pos[0], ctx->home, a.offline, &gr, &e)) return cmd_fail(ctx, &e);
        if (!ctx->quiet && !a.json) {
            fprintf(stderr, "gate: %s, %d prompt(s) (", gr.trained ? "trained" : "uniform (cold start)", gr.n_samples);
            for (int k = 0; k < n_names; k++) fprintf(stderr, "%s%s %d", k ? ", " : "", names[k], gr.per_adapter[k]);
            if (gr.trained) fprintf(stderr, "); loss %.4f, entropy %.4f\n", gr.tr.final_loss, gr.tr.final_entropy);
            else fprintf(stderr, "; training.gate.cold_start_floor not reached)\n");
        }
        if (a.json) {
            json_t *j = json_pack("{s:{s:s, s:i, s:s}}", "gate", "mode", gr.trained ? "trained" : "uniform", "samples",
                                  gr.n_samples, "dir", gr.dir);
            cmd_print_json(j);
        }
    }
watch:
    if (rpc && cycle > rpc_reported) {
        /* the cycle that just ran: its probes' audit lines and progress */
        rpc_reported = cycle;
        dlm_err ae;
        if (batch.n && rpc_batch_audit(&batch, rpc_store, res.no_op ? 0 : res.run_id, res.no_op ? 0 : res.version, &ae))
            log_warn("rpc: %s", ae.msg);
        if (!ctx->quiet && !res.no_op)
            fprintf(stderr, "rpc: cycle %d%s done: v%04d trained %d injected probe(s)\n", cycle, a.max_cycles ? cyc_of(a.max_cycles) : "",
                    res.version, batch.n_kept);
        rpc_batch_free(&batch);
    }
    if (a.watch || rpc) {
        /* --watch: wait for a debounced edit; --listen-rpc: for injected
         * probes too. Retrain from the current version (resume mode,
         * bounded) only when that adds section ids the store has not
         * trained on; Ctrl-C between runs ends cleanly */
        if (!cycle && !ctx->quiet) {
            if (a.watch) fprintf(stderr, "watching %s (Ctrl-C stops)\n", pos[0]);
            if (rpc && a.max_cycles) fprintf(stderr, "rpc: waiting for probes for cycle 1 of %d (Ctrl-C stops)\n", a.max_cycles);
            else if (rpc) fprintf(stderr, "rpc: waiting for probes (Ctrl-C stops)\n");
        }
        for (;;) {
            if (rpc && a.max_cycles && cycle >= a.max_cycles) {
                if (!ctx->quiet) fprintf(stderr, "rpc: %d cycle(s) done; stopping\n", cycle);
                return rpc_end(rpc, &batch, EXIT_OK);
            }
            if (rpc) inject_set_eta(rpc, (a.watch_debounce_ms + 999) / 1000);
            int w = watch_wait(a.watch ? pos[0] : NULL, a.watch_debounce_ms, rpc ? inject_wake_fd(rpc) : -1, &g_stop, &e);
            if (w < 0) return rpc_end(rpc, &batch, cmd_fail(ctx, &e));
            if (w == 0) return rpc_end(rpc, &batch, EXIT_OK);
            if (rpc) {
                inject_probe *pr = NULL;
                int np = 0;
                if (inject_drain(rpc, &pr, &np) || rpc_batch_add(&batch, pr, np, &e)) {
                    free(pr);
                    return rpc_end(rpc, &batch, cmd_fail(ctx, &e));
                }
                free(pr);
            }
            int n_new, n_total;
            if (watch_new_sections(pos[0], ctx->home, batch.secs, batch.n, batch.ok, batch.why, &n_new, &n_total, rpc_store,
                                   sizeof rpc_store, &e)) {
                /* a broken edit: report it and keep watching (drained
                 * probes stay in the batch for the next try) */
                err_print(stderr, &e, ctx->verbose);
                err_clear(&e);
                continue;
            }
            if (rpc_batch_settle(&batch, &e)) return rpc_end(rpc, &batch, cmd_fail(ctx, &e));
            for (int i = 0; i < batch.n; i++)
                if (!batch.ok[i]) log_warn("rpc: probe '%.60s' is not trained: %s", batch.p[i].prompt, batch.why[i] ? batch.why[i] : "refused");
            if (!n_new) {
                if (ctx->quiet) {
                } else if (!batch.n) {
                    fprintf(stderr, "no new sections; not retraining\n");
                } else if (!batch.n_kept) {
                    fprintf(stderr, "rpc: none of the %d probe(s) can train (see above); not retraining\n", batch.n);
                } else {
                    fprintf(stderr, "rpc: the %d probe(s) bring no new section (trained already); not retraining\n", batch.n);
                }
                if (batch.n && rpc_batch_audit(&batch, rpc_store, 0, 0, &e)) {
                    log_warn("rpc: %s", e.msg);
                    err_clear(&e);
                }
                rpc_batch_free(&batch);
                continue;
            }
            cycle++;
            if (rpc) {
                /* the last cycle has drained: later probes could never train */
                if (a.max_cycles && cycle == a.max_cycles) inject_close_queue(rpc);
                o.extra = batch.kept;
                o.n_extra = batch.n_kept;
                o.injected = batch.n_kept ? batch.record : NULL;   /* an edit-only cycle records none */
                if (!ctx->quiet)
                    fprintf(stderr, "rpc: cycle %d%s: %d injected probe(s), %d new section(s): retraining (resume mode, <= %d steps)\n",
                            cycle, a.max_cycles ? cyc_of(a.max_cycles) : "", batch.n_kept, n_new, a.watch_max_steps);
            } else if (!ctx->quiet) {
                fprintf(stderr, "%d new section(s): retraining (resume mode, <= %d steps)\n", n_new, a.watch_max_steps);
            }
            o.resume = 1;
            o.need_ckpt = 0;
            o.fresh = 0;
            o.max_steps = a.watch_max_steps;
            goto again;
        }
    }
    return rpc_end(rpc, &batch, EXIT_OK);
}
