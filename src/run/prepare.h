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

/* ---- audio (run/audio_plan.c) ----------------------------------------------
 * An audio document on an audio-language base: what its clips cost before
 * any encoder runs. Each audio section's file is decoded as training
 * decodes it (media/audio.h; the errors name the line and the file, as
 * ingestion's) and its <|AUDIO|> count taken from the length (the
 * processor's rule, vision/audio_feat.h); the store's caches it will fill:
 * a waveform entry (4 bytes a sample + the .npz's headers) and a feature
 * entry (16 + tokens x width x 4 bytes) per clip. */
typedef struct prep_audio {
    int32_t *ntok;           /* [sections] per audio section, 0 for the others (ds_opts.audio_ntok) */
    int clips, tokens, max_tokens, width;
    uint64_t wave_cache_bytes, feat_cache_bytes;
} prep_audio;
int prep_audio_counts(const dlm_doc *doc, const char *model_path, int auto_resample, prep_audio *a, dlm_err *e);
void prep_audio_free(prep_audio *a);
/* The plan's audio items: the encoder's f32 copy and a 30 s forward's
 * buffers (config.json's audio_config), and tokens x width x 4 bytes of
 * rows the dataset holds. */
int prep_audio_plan(const char *model_path, int tokens, plan_in *in, dlm_err *e);

#endif
