#include "adapter/adapter.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "weights/safetensors.h"
#include "kern/kern.h"
#include "util/fs.h"
#include "util/json.h"

/* ---- PEFT tensors: adapter_model.safetensors ------------------------------ */

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
                lora_tensor_name(l, layer, m, parts[p], name, sizeof name);
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
    int per = l->cfg.dora ? 3 : 2, n = 0, cap = l->n_layer * LM_COUNT * per + 2;
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
                lora_tensor_name(l, layer, m, parts[p], nm, 160);
                t[n].name = nm;
                t[n].dtype = ST_F32;
                if (p == 0) { t[n].ndim = 2; t[n].shape[0] = l->cfg.rank; t[n].shape[1] = md->in; t[n].data = l->w + md->off_a; }
                else if (p == 1) { t[n].ndim = 2; t[n].shape[0] = md->out; t[n].shape[1] = l->cfg.rank; t[n].data = l->w + md->off_b; }
                else { t[n].ndim = 1; t[n].shape[0] = md->out; t[n].data = l->w + md->off_mag; }
                n++;
            }
        }
    if (l->embd) { /* modules_to_save: the whole matrices (both names when tied, the same bytes) */
        t[n++] = (st_out){.name = ADAPTER_EMBED_KEY, .dtype = ST_F32, .ndim = 2,
                          .shape = {l->we.rows, l->we.cols}, .data = l->embd};
        t[n++] = (st_out){.name = ADAPTER_HEAD_KEY, .dtype = ST_F32, .ndim = 2,
                          .shape = {l->wo.rows, l->wo.cols}, .data = l->head};
    }
    const char *meta[] = {"format", "pt", NULL};
    int rc = st_write(path, t, n, meta, e);
    free(t);
    free(names);
    return rc;
}


/* A module name's target bits (lora.h): fused names as LM_NAME_*, split
 * names with LM_NAME_SPLIT; 0 if unknown. */
static unsigned adapter_target_bits(const char *s)
{
    if (!strcmp(s, "qkv_proj")) return LM_NAME_QKV;
    if (!strcmp(s, "gate_up_proj")) return LM_NAME_GATE_UP;
    int k = lora_module_from_name(s);
    if (k < 0) return 0;
    return 1u << k | (k == LM_O || k == LM_DOWN ? 0 : LM_NAME_SPLIT);
}

int adapter_targets(const char *const *names, int n, int is_auto, unsigned *mask, dlm_err *e)
{
    if (is_auto || n == 0) {
        /* the attention, the original's registry targets for every text
         * base (lora_targets_resolve makes it phi3's four fused and unfused modules, as the original's phi rows) */
        *mask = LM_ATTN | LM_NAME_AUTO;
        return 0;
    }
    unsigned m = 0;
    for (int i = 0; i < n; i++) {
        unsigned b = adapter_target_bits(names[i]);
        if (!b) {
            err_set(e, "AdapterError", "target module '%s' is not one of q_proj k_proj v_proj o_proj gate_proj up_proj "
                                       "down_proj (phi3: qkv_proj o_proj gate_up_proj down_proj)", names[i]);
            return err_hint(e, "set training.target_modules to a list of those names, or auto (q, k, v, o)");
        }
        m |= b;
    }
    *mask = m;
    return 0;
}

int adapter_save(const char *dir, const lora *l, const adapter_meta *meta, dlm_err *e)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/adapter_model.safetensors", dir);
    if (lora_save_st(l, p, e)) return -1;
    json_t *tm = json_array();
    for (int m = 0; m < LM_COUNT; m++)
        if (l->cfg.targets >> m & 1) json_array_append_new(tm, json_string(lora_module_name_for(l->fused, m)));
    /* lora_alpha is an int in PEFT (and Ollama's adapter reader requires
     * one); dlm's alpha comes from an integer field. */
    json_t *c = json_pack("{s:s, s:s, s:s, s:o, s:b, s:i, s:I, s:f, s:o, s:s, s:b, s:b, s:b, s:o, s:b,"
                          " s:n, s:n, s:{}, s:{}, s:s}",
                          "peft_type", "LORA", "task_type", "CAUSAL_LM", "base_model_name_or_path",
                          meta && meta->base_model ? meta->base_model : "", "revision",
                          meta && meta->revision ? json_string(meta->revision) : json_null(), "inference_mode", 1,
                          "r", l->cfg.rank, "lora_alpha", (json_int_t)lrintf(l->cfg.alpha), "lora_dropout",
                          (double)l->cfg.dropout, "target_modules", tm, "bias", "none", "fan_in_fan_out", 0,
                          "use_rslora", 0, "use_dora", l->cfg.dora, "modules_to_save",
                          l->embd ? json_pack("[s, s]", "embed_tokens", "lm_head") : json_null(), "init_lora_weights", 1,
                          "layers_to_transform", "layers_pattern", "rank_pattern", "alpha_pattern", "peft_version",
                          "0.13.2");
    if (!c) return err_set(e, "MemoryError", "out of memory");
    snprintf(p, sizeof p, "%s/adapter_config.json", dir);
    int rc = json_save_file(p, c, e);
    json_decref(c);
    return rc;
}

static int read_modules_to_save(json_t *c, const char *p, unsigned *mts, dlm_err *e)
{
    *mts = 0;
    json_t *a = json_object_get(c, "modules_to_save"), *v;
    size_t i;
    if (!a || json_is_null(a)) return 0;
    if (!json_is_array(a)) return err_set(e, "AdapterError", "%s: modules_to_save is not a list", p);
    json_array_foreach(a, i, v) {
        const char *s = json_is_string(v) ? json_string_value(v) : "?";
        if (!strcmp(s, "embed_tokens")) *mts |= ADAPTER_SAVES_EMBED;
        else if (!strcmp(s, "lm_head")) *mts |= ADAPTER_SAVES_HEAD;
        else {
            err_set(e, "AdapterError", "%s: modules_to_save names '%s'; dlm applies embed_tokens and lm_head only", p, s);
            return err_hint(e, "merge the adapter with PEFT (merge_and_unload) and use the merged model as the base");
        }
    }
    return 0;
}

int adapter_modules_to_save(const char *dir, unsigned *mts, dlm_err *e)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/adapter_config.json", dir);
    json_t *c = json_load_path(p, 1 << 20, e);
    if (!c) return -1;
    int rc = read_modules_to_save(c, p, mts, e);
    json_decref(c);
    return rc;
}

int adapter_read_config(const char *dir, lora_config *cfg, dlm_err *e)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/adapter_config.json", dir);
    json_t *c = json_load_path(p, 1 << 20, e);
    if (!c) return -1;
    long long r;
    double alpha, drop = 0;
    int dora = 0;
    const char *pt = jget_str(c, "peft_type");
    if (!json_is_object(c) || (pt && strcmp(pt, "LORA")) || jget_int(c, "r", &r) || r < 1 || r > 4096 ||
        jget_num(c, "lora_alpha", &alpha)) {
        json_decref(c);
        return err_set(e, "AdapterError", "%s: not a LoRA adapter config (needs peft_type LORA, r, lora_alpha)", p);
    }
    jget_num(c, "lora_dropout", &drop);
    jget_bool(c, "use_dora", &dora);
    int rs = 0;
    jget_bool(c, "use_rslora", &rs);
    json_t *tm = json_object_get(c, "target_modules");
    unsigned mask = 0;
    size_t i;
    json_t *v;
    if (json_is_array(tm))
        json_array_foreach(tm, i, v) {
            unsigned k = json_is_string(v) ? adapter_target_bits(json_string_value(v)) : 0;
            if (!k) {
                /* the message reads v: set it before the config is freed */
                err_set(e, "AdapterError", "%s: unsupported target module '%s'", p,
                        json_is_string(v) ? json_string_value(v) : "?");
                json_decref(c);
                return -1;
            }
            mask |= k;
        }
    json_decref(c);
    if (!mask) return err_set(e, "AdapterError", "%s: no target_modules", p);
    if (rs) return err_set(e, "AdapterError", "%s: rsLoRA adapters are not supported", p);
    cfg->rank = (int)r;
    cfg->alpha = (float)alpha;
    cfg->dropout = (float)drop;
    cfg->targets = mask;
    cfg->dora = dora;
    return 0;
}

/* modules_to_save: the saved matrices, or a copy of the base's for the one
 * not saved (PEFT wraps each named module on its own: a tied base whose
 * adapter saves embed_tokens alone keeps the base's head). */
static int load_embeddings(lora *l, const model *m, const st_file *f, unsigned mts, const char *label, dlm_err *e)
{
    if (lora_own_embeddings(l, m, e)) return -1;
    int64_t V = m->cfg.vocab, C = m->cfg.d_model;
    if (m->cfg.tied) { /* two matrices unless the file holds one matrix under both names */
        const st_tensor *a = st_find(f, ADAPTER_EMBED_KEY), *b = st_find(f, ADAPTER_HEAD_KEY);
        if (mts != (ADAPTER_SAVES_EMBED | ADAPTER_SAVES_HEAD) || !a || !b || a->nbytes != b->nbytes ||
            a->dtype != b->dtype || memcmp(a->data, b->data, a->nbytes)) {
            l->head = malloc((size_t)V * (size_t)C * sizeof(float));
            if (!l->head) return err_set(e, "OOMError", "cannot allocate the adapter's lm_head");
            memcpy(l->head, l->embd, (size_t)V * (size_t)C * sizeof(float));
            l->wo.data = l->head;
        }
    }
    const char *keys[2] = {ADAPTER_EMBED_KEY, ADAPTER_HEAD_KEY};
    float *dst[2] = {l->embd, l->head};
    for (int k = 0; k < 2; k++) {
        if (!(mts & (k ? ADAPTER_SAVES_HEAD : ADAPTER_SAVES_EMBED))) continue;
        if (k && dst[1] == dst[0]) continue;   /* tied, the same bytes: loaded once */
        const st_tensor *t = st_find(f, keys[k]);
        if (!t) return err_set(e, "AdapterError", "%s: modules_to_save lists %s but tensor '%s' is missing", label,
                               k ? "lm_head" : "embed_tokens", keys[k]);
        if (load_tensor(dst[k], t, V, C, 2, label, e)) return -1;
    }
    return 0;
}

int adapter_load(const char *dir, const model *m, lora **out, dlm_err *e)
{
    *out = NULL;
    lora_config cfg;
    unsigned mts;
    if (adapter_read_config(dir, &cfg, e) || adapter_modules_to_save(dir, &mts, e)) return -1;
    lora *l;
    if (lora_create(&m->cfg, &cfg, &l, e)) return -1;
    char p[4200];
    snprintf(p, sizeof p, "%s/adapter_model.safetensors", dir);
    st_file *f;
    if (st_open(p, &f, e)) { lora_free(l); return -1; }
    int rc = lora_load_st(l, f, p, e);
    if (!rc && mts) rc = load_embeddings(l, m, f, mts, p, e);
    st_close(f);
    if (rc) { lora_free(l); return -1; }
    *out = l;
    return 0;
}
