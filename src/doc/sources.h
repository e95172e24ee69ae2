/* sources — `training.sources` directives: files on disk → prose sections
 * (spec §1.9).
 *
 * Each directive names a file or a directory. The tree is walked in the
 * original's order (Python's sorted(Path.rglob("*")): component-wise, so a
 * directory's files come before a sibling "a-b" of directory "a"), every
 * file gets a verdict, and each kept text file becomes the prose section
 *
 *     "# source: <relpath>\n\n" + text
 *
 * whose id is the ordinary section id of that content. The verdict order is
 * the original's: include (nearest .dlm/training.yaml with a non-empty
 * include, else the directive's) and one exclude flag flipped by, in turn,
 * the directive's exclude, the default-exclude list, each anchor's
 * training.yaml exclude (shallow → deep), each anchor's .dlm/ignore rules
 * (last match wins, `!` re-includes); then size, media, binary (NUL in the
 * first 1024 bytes) and UTF-8 checks. Excluded files are never opened, so a
 * default-excluded secret never reaches memory.
 *
 * dlm adds one rule: a file that is a symlink resolving outside the
 * directive's root is skipped (the original would read it). Symlinked
 * directories are not descended into, as rglob does not.
 *
 * Typical use (the trainer and doctor, right after doc_load):
 *
 *     if (doc_expand_sources(doc, e)) ...      // appends the sections
 *     const src_report *r = doc_sources_report(doc);   // per-file verdicts
 *
 * Malformed .dlm/training.yaml or .dlm/ignore files warn (log_warn) and
 * degrade; they never fail the walk. */
#ifndef DLM_DOC_SOURCES_H
#define DLM_DOC_SOURCES_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "doc/doc.h"
#include "util/err.h"
#include "util/str.h"

/* ---- the glob dialect (shared by include/exclude, training.yaml, ignore) -- */

/* Full match of the POSIX relpath against a glob: `**` = any run of
 * characters ('/' included; one following '/' is swallowed), `*` = any run
 * without '/', `?` = one character other than '/', everything else literal.
 * No classes, no braces. Linear-space dynamic programming: no pattern can
 * make it exponential. */
int src_glob_match(const char *pat, const char *path);

/* The default-exclude list of §1.9 (NULL-terminated). */
extern const char *const src_default_excludes[];

/* ---- .dlm/ignore ----------------------------------------------------------- */

typedef struct src_ignore_rule {
    char *pattern;          /* without its '!', leading '/', trailing '/' */
    int anchored, dir_only, negate;
    int line;               /* 1-based line in the ignore file */
} src_ignore_rule;

/* Parse an ignore file's text. Malformed lines warn (with label:line) and
 * are dropped. Returns the rule count (>= 0) or -1 on out-of-memory. */
int src_ignore_parse(const char *label, const char *text, size_t len, src_ignore_rule **out);
void src_ignore_free(src_ignore_rule *r, int n);
/* Does the rule match relpath (relative to its anchor)? */
int src_ignore_match(const src_ignore_rule *r, const char *relpath, int is_dir);

/* ---- .dlm/training.yaml ------------------------------------------------------ */

typedef struct src_kv { char *key, *val; } src_kv;
typedef struct src_weight { char *key, *val; double w; } src_weight;

typedef struct src_yaml {
    doc_strlist include, exclude;
    int exclude_defaults;   /* default 1 */
    src_kv *metadata;
    int n_metadata;
    src_weight *weights;
    int n_weights;
} src_yaml;

/* Parse and validate (the original's DlmTrainingConfig: unknown keys,
 * wrong types, dlm_training_version other than 1, negative weights are
 * errors). Returns 0, or -1 with e set (the caller warns and ignores the
 * file). */
int src_yaml_parse(const char *label, const char *text, size_t len, src_yaml *out, dlm_err *e);
void src_yaml_free(src_yaml *y);

/* ---- expansion ------------------------------------------------------------- */

typedef enum {
    SRC_KEPT = 0,
    SRC_NOT_INCLUDED,       /* no include pattern matches */
    SRC_EXCLUDED,           /* directive exclude / default / yaml exclude / ignore rule */
    SRC_SYMLINK_ESCAPE,     /* symlink resolving outside the directive root */
    SRC_TOO_LARGE,          /* over max_bytes_per_file (or dlm's DOC_MAX_BYTES) */
    SRC_MEDIA,              /* audio, or an image without src_opts.images (a text base) */
    SRC_BINARY,             /* NUL in the first 1024 bytes */
    SRC_NOT_UTF8,
    SRC_MAX_FILES,          /* walk stopped: max_files sections produced */
    SRC_UNREADABLE,
} src_verdict;

const char *src_verdict_name(src_verdict v);

typedef struct src_file {
    int directive;          /* index into training.sources */
    char *relpath;          /* relative to the directive root (POSIX) */
    src_verdict verdict;
    char *reason;           /* human detail: "default exclude '*.pem'", ".dlm/ignore:3 secret/", ... */
    int64_t size;           /* -1 unknown */
    char sha256[65];        /* of the raw bytes (kept files), "" otherwise */
    char id[17];            /* section id (kept files) */
    char *tags_json;        /* merged metadata as a JSON object, NULL when none */
    double weight;          /* product of matching training.yaml weights (1.0) */
    int image;              /* kept image (src_opts.images): the sink gets its absolute path as content */
    int audio;              /* kept audio clip (src_opts.audio): the same, transcript from its sidecar */
    char *transcript;       /* <stem>.txt beside the clip, stripped (audio only) */
} src_file;

typedef struct src_directive_stats {
    char *path;             /* as written */
    char *root;             /* resolved */
    int line;               /* directive line in the .dlm */
    int kept;
    int64_t kept_bytes;
    int skipped[SRC_UNREADABLE + 1];
} src_directive_stats;

typedef struct src_report {
    src_file *files;
    int n_files, cap_files;
    src_directive_stats *dirs;
    int n_dirs;
    int kept;
    int64_t kept_bytes;
    int skipped;
    src_weight *weights;    /* every directive's .dlm/ weights merged (later wins per key, value) */
    int n_weights;
} src_report;

/* A kept file's synthesized content ("# source: ...\n\n" + normalised text).
 * Return -1 (with e set) to stop the walk. */
typedef int (*src_sink)(void *ctx, const src_file *f, const char *content, size_t len, dlm_err *e);

typedef struct src_opts {
    int list_only;          /* record verdicts, do not call sink for kept files' content */
    int images;             /* image files are kept (src_file.image), not SRC_MEDIA */
    int audio;              /* .wav/.flac/.ogg files with a <stem>.txt sidecar are kept (src_file.audio) */
} src_opts;

/* Walk every directive of fm. doc_path anchors relative paths (the .dlm's
 * directory, or its grandparent when that directory is named `.dlm`). Kept
 * files stream through sink (may be NULL) one at a time; memory is bounded
 * by the largest file. Errors: DirectivePolicyError (strict policy, root
 * outside the anchor), DirectivePathError (missing root), with the
 * directive's file:line. */
int src_expand(const char *doc_path, const doc_frontmatter *fm, const src_opts *o, src_sink sink, void *ctx,
               src_report *r, dlm_err *e);
void src_report_free(src_report *r);

/* The report as JSON: {directives:[{path, root, line, files, bytes,
 * skipped:{reason:n}}], files:[{directive, path, verdict, reason, size,
 * sha256, section_id, tags, weight}], totals:{files, kept, skipped, bytes}}.
 * with_files: 0 no per-file list, 1 every file, 2 kept files only. */
json_t *src_report_json(const src_report *r, int with_files);
/* The original's weight_distribution (trainer.py _compute_weight_distribution):
 * {tag_key: {tag_value: rows}} over the kept files before weighting, or NULL
 * when no config declares weights (r may be NULL). */
json_t *src_weight_distribution(const src_report *r);

/* ---- on a document --------------------------------------------------------- */

/* doc_expand_sources and doc_sources_report are declared in doc/doc.h. */

#endif
