/* heartbeat — see heartbeat.h. The JSON is rendered with snprintf into
 * fixed buffers: the per-step rewrite allocates nothing. */
#include "run/heartbeat.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/json.h"
#include "util/timeutil.h"

#define HB_TEXT 12288

struct heartbeat {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t timer;
    int timer_on, quit;
    char dir[4200], hb_path[4300], exit_path[4300];
    char doc[4096], console[4096], log[4096];
    char adapter[128];       /* the progress's adapter name, copied ("" none) */
    int detached, stopping;
    long pid;
    uint64_t pid_start;
    int64_t run_id;
    double started, last_write;
    char started_at[24];
    train_progress p;        /* last progress (log_path copied into log) */
    int have_p;
};

/* The exit record a second signal writes: prepared in hb_start, written by
 * hb_exit_now with open/write/rename only. */
static struct {
    volatile sig_atomic_t ready;
    char tmp[4400], path[4300];
    char text[3][1024];      /* SIGHUP, SIGINT, SIGTERM */
    size_t len[3];
} g_now;

/* JSON string body (without quotes) of s into out; control bytes escaped. */
static void esc(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (; s && *s && n + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { out[n++] = '\\'; out[n++] = (char)c; }
        else if (c < 0x20) n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
        else out[n++] = (char)c;
    }
    out[n] = 0;
}

/* A number, or null when it is not finite. */
static void num(double d, char *buf, size_t cap)
{
    if (isfinite(d)) json_fmt_double(d, buf, cap);
    else snprintf(buf, cap, "null");
}

uint64_t hb_pid_start(long pid, int *alive)
{
    char path[64], buf[2048];
    if (alive) *alive = 0;
    if (pid <= 0) return 0;
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    /* "pid (comm) S ppid ...": comm may hold spaces and ')', so parse from
     * the last ')'; the start time is field 22 */
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ') return 0;
    char state = p[2];
    p += 2;
    for (int field = 3; field < 22 && p; field++) {
        p = strchr(p, ' ');
        if (p) p++;
    }
    if (!p) return 0;
    if (alive) *alive = state != 'Z' && state != 'X';
    return strtoull(p, NULL, 10);
}

static int write_hb(heartbeat *h, dlm_err *e)
{
    char text[HB_TEXT], doc[8300], con[8300], log[8300], ad[300], loss[32], val[32], lr[32], tps[32], el[32], eta[32], upd[24];
    const train_progress *p = &h->p;
    /* whole milliseconds, rounded down: updated_unix is written with 3
     * decimals, and rounding up would put the heartbeat in the future (a
     * negative age for a reader in the same millisecond) */
    double now = floor(time_now() * 1000.0) / 1000.0;
    time_iso_utc(now, upd, sizeof upd);
    esc(h->doc, doc, sizeof doc);
    esc(h->console, con, sizeof con);
    esc(h->log, log, sizeof log);
    esc(h->adapter, ad, sizeof ad);
    num(h->have_p ? p->loss : NAN, loss, sizeof loss);
    num(h->have_p ? p->val_loss : NAN, val, sizeof val);
    num(h->have_p ? p->lr : NAN, lr, sizeof lr);
    num(h->have_p ? p->tokens_per_sec : NAN, tps, sizeof tps);
    num(time_mono() - h->started, el, sizeof el);
    num(h->have_p && p->eta > 0 ? p->eta : NAN, eta, sizeof eta);
    int n = snprintf(text, sizeof text,
                     "{\n  \"adapter_name\": %s%s%s,\n  \"console\": %s%s%s,\n  \"detached\": %s,\n  \"doc\": \"%s\",\n  \"elapsed_s\": %s,\n"
                     "  \"eta_s\": %s,\n  \"log\": %s%s%s,\n  \"loss\": %s,\n  \"lr\": %s,\n  \"phase\": \"%s\",\n"
                     "  \"pid\": %ld,\n  \"pid_start\": %llu,\n  \"run_id\": %lld,\n  \"started_at\": \"%s\",\n"
                     "  \"step\": %lld,\n  \"stopping\": %s,\n  \"tokens_per_sec\": %s,\n  \"total\": %lld,\n"
                     "  \"updated_at\": \"%s\",\n  \"updated_unix\": %.3f,\n  \"val_loss\": %s\n}\n",
                     h->adapter[0] ? "\"" : "", h->adapter[0] ? ad : "null", h->adapter[0] ? "\"" : "",
                     h->console[0] ? "\"" : "", h->console[0] ? con : "null", h->console[0] ? "\"" : "",
                     h->detached ? "true" : "false", doc, el, eta, h->log[0] ? "\"" : "", h->log[0] ? log : "null",
                     h->log[0] ? "\"" : "", loss, lr, h->have_p ? train_phase_name(p->phase) : "loading", h->pid,
                     (unsigned long long)h->pid_start, (long long)h->run_id, h->started_at,
                     (long long)(h->have_p ? p->step : 0), h->stopping ? "true" : "false", tps,
                     (long long)(h->have_p ? p->total : 0), upd, now, val);
    if (n < 0 || n >= (int)sizeof text) return err_set(e, NULL, "heartbeat record too long");
    h->last_write = time_mono();
    return fs_write_atomic(h->hb_path, text, (size_t)n, 0644, e);
}

static void *timer_main(void *arg)
{
    heartbeat *h = arg;
    pthread_mutex_lock(&h->mu);
    while (!h->quit) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += HB_PERIOD;
        pthread_cond_timedwait(&h->cv, &h->mu, &ts);
        if (h->quit) break;
        if (time_mono() - h->last_write >= HB_PERIOD - 0.5) write_hb(h, NULL);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

static void prepare_exit_now(heartbeat *h)
{
    static const int sigs[3] = {SIGHUP, SIGINT, SIGTERM};
    char doc[8300];
    esc(h->doc, doc, sizeof doc);
    snprintf(g_now.path, sizeof g_now.path, "%s", h->exit_path);
    snprintf(g_now.tmp, sizeof g_now.tmp, "%s.tmp.%ld.signal", h->exit_path, h->pid);
    for (int i = 0; i < 3; i++) {
        int n = snprintf(g_now.text[i], sizeof g_now.text[i],
                         "{\n  \"ended_at\": null,\n  \"exit_code\": %d,\n  \"message\": \"stopped at once by a"
                         " second signal %d; the last checkpoint is kept\",\n  \"pid\": %ld,\n  \"run_id\": %lld,\n"
                         "  \"status\": \"cancelled\",\n  \"steps\": null,\n  \"total\": null,\n"
                         "  \"version\": 0\n}\n",
                         128 + sigs[i], sigs[i], h->pid, (long long)h->run_id);
        g_now.len[i] = n > 0 && n < (int)sizeof g_now.text[i] ? (size_t)n : 0;
    }
    g_now.ready = 1;
}

void hb_exit_now(int sig)
{
    if (!g_now.ready) return;
    int i = sig == SIGHUP ? 0 : sig == SIGINT ? 1 : sig == SIGTERM ? 2 : -1;
    if (i < 0 || !g_now.len[i]) return;
    int fd = open(g_now.tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    ssize_t w = write(fd, g_now.text[i], g_now.len[i]);
    fsync(fd);
    close(fd);
    if (w == (ssize_t)g_now.len[i]) rename(g_now.tmp, g_now.path);
    else unlink(g_now.tmp);
}

int hb_start(const char *store, int64_t run_id, const hb_opts *o, heartbeat **out, dlm_err *e)
{
    *out = NULL;
    heartbeat *h = calloc(1, sizeof *h);
    if (!h) return err_set(e, "MemoryError", "out of memory");
    pthread_mutex_init(&h->mu, NULL);
    pthread_cond_init(&h->cv, NULL);
    snprintf(h->dir, sizeof h->dir, "%s/run", store);
    snprintf(h->hb_path, sizeof h->hb_path, "%s/heartbeat.json", h->dir);
    snprintf(h->exit_path, sizeof h->exit_path, "%s/exit.json", h->dir);
    snprintf(h->doc, sizeof h->doc, "%s", o && o->doc_path ? o->doc_path : "");
    snprintf(h->console, sizeof h->console, "%s", o && o->console ? o->console : "");
    h->detached = o && o->detached;
    h->pid = (long)getpid();
    h->pid_start = hb_pid_start(h->pid, NULL);
    h->run_id = run_id;
    h->started = time_mono();
    time_iso_utc(time_now(), h->started_at, sizeof h->started_at);
    if (fs_mkdir_p(h->dir, e)) { hb_free(h); return -1; }
    if (unlink(h->exit_path) != 0 && errno != ENOENT) {
        err_sys(e, "cannot remove the previous exit record '%s'", h->exit_path);
        hb_free(h);
        return -1;
    }
    char pidp[4300], line[32];
    snprintf(pidp, sizeof pidp, "%s/run.pid", h->dir);
    snprintf(line, sizeof line, "%ld\n", h->pid);
    if (fs_write_atomic(pidp, line, strlen(line), 0644, e) || write_hb(h, e)) { hb_free(h); return -1; }
    prepare_exit_now(h);
    /* the timer must not take the run's signals: block them in the thread */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    h->timer_on = pthread_create(&h->timer, NULL, timer_main, h) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    *out = h;
    return 0;
}

void hb_update(heartbeat *h, const train_progress *p)
{
    if (!h) return;
    pthread_mutex_lock(&h->mu);
    int changed = !h->have_p || h->p.phase != p->phase;
    h->p = *p;
    h->p.log_path = NULL;
    h->p.adapter = NULL;
    snprintf(h->adapter, sizeof h->adapter, "%s", p->adapter ? p->adapter : "");
    h->have_p = 1;
    if (p->log_path && strcmp(p->log_path, h->log)) snprintf(h->log, sizeof h->log, "%s", p->log_path);
    if (changed || p->step == p->total || time_mono() - h->last_write >= HB_MIN_GAP) write_hb(h, NULL);
    pthread_mutex_unlock(&h->mu);
}

void hb_set_stopping(heartbeat *h)
{
    if (!h) return;
    pthread_mutex_lock(&h->mu);
    if (!h->stopping) {
        h->stopping = 1;
        write_hb(h, NULL);
    }
    pthread_mutex_unlock(&h->mu);
}

static void stop_timer(heartbeat *h)
{
    pthread_mutex_lock(&h->mu);
    h->quit = 1;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
    if (h->timer_on) pthread_join(h->timer, NULL);
    h->timer_on = 0;
}

int hb_finish(heartbeat *h, const train_outcome *o, const char *message, dlm_err *e)
{
    if (!h) return 0;
    stop_timer(h);
    g_now.ready = 0;
    char text[HB_TEXT], msg[4200], now[24];
    time_iso_utc(time_now(), now, sizeof now);
    esc(message ? message : "", msg, sizeof msg);
    pthread_mutex_lock(&h->mu);
    /* a committed SFT run: what the version holds (train's summary numbers) */
    const train_result *r = o->version && o->result && o->result->phase && !strcmp(o->result->phase, "sft")
                            ? o->result : NULL;
    if (h->have_p) {
        /* the last state, with the final step count, and the committed
         * step's losses: `dlm status` says what train said */
        h->p.phase = PHASE_DONE;
        h->p.step = o->steps;
        if (r) {
            h->p.loss = r->final_loss;
            h->p.val_loss = r->val_loss;
        }
        write_hb(h, NULL);
    }
    pthread_mutex_unlock(&h->mu);
    char res[512] = "", fl[32], cl[32], vl[32];
    if (r) {
        num(r->first_loss, fl, sizeof fl);
        num(r->final_loss, cl, sizeof cl);
        num(r->val_loss, vl, sizeof vl);
        snprintf(res, sizeof res, "  \"committed_step\": %lld,\n  \"early_stopped\": %s,\n  \"final_loss\": %s,\n"
                 "  \"first_loss\": %s,\n  \"val_loss\": %s,\n", (long long)r->committed_step,
                 r->early_stopped ? "true" : "false", cl, fl, vl);
    }
    int n = snprintf(text, sizeof text,
                     "{\n%s  \"ended_at\": \"%s\",\n  \"exit_code\": %d,\n  \"message\": \"%s\",\n  \"pid\": %ld,\n"
                     "  \"run_id\": %lld,\n  \"status\": \"%s\",\n  \"steps\": %lld,\n  \"total\": %lld,\n"
                     "  \"version\": %d\n}\n",
                     res, now, o->exit_code, msg, h->pid, (long long)h->run_id, o->status, (long long)o->steps,
                     (long long)o->total, o->version);
    if (n < 0 || n >= (int)sizeof text) return err_set(e, NULL, "exit record too long");
    return fs_write_atomic(h->exit_path, text, (size_t)n, 0644, e);
}

void hb_free(heartbeat *h)
{
    if (!h) return;
    if (h->timer_on) stop_timer(h);
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

/* ---- reading ---------------------------------------------------------------- */

int64_t hb_newest_checkpoint(const char *store, char *out, size_t cap)
{
    char dir[4200], **names;
    snprintf(dir, sizeof dir, "%s/adapter/checkpoints", store);
    int n = fs_is_dir(dir) ? fs_list_dir(dir, &names, NULL) : 0;
    int64_t best = 0;
    for (int i = 0; i < n; i++) {
        long long s;
        char extra;
        if (sscanf(names[i], "step-%lld%c", &s, &extra) == 1 && s > best) {
            best = s;
            if (out) snprintf(out, cap, "%s/%s", dir, names[i]);
        }
    }
    if (n > 0) fs_free_list(names, n);
    return best;
}

const char *hb_state_name(run_state s)
{
    switch (s) {
    case RUN_RUNNING: return "running";
    case RUN_FINISHED: return "finished";
    case RUN_DIED: return "died";
    default: return "none";
    }
}

static double jnum(const json_t *o, const char *k)
{
    double d;
    return jget_num(o, k, &d) ? NAN : d;
}

static void jstr(const json_t *o, const char *k, char *out, size_t cap)
{
    const char *s = jget_str(o, k);
    snprintf(out, cap, "%s", s ? s : "");
}

int hb_read(const char *store, run_report *r, dlm_err *e)
{
    memset(r, 0, sizeof *r);
    r->loss = r->val_loss = r->lr = r->tokens_per_sec = r->elapsed = r->eta = r->age = NAN;
    r->first_loss = r->final_loss = NAN;
    char p[4400];
    snprintf(p, sizeof p, "%s/run/heartbeat.json", store);
    if (!fs_is_file(p)) return 0;
    json_t *hb = json_load_path(p, 1 << 20, e);
    if (!hb) return -1;
    long long v;
    if (!jget_int(hb, "pid", &v)) r->pid = (long)v;
    if (!jget_int(hb, "run_id", &v)) r->run_id = v;
    if (!jget_int(hb, "step", &v)) r->step = v;
    if (!jget_int(hb, "total", &v)) r->total = v;
    jstr(hb, "phase", r->phase, sizeof r->phase);
    jstr(hb, "started_at", r->started_at, sizeof r->started_at);
    jstr(hb, "updated_at", r->updated_at, sizeof r->updated_at);
    jstr(hb, "log", r->log, sizeof r->log);
    jstr(hb, "console", r->console, sizeof r->console);
    jstr(hb, "doc", r->doc, sizeof r->doc);
    jstr(hb, "adapter_name", r->adapter, sizeof r->adapter);
    r->loss = jnum(hb, "loss");
    r->val_loss = jnum(hb, "val_loss");
    r->lr = jnum(hb, "lr");
    r->tokens_per_sec = jnum(hb, "tokens_per_sec");
    r->elapsed = jnum(hb, "elapsed_s");
    r->eta = jnum(hb, "eta_s");
    r->updated_unix = jnum(hb, "updated_unix");
    if (isfinite(r->updated_unix)) {
        r->age = time_now() - r->updated_unix;
        if (r->age < 0) r->age = 0;   /* the writer's clock ran ahead (rounding, a clock step) */
    }
    int b;
    if (!jget_bool(hb, "detached", &b)) r->detached = b;
    if (!jget_bool(hb, "stopping", &b)) r->stopping = b;
    unsigned long long pid_start = 0;
    if (!jget_int(hb, "pid_start", &v) && v > 0) pid_start = (unsigned long long)v;
    json_decref(hb);

    snprintf(p, sizeof p, "%s/run/exit.json", store);
    json_t *ex = fs_is_file(p) ? json_load_path(p, 1 << 20, NULL) : NULL;
    long long rid = -1;
    if (ex && !jget_int(ex, "run_id", &rid) && rid == r->run_id) {
        r->state = RUN_FINISHED;
        jstr(ex, "status", r->status, sizeof r->status);
        jstr(ex, "message", r->message, sizeof r->message);
        jstr(ex, "ended_at", r->ended_at, sizeof r->ended_at);
        if (!jget_int(ex, "exit_code", &v)) r->exit_code = (int)v;
        if (!jget_int(ex, "version", &v)) r->version = (int)v;
        if (!jget_int(ex, "committed_step", &v)) r->committed_step = v;
        int es;
        if (!jget_bool(ex, "early_stopped", &es)) r->early_stopped = es;
        r->first_loss = jnum(ex, "first_loss");
        r->final_loss = jnum(ex, "final_loss");
        if (json_object_get(ex, "val_loss")) r->val_loss = jnum(ex, "val_loss");
        json_decref(ex);
        return 0;
    }
    json_decref(ex);
    int alive = 0;
    uint64_t st = hb_pid_start(r->pid, &alive);
    /* the pid may have been reused by another process since */
    if (alive && pid_start && st != pid_start) alive = 0;
    r->state = alive ? RUN_RUNNING : RUN_DIED;
    return 0;
}
