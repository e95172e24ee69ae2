/* Unit tests for src/cmd/opts.c: the option table parser writes each option
 * into the caller's args struct at opt.off (src/cmd/cmd.h), so a command can
 * be called twice in one process (repl, tests) without the first call's
 * values leaking into the second. The expected values come from cmd.h's
 * description of the syntax, not from earlier parser output. */
#include "check.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "cmd/commands.h"

typedef struct t_args {
    int flag, n;
    const char *str;
    double x;
    opt_list list;
} t_args;

static const opt T_OPTS[] = {
    {"flag", 'f', OPT_FLAG, offsetof(t_args, flag), NULL, "a flag"},
    {"str", 's', OPT_STR, offsetof(t_args, str), "S", "a string"},
    {"n", 0, OPT_INT, offsetof(t_args, n), "N", "an int"},
    {"x", 0, OPT_DOUBLE, offsetof(t_args, x), "X", "a double"},
    {"list", 'l', OPT_LIST, offsetof(t_args, list), "V", "repeatable"},
    {0},
};

static const cmd_spec T_SPEC = {"t", "[opts] ARGS", "a test command", NULL, T_OPTS};

/* What opts_parse printed on stderr during the last parse(). */
static char g_err[4096];

/* opts_parse on a NULL-terminated argv (argv[0] = "t"), stderr captured in
 * g_err. */
static int parse(char **argv, t_args *a, dlm_ctx *ctx, char **pos, int *npos)
{
    int argc = 0;
    while (argv[argc]) argc++;
    char path[4200];
    snprintf(path, sizeof path, "%s/stderr", check_tmpdir("opts_stderr"));
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(path, "w+");
    if (!f || saved < 0) { CHECK(0); return -1; }
    dup2(fileno(f), 2);
    int r = opts_parse(&T_SPEC, argc, argv, ctx, a, pos, npos);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(f);
    size_t n = fread(g_err, 1, sizeof g_err - 1, f);
    g_err[n] = 0;
    fclose(f);
    return r;
}

#define T_DEFAULTS {.n = 7, .str = "dflt", .x = 0.5}

static void test_types(void)
{
    t_args a = T_DEFAULTS;
    dlm_ctx ctx = {0};
    char *pos[16];
    int npos = -1;
    char *argv[] = {"t", "in.dlm", "--flag", "--str", "hello", "--n", "-42", "--x", "2.5e-3", "--list", "a",
                    "-l", "b", "--list", "c", "out", NULL};
    CHECK_INT(parse(argv, &a, &ctx, pos, &npos), 0);
    CHECK_STR(g_err, "");
    CHECK_INT(a.flag, 1);
    CHECK_STR(a.str, "hello");
    CHECK_INT(a.n, -42);
    CHECK(a.x == 2.5e-3);
    CHECK_INT(a.list.n, 3);
    CHECK_STR(a.list.v[0], "a");
    CHECK_STR(a.list.v[1], "b");
    CHECK_STR(a.list.v[2], "c");
    CHECK_INT(npos, 2);
    CHECK_STR(pos[0], "in.dlm");
    CHECK_STR(pos[1], "out");
    CHECK_INT(ctx.verbose, 0);

    /* nothing given: every field keeps the default the caller put there */
    t_args d = T_DEFAULTS;
    char *none[] = {"t", NULL};
    CHECK_INT(parse(none, &d, &ctx, pos, &npos), 0);
    CHECK_INT(npos, 0);
    CHECK_INT(d.flag, 0);
    CHECK_INT(d.n, 7);
    CHECK_STR(d.str, "dflt");
    CHECK(d.x == 0.5);
    CHECK_INT(d.list.n, 0);
}

static void test_syntax(void)
{
    dlm_ctx ctx = {0};
    char *pos[16];
    int npos;

    /* --name=value for every valued type; a value may itself hold '=' and
     * may start with '-' when it follows the option */
    t_args a = T_DEFAULTS;
    char *eq[] = {"t", "--str=k=v", "--n=2147483647", "--x=-1.25", "--list=", "-s", "-dash", NULL};
    CHECK_INT(parse(eq, &a, &ctx, pos, &npos), 0);
    CHECK_STR(a.str, "-dash");
    CHECK_INT(a.n, INT_MAX);
    CHECK(a.x == -1.25);
    CHECK_INT(a.list.n, 1);
    CHECK_STR(a.list.v[0], "");
    CHECK_INT(npos, 0);

    /* "-" is a positional (stdin); after "--" everything is, options too */
    t_args b = T_DEFAULTS;
    char *dd[] = {"t", "-", "-f", "--", "--flag", "-s", "--", "-", NULL};
    CHECK_INT(parse(dd, &b, &ctx, pos, &npos), 0);
    CHECK_INT(b.flag, 1);
    CHECK_STR(b.str, "dflt");
    CHECK_INT(npos, 5);
    CHECK_STR(pos[0], "-");
    CHECK_STR(pos[1], "--flag");
    CHECK_STR(pos[2], "-s");
    CHECK_STR(pos[3], "--");
    CHECK_STR(pos[4], "-");

    /* the global options land in ctx, not in args */
    t_args c = T_DEFAULTS;
    char *gl[] = {"t", "-v", "--home", "/h1", "--quiet", "--home=/h2", NULL};
    CHECK_INT(parse(gl, &c, &ctx, pos, &npos), 0);
    CHECK_INT(ctx.verbose, 1);
    CHECK_INT(ctx.quiet, 1);
    CHECK_STR(ctx.home_opt, "/h2");
    CHECK_INT(npos, 0);
    CHECK_INT(c.flag, 0);

    /* --help prints the usage on stdout and returns 1; nothing is bound */
    t_args h = T_DEFAULTS;
    char *hp[] = {"t", "--flag", "-h", "--n", "oops", NULL};
    fflush(stdout);
    int saved = dup(1);
    FILE *devnull = fopen("/dev/null", "w");
    dup2(fileno(devnull), 1);
    int r = parse(hp, &h, &ctx, pos, &npos);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    fclose(devnull);
    CHECK_INT(r, 1);
    CHECK_INT(h.n, 7);
}

/* Each usage error returns 2, prints "dlm: error: ..." naming the option and
 * the --help hint. */
static void expect_usage(char **argv, const char *msg)
{
    t_args a = T_DEFAULTS;
    dlm_ctx ctx = {0};
    char *pos[OPT_LIST_MAX + 8];
    int npos;
    CHECK_INT(parse(argv, &a, &ctx, pos, &npos), EXIT_USAGE);
    char want[512];
    snprintf(want, sizeof want, "dlm: error: %s\nhint: see 'dlm t --help'\n", msg);
    CHECK_STR(g_err, want);
}

static void test_errors(void)
{
    char *unk[] = {"t", "--flog", NULL};
    expect_usage(unk, "unknown option '--flog' (did you mean '--flag'?)");
    char *unk2[] = {"t", "--zzzzzzzz=1", NULL};
    expect_usage(unk2, "unknown option '--zzzzzzzz'");
    char *unk3[] = {"t", "-z", NULL};
    expect_usage(unk3, "unknown option '-z'");
    char *bundled[] = {"t", "-fl", "x", NULL};
    expect_usage(bundled, "unknown option '-fl'");

    char *miss[] = {"t", "--str", NULL};
    expect_usage(miss, "option '--str' needs a value (S)");
    char *miss2[] = {"t", "x", "-l", NULL};
    expect_usage(miss2, "option '-l' needs a value (V)");
    char *miss3[] = {"t", "--home", NULL};
    expect_usage(miss3, "option '--home' needs a value");
    char *flagval[] = {"t", "--flag=1", NULL};
    expect_usage(flagval, "option '--flag' takes no value");

    /* int: the whole text, base 10, within int */
    char *big[] = {"t", "--n", "2147483648", NULL};
    expect_usage(big, "option '--n' expects an integer, got '2147483648'");
    char *small[] = {"t", "--n=-2147483649", NULL};
    expect_usage(small, "option '--n=-2147483649' expects an integer, got '-2147483649'");
    char *huge[] = {"t", "--n", "99999999999999999999", NULL};
    expect_usage(huge, "option '--n' expects an integer, got '99999999999999999999'");
    char *junk[] = {"t", "--n", "12x", NULL};
    expect_usage(junk, "option '--n' expects an integer, got '12x'");
    char *empty[] = {"t", "--n=", NULL};
    expect_usage(empty, "option '--n=' expects an integer, got ''");
    char *frac[] = {"t", "--n", "1.5", NULL};
    expect_usage(frac, "option '--n' expects an integer, got '1.5'");
    char *dbl[] = {"t", "--x", "abc", NULL};
    expect_usage(dbl, "option '--x' expects a number, got 'abc'");
    char *dbl2[] = {"t", "--x", "1e999", NULL};
    expect_usage(dbl2, "option '--x' expects a number, got '1e999'");
}

static void test_list_max(void)
{
    char *argv[2 * OPT_LIST_MAX + 4];
    char vals[OPT_LIST_MAX + 1][8];
    int k = 0;
    argv[k++] = "t";
    for (int i = 0; i < OPT_LIST_MAX; i++) {
        snprintf(vals[i], sizeof vals[i], "v%d", i);
        argv[k++] = "--list";
        argv[k++] = vals[i];
    }
    argv[k] = NULL;
    t_args a = T_DEFAULTS;
    dlm_ctx ctx = {0};
    char *pos[2 * OPT_LIST_MAX + 4];
    int npos;
    CHECK_INT(parse(argv, &a, &ctx, pos, &npos), 0);
    CHECK_INT(a.list.n, OPT_LIST_MAX);
    CHECK_STR(a.list.v[0], "v0");
    CHECK_STR(a.list.v[OPT_LIST_MAX - 1], "v63");

    /* one more is an error, and the list stays as it was */
    argv[k++] = "--list";
    argv[k++] = "one-too-many";
    argv[k] = NULL;
    t_args b = T_DEFAULTS;
    CHECK_INT(parse(argv, &b, &ctx, pos, &npos), EXIT_USAGE);
    CHECK_STR(g_err, "dlm: error: option '--list' given more than 64 times\nhint: see 'dlm t --help'\n");
    CHECK_INT(b.list.n, OPT_LIST_MAX);
}

/* The point of args structs: two parses into two fresh structs are
 * independent, whichever order they run in (with file-scope statics the
 * second parse saw the first one's --flag, --str and list). */
static void test_reentrant(void)
{
    dlm_ctx ctx = {0};
    char *pos[16];
    int npos;
    t_args first = T_DEFAULTS;
    char *a1[] = {"t", "--flag", "--str", "one", "--n", "1", "--x", "9", "--list", "p", "--list", "q", NULL};
    CHECK_INT(parse(a1, &first, &ctx, pos, &npos), 0);
    t_args second = T_DEFAULTS;
    char *a2[] = {"t", "--list", "r", NULL};
    CHECK_INT(parse(a2, &second, &ctx, pos, &npos), 0);
    CHECK_INT(second.flag, 0);
    CHECK_STR(second.str, "dflt");
    CHECK_INT(second.n, 7);
    CHECK(second.x == 0.5);
    CHECK_INT(second.list.n, 1);
    CHECK_STR(second.list.v[0], "r");
    /* and the second parse wrote nothing into the first struct */
    CHECK_INT(first.flag, 1);
    CHECK_STR(first.str, "one");
    CHECK_INT(first.n, 1);
    CHECK(first.x == 9);
    CHECK_INT(first.list.n, 2);
    CHECK_STR(first.list.v[1], "q");
}

/* Every command's table: names and short names unique, and no two options
 * bound to one field (a copy-pasted offsetof would make two flags one)
 * unless the second is an alias whose help begins "same as --<first>". */
static void test_command_tables(void)
{
#define X(name) &spec_##name,
    const cmd_spec *specs[] = {DLM_COMMAND_LIST(X)};
#undef X
    int ncmd = (int)(sizeof specs / sizeof specs[0]);
    for (int k = 0; k < ncmd; k++) {
        const cmd_spec *c = specs[k];
        const opt *o = c->opts;
        for (int i = 0; o && o[i].type != OPT_END; i++) {
            CHECK_MSG(o[i].name && o[i].help, "%s: option %d", c->name, i);
            CHECK_MSG((o[i].type == OPT_FLAG) == !o[i].metavar, "%s --%s: a metavar exactly for options that take a value",
                      c->name, o[i].name);
            for (int j = 0; j < i; j++) {
                CHECK_MSG(strcmp(o[i].name, o[j].name), "%s: --%s twice", c->name, o[i].name);
                CHECK_MSG(!o[i].short_name || o[i].short_name != o[j].short_name, "%s: -%c twice", c->name,
                          o[i].short_name);
                if (o[i].off != o[j].off) continue;
                /* an alias (metrics --run-id) says so in its help */
                char alias[96];
                snprintf(alias, sizeof alias, "same as --%s", o[j].name);
                CHECK_MSG(o[i].type == o[j].type && !strncmp(o[i].help, alias, strlen(alias)),
                          "%s: --%s and --%s bind the same field", c->name, o[i].name, o[j].name);
            }
        }
    }
    CHECK(ncmd > 20);
}

/* The same through a real command: `tokenize --json` then plain `tokenize`
 * in one process. The second call prints space-separated ids; with
 * file-scope statics it kept the first call's --json (cmd_tokenize reset
 * its statics by hand to avoid that). */
static int run_tokenize(char **argv, char *out, size_t cap)
{
    int argc = 0;
    while (argv[argc]) argc++;
    char path[4200];
    snprintf(path, sizeof path, "%s/stdout", check_tmpdir("opts_stdout"));
    dlm_ctx ctx = {.home_opt = check_tmpdir("opts_home"), .quiet = 1};
    fflush(stdout);
    int saved = dup(1);
    FILE *f = fopen(path, "w+");
    if (!f || saved < 0) { CHECK(0); return -1; }
    dup2(fileno(f), 1);
    int rc = cmd_tokenize(argc, argv, &ctx);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    rewind(f);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = 0;
    fclose(f);
    return rc;
}

static void test_command_twice(void)
{
    dlm_err e;
    err_clear(&e);
    CHECK_INT(cmd_read_env(&e), 0);   /* as main() does: HF cache, DLM_TINY */
    char out[256];
    char *j[] = {"tokenize", "--base", "tiny", "--json", "hello", NULL};
    CHECK_INT(run_tokenize(j, out, sizeof out), EXIT_OK);
    CHECK(out[0] == '[');
    char want[256];
    snprintf(want, sizeof want, "%s", out);
    /* "[a,b,c]\n" -> "a b c\n" */
    for (char *p = want; *p; p++)
        if (*p == ',') *p = ' ';
    memmove(want, want + 1, strlen(want));
    char *close_br = strchr(want, ']');
    if (close_br) memmove(close_br, close_br + 1, strlen(close_br));
    char *plain[] = {"tokenize", "--base", "tiny", "hello", NULL};
    CHECK_INT(run_tokenize(plain, out, sizeof out), EXIT_OK);
    CHECK_STR(out, want);
}

int main(void)
{
    test_types();
    test_syntax();
    test_errors();
    test_list_max();
    test_reentrant();
    test_command_tables();
    test_command_twice();
    return check_done();
}
