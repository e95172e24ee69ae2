/* pipeline — a document's training data, built one way for `dlm train`
 * and `dlm doctor`, so the memory plan and the run see the same dataset by
 * construction:
 *
 *   sections of the document
 *   → the replay sample: earlier sections the store's corpus holds,
 *     sampled by recency (tokens/replay.h), keyed by (seed + the version
 *     before this run, run id)
 *   → token ids + loss masks, items and the train/validation split
 *     (tokens/dataset.h), rows capped at the model's context
 *   → batches (dataset_micro_items / dataset_fill, during the run).
 *
 * Nothing here writes: the trainer appends the new sections to the replay
 * corpus after its commit. */
#ifndef DLM_PIPELINE_H
#define DLM_PIPELINE_H

#include <stdint.h>
#include <jansson.h>
#include "doc/doc.h"
#include "tokens/chat.h"
#include "tokens/dataset.h"
#include "tokens/replay.h"
#include "tokens/tok.h"
#include "util/err.h"
#include "weights/registry.h"

/* The chat dialect of a base: the one its chat template implements, else
 * the registry row's, else NULL (no chat template dlm can render). */
const chat_dialect *chat_dialect_resolve(const tok *t, const reg_entry *entry);

typedef struct pipeline_in {
    const dlm_doc *doc;
    const char *store;              /* the document's store folder (may not exist yet) */
    const char *replay_store;       /* the folder whose replay/ holds the corpus (NULL = store; a named
                                     * adapter's tree keeps its own) */
    const json_t *manifest;         /* its manifest (content_hashes: sections already trained), or NULL */
    tok *tok;
    const chat_dialect *dialect;    /* chat_dialect_resolve's answer */
    uint64_t seed;                  /* the run's seed: --seed, else training.seed */
    int max_pos;                    /* the model's context (0 = unknown): caps sequence_len */
    int no_replay;                  /* --no-replay */
    int prev_version;               /* the current version before this run (0 none) */
    int64_t run_id;                 /* this run's id (manifest_next_run_id) */
    int no_mined;                   /* --no-mined: leave auto-mined preference sections out */
    struct tcache *cache;           /* the store's tokenization cache (tokens/tcache.h), or NULL */
    const char *tok_sha256;         /* with cache: tok_source_sha256 of the base */
    const ds_vl *vl;                /* a vision-language base's images (run/vl_run.c), or NULL */
} pipeline_in;

typedef struct pipeline {
    dataset *ds;
    const chat_dialect *dialect;    /* what Q/A rows are rendered with (chatml when the base has none and there are no Q/A) */
    const char **cur_ids;           /* [n_cur] ids of the document's sections */
    int n_cur, n_new, n_replay;     /* sections: in the document, not yet trained, sampled from the corpus */
    replay *rp;                     /* the store's replay corpus (empty when there is none) */
    dlm_doc *rdoc;                  /* the sampled replay sections, or NULL */
} pipeline;

int pipeline_build(const pipeline_in *in, pipeline *out, dlm_err *e);
void pipeline_free(pipeline *p);

/* What the memory plan counts (run/prepare.c), from the structures' sizes so
 * that `dlm doctor PATH` and `dlm train PATH` plan the same bytes (a heap
 * delta depends on what the process did before):
 *   pipeline_mem_bytes  the dataset (token and target arrays, items, split
 *                       and order tables) and the replay sample;
 *   pipeline_doc_bytes  the parsed document (its text and section table). */
uint64_t pipeline_mem_bytes(const pipeline *p);

/* A row the validation split holds out of training (issue 30: never
 * silently): its section and row (pair index of a Q/A section). */
typedef struct held_row { const doc_section *s; int row; } held_row;
/* The held-out rows of the document, in dataset order, each once (a long
 * row's windows are one row); *out is malloc'd (NULL when none). Returns
 * the count, -1 when out of memory. */
int pipeline_held_out(const pipeline *p, const dlm_doc *doc, held_row **out);
/* Where the row is and what it says: `PATH:LINE: Q "question"`,
 * `PATH:LINE: prose "first words..."`, or `FILE (training.sources): prose
 * "..."`; kind, file, line and text also apart for JSON. */
typedef struct held_desc { const char *kind, *file; int line; char text[96]; } held_desc;
void pipeline_held_describe(const dlm_doc *doc, const held_row *h, held_desc *d);
void pipeline_held_format(const held_desc *d, char *out, size_t cap);
/* The split as one JSON object: {"fraction", "rows", "held_out": [{"file",
 * "line", "kind", "text"}], "none": why there is no validation or null}. */
json_t *pipeline_split_json(const pipeline *p, const dlm_doc *doc);
/* One line saying what the split did (no trailing newline), e.g.
 * "validation: 2 of 40 rows held out (training.val_frac 0.1): they are not trained". */
void pipeline_split_line(const pipeline *p, char *out, size_t cap);
uint64_t pipeline_doc_bytes(const dlm_doc *d);

#endif
