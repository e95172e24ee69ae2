/* dlm — turn a .dlm document into a LoRA adapter on a real pretrained LLM.
 *
 * This file is the command table and the dispatcher, nothing else: global
 * options, `dlm help`, `dlm --version`, then one row per command. Each
 * command lives in src/cmd/cmd_<name>.c and returns its exit code. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "cmd/commands.h"
#include "kern/cpu.h"
#include "kern/kern.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/str.h"
#include "version.h"
#include "run/dist.h"

/* Alphabetical within each group; `dlm help` prints them in this order. */
const cmd_entry dlm_commands[] = {
#define X(name) {#name, cmd_##name, &spec_##name},
    DLM_COMMAND_LIST(X)
#undef X
    {NULL, NULL, NULL},
};

const cmd_entry *cmd_find(const char *name)
{
    for (const cmd_entry *c = dlm_commands; c->name; c++)
        if (!strcmp(c->name, name)) return c;
    return NULL;
}

static void print_version(void)
{
    char cpu[128], amx[128];
    cpu_describe(cpu, sizeof cpu);
    cpu_amx_describe(amx, sizeof amx);
    printf("dlm %s (commit %s)\n", DLM_VERSION, DLM_COMMIT);
    printf("cpu: %s (dispatch level %s; amx %s)\n", cpu, cpu_level_name(cpu_level()), amx);
    char bf[96];
    kern_bf16_describe(bf, sizeof bf);
    kern_bf16_be be = kern_bf16_backend();
    printf("bf16: %s; training.precision null trains %s\n", bf,
           be == KERN_BF16_AMX || be == KERN_BF16_AVX512BF16 ? "bf16" : "fp32");
    printf("mpi: %s\n", dist_compiled() ? "yes (data-parallel 'mpirun -np N dlm train'; docs/mpi.md)" : "no (build with 'make mpi')");
}

static void print_help(FILE *f)
{
    fprintf(f, "usage: dlm [--home DIR] [-v|-q] <command> [options]\n\n"
               "Train a LoRA adapter from a .dlm document on a real pretrained LLM.\n\n"
               "commands:\n");
    for (const cmd_entry *c = dlm_commands; c->name; c++)
        fprintf(f, "  %-12s %s\n", c->name, c->spec->summary);
    fprintf(f, "\nglobal options:\n"
               "  --home DIR     store root (else $DLM_HOME, else ~/.dlm)\n"
               "  -v, --verbose  more detail; class names on file:line errors too\n"
               "  -q, --quiet    warnings and progress off\n"
               "  --version      version, commit and CPU level\n\n"
               "'dlm help <command>' or 'dlm <command> --help' shows a command's options.\n");
}

static int suggest(const char *name)
{
    fprintf(stderr, "dlm: error: unknown command '%s'\n", name);
    const char *names[sizeof dlm_commands / sizeof dlm_commands[0]];
    size_t n = 0;
    for (const cmd_entry *c = dlm_commands; c->name; c++) names[n++] = c->name;
    names[n] = NULL;
    const char *best = str_closest(name, names);
    if (best) fprintf(stderr, "hint: did you mean 'dlm %s'?\n", best);
    else fprintf(stderr, "hint: see 'dlm --help' for the list of commands\n");
    return EXIT_USAGE;
}

/* stdout is a pipe or socket whose reading end is closed: poll reports
 * POLLERR (a pipe) or POLLHUP (a socket) on the writing end. */
static int stdout_reader_gone(void)
{
    struct stat st;
    if (fstat(STDOUT_FILENO, &st) || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) return 0;
    struct pollfd p = {.fd = STDOUT_FILENO, .events = 0};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP));
}

int main(int argc, char **argv)
{
    dlm_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    if (hash_init() != 0) {
        fprintf(stderr, "dlm: error: cannot initialise libsodium\n");
        return EXIT_FAIL;
    }
    signal(SIGPIPE, SIG_IGN);
    dlm_err e;
    err_clear(&e);
    if (cmd_read_env(&e)) return cmd_fail(&ctx, &e);

    /* Run as `dlm-lsp` (a link to dlm), the language server: editors' dlm
     * extensions start that name with no arguments (docs/editors.md). */
    const char *self = argc > 0 ? strrchr(argv[0], '/') : NULL;
    self = self ? self + 1 : argc > 0 ? argv[0] : "";
    if (!strcmp(self, "dlm-lsp")) {
        static char lsp_name[] = "lsp";
        argv[0] = lsp_name;
        return cmd_lsp(argc, argv, &ctx);
    }

    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--version")) { print_version(); return EXIT_OK; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { print_help(stdout); return EXIT_OK; }
        if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) { ctx.verbose = 1; continue; }
        if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) { ctx.quiet = 1; continue; }
        if (!strcmp(a, "--home")) {
            if (i + 1 >= argc) return cmd_usage_error(NULL, "option '--home' needs a value");
            ctx.home_opt = argv[++i];
            continue;
        }
        if (!strncmp(a, "--home=", 7)) { ctx.home_opt = a + 7; continue; }
        return cmd_usage_error(NULL, "unknown global option '%s'", a);
    }
    if (i >= argc) { print_help(stderr); return EXIT_USAGE; }

    const char *name = argv[i];
    if (!strcmp(name, "help")) {
        if (i + 1 >= argc) { print_help(stdout); return EXIT_OK; }
        const cmd_entry *c = cmd_find(argv[i + 1]);
        if (!c) return suggest(argv[i + 1]);
        opts_usage(stdout, c->spec);
        return EXIT_OK;
    }
    if (!strcmp(name, "version")) { print_version(); return EXIT_OK; }
    const cmd_entry *c = cmd_find(name);
    if (!c) return suggest(name);

    /* Verbosity may also be given after the command: commands re-apply it
     * after parsing, through cmd_apply_globals(). */
    int rc = c->fn(argc - i, argv + i, &ctx);

    /* Like git: a failed write to stdout (full disk) is an error, but a
     * reader that went away (`dlm metrics DOC | head -1`) ends us quietly,
     * as SIGPIPE would have (SIGPIPE is ignored for the sockets). */
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (errno == EPIPE || stdout_reader_gone()) {
            fflush(stderr);
            signal(SIGPIPE, SIG_DFL);
            raise(SIGPIPE);
            return 128 + SIGPIPE;
        }
        if (rc == EXIT_OK) {
            fprintf(stderr, "dlm: error: cannot write to standard output\n");
            rc = EXIT_FAIL;
        }
    }
    return rc;
}
