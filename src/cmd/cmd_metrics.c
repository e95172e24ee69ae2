/* dlm metrics — per-step training metrics from <store>/metrics.sqlite. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/commands.h"
#include "doc/doc.h"
#include "store/metrics.h"
#include "store/store.h"
#include "util/json.h"

static int o_json, o_csv, o_run, o_evals, o_runs;
static const char *o_phase;

static const opt OPTS[] = {
    {"json", 0, OPT_FLAG, &o_json, NULL, "one JSON array of row objects"},
    {"csv", 0, OPT_FLAG, &o_csv, NULL, "CSV with a header line"},
    {"run", 0, OPT_INT, &o_run, "N", "only run N (default: every run)"},
    {"evals", 0, OPT_FLAG, &o_evals, NULL, "validation losses instead of steps"},
    {"runs", 0, OPT_FLAG, &o_runs, NULL, "one row per run (status, times, version)"},
    {"phase", 0, OPT_STR, &o_phase, "sft|dpo|orpo", "only runs of this phase (dpo/orpo steps add rewards/...)"},
    {0},
};

const cmd_spec spec_metrics = {
    "metrics", "PATH [--json | --csv] [--run N] [--evals | --runs] [--phase sft|dpo|orpo]",
    "show the training metrics recorded for a document's runs",
    "Columns of steps: run_id, step, loss, lr, grad_norm, tokens_per_sec, at; with --phase dpo or orpo\n"
    "also rewards/chosen, rewards/rejected, rewards/margins, rewards/accuracies (TRL's names).", OPTS,
};

typedef struct out_ctx { int mode, rows; json_t *arr; } out_ctx;

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
        if (!o->rows) {
            for (int i = 0; i < nc; i++) printf("%-16s", names[i]);
            putchar('\n');
        }
        for (int i = 0; i < nc; i++) {
            const char *v = vals[i] ? vals[i] : "-";
            char *end;
            double d = strtod(v, &end);
            if (*end == 0 && end != v && strchr(v, '.')) printf("%-16.6g", d);
            else printf("%-16s", v);
        }
        putchar('\n');
    }
    o->rows++;
}

int cmd_metrics(int argc, char **argv, dlm_ctx *ctx)
{
    char *pos[64];
    int npos;
    int r = opts_parse(&spec_metrics, argc, argv, ctx, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos != 1) return cmd_usage_error(&spec_metrics, "metrics needs one PATH (a .dlm file)");
    if (o_json && o_csv) return cmd_usage_error(&spec_metrics, "--json and --csv are mutually exclusive");
    if (o_evals && o_runs) return cmd_usage_error(&spec_metrics, "--evals and --runs are mutually exclusive");
    dlm_err e;
    err_clear(&e);
    char store[4096];
    if (cmd_doc_store(ctx, pos[0], store, sizeof store, &e)) return cmd_fail(ctx, &e);
    out_ctx o = {o_json ? 1 : o_csv ? 2 : 0, 0, o_json ? json_array() : NULL};
    if (o_phase && strcmp(o_phase, "sft") && strcmp(o_phase, "dpo") && strcmp(o_phase, "orpo"))
        return cmd_usage_error(&spec_metrics, "--phase expects sft, dpo or orpo, got '%s'", o_phase);
    if (metrics_query(store, o_runs ? "runs" : o_evals ? "evals" : "steps", o_run, o_phase, on_row, &o, &e)) {
        json_decref(o.arr);
        err_hint(&e, "train first: dlm train %s", pos[0]);
        return cmd_fail(ctx, &e);
    }
    if (o_json) {
        strbuf sb = STRBUF_INIT;
        json_write(&sb, o.arr, JW_COMPACT);
        printf("%s\n", sb_str(&sb));
        sb_free(&sb);
        json_decref(o.arr);
    } else if (!o.rows && !o_csv) {
        fprintf(stderr, "no rows%s\n", o_run ? " for that run" : "");
    }
    return EXIT_OK;
}
