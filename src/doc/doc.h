/* doc — the .dlm document: read, validate, migrate, write.
 *
 * A .dlm file is YAML frontmatter between two `---` lines, then a markdown
 * body cut into sections by fence lines (`::instruction::`,
 * `::preference#tone::`, `::image path="a.png"::`, ...). The format is the
 * original DocumentLanguageModel's schema v15 (docs/reference/
 * original-spec.md §1): every document the original accepts parses here to the
 * same sections, the same section ids and the same frontmatter values.
 * dlm is stricter in one place on purpose: instruction and preference
 * bodies are checked at parse time, with the document's file:line.
 *
 * Typical use:
 *
 *     dlm_err e;
 *     dlm_doc *d = doc_load("tutor.dlm", &e);
 *     if (!d) return cmd_fail(ctx, &e);        // "tutor.dlm:7:1: unknown section fence ..."
 *     const doc_frontmatter *fm = doc_fm(d);
 *     for (int i = 0; i < doc_nsections(d); i++) {
 *         const doc_section *s = doc_section_at(d, i);
 *         ... s->type, s->id, s->content, s->pairs[k].question ...
 *     }
 *     doc_free(d);
 *
 * Everything returned by accessors is owned by the handle and lives until
 * doc_free. The handle is not thread-safe; separate handles are. */
#ifndef DLM_DOC_H
#define DLM_DOC_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "util/err.h"
#include "util/str.h"

#define DOC_SCHEMA_VERSION 15      /* CURRENT_SCHEMA_VERSION of the original */
#define DOC_MAX_BYTES (64u << 20)  /* documents larger than this are refused */

/* ---- sections ------------------------------------------------------------ */

typedef enum {
    DOC_PROSE = 0,
    DOC_INSTRUCTION,
    DOC_PREFERENCE,
    DOC_IMAGE,
    DOC_AUDIO,
} doc_section_type;

/* "prose", "instruction", ... */
const char *doc_section_type_name(doc_section_type t);

typedef struct doc_qa {
    char *question;     /* body between `### Q` and `### A`, str.strip()ped */
    char *answer;
    int q_line, a_line; /* 1-based file lines of the two headers */
    int probe;          /* header was `### Q !probe` (an eval probe; trains the same) */
} doc_qa;

typedef struct doc_triple {
    char *prompt, *chosen, *rejected;
    int prompt_line, chosen_line, rejected_line;
} doc_triple;

typedef struct doc_section {
    doc_section_type type;
    char *adapter;          /* `#name` fence suffix, or NULL */
    char id[17];            /* 16 lowercase hex: sha256(type "\n" content)[:16] */
    int line;               /* 1-based: fence line, or first body line for leading prose */
    int fenced;             /* opened by a fence line (prose may be implicit) */
    char *content;          /* exactly the text that is hashed (markers removed) */
    size_t content_len;
    int content_line;       /* file line of content's first line */

    doc_qa *pairs;          /* instruction: >= 1 pairs */
    int n_pairs;
    doc_triple *triples;    /* preference: >= 1 triples */
    int n_triples;

    /* media fences (image: path + optional alt; audio: path + transcript) */
    char *media_path, *media_alt, *media_transcript;
    /* the bytes' file for an image reached by training.sources (absolute;
     * NULL for a fence, whose media_path is relative to the document's
     * directory), and the blob's sha256 once media/ingest.h stored it
     * ("" before: the section id is then sha256(type "\n" path)[:16]) */
    char *media_src;
    char media_blob_sha[65];

    /* provenance markers (first line(s) of instruction/preference bodies) */
    int auto_harvest;
    char *harvest_source;
    int auto_mined;         /* preference only */
    char *judge_name;
    char *judge_score_chosen_text, *judge_score_rejected_text; /* as written */
    double judge_score_chosen, judge_score_rejected;
    char *mined_at;
    int64_t mined_run_id;
    int auto_synth;         /* instruction only */
    char *synth_teacher, *synth_strategy, *synth_at, *source_section_id;

    /* synthesized from a training.sources file (doc_expand_sources, see
     * doc/sources.h): its path relative to the directive root, and the
     * product of the merged .dlm/training.yaml weights its tags match (the
     * trainer repeats or drops its row by it: tokens/dataset.h). NULL, and
     * weight 0 (read as 1), for sections of the file itself. */
    char *source_file;
    double source_weight;
    int source_index;       /* its file in the sources report */
} doc_section;

/* sha256(type + "\n" + content)[:16] as lowercase hex (content normalised:
 * BOM stripped, CRLF/CR → LF, as the original). out: 17 bytes. */
void doc_section_id(doc_section_type t, const char *content, size_t len, char out[17]);
/* Media identity: sha256(type "\n" path [ "\n" blob_sha ])[:16]. */
void doc_media_section_id(doc_section_type t, const char *path, const char *blob_sha, char out[17]);

/* ---- frontmatter ---------------------------------------------------------- */

typedef struct doc_strlist {
    char **v;
    int n;
} doc_strlist;

typedef enum { DOC_ADAPTER_LORA = 0, DOC_ADAPTER_QLORA, DOC_ADAPTER_DORA } doc_adapter_kind;
typedef enum {
    DOC_OPT_ADAMW_TORCH = 0, DOC_OPT_ADAMW_BNB_8BIT, DOC_OPT_PAGED_ADAMW_8BIT,
    DOC_OPT_GALORE_ADAMW, DOC_OPT_GALORE_ADAMW_8BIT,
} doc_optimizer;
typedef enum {
    DOC_SCHED_COSINE = 0, DOC_SCHED_LINEAR, DOC_SCHED_CONSTANT,
    DOC_SCHED_COSINE_MIN_LR,        /* dlm extension */
} doc_lr_scheduler;
typedef enum { DOC_PREC_AUTO = 0, DOC_PREC_BF16, DOC_PREC_FP16, DOC_PREC_FP32 } doc_precision;
typedef enum { DOC_PREF_DPO = 0, DOC_PREF_ORPO } doc_pref_method;
typedef enum { DOC_LOSS_SIGMOID = 0, DOC_LOSS_HINGE, DOC_LOSS_IPO } doc_pref_loss;
typedef enum { DOC_REF_PRE_ADAPTER = 0, DOC_REF_BASE } doc_pref_reference;
typedef enum { DOC_CPT_AUTO = 0, DOC_CPT_DAPT, DOC_CPT_SFT } doc_cpt_schedule;
typedef enum { DOC_POLICY_PERMISSIVE = 0, DOC_POLICY_STRICT } doc_sources_policy;
typedef enum { DOC_QUANT_Q4_K_M = 0, DOC_QUANT_Q5_K_M, DOC_QUANT_Q6_K, DOC_QUANT_Q8_0 } doc_quant;
typedef enum { DOC_LOSS_ON_COMPLETION = 0, DOC_LOSS_ON_ALL } doc_loss_on;
typedef enum { DOC_RECOMPUTE_AUTO = 0, DOC_RECOMPUTE_ON, DOC_RECOMPUTE_OFF } doc_recompute;

/* Names as written in YAML, indexed by the enums above. */
extern const char *const doc_adapter_kind_names[];
extern const char *const doc_optimizer_names[];
extern const char *const doc_lr_scheduler_names[];
extern const char *const doc_precision_names[];   /* [0] = NULL (auto) */
extern const char *const doc_pref_method_names[];
extern const char *const doc_pref_loss_names[];
extern const char *const doc_pref_reference_names[];
extern const char *const doc_cpt_schedule_names[];
extern const char *const doc_sources_policy_names[];
extern const char *const doc_quant_names[];
extern const char *const doc_loss_on_names[];
extern const char *const doc_recompute_names[];

typedef struct doc_adapter_cfg {       /* one entry of training.adapters */
    char *name;
    doc_adapter_kind adapter;
    int lora_r;
    int64_t lora_alpha;
    double lora_dropout;
    int target_modules_auto;           /* 1 = "auto", else the list */
    doc_strlist target_modules;
    double learning_rate;
} doc_adapter_cfg;

typedef struct doc_source {            /* one entry of training.sources */
    char *path;
    doc_strlist include;               /* default: every file (the glob "**" "/" "*") */
    doc_strlist exclude;               /* default [] */
    int64_t max_bytes_per_file;        /* 0 = null */
    int64_t max_files;                 /* 0 = null */
    int line;                          /* file line of the directive (for errors) */
} doc_source;

typedef struct doc_training {
    doc_adapter_kind adapter;
    int lora_r;                        /* 1..256 */
    int64_t lora_alpha;                /* >= 1 */
    double lora_dropout;               /* 0..0.5 */
    int target_modules_auto;
    doc_strlist target_modules;
    int sequence_len;                  /* 64..32768 */
    int64_t micro_batch_size;          /* 0 = "auto" */
    int64_t grad_accum;                /* 0 = "auto" */
    double learning_rate;              /* > 0 */
    int64_t num_epochs;                /* >= 1 */
    doc_optimizer optimizer;
    doc_lr_scheduler lr_scheduler;
    double warmup_ratio;               /* 0..0.5 */
    doc_precision precision;           /* AUTO = null */
    int64_t seed;
    struct {
        int enabled;
        int enabled_explicit;          /* the document set preference.enabled */
        doc_pref_method method;
        struct { double beta, alpha, learning_rate; int64_t num_epochs; } hyperparams;
        doc_pref_loss loss_type;
        doc_pref_reference reference;
    } preference;
    struct { doc_cpt_schedule schedule; int64_t embed_warmup_steps; } cpt;
    struct {
        int enabled;
        int hidden_proj_dim, steps, cold_start_floor;
        double lr, entropy_lambda;
    } gate;
    struct { int enabled; int64_t max_bytes, prune_older_than_days; } cache;
    struct { int auto_resample; } audio;
    doc_adapter_cfg *adapters;         /* NULL = null (single-adapter shorthand) */
    int n_adapters;
    doc_source *sources;               /* NULL = null */
    int n_sources;
    int sources_set;                   /* sources: [] is distinct from null */
    doc_sources_policy sources_policy;

    /* dlm extensions (ignored by the original tool, see docs/dlm-format.md) */
    doc_loss_on loss_on;               /* completion */
    int packing;                       /* true */
    int64_t save_steps;                /* 0 = null (auto) */
    double weight_decay;               /* 0.0 */
    double min_lr_ratio;               /* 0.1 */
    struct { int64_t max_bytes; int enabled; } replay;
    doc_recompute recompute;           /* auto */
    int64_t threads;                   /* 0 = "auto" */
    double val_frac;                   /* -1 = null (auto: 0 below DS_VAL_MIN_ROWS rows, else 0.1), or 0..0.5 */
    int64_t multi_turn;                /* DOC_MULTI_TURN_DEFAULT: conversation rows per Q/A pair, 0..8 */
} doc_training;

/* training.multi_turn's default (tokens/dataset.h: each Q/A pair also
 * trained once after 1 to 3 earlier pairs of the document) */
#define DOC_MULTI_TURN_DEFAULT 1

typedef struct doc_export {
    doc_quant default_quant;
    int has_temperature;
    double default_temperature;        /* (0, 2] when set */
    int has_top_p;
    double default_top_p;              /* (0, 1] when set */
} doc_export;

typedef struct doc_frontmatter {
    char dlm_id[27];
    int dlm_version;                   /* after in-memory migration: always 15 */
    int source_version;                /* as the file says (1 when absent) */
    char *base_model;                  /* registry key, hf:org/name[@rev], path or "tiny" */
    char *system_prompt;               /* NULL = null */
    doc_training training;
    doc_export export;
} doc_frontmatter;

/* Defaults of every field (what an empty `training:` means). */
void doc_training_defaults(doc_training *t);

/* Every key the frontmatter schema accepts, from its field tables
 * (src/doc/schema.c), dotted: "training.cpt.schedule"; a named adapter's
 * keys as "training.adapters.*.lora_r", a source's as
 * "training.sources[].path"; objects ("training.cpt") are listed too. fn is
 * called once per key; returns the count. */
typedef void (*doc_schema_key_fn)(void *ctx, const char *key);
int doc_schema_keys(doc_schema_key_fn fn, void *ctx);

/* ---- the document handle ------------------------------------------------- */

typedef struct dlm_doc dlm_doc;

/* Read and parse a file (size-capped at DOC_MAX_BYTES). Errors: kind one of
 * DlmEncodingError, FrontmatterError, SchemaValidationError, DlmVersionError,
 * FenceError, InstructionParseError, PreferenceParseError, with
 * file:line:col. */
dlm_doc *doc_load(const char *path, dlm_err *e);
/* Parse bytes already in memory; path labels messages (may be "<text>"). */
dlm_doc *doc_parse(const char *path, const void *bytes, size_t len, dlm_err *e);
void doc_free(dlm_doc *d);

const char *doc_path(const dlm_doc *d);
/* The file's bytes as read (before BOM/CRLF normalisation). */
const char *doc_raw(const dlm_doc *d, size_t *len);
/* The normalised text (UTF-8, LF, no BOM) that was parsed. */
const char *doc_text(const dlm_doc *d, size_t *len);
const doc_frontmatter *doc_fm(const dlm_doc *d);
int doc_nsections(const dlm_doc *d);
const doc_section *doc_section_at(const dlm_doc *d, int i);
/* Line where the body starts (after the closing `---`). */
int doc_body_line(const dlm_doc *d);
/* 1 if the document was changed through the API since it was read. */
int doc_dirty(const dlm_doc *d);

/* The frontmatter as JSON, every default filled in, keys and nesting exactly
 * as schema v15 (+ the dlm extensions under training). Caller decrefs. */
json_t *doc_frontmatter_json(const dlm_doc *d);

/* ---- training.sources (doc/sources.h has the details) -------------------- */

/* Expand the document's training.sources directives and append one prose
 * section per kept file ("# source: <relpath>\n\n" + text; section_id as
 * any prose). In memory only: such a document refuses doc_write.
 * Idempotent; a no-op without directives. Errors: DirectivePolicyError,
 * DirectivePathError at the directive's file:line. */
int doc_expand_sources(dlm_doc *d, dlm_err *e);
/* The same, and when images is set an image file (png, jpg/jpeg, webp, gif,
 * bmp, tiff) becomes an image section (media_path its relpath, media_alt its
 * stem, media_src its absolute path) instead of a "media" skip: the trainer
 * sets it for a vision-language base, whose media/ingest.h stores the bytes. */
int doc_expand_sources_images(dlm_doc *d, int images, dlm_err *e);
/* The same, and when audio is set a .wav/.flac/.ogg file with a <stem>.txt
 * sidecar becomes an audio section (media_path its relpath,
 * media_transcript the sidecar's text stripped, media_src its absolute
 * path); one without a sidecar is skipped as "media": the trainer sets it
 * for an audio-language base. */
int doc_expand_sources_media(dlm_doc *d, int images, int audio, dlm_err *e);
/* Record section i's blob (64 hex) and recompute its id as the original:
 * sha256(type "\n" path "\n" blob_sha)[:16]. */
void doc_set_media_blob(dlm_doc *d, int i, const char *sha);
/* Per-file verdicts and totals of the expansion; NULL until it ran. */
struct src_report;
const struct src_report *doc_sources_report(const dlm_doc *d);

/* ---- named adapters (docs/reference/original-spec.md §3.9, src/doc/route.c) -- */

/* Index of name in training.adapters (declaration order), -1 when absent. */
int doc_adapter_index(const doc_frontmatter *fm, const char *name);
/* 1 when section s trains adapter `name`: prose without suffix → every
 * adapter, instruction/preference without suffix → the first declared, a
 * `#name` suffix → that one. Without training.adapters every section trains
 * the one flat adapter (1 for any name). */
int doc_section_routes_to(const doc_frontmatter *fm, const doc_section *s, const char *name);
/* Keep only the sections routed to `name` and put its AdapterConfig
 * (adapter, lora_r, lora_alpha, lora_dropout, target_modules,
 * learning_rate) into the flat training fields. In memory only: such a
 * document refuses doc_write. UnknownAdapterError when not declared. */
int doc_scope_adapter(dlm_doc *d, const char *name, dlm_err *e);
/* The adapter doc_scope_adapter scoped d to, or NULL. */
const char *doc_scoped_adapter(const dlm_doc *d);

/* ---- editing and writing ---------------------------------------------------
 * An untouched document serialises to its normalised text byte for byte.
 * After edits the body is regenerated so that every kept section keeps its
 * exact content (and id); the frontmatter text is kept verbatim. Every
 * serialisation is re-parsed and compared before it is returned. */

/* Append a section. Fields used from tmpl: type, adapter, content, media_*,
 * the marker fields. The new section is validated (fences inside content
 * must sit in code blocks, Q/A grammar, ...). */
int doc_append_section(dlm_doc *d, const doc_section *tmpl, dlm_err *e);
/* Remove section i. */
int doc_remove_section(dlm_doc *d, int i, dlm_err *e);

int doc_serialize(const dlm_doc *d, strbuf *out, dlm_err *e);
/* Serialise and write atomically (temp + fsync + rename + fsync dir). */
int doc_write(const dlm_doc *d, const char *path, dlm_err *e);

/* A YAML scalar that reads back (YAML 1.1, as PyYAML) as exactly string s:
 * plain when safe, else double-quoted. */
void doc_yaml_scalar(strbuf *out, const char *s);

/* ---- migration (docs/reference/original-spec.md §1.4) ------------------------------------------------- */

typedef struct doc_migration {
    int from_version;          /* version the file declares (1 when absent) */
    int to_version;            /* DOC_SCHEMA_VERSION */
    int applied;               /* number of migration steps (0 = already current) */
    int rewrote_data;          /* a data-changing step ran (v1→v2 with training.dpo) */
    char *text;                /* the migrated document (NULL when applied == 0) */
    size_t text_len;
    strbuf notes;              /* one line per step that changed something */
} doc_migration;

/* Migrate the document at path in memory: the result is validated and
 * re-parsed (same sections and ids, same values apart from dlm_version).
 * Nothing is written. */
int doc_migrate_file(const char *path, doc_migration *m, dlm_err *e);
void doc_migration_free(doc_migration *m);

/* One line describing step v → v+1 ("training.dpo → training.preference" or
 * the feature epoch it records). */
const char *doc_migration_step_desc(int from_version);

#endif
