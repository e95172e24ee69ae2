/* dlm templates list — the template gallery `dlm init --template NAME` draws
 * from, with the original gallery's meta fields (spec §8). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/commands.h"
#include "doc/templates.h"
#include "util/json.h"

typedef struct templates_args {
    int json, refresh, accept_unsigned;
} templates_args;

static const opt OPTS[] = {
    {"json", 0, OPT_FLAG, offsetof(templates_args, json), NULL, "one JSON object: {source, templates: [meta, ...]}"},
    {"refresh", 0, OPT_FLAG, offsetof(templates_args, refresh), NULL, "accepted for the original's CLI; the gallery is local, nothing to fetch"},
    {"accept-unsigned", 0, OPT_FLAG, offsetof(templates_args, accept_unsigned), NULL, "accepted for the original's CLI; no effect"},
    {0},
};

const cmd_spec spec_templates = {
    "templates", "[list] [--json]",
    "list the document templates (name, steps and time on tiny, summary, sample prompts)",
    "Each template is a .dlm scaffold whose training settings suit the embedded\n"
    "base tiny: `dlm init doc.dlm --template NAME` then `dlm train doc.dlm`\n"
    "answers the template's sample prompts. expected_steps and\n"
    "expected_duration are measured on tiny (2 cores). Templates are files\n"
    "(templates/<name>.dlm + templates/index.json; $DLM_TEMPLATES overrides\n"
    "the directory).",
    OPTS,
};

int cmd_templates(int argc, char **argv, dlm_ctx *ctx)
{
    templates_args a = {0};
    char *pos[64];
    int npos;
    if (argc > 64) return cmd_usage_error(&spec_templates, "too many arguments");
    int r = opts_parse(&spec_templates, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    /* `dlm templates` alone lists, as `dlm templates list` */
    if (npos > 1 || (npos == 1 && strcmp(pos[0], "list")))
        return cmd_usage_error(&spec_templates, "templates takes one subcommand: list (or none)");
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    doc_template_set set;
    if (doc_templates_load(&set, &e)) return cmd_fail(ctx, &e);
    if (a.json) {
        json_t *arr = json_array();
        for (int i = 0; i < set.n; i++) {
            json_t *m = json_loads(set.v[i].meta, 0, NULL);
            if (!m) m = json_pack("{s:s, s:s}", "name", set.v[i].name, "summary", set.v[i].summary);
            json_array_append_new(arr, m);
        }
        json_t *o = json_pack("{s:s, s:o}", "source", set.source, "templates", arr);
        cmd_print_json(o);
    } else {
        /* columns as wide as their longest cell; each template's sample
         * prompts on the lines under it (what the trained document answers) */
        int wn = 4, ws = 5, wt = 4;
        json_t **meta = calloc((size_t)set.n + 1, sizeof *meta);
        char (*steps)[24] = calloc((size_t)set.n + 1, sizeof *steps);
        if (!meta || !steps) {
            free(meta);
            free(steps);
            doc_templates_free(&set);
            err_set(&e, "MemoryError", "out of memory");
            return cmd_fail(ctx, &e);
        }
        for (int i = 0; i < set.n; i++) {
            meta[i] = json_loads(set.v[i].meta, 0, NULL);
            long long n = 0;
            if (meta[i]) jget_int(meta[i], "expected_steps", &n);
            if (n > 0) snprintf(steps[i], sizeof steps[i], "%lld", n);
            else snprintf(steps[i], sizeof steps[i], "-");
            const char *dur = meta[i] ? jget_str(meta[i], "expected_duration") : NULL;
            int l = (int)strlen(set.v[i].name);
            if (l > wn) wn = l;
            if ((l = (int)strlen(steps[i])) > ws) ws = l;
            if (dur && (l = (int)strlen(dur)) > wt) wt = l;
        }
        printf("%-*s  %-*s  %-*s  %s\n", wn, "name", ws, "steps", wt, "time", "summary");
        for (int i = 0; i < set.n; i++) {
            const char *dur = meta[i] ? jget_str(meta[i], "expected_duration") : NULL;
            printf("%-*s  %-*s  %-*s  %s\n", wn, set.v[i].name, ws, steps[i], wt, dur ? dur : "-", set.v[i].summary);
            json_t *sp = meta[i] ? json_object_get(meta[i], "sample_prompts") : NULL;
            size_t k;
            json_t *q;
            json_array_foreach(sp, k, q) {
                if (json_is_string(q)) printf("%-*s  ask: %s\n", wn, "", json_string_value(q));
            }
            json_decref(meta[i]);
        }
        free(meta);
        free(steps);
    }
    doc_templates_free(&set);
    return EXIT_OK;
}
