/* dlm harvest — failing probes of a sway report become instruction
 * sections (spec §8): `### Q !probe` pairs carrying the auto-harvest marker
 * `<!-- dlm-auto-harvest: source="<tag>/<probe name>" -->`. Dry run unless
 * --apply; --revert removes every harvested section. Exit 2 when there is
 * nothing to harvest (or to revert). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/commands.h"
#include "cmd/grow_cmd.h"
#include "doc/doc.h"
#include "doc/grow.h"
#include "util/json.h"

typedef struct harvest_args {
    const char *report, *tag;
    int apply, strict, lax, revert, json;
    double min_conf;
} harvest_args;

static const opt OPTS[] = {
    {"sway-json", 0, OPT_STR, offsetof(harvest_args, report), "REPORT", "the sway JSON report to harvest from"},
    {"apply", 0, OPT_FLAG, offsetof(harvest_args, apply), NULL, "write the sections (default: show the plan only)"},
    {"tag", 0, OPT_STR, offsetof(harvest_args, tag), "TAG", "marker source prefix: source=\"TAG/<probe name>\" (default auto-harvest)"},
    {"min-confidence", 0, OPT_DOUBLE, offsetof(harvest_args, min_conf), "C", "skip probes whose evidence.confidence is below C (0..1, default 0)"},
    {"strict", 0, OPT_FLAG, offsetof(harvest_args, strict), NULL, "a failing probe without prompt + reference is an error (default)"},
    {"lax", 0, OPT_FLAG, offsetof(harvest_args, lax), NULL, "skip failing probes without prompt + reference"},
    {"revert", 0, OPT_FLAG, offsetof(harvest_args, revert), NULL, "remove every auto-harvested section instead"},
    {"json", 0, OPT_FLAG, offsetof(harvest_args, json), NULL, "print the plan as JSON"},
    {0},
};

const cmd_spec spec_harvest = {
    "harvest", "PATH --sway-json REPORT [--apply] [--tag auto-harvest] [--min-confidence 0.0] [--strict | --lax]\n"
               "       dlm harvest PATH --revert",
    "turn a sway report's failing probes into instruction sections of the document",
    "Reads probes with verdict \"fail\" and evidence.prompt + evidence.reference\n"
    "(report schema_version 1). Pairs already in the document are skipped.\n"
    "Exit: 0 the plan was shown or applied, 1 a bad report (or, --strict, a\n"
    "failing probe without a reference), 2 nothing to harvest or revert.",
    OPTS,
};

typedef struct cand {
    char *prompt, *reference, *name, *source;
    double confidence;
    int skip;               /* 1 already in the document or earlier in the report */
} cand;

static char *dup_strip(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\f' || *s == '\v') s++;
    size_t n = strlen(s);
    while (n && strchr(" \t\n\r\f\v", s[n - 1])) n--;
    char *o = malloc(n + 1);
    if (o) { memcpy(o, s, n); o[n] = 0; }
    return o;
}

/* The failing probes of the report, filtered (strict/lax, confidence). */
static int read_report(const harvest_args *a, const char *path, cand **out, int *n, dlm_err *e)
{
    *out = NULL;
    *n = 0;
    json_t *r = json_load_path(path, 64u << 20, e);
    if (!r) return err_hint(e, "--sway-json takes the JSON report sway writes"), -1;
    int rc = -1;
    long long ver;
    json_t *probes = json_object_get(r, "probes");
    if (!json_is_object(r)) { err_set(e, "MalformedSwayReportError", "%s: the report must be a JSON object", path); goto out; }
    if (jget_int(r, "schema_version", &ver)) {
        err_set(e, "MalformedSwayReportError", "%s: missing integer schema_version", path);
        goto out;
    }
    if (ver > 1) {
        err_set(e, "MalformedSwayReportError", "%s: schema_version %lld is newer than this reader (1)", path, ver);
        goto out;
    }
    if (!json_is_array(probes)) { err_set(e, "MalformedSwayReportError", "%s: missing the probes array", path); goto out; }
    cand *v = calloc(json_array_size(probes) + 1, sizeof *v);
    if (!v) { err_set(e, "MemoryError", "out of memory"); goto out; }
    *out = v;
    size_t i;
    json_t *p;
    json_array_foreach(probes, i, p) {
        if (!json_is_object(p)) continue;
        const char *verdict = jget_str(p, "verdict");
        if (!verdict || strcmp(verdict, "fail")) continue;
        const char *name = jget_str(p, "name");
        if (!name || !*name) name = "<unnamed>";
        json_t *ev = json_object_get(p, "evidence");
        const char *q = ev ? jget_str(ev, "prompt") : NULL, *ref = ev ? jget_str(ev, "reference") : NULL;
        char *qs = q ? dup_strip(q) : NULL, *as = ref ? dup_strip(ref) : NULL;
        if (!qs || !*qs || !as || !*as) {
            const char *missing = !qs || !*qs ? "prompt" : "reference";
            free(qs);
            free(as);
            if (a->lax) {
                fprintf(stderr, "dlm: warning: probe '%s' (probes[%zu]) failed but has no evidence.prompt/reference: skipped\n",
                        name, i);
                continue;
            }
            err_set(e, "NoReferenceError", "%s: probe '%s' (probes[%zu]) failed but has no evidence.%s", path, name, i,
                    missing);
            err_hint(e, "--lax skips such probes");
            goto out;
        }
        double c = 1.0;
        json_t *cj = ev ? json_object_get(ev, "confidence") : NULL;
        if (json_is_number(cj)) c = json_number_value(cj);
        if (!isfinite(c)) c = 1.0;
        c = c < 0 ? 0 : c > 1 ? 1 : c;
        if (c < a->min_conf) {
            free(qs);
            free(as);
            continue;
        }
        cand *k = &v[(*n)++];
        k->prompt = qs;
        k->reference = as;
        k->name = strdup(name);
        k->confidence = c;
    }
    rc = 0;
out:
    json_decref(r);
    return rc;
}

static void free_cands(cand *v, int n)
{
    for (int i = 0; i < n; i++) {
        free(v[i].prompt);
        free(v[i].reference);
        free(v[i].name);
        free(v[i].source);
    }
    free(v);
}

static int pick_auto_harvest(const doc_section *s) { return s->auto_harvest; }

int cmd_harvest(int argc, char **argv, dlm_ctx *ctx)
{
    harvest_args a = {.tag = "auto-harvest", .min_conf = 0.0};
    char *pos[64];
    int npos;
    if (argc > 64) return cmd_usage_error(&spec_harvest, "too many arguments");
    int r = opts_parse(&spec_harvest, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos != 1) return cmd_usage_error(&spec_harvest, "harvest needs one PATH (a .dlm file)");
    if (a.strict && a.lax) return cmd_usage_error(&spec_harvest, "--strict and --lax are mutually exclusive");
    if (!(a.min_conf >= 0 && a.min_conf <= 1)) return cmd_usage_error(&spec_harvest, "--min-confidence must be 0..1");
    if (a.revert && (a.report || a.apply)) return cmd_usage_error(&spec_harvest, "--revert takes no --sway-json or --apply");
    if (strchr(a.tag, '"') || strchr(a.tag, '\n')) return cmd_usage_error(&spec_harvest, "--tag cannot contain '\"' or newlines");
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    if (a.revert) return grow_cmd_revert(ctx, pos[0], "harvest", "auto-harvested", pick_auto_harvest);
    if (!a.report) return cmd_usage_error(&spec_harvest, "harvest needs --sway-json REPORT (or --revert)");

    dlm_doc *d = doc_load(pos[0], &e);
    if (!d) return cmd_fail(ctx, &e);
    cand *c;
    int n;
    if (read_report(&a, a.report, &c, &n, &e)) {
        free_cands(c, n);
        doc_free(d);
        return cmd_fail(ctx, &e);
    }
    int nadd = 0;
    doc_section *secs = calloc((size_t)n + 1, sizeof *secs);
    strbuf *bodies = calloc((size_t)n + 1, sizeof *bodies);
    int rc = EXIT_OK;
    for (int i = 0; i < n; i++) {
        int dup = doc_grow_has_pair(d, c[i].prompt, c[i].reference);
        for (int j = 0; !dup && j < i; j++)
            dup = !c[j].skip && !strcmp(c[j].prompt, c[i].prompt) && !strcmp(c[j].reference, c[i].reference);
        if (dup) { c[i].skip = 1; continue; }
        size_t sl = strlen(a.tag) + strlen(c[i].name) + 2;
        c[i].source = malloc(sl);
        snprintf(c[i].source, sl, "%s%s%s", a.tag, *a.tag ? "/" : "", c[i].name);
        for (char *p = c[i].source; *p; p++)
            if (*p == '"' || *p == '\n') *p = '\'';   /* a marker value cannot hold these */
        if (doc_grow_qa_content(&bodies[nadd], c[i].prompt, c[i].reference, 1, &e)) {
            err_prefix(&e, "probe '%s'", c[i].name);
            rc = cmd_fail(ctx, &e);
            goto done;
        }
        doc_section *s = &secs[nadd++];
        s->type = DOC_INSTRUCTION;
        s->auto_harvest = 1;
        s->harvest_source = c[i].source;
    }
    for (int i = 0; i < nadd; i++) {
        secs[i].content = bodies[i].buf;
        secs[i].content_len = bodies[i].len;
    }
    int nskip = 0;
    for (int i = 0; i < n; i++) nskip += c[i].skip;
    if (a.json) {
        json_t *add = json_array(), *skip = json_array();
        for (int i = 0; i < n; i++)
            json_array_append_new(c[i].skip ? skip : add,
                                  json_pack("{s:s, s:s, s:s, s:f}", "probe", c[i].name, "prompt", c[i].prompt,
                                            "reference", c[i].reference, "confidence", c[i].confidence));
        json_t *o = json_pack("{s:o, s:o, s:b}", "additions", add, "skipped", skip, "applied", a.apply && nadd);
        cmd_print_json(o);
    } else {
        printf("harvest plan: %d add, %d skip\n", nadd, nskip);
        for (int i = 0; i < n; i++) {
            char q[100], ref[100];
            grow_first_line(c[i].prompt, q, sizeof q);
            grow_first_line(c[i].reference, ref, sizeof ref);
            if (c[i].skip) printf("- %s: already in the document\n", c[i].name);
            else printf("+ ::instruction:: probe=%s confidence=%.2f\n  Q: %s\n  A: %s\n", c[i].name, c[i].confidence, q, ref);
        }
    }
    if (!nadd) {
        if (!a.json) printf("harvest: nothing to harvest from %s\n", a.report);
        rc = EXIT_USAGE;
        goto done;
    }
    if (a.apply) {
        strbuf sb = STRBUF_INIT;
        if (doc_grow_append(d, secs, nadd, &sb, &e) || doc_grow_write(pos[0], &sb, &e)) {
            sb_free(&sb);
            rc = cmd_fail(ctx, &e);
            goto done;
        }
        sb_free(&sb);
        if (!a.json) printf("harvest: added %d section%s to %s (dlm harvest %s --revert removes them)\n", nadd,
                            nadd == 1 ? "" : "s", pos[0], pos[0]);
    } else if (!a.json) {
        printf("dry run: --apply writes them\n");
    }
done:
    for (int i = 0; i < n; i++) sb_free(&bodies[i]);
    free(bodies);
    free(secs);
    free_cands(c, n);
    doc_free(d);
    return rc;
}
