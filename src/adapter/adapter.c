#include "adapter/adapter.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "weights/safetensors.h"
#include "util/fs.h"
#include "util/json.h"

int adapter_targets(const char *const *names, int n, int is_auto, unsigned *mask, dlm_err *e)
{
    if (is_auto || n == 0) {
        *mask = LM_ATTN; /* the original's registry targets for every text base */
        return 0;
    }
    unsigned m = 0;
    for (int i = 0; i < n; i++) {
        int k = lora_module_from_name(names[i]);
        if (k < 0) {
            err_set(e, "AdapterError", "target module '%s' is not one of q_proj k_proj v_proj o_proj gate_proj up_proj down_proj",
                    names[i]);
            return err_hint(e, "set training.target_modules to a list of those names, or auto (q, k, v, o)");
        }
        m |= 1u << k;
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
        if (l->cfg.targets >> m & 1) json_array_append_new(tm, json_string(lora_module_name(m)));
    /* lora_alpha is an int in PEFT (and Ollama's adapter reader requires
     * one); dlm's alpha comes from an integer field. */
    json_t *c = json_pack("{s:s, s:s, s:s, s:o, s:b, s:i, s:I, s:f, s:o, s:s, s:b, s:b, s:b, s:n, s:b,"
                          " s:n, s:n, s:{}, s:{}, s:s}",
                          "peft_type", "LORA", "task_type", "CAUSAL_LM", "base_model_name_or_path",
                          meta && meta->base_model ? meta->base_model : "", "revision",
                          meta && meta->revision ? json_string(meta->revision) : json_null(), "inference_mode", 1,
                          "r", l->cfg.rank, "lora_alpha", (json_int_t)lrintf(l->cfg.alpha), "lora_dropout",
                          (double)l->cfg.dropout, "target_modules", tm, "bias", "none", "fan_in_fan_out", 0,
                          "use_rslora", 0, "use_dora", l->cfg.dora, "modules_to_save", "init_lora_weights", 1,
                          "layers_to_transform", "layers_pattern", "rank_pattern", "alpha_pattern", "peft_version",
                          "0.13.2");
    if (!c) return err_set(e, "MemoryError", "out of memory");
    snprintf(p, sizeof p, "%s/adapter_config.json", dir);
    int rc = json_save_file(p, c, e);
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
            int k = json_is_string(v) ? lora_module_from_name(json_string_value(v)) : -1;
            if (k < 0) {
                /* the message reads v: set it before the config is freed */
                err_set(e, "AdapterError", "%s: unsupported target module '%s'", p,
                        json_is_string(v) ? json_string_value(v) : "?");
                json_decref(c);
                return -1;
            }
            mask |= 1u << k;
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

int adapter_load(const char *dir, const model *m, lora **out, dlm_err *e)
{
    *out = NULL;
    lora_config cfg;
    if (adapter_read_config(dir, &cfg, e)) return -1;
    lora *l;
    if (lora_create(&m->cfg, &cfg, &l, e)) return -1;
    char p[4200];
    snprintf(p, sizeof p, "%s/adapter_model.safetensors", dir);
    st_file *f;
    if (st_open(p, &f, e)) { lora_free(l); return -1; }
    int rc = lora_load_st(l, f, p, e);
    st_close(f);
    if (rc) { lora_free(l); return -1; }
    *out = l;
    return 0;
}
