/* doctor — what `dlm doctor` reports, without printing: the memory plan of
 * a document (the same plan_make that `dlm train` runs, from the same
 * inputs: the base's headers, the tokenizer and the dataset measured on the
 * heap), and for every registry base what fits on this host and how.
 * Nothing here downloads: a base that is not on this machine is planned
 * from its registry shape (src/run/shapes.c). */
#ifndef DLM_DOCTOR_H
#define DLM_DOCTOR_H

#include <stdint.h>
#include <jansson.h>
#include "run/cpt.h"
#include "run/plan.h"
#include "run/prepare.h"
#include "run/precision.h"
#include "run/probe.h"
#include "weights/registry.h"
#include "util/err.h"

typedef struct doctor_doc {
    char adapter[33];           /* the named adapter planned (training.adapters), "" for the document;
                                 * in.lora is its own LoRA shape */
    char base_spec[512];
    char model_path[4096];      /* "" when the base is not on this machine */
    int from_files;             /* 1: planned from the base's files; 0: from its registry shape */
    int seq_cfg;                /* training.sequence_len */
    /* training.precision: what the document asks, what train would use on
     * this host (precision_decide), or why train would refuse it */
    const char *prec_asked;     /* "bf16", "fp16", "fp32" or "null" */
    prec_choice prec;
    char prec_refused[512];     /* "" unless refused */
    int n_train, n_val;         /* dataset items (from_files only) */
    /* the validation split as train will make it (from_files only): its
     * line and pipeline_split_json (owned: json_decref it) */
    char split_line[512];
    json_t *split;
    int64_t tokens, loss_tokens;
    /* training.cpt (from_files only): the schedule train will choose for a
     * run of the document's epochs with the plan's batch shape */
    cpt_choice cpt;
    optim_config optim;
    int tag_dropped, tag_extra;     /* tag weights: rows dropped, copies added */
    int replay_sections;        /* in the store's corpus: train adds a sample of them */
    int qlora;                  /* adapter: qlora: the plan counts the base's projections as Q4_K */
    uint64_t budget;
    const char *budget_from;    /* "--max-memory", "MemAvailable", "cgroup v2 memory.max", ... */
    plan_in in;
    plan p;
    int fits;
    /* the preference phase `dlm train` (--phase all) runs after SFT, when
     * the document has preference sections and does not disable it */
    int pref_planned;
    const char *pref_method;    /* "dpo" or "orpo" */
    int pref_pairs, pref_triples, pref_enabled;
    plan_in pref_in;
    plan pref_p;
    int pref_fits;
    prep_audio audio;           /* an audio document's clips (from_files; clips 0 otherwise) */
} doctor_doc;

/* Plan the document at doc_path on host h (max_memory 0 = the host
 * budget). adapter: one of its training.adapters, planned as `dlm train
 * --adapter NAME` runs it (doc_scope_adapter: its sections, its LoRA
 * shape, its replay corpus and current version); NULL the document as a
 * whole. Fails only when the document or its base cannot be read. */
int doctor_plan_document(const char *doc_path, const char *home, const host_info *h, uint64_t max_memory,
                         const char *adapter, doctor_doc *out, dlm_err *e);

typedef struct doctor_row {
    const reg_entry *entry;
    int trainable;
    char note[192];             /* why not trainable, or where the shape came from */
    int from_files;             /* shape read from a downloaded copy */
    int fits;
    int wtype;                  /* stored type planned: the widest that fits, else Q4_K */
    int gguf;                   /* that type as a GGUF (quantized) or as published (safetensors) */
    int seq;                    /* sequence length planned */
    plan p;
    /* an audio row (vision/audio_feat.h): the frozen encoder's f32 copy and
     * one 30 s forward's buffers (both in p), the <|AUDIO|> tokens of a 30 s
     * clip, and per clip the store's waveform-cache and feature-cache bytes */
    uint64_t audio_encoder, audio_scratch, audio_wave_cache, audio_feat_cache;
    int audio_tokens;
} doctor_row;

/* One row per registry entry (up to cap), default training settings. */
int doctor_plan_registry(const host_info *h, uint64_t max_memory, doctor_row *rows, int cap);

/* The published config of a registry base dlm can train (shapes.c). */
int doctor_known_shape(const char *key, model_config *c);
/* Weights of a shape (for the registry cross-check); a PaliGemma's tower
 * and projector included. */
uint64_t doctor_shape_params(const model_config *c);
/* A PaliGemma's SigLIP tower and projector weights (0 for any other base). */
uint64_t doctor_pali_tower_params(const model_config *c);
/* Bytes a PaliGemma's tower holds while it computes an image's features:
 * its weights in f32 (vision/siglip.c widens them) and siglip_forward's
 * buffers for one image (0 for any other base). */
uint64_t doctor_pali_tower_bytes(const model_config *c);

#endif
