/* dlm metrics [show|watch] — training metrics from <store>/metrics.sqlite.
 *
 * `dlm metrics PATH` (= `metrics show PATH`) prints a table (steps, evals or
 * runs) with the original's filters; `metrics watch PATH` follows the
 * running run: one line per step as the trainer commits them, its evals,
 * and the ETA from the run's heartbeat, until the run ends. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/commands.h"
#include "doc/doc.h"
#include "run/heartbeat.h"
#include "store/metrics.h"
#include "store/store.h"
#include "util/json.h"
#include "util/timeutil.h"

typedef struct metrics_args {
    int json, csv, run, evals, runs, limit;
    const char *phase, *since;
    double poll;
} metrics_args;

static const opt OPTS[] = {
    {"json", 0, OPT_FLAG, offsetof(metrics_args, json), NULL, "one JSON array of row objects"},
    {"csv", 0, OPT_FLAG, offsetof(metrics_args, csv), NULL, "CSV with a header line"},
    {"run", 0, OPT_INT, offsetof(metrics_args, run), "N", "only run N (default: every run)"},
    {"run-id", 0, OPT_INT, offsetof(metrics_args, run), "N", "same as --run (the original's name)"},
    {"evals", 0, OPT_FLAG, offsetof(metrics_args, evals), NULL, "validation losses instead of steps"},
    {"runs", 0, OPT_FLAG, offsetof(metrics_args, runs), NULL, "one row per run (status, times, version)"},
    {"phase", 0, OPT_STR, offsetof(metrics_args, phase), "PHASE", "only runs of this phase: sft, dpo, orpo, cpt"},
    {"since", 0, OPT_STR, offsetof(metrics_args, since), "AGE", "only rows from the last AGE: 30m, 24h, 7d, 10s"},
    {"limit", 0, OPT_INT, offsetof(metrics_args, limit), "N", "only the last N rows (default: all)"},
    {"poll-seconds", 0, OPT_DOUBLE, offsetof(metrics_args, poll), "S", "watch: seconds between polls (default 1.0)"},
    {0},
};

const cmd_spec spec_metrics = {
    "metrics", "[show] PATH [--json | --csv] [--run N] [--evals | --runs] [--phase P] [--since AGE] [--limit N]\n"
               "       dlm metrics watch PATH [--poll-seconds 1.0]",
    "show the training metrics recorded for a document's runs, or follow the running one",
    "Columns of steps: run_id, step, loss, lr, grad_norm, tokens_per_sec,\n"
    "peak_vram_mb, at (UTC). watch prints one line per step of the running\n"
    "run (step rows reach metrics.sqlite in batches of a few seconds), its\n"
    "evals and the ETA, and exits when the run ends: 0 when it completed, 1\n"
    "when it failed or died. With no run in progress it says so and exits 0.\n"
    "With --phase dpo or orpo, steps also show rewards/chosen, rewards/rejected,\n"
    "rewards/margins, rewards/accuracies (TRL's names).",
    OPTS,
};

/* ---- show ------------------------------------------------------------------- */

typedef struct out_ctx {
    int mode, rows, nc;
    json_t *arr;          /* JSON rows, or the table's cells (arrays of strings) */
    char *names[16];
} out_ctx;

static void csv_field(const char *v)
{
    if (!v) return;
    if (strpbrk(v, ",\"\n")) {
        putchar('"');
        for (const char *p = v; *p; p++) { if (*p == '"') putchar('"'); putchar(*p); }
        putchar('"');
    } else fputs(v, stdout);
}

static void on_row(void *ctx, int nc, const char *const *names, const char *const *vals)
{
    out_ctx *o = ctx;
    if (o->mode == 1) {
        json_t *r = json_object();
        for (int i = 0; i < nc; i++) {
            json_t *v = json_null();
            if (vals[i]) {
                char *end;
                double d = strtod(vals[i], &end);
                if (*end == 0 && end != vals[i]) v = strchr(vals[i], '.') || strchr(vals[i], 'e') ? json_real(d) : json_integer((json_int_t)d);
                else v = json_string(vals[i]);
            }
            json_object_set_new(r, names[i], v);
        }
        json_array_append_new(o->arr, r);
    } else if (o->mode == 2) {
        if (!o->rows) {
            for (int i = 0; i < nc; i++) { if (i) putchar(','); fputs(names[i], stdout); }
            putchar('\n');
        }
        for (int i = 0; i < nc; i++) { if (i) putchar(','); csv_field(vals[i]); }
        putchar('\n');
    } else {
        /* The table is printed at the end, each column as wide as its
         * widest cell, so timestamps never run into the next column. */
        if (!o->rows) {
            o->nc = nc;
            for (int i = 0; i < nc; i++) o->names[i] = strdup(names[i]);
        }
        json_t *row = json_array();
        for (int i = 0; i < nc; i++) {
            const char *v = vals[i] ? vals[i] : "-";
            char *end, buf[48];
            double d = strtod(v, &end);
            if (*end == 0 && end != v && strchr(v, '.')) {
                snprintf(buf, sizeof buf, "%.6g", d);
                v = buf;
            }
            json_array_append_new(row, json_string(v));
        }
        json_array_append_new(o->arr, row);
    }
    o->rows++;
}

static void print_table(out_ctx *o)
{
    int w[16] = {0};
    for (int i = 0; i < o->nc; i++) w[i] = (int)strlen(o->names[i]);
    size_t r;
    json_t *row;
    json_array_foreach(o->arr, r, row)
        for (int i = 0; i < o->nc; i++) {
            int l = (int)strlen(json_string_value(json_array_get(row, (size_t)i)));
            if (l > w[i]) w[i] = l;
        }
    for (int i = 0; i < o->nc; i++)
        printf("%-*s%s", i + 1 < o->nc ? w[i] : 0, o->names[i], i + 1 < o->nc ? "  " : "\n");
    json_array_foreach(o->arr, r, row)
        for (int i = 0; i < o->nc; i++)
            printf("%-*s%s", i + 1 < o->nc ? w[i] : 0, json_string_value(json_array_get(row, (size_t)i)),
                   i + 1 < o->nc ? "  " : "\n");
    for (int i = 0; i < o->nc; i++) free(o->names[i]);
}

/* "30m", "24h", "7d", "10s" → seconds; -1 when malformed. */
static double parse_age(const char *s)
{
    char *end;
    if (!isdigit((unsigned char)s[0])) return -1;
    double n = strtod(s, &end);
    if (end == s || end[0] == 0 || end[1] != 0 || !(n > 0) || n > 1e9) return -1;
    switch (end[0]) {
    case 's': return n;
    case 'm': return n * 60;
    case 'h': return n * 3600;
    case 'd': return n * 86400;
    default: return -1;
    }
}

static int show(dlm_ctx *ctx, const metrics_args *a, const char *path)
{
    dlm_err e;
    err_clear(&e);
    metrics_filter f = {.run_id = a->run, .phase = a->phase, .limit = a->limit};
    char since[32];
    if (a->since) {
        double age = parse_age(a->since);
        if (age < 0) {
            fprintf(stderr, "dlm: error: --since '%s' is not an age\nhint: a number and a unit: 30m, 24h, 7d, 10s\n", a->since);
            return EXIT_USAGE;
        }
        time_iso_utc(time_now() - age, since, sizeof since);
        f.since = since;
    }
    char store[4096];
    if (cmd_doc_store(ctx, path, store, sizeof store, &e)) return cmd_fail(ctx, &e);
    if (a->phase && strcmp(a->phase, "sft") && strcmp(a->phase, "dpo") && strcmp(a->phase, "orpo") && strcmp(a->phase, "cpt"))
        return cmd_usage_error(&spec_metrics, "--phase expects sft, dpo, orpo or cpt, got '%s'", a->phase);
    out_ctx o = {.mode = a->json ? 1 : a->csv ? 2 : 0, .arr = a->csv ? NULL : json_array()};
    if (metrics_query(store, a->runs ? "runs" : a->evals ? "evals" : "steps", &f, on_row, &o, &e)) {
        json_decref(o.arr);
        err_hint(&e, "train first: dlm train %s", path);
        return cmd_fail(ctx, &e);
    }
    if (a->json) {
        strbuf sb = STRBUF_INIT;
        json_write(&sb, o.arr, JW_COMPACT);
        printf("%s\n", sb_str(&sb));
        sb_free(&sb);
    } else if (!a->csv) {
        if (o.rows) print_table(&o);
        else fprintf(stderr, "no rows%s\n", a->run || a->phase || a->since ? " match the filters" : "");
    }
    json_decref(o.arr);
    return EXIT_OK;
}

/* ---- watch ------------------------------------------------------------------ */

typedef struct watch_row { int64_t step; int eval; double a, b, c; } watch_row;

typedef struct watch_ctx {
    int64_t last_step, last_eval, total;
    double eta;
    int evals;
    watch_row *rows;      /* this poll's new rows, printed merged by step */
    int n, cap;
} watch_ctx;

static const char *col(int nc, const char *const *names, const char *const *vals, const char *want)
{
    for (int i = 0; i < nc; i++)
        if (!strcmp(names[i], want)) return vals[i] ? vals[i] : "";
    return "";
}

static void on_watch_row(void *ctx, int nc, const char *const *names, const char *const *vals)
{
    watch_ctx *w = ctx;
    if (w->n == w->cap) {
        int cap = w->cap ? w->cap * 2 : 64;
        watch_row *nr = realloc(w->rows, (size_t)cap * sizeof *nr);
        if (!nr) return;
        w->rows = nr;
        w->cap = cap;
    }
    watch_row *r = &w->rows[w->n++];
    r->step = atoll(col(nc, names, vals, "step"));
    r->eval = w->evals;
    if (w->evals) {
        r->a = atof(col(nc, names, vals, "val_loss"));
        if (r->step > w->last_eval) w->last_eval = r->step;
    } else {
        r->a = atof(col(nc, names, vals, "loss"));
        r->b = atof(col(nc, names, vals, "lr"));
        r->c = atof(col(nc, names, vals, "tokens_per_sec"));
        if (r->step > w->last_step) w->last_step = r->step;
    }
}

static int cmp_row(const void *x, const void *y)
{
    const watch_row *a = x, *b = y;
    if (a->step != b->step) return a->step < b->step ? -1 : 1;
    return a->eval - b->eval;   /* the step, then its eval */
}

static void print_rows(watch_ctx *w)
{
    if (w->n > 0) qsort(w->rows, (size_t)w->n, sizeof *w->rows, cmp_row);   /* rows may be NULL when none came */
    char eta[32] = "-";
    if (isfinite(w->eta) && w->eta > 0) time_fmt_duration(w->eta, eta, sizeof eta);
    for (int i = 0; i < w->n; i++) {
        const watch_row *r = &w->rows[i];
        if (r->eval)
            printf("%7lld/%-7lld  %-9s  %-10s  %-8s  %-9.4f  %s\n", (long long)r->step, (long long)w->total, "eval", "",
                   "", r->a, eta);
        else
            printf("%7lld/%-7lld  %-9.4f  %-10.3e  %-8.0f  %-9s  %s\n", (long long)r->step, (long long)w->total, r->a,
                   r->b, r->c, "", eta);
    }
    w->n = 0;
}

static int watch(dlm_ctx *ctx, const metrics_args *a, const char *path)
{
    if (!(a->poll >= 0.05 && a->poll <= 3600)) return cmd_usage_error(&spec_metrics, "--poll-seconds must be 0.05..3600");
    dlm_err e;
    err_clear(&e);
    char store[4096];
    if (cmd_doc_store(ctx, path, store, sizeof store, &e)) return cmd_fail(ctx, &e);
    run_report rep;
    if (hb_read(store, &rep, &e)) return cmd_fail(ctx, &e);
    if (rep.state != RUN_RUNNING) {
        if (rep.state == RUN_NONE) printf("no training run in progress (none recorded)\n");
        else printf("no training run in progress (run %lld: %s)\n", (long long)rep.run_id,
                    rep.state == RUN_FINISHED ? rep.status : hb_state_name(rep.state));
        return EXIT_OK;
    }
    int64_t run = rep.run_id;
    watch_ctx w = {.total = rep.total, .eta = rep.eta};
    printf("watching run %lld of %s (every %gs; Ctrl-C stops watching, not the run)\n", (long long)run, path, a->poll);
    printf("%15s  %-9s  %-10s  %-8s  %-9s  %s\n", "step/total", "loss", "lr", "tok/s", "val_loss", "ETA");
    fflush(stdout);
    for (;;) {
        int running = rep.state == RUN_RUNNING && rep.run_id == run;
        w.total = rep.total > 0 ? rep.total : w.total;
        w.eta = rep.eta;
        /* Missing metrics.sqlite (the run is still loading) is not an error. */
        dlm_err qe;
        metrics_filter fs = {.run_id = run, .after_step = w.last_step};
        w.evals = 0;
        metrics_query(store, "steps", &fs, on_watch_row, &w, &qe);
        metrics_filter fe = {.run_id = run, .after_step = w.last_eval};
        w.evals = 1;
        metrics_query(store, "evals", &fe, on_watch_row, &w, &qe);
        print_rows(&w);
        fflush(stdout);
        if (!running) break;
        usleep((useconds_t)(a->poll * 1e6));
        if (hb_read(store, &rep, &e)) return cmd_fail(ctx, &e);
    }
    free(w.rows);
    if (rep.state == RUN_FINISHED && rep.run_id == run) {
        printf("run %lld %s", (long long)run, rep.status);
        if (!strcmp(rep.status, "completed") && rep.version > 0) printf(": v%04d", rep.version);
        printf("\n");
        return strcmp(rep.status, "completed") ? EXIT_FAIL : EXIT_OK;
    }
    printf("run %lld %s\n", (long long)run, rep.state == RUN_DIED ? "died (no exit record)" : hb_state_name(rep.state));
    return rep.state == RUN_DIED ? EXIT_FAIL : EXIT_OK;
}

int cmd_metrics(int argc, char **argv, dlm_ctx *ctx)
{
    metrics_args a = {.poll = 1.0};
    char *pos[64];
    int npos;
    if (argc > 64) return cmd_usage_error(&spec_metrics, "too many arguments");
    int r = opts_parse(&spec_metrics, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    const char *sub = "show";
    if (npos == 2 && (!strcmp(pos[0], "show") || !strcmp(pos[0], "watch"))) {
        sub = pos[0];
        pos[0] = pos[1];
        npos = 1;
    }
    if (npos != 1) return cmd_usage_error(&spec_metrics, "metrics needs one PATH (a .dlm file), after show or watch");
    if (a.json && a.csv) return cmd_usage_error(&spec_metrics, "--json and --csv are mutually exclusive");
    if (a.evals && a.runs) return cmd_usage_error(&spec_metrics, "--evals and --runs are mutually exclusive");
    if (a.limit < 0) return cmd_usage_error(&spec_metrics, "--limit must be >= 1");
    return !strcmp(sub, "watch") ? watch(ctx, &a, pos[0]) : show(ctx, &a, pos[0]);
}
