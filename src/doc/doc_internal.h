/* doc_internal — what the files of src/doc share and nobody else sees. */
#ifndef DLM_DOC_INTERNAL_H
#define DLM_DOC_INTERNAL_H

#include "doc/doc.h"
#include "doc/ynode.h"

struct dlm_doc {
    char *path;
    char *raw;              /* bytes as read */
    size_t raw_len;
    char *text;             /* normalised text */
    size_t text_len;
    size_t fm_end;          /* offset just past the closing `---` (before its '\n') */
    int body_line;          /* file line of the first body line */
    doc_frontmatter fm;
    doc_section *sections;
    int n, cap;
    int dirty;
    struct src_report *sources;  /* doc_expand_sources ran (sources.c) */
    char *scoped;           /* doc_scope_adapter's name (route.c), NULL when not scoped */
};

/* text.c */
int doc_text_normalize(const char *label, const char *bytes, size_t len, char **out,
                       size_t *out_len, int *had_bom, dlm_err *e);

/* Split normalised text into frontmatter YAML and body (docs/reference/original-spec.md §1.2).
 * yaml_{off,len}: the lines between the delimiters; body_off: first char
 * after the closer line's '\n' (== text_len when none); fm_end as above. */
int doc_split(const char *path, const char *text, size_t len, size_t *yaml_off, size_t *yaml_len,
              size_t *fm_end, size_t *body_off, int *body_line, dlm_err *e);

/* migrate.c: version gate + in-memory migration of the parsed YAML.
 * Returns the version the file declared in *from (1 when absent). */
int doc_migrate_tree(const char *path, ydoc *y, int *from, int *data_changed, dlm_err *e);

/* schema.c: validate the (migrated) tree into fm; errors are
 * SchemaValidationError at the offending key. */
int doc_schema_validate(const char *path, const ynode *root, doc_frontmatter *fm, dlm_err *e);
void doc_fm_free(doc_frontmatter *fm);

/* fm_emit.c: YAML text of fm in schema order (for migrations that change
 * data). Fields equal to their default are left out unless their dotted path
 * is in force_paths (the paths the original document spelled out). */
int doc_fm_emit(const doc_frontmatter *fm, const ynode *orig_root, strbuf *out);

/* body.c: sections of the body text (body_line = file line of its first
 * line). Validates fences, markers and Q/A grammar. */
int doc_parse_body(const char *path, const char *body, size_t len, int body_line,
                   doc_section **out, int *n, dlm_err *e);
void doc_section_clear(doc_section *s);
/* Parse a section's Q/A or preference body into s (content + content_line
 * must be set). */
int doc_parse_pairs(const char *path, doc_section *s, dlm_err *e);

/* route.c: UnknownAdapterError for a section whose `#name` suffix
 * training.adapters does not declare (a no-op without adapters). */
int doc_check_route(const char *path, const doc_frontmatter *fm, const doc_section *s, dlm_err *e);
int doc_check_routes(const dlm_doc *d, dlm_err *e);

/* Body text of the sections, regenerated (see doc.h "editing"). */
int doc_emit_body(const doc_section *secs, int n, strbuf *out, dlm_err *e);

#endif
