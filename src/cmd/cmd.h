/* cmd — the command layer: flags → library calls → exit code.
 *
 * The only place that prints errors and picks exit codes:
 *   0 ok, 1 failure, 2 usage error, 130 interrupted.
 * One file per command (cmd_<name>.c), registered in src/main.c's table. */
#ifndef DLM_CMD_H
#define DLM_CMD_H

#include <signal.h>
#include <stddef.h>
#include "util/err.h"
#include "doc/doc.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_INTERRUPTED = 130 };

typedef struct dlm_ctx {
    char home[4096];    /* --home > $DLM_HOME > ~/.dlm (resolved, absolute) */
    const char *home_opt;
    int verbose;
    int quiet;
} dlm_ctx;

/* ---- option parsing ------------------------------------------------------
 * Long options "--name value" / "--name=value", short "-x value", bundled
 * flags are not supported (keep it obvious). "--" ends options; "-" alone is
 * a positional (stdin). Global options (--home, -v, -q) are accepted by every
 * command as well as before it. */
typedef enum { OPT_END = 0, OPT_FLAG, OPT_STR, OPT_INT, OPT_DOUBLE, OPT_LIST, OPT_THREADS } opt_type;
/* OPT_THREADS: an int >= 0 (0 = all cores), the --threads of every command. */

/* OPT_LIST: every occurrence of a repeatable option, in order. */
#define OPT_LIST_MAX 64
typedef struct opt_list {
    const char *v[OPT_LIST_MAX];
    int n;
} opt_list;

typedef struct opt {
    const char *name;       /* long name without "--" */
    char short_name;        /* 0 = none */
    opt_type type;
    size_t off;             /* offsetof(<command>_args, field): FLAG/INT int, STR const char *,
                               DOUBLE double, LIST opt_list */
    const char *metavar;    /* "N", "PATH", ... (NULL for flags) */
    const char *help;
} opt;

typedef struct cmd_spec {
    const char *name;
    const char *synopsis;   /* "PATH [--json]" */
    const char *summary;    /* one line for `dlm help` */
    const char *details;    /* paragraph(s) after the option list; may be NULL */
    const opt *opts;        /* terminated by {0} */
} cmd_spec;

/* Parse argv[1..argc-1] (argv[0] is the command name) into args, the
 * command's own args struct (a local, already holding its defaults): each
 * option writes the field at args + opt.off, so a second call of a
 * command in one process (tests/unit/test_opts.c) starts from its
 * defaults again. Positionals are
 * stored into pos[] (capacity argc), count into *npos. Returns:
 *   0 ok, 1 help was printed (caller returns EXIT_OK), 2 usage error printed. */
int opts_parse(const cmd_spec *spec, int argc, char **argv, dlm_ctx *ctx,
               void *args, char **pos, int *npos);
void opts_usage(FILE *f, const cmd_spec *spec);

/* Print a usage error ("dlm: error: <msg>" + hint to --help); returns 2. */
int cmd_usage_error(const cmd_spec *spec, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* A sampling option against the one shared range (infer/sample.h's
 * sample_check): 0 in range, else the usage error "OPTION: <knob> must be
 * in ..." is printed and 2 returned. */
int cmd_check_sample(const cmd_spec *spec, const char *option, const char *knob, double v);
/* The original's --backend (prompt, repl, preference mine): NULL, "auto"
 * and "pytorch" pass (dlm has one backend, its CPU kernels, which is what
 * the original's pytorch backend is on a CPU host); "mlx" and anything
 * else print a usage error with the reason and return 2. */
int cmd_check_backend(const cmd_spec *spec, const char *backend);
/* Print e and return its exit code (e->code or 1). */
int cmd_fail(const dlm_ctx *ctx, const dlm_err *e);
/* o as sorted JSON and a newline on stdout (every --json), then released. */
void cmd_print_json(json_t *o);

/* Resolve ctx->home from --home / $DLM_HOME / ~/.dlm. */
int ctx_resolve_home(dlm_ctx *ctx, dlm_err *e);

/* srcview.c: the per-file verdicts of a document's training.sources (text
 * or JSON on stdout), for `show --sources` and `train --dry-run`. */
/* src/cmd/adapters_view.c: the document's named adapters with their store
 * versions (JSON array; null without training.adapters), and as lines. */
json_t *adapters_view_json(const dlm_doc *d, const char *home);
/* training.gate: {enabled, mode: off|not trained|trained|uniform, ...}; null without adapters. */
json_t *adapters_view_gate_json(const dlm_doc *d, const char *home);
void adapters_view_print(const json_t *adapters, const json_t *gate);
/* `train --dry-run` / `show --sources`: every file of the document's
 * directives with its verdict; shown (or NULL) is the path printed for a
 * dry run's temporary scaffold, which is listed under that name. */
int srcview_print(const char *doc_path, const char *shown, int as_json, dlm_err *e);

/* scaffold.c: `dlm train DIR` — the path of DIR/.dlm/<name>.dlm, reused or
 * written now (*scaffolded = 1). With dry_run, a scaffold that would be
 * written goes to a hidden temp name in DIR/.dlm instead (*scaffolded = 2),
 * which scaffold_discard removes, with DIR/.dlm when that is then empty. */
#define SCAFFOLD_DEFAULT_NAME "corpus"
typedef struct scaffold_opts {
    const char *base;           /* required to write one */
    const char *name;           /* NULL = SCAFFOLD_DEFAULT_NAME */
    const opt_list *include, *exclude;
    int recursive;              /* default include "**" "/" "*" vs "*" */
    int policy_strict;
    int rescaffold;             /* rewrite it (keeping its dlm_id) */
    int dry_run;                /* write nothing the user keeps */
} scaffold_opts;
int scaffold_train_target(const char *dir, const scaffold_opts *o, char *out, size_t cap, int *scaffolded, dlm_err *e);
void scaffold_discard(const char *path);

/* watch.c: `train --watch` and `--listen-rpc`'s cycles. Block until the
 * document or a file under its training.sources roots changed and then
 * stayed quiet for debounce_ms, or wake_fd (>= 0: the probe RPC's) became
 * readable and stayed quiet as long (1), or *stop became set (0).
 * doc_path NULL: wait on wake_fd alone. */
int watch_wait(const char *doc_path, int debounce_ms, int wake_fd, volatile sig_atomic_t *stop, dlm_err *e);
/* Prose and Q/A sections of the document (sources expanded) plus extra[0..
 * n_extra) appended as the trainer appends them, and how many of them the
 * store's manifest has not seen (content_hashes). An extra section the
 * document cannot take (bad Q/A grammar) is left out: ok[i] = 0 and
 * why[i] (malloc'd) says why; ok/why may be NULL when n_extra is 0.
 * store_out (may be NULL): the store's folder. */
int watch_new_sections(const char *doc_path, const char *home, const doc_section *extra, int n_extra, int *ok,
                       char **why, int *n_new, int *n_total, char *store_out, size_t store_cap, dlm_err *e);

/* rpc_cycle.c: `train --listen-rpc`. The probes drained for the next cycle
 * (kept until a cycle trains them, or finds them trained already): the
 * sections they become, which of them the document took (ok/why, set by
 * watch_new_sections), the kept ones and their training_run.json record. */
struct inject_probe;
typedef struct rpc_batch {
    struct inject_probe *p;
    int n;
    doc_section *secs;
    strbuf *content, *source;
    int *ok;
    char **why;
    doc_section *kept;          /* the sections of p[i] with ok[i] (rpc_batch_settle) */
    int n_kept;
    json_t *record;             /* [{prompt, reference, tags, source_addr, accepted_at, section_id, harvest_source}] */
} rpc_batch;
/* Take p[0..n) (moved: p's entries are cleared) onto the batch. */
int rpc_batch_add(rpc_batch *b, struct inject_probe *p, int n, dlm_err *e);
/* After watch_new_sections filled ok/why: kept and record. */
int rpc_batch_settle(rpc_batch *b, dlm_err *e);
/* Append one line per probe to <store>/logs/rpc-injected.jsonl (run_id 0:
 * the cycle trained nothing; run_id and adapter_version null). */
int rpc_batch_audit(const rpc_batch *b, const char *store, int64_t run_id, int version, dlm_err *e);
void rpc_batch_free(rpc_batch *b);

/* Every command. */
typedef int (*cmd_fn)(int argc, char **argv, dlm_ctx *ctx);
typedef struct cmd_entry {
    const char *name;
    cmd_fn fn;
    const cmd_spec *spec;
} cmd_entry;

extern const cmd_entry dlm_commands[];
const cmd_entry *cmd_find(const char *name);

#endif
