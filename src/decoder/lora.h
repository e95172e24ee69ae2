/* lora — the trainable adapter: LoRA A/B (and DoRA magnitudes) for a subset
 * of the seven projections of every layer, in one f32 slab.
 *
 *   y = x·Wᵀ + b + s · (dropout(x)·Aᵀ)·Bᵀ         s = alpha / r
 *   DoRA:  y = x·Wᵀ + b + (g−1)⊙(xd·Wᵀ) + g⊙s·(xd·Aᵀ)·Bᵀ,
 *          g = mag / ‖W + s·B·A‖_row  (the norm is detached, as PEFT does)
 *
 * A [r, in] starts Kaiming-uniform(a=√5) = U(−1/√in, 1/√in) as PEFT does,
 * B [out, r] starts at zero, mag [out] at ‖W‖_row. Slab layout: for each
 * layer, for each targeted module in the order q k v o gate up down: A, B,
 * then mag (DoRA only). Gradients and optimizer moments use the same layout,
 * so the optimizer sees one flat vector. */
#ifndef DLM_LORA_H
#define DLM_LORA_H

#include <stddef.h>
#include <stdint.h>
#include "weights/model.h"
#include "util/err.h"

enum { LM_Q, LM_K, LM_V, LM_O, LM_GATE, LM_UP, LM_DOWN, LM_COUNT };
#define LM_ALL ((1u << LM_COUNT) - 1)
#define LM_ATTN ((1u << LM_Q) | (1u << LM_K) | (1u << LM_V) | (1u << LM_O))

/* Bits of a target list as written, before lora_targets_resolve knows the
 * model: phi3's fused module names, the split names of q k v gate up, and
 * `auto`. A resolved mask holds LM_* bits only; on a fused model (phi3)
 * LM_Q is qkv_proj and LM_GATE gate_up_proj. */
#define LM_NAME_QKV (1u << 8)
#define LM_NAME_GATE_UP (1u << 9)
#define LM_NAME_SPLIT (1u << 10)
#define LM_NAME_AUTO (1u << 11)

typedef struct lora_config {
    int rank;               /* r */
    float alpha;            /* scale = alpha / r */
    float dropout;          /* on the LoRA input path, training only */
    unsigned targets;       /* bitmask of 1u << LM_* */
    int dora;               /* magnitude vectors */
} lora_config;

typedef struct lora_mod {
    int in, out;            /* I, O of the projection */
    size_t off_a, off_b, off_mag; /* offsets into the slab (mag only if dora) */
} lora_mod;

typedef struct lora {
    lora_config cfg;
    int n_layer;
    int fused;              /* the model's fused qkv / gate_up (phi3): the PEFT names */
    float scale;            /* alpha / r */
    lora_mod *mods;         /* [L * LM_COUNT]; mod (l, m) targeted iff targets bit m */
    float *w;               /* the slab: n floats */
    size_t n;
    /* PEFT modules_to_save (training.cpt.embed_warmup_steps, docs/cpt.md):
     * f32 [V, C] copies of embed_tokens and lm_head that replace the base's
     * wherever this adapter is applied; NULL = the base's. head == embd for
     * a tied base (one matrix). we / wo view them as weights. */
    float *embd, *head;
    wmat we, wo;
} lora;

const char *lora_module_name(int m);              /* "q_proj", ..., "down_proj" */
/* The PEFT module name of m on a fused (phi3) model or not: "qkv_proj" for LM_Q, "gate_up_proj" for LM_GATE. */
const char *lora_module_name_for(int fused, int m);
/* A target list's bits (the names above) → LM_* bits for model c: on phi3
 * qkv_proj / gate_up_proj (q_proj ... up_proj refused), elsewhere the split
 * names (qkv_proj, gate_up_proj refused); auto is the attention (phi3:
 * all four, as the original's registry). Idempotent. */
int lora_targets_resolve(const model_config *c, unsigned *targets, dlm_err *e);
/* "self_attn" or "mlp" */
const char *lora_module_block(int m);
/* Parse "q_proj"/"q" etc. into LM_*; -1 if unknown. */
int lora_module_from_name(const char *s);
/* In/out features of module m for cfg. */
void lora_module_dims(const model_config *cfg, int m, int *in, int *out);
/* The frozen base weight of (layer, m). */
const wmat *lora_base_weight(const model *mdl, int layer, int m);

/* Allocate (zeroed) for a model config; cfg->targets must be non-empty. */
int lora_create(const model_config *mc, const lora_config *cfg, lora **out, dlm_err *e);
void lora_free(lora *l);
/* PEFT initialisation from (seed): A uniform, B zero, mag = ‖W‖_row. */
int lora_init(lora *l, const model *mdl, uint64_t seed, dlm_err *e);
static inline const lora_mod *lora_mod_at(const lora *l, int layer, int m)
{
    return (l->cfg.targets >> m & 1) ? &l->mods[layer * LM_COUNT + m] : NULL;
}

/* PEFT tensor name of (layer, m, part): part "lora_A", "lora_B" or
 * "lora_magnitude_vector" → "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight". */
void lora_tensor_name(const lora *l, int layer, int m, const char *part, char *buf, size_t cap);

/* ‖W + s·B·A‖ per output row (DoRA's norm), using dequantized rows of W.
 * norm[out]. scratch >= in + r floats. */
void lora_dora_norm(const lora *l, const model *mdl, int layer, int m, float *norm, float *scratch);

/* modules_to_save: give l f32 copies of mdl's token embedding and LM head
 * (dequantized from the stored type; one shared matrix when tied). */
int lora_own_embeddings(lora *l, const model *mdl, dlm_err *e);
/* Move src's modules_to_save matrices (if any) to dst, freeing dst's. */
void lora_take_embeddings(lora *dst, lora *src);
/* The embedding / LM head the decoder uses with l (l may be NULL). */
static inline const wmat *lora_embd(const lora *l, const model *mdl) { return l && l->embd ? &l->we : &mdl->tok_embd; }
static inline const wmat *lora_head(const lora *l, const model *mdl) { return l && l->embd ? &l->wo : &mdl->output; }

/* Nonzero if every value is finite. */
int lora_all_finite(const lora *l);

#endif
