/* ollama — what an export hands to Ollama and llama-server: the Modelfile
 * (FROM, ADAPTER, TEMPLATE, PARAMETER stop/temperature/top_p/num_ctx,
 * SYSTEM, LICENSE), the Go TEMPLATE of each chat dialect, the stop list,
 * the template drift check, the llama-server launch script, and running a
 * program with a timeout (ollama create / run). */
#ifndef DLM_EXPORT_OLLAMA_H
#define DLM_EXPORT_OLLAMA_H

#include <stddef.h>
#include "tokens/chat.h"
#include "tokens/tok.h"
#include "util/err.h"
#include "util/str.h"

/* The Go template dlm writes for dialect d: one that renders every
 * conversation of the drift check to the tokens of d's Jinja template when
 * Ollama executes it (see docs/export.md). */
const char *export_ollama_template(const chat_dialect *d);

/* Stop strings: the dialect's, then the tokenizer's EOS and its special
 * end-of-generation tokens (llama.cpp's EOG names), without duplicates.
 * Pointers stay valid while t and d live. Returns the count (<= cap). */
int export_stop_list(const tok *t, const chat_dialect *d, const char **out, int cap);

/* Ollama model names: [namespace/]name[:tag], letters, digits, '.', '-',
 * '_', at most 128 bytes, no "..". */
int export_ollama_name_ok(const char *name);
/* The default model name of a document: its file name without ".dlm",
 * lowercased, every run of characters outside [a-z0-9._-] one '-', no
 * leading/trailing '-', '.' or '_', at most 64 characters ("My Notes
 * (v2).dlm" -> "my-notes-v2"). Empty when nothing is left. */
void export_ollama_doc_name(const char *doc_path, char *out, size_t cap);

typedef struct export_modelfile {
    const char *version;        /* dlm version for the header */
    const char *created_at;     /* UTC ISO */
    const char *source;         /* absolute .dlm path */
    const char *dlm_id;
    int adapter_version;
    const char *base_model, *base_revision;
    const char *quant;
    int merged;
    const char *from;           /* "./base.Q4_K_M.gguf" */
    const char *adapter;        /* "./adapter.gguf" or NULL */
    const char *template_text;  /* NULL: no TEMPLATE (--no-template) */
    const char *const *stops;
    int n_stops;
    double temperature, top_p;
    int num_ctx;
    const char *system;         /* NULL: no SYSTEM */
    const char *license;        /* NULL: no LICENSE */
    const char *draft;          /* speculative-decoding draft tag: two comment lines (Ollama has no
                                 * PARAMETER for it; the original writes the same comments), or NULL */
} export_modelfile;

/* The Modelfile text. A value that cannot be quoted for Ollama's parser
 * (it contains three double quotes) is an error. */
int export_modelfile_text(const export_modelfile *m, strbuf *out, dlm_err *e);

/* Render a fixed set of conversations through the Jinja side (chat_render,
 * the transcription of the base's template, with system_prompt) and the
 * Go side (gotmpl_render_ollama with modelfile_system), tokenize both as
 * HF and llama.cpp would (special tokens parsed; llama.cpp also puts
 * bos_id in front and eos_id behind, -1 = none, as the exported GGUF's
 * add_bos/add_eos tell it) and require the same ids. *n_checked gets the
 * number of conversations compared. */
int export_drift_check(const chat_dialect *d, const char *go_template, const char *system_prompt,
                       const char *modelfile_system, tok *t, int32_t bos_id, int32_t eos_id, int *n_checked,
                       dlm_err *e);

/* The llama-server launch script (POSIX sh, paths relative to its own
 * folder). adapter may be NULL (merged). */
void export_llama_server_script(strbuf *out, const char *version, const char *model_file, const char *adapter_file,
                                const char *template_file, int ctx_size);

/* ---- running a program -------------------------------------------------------- */

typedef struct export_proc {
    int exit_code;              /* -1: killed by the timeout or a signal */
    int timed_out;
    strbuf out;                 /* stdout (first 64 KiB) */
    strbuf err;                 /* last 4 KiB of stderr */
} export_proc;

/* Find an executable named prog on $PATH (or prog itself if it has a
 * '/'); 1 found (path in out), 0 not. */
int export_which(const char *prog, char *out, size_t cap);
/* Run argv (argv[0] a path) in cwd with stdin from /dev/null, killing it
 * after timeout_s. 0 when it ran (exit status in p), -1 when it could not
 * be started. Free p with export_proc_free. */
int export_proc_run(char *const argv[], const char *cwd, int timeout_s, export_proc *p, dlm_err *e);
void export_proc_free(export_proc *p);

#endif
