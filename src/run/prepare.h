/* prepare — everything `dlm train` and `dlm doctor PATH` do before a
 * weight is touched, written once so that doctor shows the plan train will
 * make: the tokenizer (its heap measured), the base's shape from its file
 * headers, the chat dialect, the adapter the frontmatter asks for (and
 * whether qlora quantizes the base), the data pipeline (tokens/pipeline.h,
 * its heap measured), and the memory plan's inputs. */
#ifndef DLM_PREPARE_H
#define DLM_PREPARE_H

#include <stdint.h>
#include "doc/doc.h"
#include "run/plan.h"
#include "tokens/pipeline.h"
#include "util/err.h"
#include "weights/registry.h"

typedef struct prep {
    tok *tok;
    plan_base base;                 /* the base's shape and bytes, from its headers */
    const chat_dialect *dialect;    /* chat_dialect_resolve's answer (may be NULL) */
    lora_config lora;
    int qlora;                      /* quantize the base's projections to Q4_K in memory */
    int bf16_base;                  /* training.precision bf16: F32/F16 projections re-stored as BF16 once */
    pipeline data;
    uint64_t doc_bytes;             /* the parsed document (pipeline_doc_bytes) */
} prep;

/* Tokenizer, base shape, vocabulary check, dialect. entry: the base's
 * registry row, or NULL. */
int prep_base(prep *P, const char *model_path, const reg_entry *entry, dlm_err *e);
/* The adapter (rank, alpha, dropout, DoRA, targets) and qlora. */
int prep_adapter(prep *P, const doc_training *tr, dlm_err *e);
/* After prep_adapter: a bf16 run (run/precision.h) keeps an F32 or F16
 * base's projections as BF16 (model_bf16_projections), not qlora's Q4_K. */
void prep_precision(prep *P, int bf16);
/* The data: in->tok and in->dialect are taken from P. */
int prep_data(prep *P, pipeline_in *in, dlm_err *e);
/* The memory plan's inputs. threads: the thread count asked for (0 =
 * training.threads or every usable core). */
void prep_plan_inputs(const prep *P, const doc_training *tr, int threads, int cores, uint64_t budget, plan_in *in);
void prep_free(prep *P);
/* The preference phase: the document's triples as pairs (tokens/dataset.h
 * pref_build) in the dialect prep_data resolved, and the plan's inputs for
 * that phase (two rows per pair, the longest pair sequence). */
int prep_pref(const prep *P, const dlm_doc *doc, uint64_t seed, int no_mined, pref_set **out, dlm_err *e);
/* The same with the store's past preference sections replayed
 * (tokens/replay.h replay_sample_pref), drawn with rin->seed (the run's seed
 * + the prior adapter version, as the SFT replay) and rin->run_id; the
 * sections drawn into rin->n_sections. */
typedef struct pref_replay_in {
    uint64_t seed;
    int64_t run_id;
    int n_sections;
} pref_replay_in;
int prep_pref_replay(const prep *P, const dlm_doc *doc, uint64_t seed, int no_mined, pref_replay_in *rin,
                     pref_set **out, dlm_err *e);
void prep_pref_plan_inputs(const prep *P, const pref_set *ps, plan_in *in);

#endif
