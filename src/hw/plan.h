/* plan — the memory plan, shared by `dlm doctor` and `dlm train`.
 *
 * From the base's config and stored weight bytes, the adapter and training
 * settings and the host budget, it computes the bytes of every buffer a run
 * allocates (the activation figure is fb_plan_bytes, i.e. exactly what
 * fb_create allocates), picks micro_batch_size / grad_accum for `auto`
 * (effective batch 8) and recomputation, and says whether it fits. `train`
 * allocates these buffers once before step 1; nothing is allocated in the
 * step loop. */
#ifndef DLM_PLAN_H
#define DLM_PLAN_H

#include <stdint.h>
#include "model/model.h"
#include "train/lora.h"

typedef struct plan_in {
    model_config cfg;
    uint64_t weight_bytes;      /* stored weights (file bytes of the tensors) */
    uint64_t weight_copies;     /* bytes the loader copies (un-permuted Q/K, f32 norms) */
    int full;                   /* every weight trainable (f32 copy of the model) */
    lora_config lora;           /* when !full */
    int seq_len;                /* T: longest item (<= training.sequence_len) */
    int mb, ga;                 /* 0 = auto */
    int recompute;              /* -1 auto, 0 off, 1 on */
    int64_t dataset_tokens;     /* tokens held by the dataset */
    uint64_t tokenizer_bytes;   /* estimate of the tokenizer's tables */
    uint64_t budget;            /* bytes we may use (0 = unknown: everything fits) */
    int keep_best;              /* early stopping keeps a copy of the best params */
} plan_in;

#define PLAN_MAX_ITEMS 16
typedef struct plan_item {
    const char *name;
    uint64_t bytes;
} plan_item;

typedef struct plan {
    int mb, ga, recompute;
    uint64_t total;
    plan_item items[PLAN_MAX_ITEMS];
    int n_items;
    int fits;                   /* total <= budget (or no budget) */
    char reason[512];           /* why it does not fit, and what would */
} plan;

/* Bytes for fixed choices (mb, recompute). */
void plan_compute(const plan_in *in, int mb, int ga, int recompute, plan *out);
/* Choose mb/ga/recompute (honouring the fixed ones) and fill out. Returns 0
 * when it fits, -1 otherwise (out->reason says why; out holds the smallest
 * configuration tried). */
int plan_make(const plan_in *in, plan *out);
/* LoRA parameter count for a config (no allocation). */
uint64_t plan_lora_params(const model_config *c, const lora_config *l);

#endif
