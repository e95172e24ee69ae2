/* dlm train — see src/train/trainer.h for what a run does. This file owns
 * the terminal: flags, the live progress line, signals, the last line. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "train/trainer.h"
#include "util/json.h"
#include "util/log.h"
#include "util/str.h"
#include "util/timeutil.h"

static int o_resume, o_fresh, o_max_steps, o_seed = -1, o_threads, o_update, o_ignore, o_strict, o_no_replay,
           o_force, o_json, o_offline;
static const char *o_max_memory, *o_base;

static const opt OPTS[] = {
    {"resume", 0, OPT_FLAG, &o_resume, NULL, "continue the interrupted run (or the current version) exactly"},
    {"fresh", 0, OPT_FLAG, &o_fresh, NULL, "start a new adapter from the base (drops a leftover checkpoint)"},
    {"max-steps", 0, OPT_INT, &o_max_steps, "N", "stop after N optimizer steps"},
    {"seed", 0, OPT_INT, &o_seed, "N", "override training.seed"},
    {"threads", 0, OPT_INT, &o_threads, "N", "compute threads (default: training.threads or all cores)"},
    {"base", 0, OPT_STR, &o_base, "BASE", "override base_model for this run"},
    {"no-replay", 0, OPT_FLAG, &o_no_replay, NULL, "train on the current document only"},
    {"max-memory", 0, OPT_STR, &o_max_memory, "SIZE", "memory budget, e.g. 8G (default: available RAM)"},
    {"force", 0, OPT_FLAG, &o_force, NULL, "train even when the memory plan does not fit"},
    {"update-lock", 0, OPT_FLAG, &o_update, NULL, "skip the dlm.lock check and rewrite it"},
    {"ignore-lock", 0, OPT_FLAG, &o_ignore, NULL, "skip the dlm.lock check, do not write it"},
    {"strict-lock", 0, OPT_FLAG, &o_strict, NULL, "lock warnings become errors"},
    {"offline", 0, OPT_FLAG, &o_offline, NULL, "never download the base"},
    {"json", 0, OPT_FLAG, &o_json, NULL, "print the result as JSON on stdout"},
    {0},
};

const cmd_spec spec_train = {
    "train", "PATH [--resume | --fresh] [--max-steps N] [--seed N] [--threads N]",
    "train a LoRA adapter on the document and commit it as the next version",
    "Each run trains on every prose and Q&A section plus a replay sample of sections\n"
    "earlier versions saw, checkpoints every training.save_steps, and commits\n"
    "adapter/versions/vNNNN in PEFT's format. Ctrl-C finishes the step, saves a\n"
    "checkpoint and stops; 'dlm train PATH --resume' continues bit-exactly.",
    OPTS,
};

static volatile sig_atomic_t g_stop;
static void on_signal(int sig)
{
    if (g_stop) { /* a second signal: leave now */
        signal(sig, SIG_DFL);
        raise(sig);
    }
    g_stop = 1;
}

typedef struct view {
    int tty, quiet;
    double last_print;
    int64_t last_step;
    int dirty;
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

static const char *phase_name(train_phase p)
{
    switch (p) {
    case PHASE_LOADING: return "loading";
    case PHASE_TRAINING: return "training";
    case PHASE_EVALUATING: return "evaluating";
    case PHASE_SAVING: return "saving";
    default: return "done";
    }
}

static void on_progress(void *ctx, const train_progress *p)
{
    view *v = ctx;
    if (v->quiet) return;
    char eta[32] = "", val[32] = "";
    if (p->eta > 0) { strcpy(eta, " ETA "); time_fmt_duration(p->eta, eta + 5, sizeof eta - 5); }
    if (isfinite(p->val_loss)) snprintf(val, sizeof val, "  val %.4f", p->val_loss);
    if (p->phase == PHASE_LOADING) {
        if (!v->tty) fprintf(stderr, "loading base and document...\n");
        return;
    }
    if (v->tty) {
        fprintf(stderr, "\r\033[K  %s step %lld/%lld  loss %.4f%s  lr %.2e  %.0f tok/s%s", phase_name(p->phase),
                (long long)p->step, (long long)p->total, p->loss, val, p->lr, p->tokens_per_sec, eta);
        v->dirty = 1;
        return;
    }
    /* plain lines: about 20 per run, and at least every 10 s */
    double now = time_mono();
    int64_t every = p->total / 20 > 1 ? p->total / 20 : 1;
    if (p->phase != PHASE_TRAINING) return;
    if (p->step == p->total || p->step - v->last_step >= every || now - v->last_print >= 10) {
        fprintf(stderr, "step %lld/%lld loss %.4f%s lr %.2e %.0f tok/s%s\n", (long long)p->step, (long long)p->total,
                p->loss, val, p->lr, p->tokens_per_sec, eta);
        v->last_print = now;
        v->last_step = p->step;
    }
}

static int should_stop(void *ctx) { (void)ctx; return g_stop != 0; }

int cmd_train(int argc, char **argv, dlm_ctx *ctx)
{
    char *pos[64];
    int npos;
    int r = opts_parse(&spec_train, argc, argv, ctx, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos != 1) return cmd_usage_error(&spec_train, "train needs exactly one PATH (a .dlm file)");
    if (o_resume && o_fresh) return cmd_usage_error(&spec_train, "--resume and --fresh are mutually exclusive");
    if (o_update + o_ignore + o_strict > 1)
        return cmd_usage_error(&spec_train, "--strict-lock / --update-lock / --ignore-lock are mutually exclusive");
    if (o_max_steps < 0 || o_threads < 0) return cmd_usage_error(&spec_train, "--max-steps and --threads must be >= 0");
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    unsigned long long maxmem = 0;
    if (o_max_memory && str_parse_size(o_max_memory, &maxmem))
        return cmd_usage_error(&spec_train, "--max-memory expects a size like 8G or 512M, got '%s'", o_max_memory);

    train_opts o = {pos[0], ctx->home, o_resume, o_fresh, o_max_steps, o_seed, o_threads,
                    o_update ? LOCK_UPDATE : o_ignore ? LOCK_IGNORE : o_strict ? LOCK_STRICT : LOCK_DEFAULT,
                    o_no_replay, maxmem, o_force, o_base, o_offline};
    view v = {isatty(2), ctx->quiet, 0, 0, 0};
    train_hooks h = {&v, on_progress, on_note, should_stop};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    train_result res;
    r = train_run(&o, &h, &res, &e);
    clear_line(&v);
    if (r) return cmd_fail(ctx, &e);
    if (res.no_op) return EXIT_OK;
    if (res.cancelled) return EXIT_INTERRUPTED;
    char dur[32], val[48] = "";
    time_fmt_duration(res.seconds, dur, sizeof dur);
    if (isfinite(res.val_loss)) snprintf(val, sizeof val, " (val %.3f)", res.val_loss);
    if (o_json) {
        json_t *j = json_pack("{s:i, s:I, s:f, s:f, s:o, s:f, s:s, s:s, s:b}", "version", res.version, "steps",
                              (json_int_t)res.steps, "first_loss", res.first_loss, "final_loss", res.final_loss,
                              "val_loss", isfinite(res.val_loss) ? json_real(res.val_loss) : json_null(), "seconds",
                              res.seconds, "adapter_dir", res.version_dir, "log", res.log_path, "early_stopped",
                              res.early_stopped);
        strbuf sb = STRBUF_INIT;
        json_write(&sb, j, JW_SORT);
        printf("%s\n", sb_str(&sb));
        sb_free(&sb);
        json_decref(j);
    } else {
        printf("trained v%04d: %lld steps, loss %.3f → %.3f%s, %s\n", res.version, (long long)res.steps,
               res.first_loss, res.final_loss, val, dur);
        if (!ctx->quiet) fprintf(stderr, "adapter: %s\nlog: %s\n", res.version_dir, res.log_path);
    }
    if (res.steps > 1 && res.final_loss > 0.95 * res.first_loss)
        log_warn("the loss fell less than 5%% (%.3f → %.3f): the adapter learned little. Try more epochs"
                 " (training.num_epochs), a higher training.learning_rate, or more Q&A pairs in the document",
                 res.first_loss, res.final_loss);
    return EXIT_OK;
}
