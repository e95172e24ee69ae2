/* opts — the one option parser every command uses. */
#include <errno.h>
#include <math.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pwd.h>

#include "cmd/cmd.h"
#include "infer/sample.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/str.h"

static const opt *find_long(const opt *o, const char *name, size_t n)
{
    for (; o && o->type != OPT_END; o++)
        if (strlen(o->name) == n && !strncmp(o->name, name, n)) return o;
    return NULL;
}

static const opt *find_short(const opt *o, char c)
{
    for (; o && o->type != OPT_END; o++)
        if (o->short_name && o->short_name == c) return o;
    return NULL;
}

/* The original DocumentLanguageModel's options that dlm does not take:
 * said with the reason instead of "unknown option" (a user switching
 * tools types them). */
static const struct {
    const char *cmd, *opt, *why, *hint;
} ORIGINAL_ONLY[] = {
    {"train", "gpus", "dlm trains on CPU cores, not GPUs",
     "several processes or machines: mpirun -np N dlm train PATH (docs/mpi.md)"},
    {"train", "repl", "dlm train --watch has no built-in REPL", "run 'dlm repl PATH' in another terminal"},
    {"train", "skip-export-probes", "dlm runs no export probes when it trains", "leave the option out"},
    {"init", "skip-export-probes", "dlm runs no export probes when it initialises a document", "leave the option out"},
};

static int original_only(const cmd_spec *spec, const char *name)
{
    for (size_t i = 0; spec && i < sizeof ORIGINAL_ONLY / sizeof ORIGINAL_ONLY[0]; i++)
        if (!strcmp(spec->name, ORIGINAL_ONLY[i].cmd) && !strcmp(name, ORIGINAL_ONLY[i].opt)) {
            fprintf(stderr, "dlm: error: %s --%s (the original's option) is not supported: %s\nhint: %s\n",
                    spec->name, name, ORIGINAL_ONLY[i].why, ORIGINAL_ONLY[i].hint);
            return 1;
        }
    return 0;
}

int cmd_usage_error(const cmd_spec *spec, const char *fmt, ...)
{
    va_list ap;
    fputs("dlm: error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (spec) fprintf(stderr, "hint: see 'dlm %s --help'\n", spec->name);
    else fprintf(stderr, "hint: see 'dlm --help'\n");
    return EXIT_USAGE;
}

int cmd_check_sample(const cmd_spec *spec, const char *option, const char *knob, double v)
{
    char why[160];
    if (!sample_check(knob, v, why, sizeof why)) return 0;
    return cmd_usage_error(spec, "%s: %s", option, why);
}

void opts_usage(FILE *f, const cmd_spec *spec)
{
    fprintf(f, "usage: dlm %s %s\n\n%s\n", spec->name, spec->synopsis, spec->summary);
    if (spec->opts && spec->opts[0].type != OPT_END) {
        fprintf(f, "\noptions:\n");
        for (const opt *o = spec->opts; o->type != OPT_END; o++) {
            char left[96];
            if (o->short_name)
                snprintf(left, sizeof left, "-%c, --%s%s%s", o->short_name, o->name,
                         o->metavar ? " " : "", o->metavar ? o->metavar : "");
            else
                snprintf(left, sizeof left, "    --%s%s%s", o->name, o->metavar ? " " : "",
                         o->metavar ? o->metavar : "");
            fprintf(f, "  %-28s %s\n", left, o->help ? o->help : "");
        }
    }
    fprintf(f, "\nglobal options: --home DIR, -v/--verbose, -q/--quiet, -h/--help\n");
    if (spec->details) fprintf(f, "\n%s\n", spec->details);
}

static int set_value(const cmd_spec *spec, const opt *o, void *args, const char *flag, const char *val)
{
    char *dst = (char *)args + o->off;
    char *end;
    switch (o->type) {
    case OPT_STR: *(const char **)dst = val; return 0;
    case OPT_LIST: {
        opt_list *l = (opt_list *)dst;
        if (l->n >= OPT_LIST_MAX) return cmd_usage_error(spec, "option '%s' given more than %d times", flag, OPT_LIST_MAX);
        l->v[l->n++] = val;
        return 0;
    }
    case OPT_INT:
    case OPT_THREADS: {
        errno = 0;
        long long v = strtoll(val, &end, 10);
        if (errno || end == val || *end || v < INT_MIN || v > INT_MAX)
            return cmd_usage_error(spec, "option '%s' expects an integer, got '%s'", flag, val);
        if (o->type == OPT_THREADS && v < 0) return cmd_usage_error(spec, "--threads must be >= 0 (0 = all cores)");
        *(int *)dst = (int)v;
        return 0;
    }
    case OPT_DOUBLE: {
        errno = 0;
        double v = strtod(val, &end);
        if (errno || end == val || *end || !isfinite(v))   /* "nan" and "inf" parse, and mean nothing here */
            return cmd_usage_error(spec, "option '%s' expects a number, got '%s'", flag, val);
        *(double *)dst = v;
        return 0;
    }
    default: return 0;
    }
}

int opts_parse(const cmd_spec *spec, int argc, char **argv, dlm_ctx *ctx, void *args, char **pos, int *npos)
{
    int only_pos = 0;
    *npos = 0;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (only_pos || a[0] != '-' || a[1] == 0) { pos[(*npos)++] = a; continue; }
        if (!strcmp(a, "--")) { only_pos = 1; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { opts_usage(stdout, spec); return 1; }
        if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) { ctx->verbose = 1; continue; }
        if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) { ctx->quiet = 1; continue; }
        const opt *o = NULL;
        const char *inline_val = NULL;
        if (a[1] == '-') {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t n = eq ? (size_t)(eq - name) : strlen(name);
            if (n == 4 && !strncmp(name, "home", 4)) {
                const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
                if (!v) return cmd_usage_error(spec, "option '--home' needs a value");
                ctx->home_opt = v;
                continue;
            }
            o = find_long(spec->opts, name, n);
            if (!o) {
                /* Suggest the closest known option. */
                const char *best = NULL;
                int bd = 4;
                char want[64];
                snprintf(want, sizeof want, "%.*s", (int)(n < 63 ? n : 63), name);
                if (original_only(spec, want)) return EXIT_USAGE;
                for (const opt *p = spec->opts; p && p->type != OPT_END; p++) {
                    int d = str_edit_distance(want, p->name);
                    if (d < bd) { bd = d; best = p->name; }
                }
                if (best) return cmd_usage_error(spec, "unknown option '--%s' (did you mean '--%s'?)", want, best);
                return cmd_usage_error(spec, "unknown option '--%s'", want);
            }
            if (eq) inline_val = eq + 1;
        } else {
            if (a[2] != 0) return cmd_usage_error(spec, "unknown option '%s'", a);
            o = find_short(spec->opts, a[1]);
            if (!o) return cmd_usage_error(spec, "unknown option '%s'", a);
        }
        if (o->type == OPT_FLAG) {
            if (inline_val) return cmd_usage_error(spec, "option '--%s' takes no value", o->name);
            *(int *)((char *)args + o->off) = 1;
            continue;
        }
        const char *val = inline_val;
        if (!val) {
            if (i + 1 >= argc) return cmd_usage_error(spec, "option '%s' needs a value (%s)", a,
                                                      o->metavar ? o->metavar : "VALUE");
            val = argv[++i];
        }
        if (set_value(spec, o, args, a, val)) return EXIT_USAGE;
    }
    return 0;
}

int cmd_check_backend(const cmd_spec *spec, const char *backend)
{
    if (!backend || !strcmp(backend, "auto") || !strcmp(backend, "pytorch")) return 0;
    if (!strcmp(backend, "mlx")) {
        fprintf(stderr, "dlm: error: --backend mlx is not available: MLX is Apple's Python/Metal runtime, and dlm runs "
                        "its own CPU kernels on every host\n"
                        "hint: leave --backend out (or use auto or pytorch, which mean the same here)\n");
        return EXIT_USAGE;
    }
    return cmd_usage_error(spec, "--backend must be auto, pytorch or mlx (got '%s')", backend);
}

void cmd_print_json(json_t *o)
{
    strbuf sb = STRBUF_INIT;
    json_write(&sb, o, JW_SORT);
    printf("%s\n", sb_str(&sb));
    sb_free(&sb);
    json_decref(o);
}

int cmd_fail(const dlm_ctx *ctx, const dlm_err *e)
{
    err_print(stderr, e, ctx ? ctx->verbose : 0);
    return e->code ? e->code : EXIT_FAIL;
}

int ctx_resolve_home(dlm_ctx *ctx, dlm_err *e)
{
    const char *h = ctx->home_opt;
    if (!h || !*h) h = getenv("DLM_HOME");
    if (h && *h) {
        if (h[0] == '/') snprintf(ctx->home, sizeof ctx->home, "%s", h);
        else {
            char cwd[2048];
            if (!getcwd(cwd, sizeof cwd)) return err_sys(e, "cannot read the current directory");
            if (!fs_join(ctx->home, sizeof ctx->home, cwd, h)) return err_set(e, NULL, "home path too long");
        }
        return 0;
    }
    const char *user = getenv("HOME");
    if (!user || !*user) {
        struct passwd *pw = getpwuid(getuid());
        user = pw ? pw->pw_dir : NULL;
    }
    if (!user) return err_set(e, NULL, "cannot find a home directory; pass --home DIR or set DLM_HOME");
    if (!fs_join(ctx->home, sizeof ctx->home, user, ".dlm")) return err_set(e, NULL, "home path too long");
    return 0;
}
