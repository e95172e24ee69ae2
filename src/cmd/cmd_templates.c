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
    "templates", "list [--json]",
    "list the document templates (name, title, steps and time on tiny, sample prompts)",
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
    if (npos != 1 || strcmp(pos[0], "list"))
        return cmd_usage_error(&spec_templates, "templates takes one subcommand: list");
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
        printf("%-26s %-7s %-9s %s\n", "name", "steps", "time", "summary");
        for (int i = 0; i < set.n; i++) {
            json_t *m = json_loads(set.v[i].meta, 0, NULL);
            long long steps = 0;
            const char *dur = m ? jget_str(m, "expected_duration") : NULL;
            if (m) jget_int(m, "expected_steps", &steps);
            char sbuf[24];
            if (steps > 0) snprintf(sbuf, sizeof sbuf, "%lld", steps);
            else snprintf(sbuf, sizeof sbuf, "-");
            printf("%-26s %-7s %-9s %s\n", set.v[i].name, sbuf, dur ? dur : "-", set.v[i].summary);
            json_decref(m);
        }
    }
    doc_templates_free(&set);
    return EXIT_OK;
}
