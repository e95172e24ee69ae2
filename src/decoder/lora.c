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

void lora_module_dims(const model_config *c, int m, int *in, int *out)
{
    int q = c->n_head * c->head_dim, kv = c->n_kv_head * c->head_dim;
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
    if (!(cfg->targets & LM_ALL)) return err_set(e, "LoraError", "LoRA has no target modules");
    lora *l = calloc(1, sizeof *l);
    if (!l) return err_set(e, "MemoryError", "out of memory");
    l->cfg = *cfg;
    l->n_layer = mc->n_layer;
    l->scale = cfg->alpha / (float)cfg->rank;
    l->mods = calloc((size_t)mc->n_layer * LM_COUNT, sizeof *l->mods);
    if (!l->mods) { free(l); return err_set(e, "MemoryError", "out of memory"); }
    size_t off = 0, r = (size_t)cfg->rank;
    for (int layer = 0; layer < mc->n_layer; layer++)
        for (int m = 0; m < LM_COUNT; m++) {
            if (!(cfg->targets >> m & 1)) continue;
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
    free(l);
}

void lora_tensor_name(int layer, int m, const char *part, char *buf, size_t cap)
{
    if (!strcmp(part, "lora_magnitude_vector"))
        snprintf(buf, cap, "base_model.model.model.layers.%d.%s.%s.lora_magnitude_vector", layer,
                 lora_module_block(m), lora_module_name(m));
    else
        snprintf(buf, cap, "base_model.model.model.layers.%d.%s.%s.%s.weight", layer,
                 lora_module_block(m), lora_module_name(m), part);
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

/* ---- PEFT files ---------------------------------------------------------- */

#include "weights/safetensors.h"

static int load_tensor(float *dst, const st_tensor *t, int64_t rows, int64_t cols, int ndim,
                       const char *label, dlm_err *e)
{
    int64_t n = rows * (ndim == 2 ? cols : 1);
    if (t->ndim != ndim || t->shape[0] != rows || (ndim == 2 && t->shape[1] != cols))
        return err_set(e, "AdapterError", "%s: tensor '%s' has the wrong shape (expected [%lld%s%lld])",
                       label, t->name, (long long)rows, ndim == 2 ? ", " : "", ndim == 2 ? (long long)cols : 0LL);
    const unsigned char *p = t->data;
    switch (t->dtype) {
    case ST_F32: memcpy(dst, p, (size_t)n * 4); return 0;
    case ST_F16:
    case ST_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
            dst[i] = t->dtype == ST_F16 ? fp16_to_f32(h) : bf16_to_f32(h);
        }
        return 0;
    default:
        return err_set(e, "AdapterError", "%s: tensor '%s' has dtype %s (expected F32, F16 or BF16)", label,
                       t->name, st_dtype_name(t->dtype));
    }
}

int lora_load_st(lora *l, const struct st_file *f, const char *label, dlm_err *e)
{
    char name[256];
    int expected = 0;
    for (int layer = 0; layer < l->n_layer; layer++)
        for (int m = 0; m < LM_COUNT; m++) {
            const lora_mod *md = lora_mod_at(l, layer, m);
            if (!md) continue;
            const char *parts[3] = {"lora_A", "lora_B", "lora_magnitude_vector"};
            for (int p = 0; p < (l->cfg.dora ? 3 : 2); p++) {
                lora_tensor_name(layer, m, parts[p], name, sizeof name);
                const st_tensor *t = st_find(f, name);
                if (!t) return err_set(e, "AdapterError", "%s: tensor '%s' is missing", label, name);
                int rc = p == 0 ? load_tensor(l->w + md->off_a, t, l->cfg.rank, md->in, 2, label, e)
                       : p == 1 ? load_tensor(l->w + md->off_b, t, md->out, l->cfg.rank, 2, label, e)
                                : load_tensor(l->w + md->off_mag, t, md->out, 1, 1, label, e);
                if (rc) return -1;
                expected++;
            }
        }
    int extra = 0;
    for (int i = 0; i < st_count(f); i++)
        if (strstr(st_at(f, i)->name, "lora_")) extra++;
    if (extra != expected)
        return err_set(e, "AdapterError", "%s: holds %d adapter tensors, the adapter config describes %d", label,
                       extra, expected);
    return 0;
}

int lora_save_st(const lora *l, const char *path, dlm_err *e)
{
    int per = l->cfg.dora ? 3 : 2, n = 0, cap = l->n_layer * LM_COUNT * per;
    st_out *t = calloc((size_t)cap, sizeof *t);
    char *names = calloc((size_t)cap, 160);
    if (!t || !names) { free(t); free(names); return err_set(e, "MemoryError", "out of memory"); }
    for (int layer = 0; layer < l->n_layer; layer++)
        for (int m = 0; m < LM_COUNT; m++) {
            const lora_mod *md = lora_mod_at(l, layer, m);
            if (!md) continue;
            const char *parts[3] = {"lora_A", "lora_B", "lora_magnitude_vector"};
            for (int p = 0; p < per; p++) {
                char *nm = names + (size_t)n * 160;
                lora_tensor_name(layer, m, parts[p], nm, 160);
                t[n].name = nm;
                t[n].dtype = ST_F32;
                if (p == 0) { t[n].ndim = 2; t[n].shape[0] = l->cfg.rank; t[n].shape[1] = md->in; t[n].data = l->w + md->off_a; }
                else if (p == 1) { t[n].ndim = 2; t[n].shape[0] = md->out; t[n].shape[1] = l->cfg.rank; t[n].data = l->w + md->off_b; }
                else { t[n].ndim = 1; t[n].shape[0] = md->out; t[n].data = l->w + md->off_mag; }
                n++;
            }
        }
    const char *meta[] = {"format", "pt", NULL};
    int rc = st_write(path, t, n, meta, e);
    free(t);
    free(names);
    return rc;
}

int lora_all_finite(const lora *l)
{
    for (size_t i = 0; i < l->n; i++)
        if (!isfinite(l->w[i])) return 0;
    return 1;
}
