#include "decoder/lora.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"
#include "util/rng.h"

static const char *NAMES[LM_COUNT] = {"q_proj", "k_proj", "v_proj", "o_proj",
                                      "gate_proj", "up_proj", "down_proj"};
static const char *SHORT[LM_COUNT] = {"q", "k", "v", "o", "gate", "up", "down"};

const char *lora_module_name(int m) { return (m >= 0 && m < LM_COUNT) ? NAMES[m] : "?"; }
const char *lora_module_block(int m) { return m <= LM_O ? "self_attn" : "mlp"; }

int lora_module_from_name(const char *s)
{
    for (int m = 0; m < LM_COUNT; m++)
        if (!strcmp(s, NAMES[m]) || !strcmp(s, SHORT[m])) return m;
    return -1;
}

const char *lora_module_name_for(int fused, int m)
{
    if (fused && m == LM_Q) return "qkv_proj";
    if (fused && m == LM_GATE) return "gate_up_proj";
    return lora_module_name(m);
}

int lora_targets_resolve(const model_config *c, unsigned *targets, dlm_err *e)
{
    unsigned t = *targets, split = (1u << LM_Q) | (1u << LM_K) | (1u << LM_V) | (1u << LM_GATE) | (1u << LM_UP);
    /* auto: the original's registry targets, the attention (its phi rows:
     * all four modules, src/weights/registry_table.c) */
    if (t & LM_NAME_AUTO)
        t = (t & ~(LM_NAME_AUTO | LM_ALL)) |
            (c->fused ? (1u << LM_Q) | (1u << LM_O) | (1u << LM_GATE) | (1u << LM_DOWN) : LM_ATTN);
    if (c->fused) {
        if (t & (LM_NAME_SPLIT | (1u << LM_K) | (1u << LM_V) | (1u << LM_UP))) {
            err_set(e, "AdapterError", "phi3 fuses q, k, v into qkv_proj and gate, up into gate_up_proj: "
                                       "q_proj, k_proj, v_proj, gate_proj and up_proj are not modules of it");
            return err_hint(e, "set training.target_modules to [qkv_proj, o_proj, gate_up_proj, down_proj] or a subset");
        }
        t = (t & ~split) | (t & LM_NAME_QKV ? 1u << LM_Q : 0) | (t & LM_NAME_GATE_UP ? 1u << LM_GATE : 0) |
            (t & ((1u << LM_Q) | (1u << LM_GATE)));
    } else if (t & (LM_NAME_QKV | LM_NAME_GATE_UP)) {
        err_set(e, "AdapterError", "qkv_proj and gate_up_proj are phi3's fused modules; this model has separate ones");
        return err_hint(e, "name q_proj, k_proj, v_proj (gate_proj, up_proj) instead");
    }
    *targets = t & LM_ALL;
    return 0;
}

void lora_module_dims(const model_config *c, int m, int *in, int *out)
{
    int q = c->n_head * c->head_dim, kv = c->n_kv_head * c->head_dim;
    if (c->fused && (m == LM_Q || m == LM_GATE)) {   /* phi3's qkv_proj, gate_up_proj */
        *in = c->d_model;
        *out = m == LM_Q ? q + 2 * kv : 2 * c->n_ff;
        return;
    }
    switch (m) {
    case LM_Q: *in = c->d_model; *out = q; break;
    case LM_K: *in = c->d_model; *out = kv; break;
    case LM_V: *in = c->d_model; *out = kv; break;
    case LM_O: *in = q; *out = c->d_model; break;
    case LM_GATE: *in = c->d_model; *out = c->n_ff; break;
    case LM_UP: *in = c->d_model; *out = c->n_ff; break;
    default: *in = c->n_ff; *out = c->d_model; break;
    }
}

const wmat *lora_base_weight(const model *mdl, int layer, int m)
{
    const layer_weights *w = &mdl->layers[layer];
    switch (m) {
    case LM_Q: return &w->wq;
    case LM_K: return &w->wk;
    case LM_V: return &w->wv;
    case LM_O: return &w->wo;
    case LM_GATE: return &w->w_gate;
    case LM_UP: return &w->w_up;
    default: return &w->w_down;
    }
}

int lora_create(const model_config *mc, const lora_config *cfg, lora **out, dlm_err *e)
{
    *out = NULL;
    if (cfg->rank < 1 || cfg->rank > 4096) return err_set(e, "LoraError", "LoRA rank %d out of range", cfg->rank);
    unsigned targets = cfg->targets;
    if (lora_targets_resolve(mc, &targets, e)) return -1;
    if (!targets) return err_set(e, "LoraError", "LoRA has no target modules");
    lora *l = calloc(1, sizeof *l);
    if (!l) return err_set(e, "MemoryError", "out of memory");
    l->cfg = *cfg;
    l->cfg.targets = targets;
    l->fused = mc->fused;
    l->n_layer = mc->n_layer;
    l->scale = cfg->alpha / (float)cfg->rank;
    l->mods = calloc((size_t)mc->n_layer * LM_COUNT, sizeof *l->mods);
    if (!l->mods) { free(l); return err_set(e, "MemoryError", "out of memory"); }
    size_t off = 0, r = (size_t)cfg->rank;
    for (int layer = 0; layer < mc->n_layer; layer++)
        for (int m = 0; m < LM_COUNT; m++) {
            if (!(targets >> m & 1)) continue;
            lora_mod *md = &l->mods[layer * LM_COUNT + m];
            lora_module_dims(mc, m, &md->in, &md->out);
            md->off_a = off;
            off += r * (size_t)md->in;
            md->off_b = off;
            off += (size_t)md->out * r;
            if (cfg->dora) {
                md->off_mag = off;
                off += (size_t)md->out;
            }
        }
    l->n = off;
    l->w = calloc(off ? off : 1, sizeof(float));
    if (!l->w) { lora_free(l); return err_set(e, "MemoryError", "out of memory for %zu LoRA parameters", off); }
    *out = l;
    return 0;
}

void lora_free(lora *l)
{
    if (!l) return;
    free(l->mods);
    free(l->w);
    if (l->head != l->embd) free(l->head);
    free(l->embd);
    free(l);
}

static int own_copy(const wmat *src, float **dst, wmat *view, dlm_err *e)
{
    size_t n = (size_t)src->rows * (size_t)src->cols;
    *dst = malloc(n * sizeof(float));
    if (!*dst) return err_set(e, "OOMError", "cannot allocate a %lld x %lld f32 embedding copy", (long long)src->rows,
                              (long long)src->cols);
    for (int64_t r = 0; r < src->rows; r++)
        kern_dequant_row(src->type, (const char *)src->data + (size_t)r * src->row_bytes, *dst + (size_t)r * src->cols,
                         src->cols);
    *view = (wmat){DT_F32, src->rows, src->cols, (size_t)src->cols * sizeof(float), *dst};
    return 0;
}

void lora_take_embeddings(lora *dst, lora *src)
{
    if (!src->embd) return;
    if (dst->head != dst->embd) free(dst->head);
    free(dst->embd);
    dst->embd = src->embd;
    dst->head = src->head;
    dst->we = src->we;
    dst->wo = src->wo;
    src->embd = src->head = NULL;
}

int lora_own_embeddings(lora *l, const model *mdl, dlm_err *e)
{
    if (l->embd) return 0;
    if (own_copy(&mdl->tok_embd, &l->embd, &l->we, e)) return -1;
    if (mdl->cfg.tied) {
        l->head = l->embd;
        l->wo = l->we;
        return 0;
    }
    if (own_copy(&mdl->output, &l->head, &l->wo, e)) {
        free(l->embd);
        l->embd = NULL;
        return -1;
    }
    return 0;
}

void lora_tensor_name(const lora *l, int layer, int m, const char *part, char *buf, size_t cap)
{
    const char *name = lora_module_name_for(l->fused, m);
    if (!strcmp(part, "lora_magnitude_vector"))
        snprintf(buf, cap, "base_model.model.model.layers.%d.%s.%s.lora_magnitude_vector", layer,
                 lora_module_block(m), name);
    else
        snprintf(buf, cap, "base_model.model.model.layers.%d.%s.%s.%s.weight", layer,
                 lora_module_block(m), name, part);
}

void lora_dora_norm(const lora *l, const model *mdl, int layer, int m, float *norm, float *scratch)
{
    const lora_mod *md = lora_mod_at(l, layer, m);
    const wmat *W = lora_base_weight(mdl, layer, m);
    int r = l->cfg.rank;
    const float *A = l->w + md->off_a, *B = l->w + md->off_b;
    float *row = scratch;
    for (int o = 0; o < md->out; o++) {
        kern_dequant_row(W->type, (const char *)W->data + (size_t)o * W->row_bytes, row, md->in);
        const float *b = B + (size_t)o * r;
        double acc = 0;
        for (int i = 0; i < md->in; i++) {
            float ba = 0;
            for (int k = 0; k < r; k++) ba += b[k] * A[(size_t)k * md->in + i];
            float v = row[i] + l->scale * ba;
            acc += (double)v * v;
        }
        norm[o] = (float)sqrt(acc);
    }
}

int lora_init(lora *l, const model *mdl, uint64_t seed, dlm_err *e)
{
    int r = l->cfg.rank;
    float *scratch = NULL;
    if (l->cfg.dora) {
        int maxin = 0;
        for (int i = 0; i < l->n_layer * LM_COUNT; i++)
            if (l->mods[i].in > maxin) maxin = l->mods[i].in;
        scratch = malloc(((size_t)maxin + (size_t)r) * sizeof(float));
        if (!scratch) return err_set(e, "MemoryError", "out of memory");
    }
    memset(l->w, 0, l->n * sizeof(float));
    for (int layer = 0; layer < l->n_layer; layer++)
        for (int m = 0; m < LM_COUNT; m++) {
            const lora_mod *md = lora_mod_at(l, layer, m);
            if (!md) continue;
            /* kaiming_uniform_(a=sqrt(5)): gain = sqrt(2/(1+5)), bound =
             * gain*sqrt(3/fan_in) = 1/sqrt(fan_in). */
            float bound = 1.0f / sqrtf((float)md->in);
            float *A = l->w + md->off_a;
            uint64_t tensor = (uint64_t)layer * LM_COUNT + (uint64_t)m;
            for (size_t i = 0; i < (size_t)r * (size_t)md->in; i++)
                A[i] = (2.0f * rng_uniform(seed, RNG_LORA_INIT, tensor, i) - 1.0f) * bound;
            /* B = 0 here, so ‖W + s·B·A‖ = ‖W‖: the magnitude starts at it. */
            if (l->cfg.dora) lora_dora_norm(l, mdl, layer, m, l->w + md->off_mag, scratch);
        }
    free(scratch);
    return 0;
}

int lora_all_finite(const lora *l)
{
    for (size_t i = 0; i < l->n; i++)
        if (!isfinite(l->w[i])) return 0;
    return 1;
}
