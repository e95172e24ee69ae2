/* lsp_internal — what the files of src/lsp share. */
#ifndef DLM_LSP_INTERNAL_H
#define DLM_LSP_INTERNAL_H

#include <jansson.h>
#include <stdint.h>

#include "doc/doc.h"
#include "lsp/lsp.h"
#include "lsp/rpc.h"
#include "run/heartbeat.h"

/* Documents are capped as the CLI caps files; the JSON that carries one may
 * escape every byte (\u00XX = 6 bytes), plus room for the envelope. */
#define LSP_MAX_MESSAGE ((size_t)DOC_MAX_BYTES * 6 + 65536)

typedef struct lsp_doc {
    char *uri;
    char *path;           /* filesystem path for file:// URIs, else NULL */
    char *text;           /* as the editor holds it (UTF-8) */
    size_t len;
    int64_t version;
    dlm_doc *parsed;      /* the text parsed (clean, or with the broken parts blanked), or NULL */
    int clean;            /* parsed with no error */
    char error[4608];     /* the first error, as the CLI prints it ("" when clean) */
    json_t *diags;        /* the last published diagnostics */
    int64_t progress_step; /* last dlm/trainingProgress sent (-1 none) */
    int64_t progress_run;
} lsp_doc;

struct lsp_server {
    lsp_options opt;
    lsp_sink_fn sink;
    void *sink_ctx;
    rpc_reader rd;
    int initialized, shutdown, exited;
    lsp_doc *docs;
    int ndocs, capdocs;
    json_t *cancelled;    /* ids ($/cancelRequest) not answered yet, as a JSON array */
    int64_t next_id;      /* our own requests (workspace/applyEdit) */
    int host_probed;      /* doctor plan of the registry, for hover */
    struct doctor_fit { const char *key; int fits; } *fits;
    int nfits;
};

/* server.c */
void lsp_send(lsp_server *s, json_t *msg);       /* steals msg */
void lsp_notify(lsp_server *s, const char *method, json_t *params);
lsp_doc *lsp_doc_find(lsp_server *s, const char *uri);

/* text.c: positions. LSP positions are 0-based line and UTF-16 code unit;
 * dlm's are 1-based line and code point column. */
/* Byte offset of the start of 0-based line (len when past the end). */
size_t text_line_start(const char *t, size_t len, int line);
/* Byte length of the line starting at off (without its end of line). */
size_t text_line_len(const char *t, size_t len, size_t off);
/* UTF-16 units in the first n bytes of s. */
int text_utf16_units(const char *s, size_t n);
/* Bytes of the line at off that hold `units` UTF-16 units (clamped). */
size_t text_utf16_to_bytes(const char *line, size_t linelen, int units);
/* Byte offset in line of 1-based code point column col (clamped). */
size_t text_col_to_bytes(const char *line, size_t linelen, int col);
/* {"line": l, "character": c} for byte offset `at` of 0-based line l. */
json_t *text_pos(const char *t, size_t len, int line, size_t byte_in_line);
json_t *text_range(const char *t, size_t len, int l0, size_t b0, int l1, size_t b1);
/* Byte offset of an LSP position (clamped). -1 when pos is malformed. */
int text_offset(const char *t, size_t len, const json_t *pos, size_t *off);
/* Apply one contentChanges entry (full text, or range + text). */
int text_apply_change(char **t, size_t *len, const json_t *change);
/* Number of lines (a final line without '\n' counts). */
int text_nlines(const char *t, size_t len);

/* The frontmatter outline: dotted key path of each frontmatter line. */
typedef struct fm_line {
    int line;             /* 0-based */
    int indent;           /* columns before the key (a "- " counts) */
    char key[64];         /* "" when the line holds no `key:` */
    char path[256];       /* "training.preference.method"; list items as "[]" */
    size_t key_off;       /* byte offset of the key in its line */
    size_t val_off;       /* byte offset after "key:" and blanks */
} fm_line;
typedef struct fm_outline {
    int open_line, close_line;   /* 0-based `---` lines; close -1 when unclosed */
    fm_line *v;
    int n;
} fm_outline;
void fm_outline_build(const char *t, size_t len, fm_outline *o);
void fm_outline_free(fm_outline *o);
const fm_line *fm_outline_find(const fm_outline *o, const char *path);
/* Schema path of an outline path: named adapters → "training.adapters.*",
 * sources items → "training.sources[]". */
void fm_schema_path(const char *path, char *out, size_t cap);

/* keys.c: what hover and completion say about a schema key. */
typedef struct key_info {
    const char *path;     /* schema path as doc_schema_keys spells it */
    const char *deflt;
    const char *rule;
    const char *meaning;
    int extension;        /* a dlm extension the original refuses */
    const char *const *values;  /* enum values, or NULL */
} key_info;
const key_info *keys_find(const char *schema_path);
/* Closest schema key under parent (a schema path, "" = top level) to name
 * (a did-you-mean): 1 with it in out, 0 when none is close. */
int keys_suggest(const char *parent, const char *name, char *out, size_t cap);

/* diag.c */
void lsp_diagnose(lsp_server *s, lsp_doc *d);   /* (re)parse and publish */
/* The diagnostics array of a text (path: the file it is, for relative
 * training.sources; may be NULL); *parsed the parse kept for the other
 * features, *clean 1 when it had no error, first the CLI's first error. */
json_t *lsp_diagnostics_of(const char *path, const char *text, size_t len, dlm_doc **parsed, int *clean,
                           char *first, size_t firstcap);

/* assist.c */
json_t *lsp_completion(lsp_server *s, lsp_doc *d, const json_t *params);
json_t *lsp_hover(lsp_server *s, lsp_doc *d, const json_t *params);

/* actions.c */
json_t *lsp_code_actions(lsp_server *s, lsp_doc *d, const json_t *params);
/* workspace/executeCommand and the dlm/ requests: 0 with *result (may be
 * JSON null), or an RPC error code with *msg. */
int lsp_execute(lsp_server *s, const char *command, const json_t *args, json_t **result, const char **msg);
json_t *lsp_list_base_models(void);
json_t *lsp_list_templates(void);
json_t *lsp_document_state(lsp_server *s, const char *uri);
void lsp_poll_progress(lsp_server *s);
json_t *lsp_base_spec(const char *key);
int lsp_base_fits(lsp_server *s, const char *key);   /* 1 fits, 0 not, -1 unknown */

#endif
