/* progress — bars on a terminal, lines otherwise (progress.h). */
#include "util/progress.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"
#include "util/str.h"
#include "util/timeutil.h"

static double g_min_s = 2.0;
static int g_mode = -1;

void progress_set_min_seconds(double s) { g_min_s = s >= 0 ? s : 0; }
void progress_set_mode(int mode) { g_mode = mode; }

#define BAR_EVERY_S 0.1     /* at most 10 redraws a second */
#define LINE_EVERY_S 10.0

void progress_begin(progress *p, const char *label, uint64_t total, progress_unit unit)
{
    memset(p, 0, sizeof *p);
    snprintf(p->label, sizeof p->label, "%s", label);
    p->unit = unit;
    p->total = total;
    p->start = p->last = time_mono();
    if (log_level() < LOG_NORMAL) p->mode = 0;
    else if (g_mode >= 0) p->mode = g_mode;
    else p->mode = isatty(STDERR_FILENO) ? 2 : 1;
}

void progress_begin_count(progress *p, const char *label, uint64_t total, const char *what)
{
    progress_begin(p, label, total, PROGRESS_COUNT);
    p->count_unit = what;
}

static void amount(const progress *p, uint64_t n, char *b, size_t cap)
{
    if (p->unit == PROGRESS_BYTES) str_human_size(n, b, cap);
    else snprintf(b, cap, "%llu", (unsigned long long)n);
}

static void fmt_eta(char *b, size_t n, double s)
{
    if (s < 0 || s > 360000) { snprintf(b, n, "--:--"); return; }
    int t = (int)(s + 0.5);
    if (t >= 3600) snprintf(b, n, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
    else snprintf(b, n, "%d:%02d", t / 60, t % 60);
}

/* "1.2 GiB of 4.0 GiB (30%), 400 MiB/s, ETA 0:07" and the bar's cells */
static void describe(const progress *p, double dt, char *out, size_t cap, int *pct)
{
    char a[32], b[32], r[32], eta[16];
    double rate = dt > 0 ? (double)p->done / dt : 0;
    amount(p, p->done, a, sizeof a);
    *pct = p->total ? (int)(100.0 * (double)p->done / (double)p->total) : 0;
    if (*pct > 100) *pct = 100;
    if (p->unit == PROGRESS_BYTES) str_human_size((unsigned long long)rate, r, sizeof r);
    else snprintf(r, sizeof r, "%.1f %s", rate, p->count_unit ? p->count_unit : "");
    const char *per = "/s";
    if (p->total) {
        amount(p, p->total, b, sizeof b);
        fmt_eta(eta, sizeof eta, rate > 0 ? (double)(p->total - (p->done < p->total ? p->done : p->total)) / rate : -1);
        snprintf(out, cap, "%s of %s%s%s (%d%%), %s%s, ETA %s", a, b, p->count_unit ? " " : "",
                 p->count_unit ? p->count_unit : "", *pct, r, per, eta);
    } else {
        snprintf(out, cap, "%s%s%s, %s%s", a, p->count_unit ? " " : "", p->count_unit ? p->count_unit : "", r, per);
    }
}

static void draw(progress *p, int final)
{
    double t = time_mono(), dt = t - p->start;
    if (!p->mode || (dt < g_min_s && !p->drawn)) return;
    char what[256];
    int pct;
    if (p->mode == 2) {
        if (!final && t - p->last < BAR_EVERY_S && p->drawn) return;
        describe(p, dt, what, sizeof what, &pct);
        char bar[25];
        int fill = final ? 24 : pct * 24 / 100;
        for (int i = 0; i < 24; i++) bar[i] = i < fill ? '#' : '.';
        bar[24] = 0;
        fprintf(stderr, "\r\033[K%s [%s] %s", p->label, bar, what);
        if (final) {
            char d[32];
            time_fmt_duration(dt, d, sizeof d);
            fprintf(stderr, ", done in %s\n", d);
        }
    } else {
        if (!final && p->drawn && t - p->last < LINE_EVERY_S) return;
        if (!final && !p->drawn && dt < LINE_EVERY_S) return;
        describe(p, dt, what, sizeof what, &pct);
        if (final) {
            char a[32], d[32];
            amount(p, p->done, a, sizeof a);
            time_fmt_duration(dt, d, sizeof d);
            char r[32];
            double rate = dt > 0 ? (double)p->done / dt : 0;
            if (p->unit == PROGRESS_BYTES) str_human_size((unsigned long long)rate, r, sizeof r);
            else snprintf(r, sizeof r, "%.1f %s", rate, p->count_unit ? p->count_unit : "");
            fprintf(stderr, "dlm: %s: %s%s%s in %s (%s/s)\n", p->label, a, p->count_unit ? " " : "",
                    p->count_unit ? p->count_unit : "", d, r);
        } else {
            fprintf(stderr, "dlm: %s: %s\n", p->label, what);
        }
    }
    fflush(stderr);
    p->last = t;
    p->drawn = 1;
}

void progress_update(progress *p, uint64_t done)
{
    p->done = done;
    draw(p, 0);
}

void progress_add(progress *p, uint64_t n) { progress_update(p, p->done + n); }

void progress_abort(progress *p)
{
    if (p->mode == 2 && p->drawn) fputc('\n', stderr);
    p->mode = 0;
}

void progress_end(progress *p)
{
    if (p->total && p->done < p->total) p->done = p->total;
    draw(p, 1);
    p->mode = 0;
}
