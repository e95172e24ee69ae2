/* config — HF config.json → model_config for llama (and mistral, mixtral), qwen2, qwen3, olmo2, smollm3, gemma2,
 * phi3 and Qwen2-VL (qwen2 with M-RoPE and a vision tower).
 *
 * Accepts both transformers layouts: v4 (top-level rope_theta, rope_scaling,
 * torch_dtype) and v5 (rope_parameters with rope_theta inside, dtype).
 * Defaults are transformers' LlamaConfig / Qwen2Config defaults for the
 * optional fields only; the dimensions themselves must be present, because
 * a missing hidden_size silently becoming 4096 would only surface later as
 * a confusing shape error. */
#include "weights/model.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define KIND "ConfigError"

typedef struct cfg_ctx {
    const json_t *root;
    const char *path;
    dlm_err *e;
} cfg_ctx;

/* An integer field; integral reals ("2048.0") are tolerated as Python's
 * json would load them as floats but transformers casts them. Returns 1 if
 * absent or null (out untouched), 0 if read, -1 on a bad value. */
static int get_int(const cfg_ctx *c, const json_t *o, const char *key, long long *out)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 1;
    if (json_is_integer(v)) { *out = json_integer_value(v); return 0; }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == floor(d) && fabs(d) < 9e15) { *out = (long long)d; return 0; }
    }
    err_at(c->e, KIND, c->path, 0, 0, "\"%s\" must be an integer", key);
    return -1;
}

static int get_num(const cfg_ctx *c, const json_t *o, const char *key, double *out)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 1;
    if (json_is_number(v)) { *out = json_number_value(v); return 0; }
    err_at(c->e, KIND, c->path, 0, 0, "\"%s\" must be a number", key);
    return -1;
}

static int get_bool(const cfg_ctx *c, const json_t *o, const char *key, int *out)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 1;
    if (json_is_boolean(v)) { *out = json_is_true(v); return 0; }
    err_at(c->e, KIND, c->path, 0, 0, "\"%s\" must be true or false", key);
    return -1;
}

/* A required positive int within [1, max]. */
static int need_dim(const cfg_ctx *c, const char *key, long long max, int *out)
{
    long long v = 0;
    int r = get_int(c, c->root, key, &v);
    if (r < 0) return -1;
    if (r == 1) return err_at(c->e, KIND, c->path, 0, 0, "missing \"%s\"", key);
    if (v < 1 || v > max)
        return err_at(c->e, KIND, c->path, 0, 0, "\"%s\" = %lld is out of range (1..%lld)", key, v, max);
    *out = (int)v;
    return 0;
}

static int opt_dim(const cfg_ctx *c, const char *key, long long max, int *out)
{
    long long v = 0;
    int r = get_int(c, c->root, key, &v);
    if (r < 0) return -1;
    if (r == 1) return 0;
    if (v < 1 || v > max)
        return err_at(c->e, KIND, c->path, 0, 0, "\"%s\" = %lld is out of range (1..%lld)", key, v, max);
    *out = (int)v;
    return 0;
}

/* Token id fields: int, null, or (eos) a list of ints. */
static int get_token_ids(const cfg_ctx *c, const char *key, int *first, int *ids, int cap, int *n)
{
    const json_t *v = json_object_get(c->root, key);
    *first = -1;
    if (n) *n = 0;
    if (!v || json_is_null(v)) return 0;
    if (json_is_integer(v)) {
        json_int_t x = json_integer_value(v);
        if (x < 0 || x > INT32_MAX) return err_at(c->e, KIND, c->path, 0, 0, "\"%s\" is out of range", key);
        *first = (int)x;
        if (n && cap > 0) { ids[0] = (int)x; *n = 1; }
        return 0;
    }
    if (json_is_array(v) && n) {
        size_t i;
        const json_t *it;
        json_array_foreach(v, i, it) {
            json_int_t x = json_is_integer(it) ? json_integer_value(it) : -1;
            if (x < 0 || x > INT32_MAX)
                return err_at(c->e, KIND, c->path, 0, 0, "\"%s\"[%zu] is not a token id", key, i);
            if (i == 0) *first = (int)x;
            if (*n < cap) ids[(*n)++] = (int)x;
        }
        return 0;
    }
    return err_at(c->e, KIND, c->path, 0, 0, "\"%s\" must be a token id%s", key, n ? " or a list of them" : "");
}

/* A list of n positive numbers (LongRoPE's factors). */
static int get_factors(const cfg_ctx *c, const json_t *o, const char *key, const char *rp_key, int n, float *out)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_array(v) || json_array_size(v) != (size_t)n)
        return err_at(c->e, KIND, c->path, 0, 0, "%s.%s must list %d numbers (rotary dims / 2)", rp_key, key, n);
    for (int i = 0; i < n; i++) {
        const json_t *x = json_array_get(v, (size_t)i);
        double d = json_is_number(x) ? json_number_value(x) : -1;
        if (!(d > 0 && d < 1e9))
            return err_at(c->e, KIND, c->path, 0, 0, "%s.%s[%d] is not a positive number", rp_key, key, i);
        out[i] = (float)d;
    }
    return 0;
}

/* Phi3's rope_scaling type longrope (transformers' _compute_longrope_parameters):
 * per-frequency divisors short_factor / long_factor of the rotary dims'
 * rope_dim/2 frequencies, long ones for a context past
 * original_max_position_embeddings, and cos, sin × sqrt(1 + ln(s)/ln(orig))
 * with s = max_position_embeddings / orig (or the config's attention_factor). */
static int parse_longrope(const cfg_ctx *c, model_config *cfg, const json_t *rp, const char *rp_key)
{
    int n = model_rope_dim(cfg) / 2;
    if (n > MODEL_MAX_ROPE_FACTORS)
        return err_at(c->e, KIND, c->path, 0, 0, "%d RoPE factors are more than dlm supports", n);
    if (get_factors(c, rp, "short_factor", rp_key, n, cfg->rope_short) ||
        get_factors(c, rp, "long_factor", rp_key, n, cfg->rope_long))
        return -1;
    long long orig = 4096;   /* Phi3Config's default */
    int r = get_int(c, rp, "original_max_position_embeddings", &orig);
    if (r < 0 || (r == 1 && get_int(c, c->root, "original_max_position_embeddings", &orig) < 0)) return -1;
    if (orig < 1 || orig > (1 << 24))
        return err_at(c->e, KIND, c->path, 0, 0, "original_max_position_embeddings = %lld is out of range", orig);
    double af = 0;
    if ((r = get_num(c, rp, "attention_factor", &af)) < 0) return -1;
    if (r == 1) {
        double s = (double)cfg->max_pos / (double)orig;
        af = s <= 1.0 ? 1.0 : sqrt(1.0 + log(s) / log((double)orig));
    }
    if (!(af > 0 && af < 100)) return err_at(c->e, KIND, c->path, 0, 0, "%s.attention_factor is out of range", rp_key);
    cfg->n_rope_factors = n;
    cfg->rope_orig_ctx = (int)orig;
    cfg->rope_attn = af != 1.0 ? (float)af : 0.0f;
    return 0;
}

/* Phi3Config: partial_rotary_factor (before the RoPE scaling, which counts
 * the rotary dims), no biases, a sliding window only below the context. */
static int parse_phi3(const cfg_ctx *c, model_config *cfg)
{
    double prf = 1.0;
    const json_t *rp = json_object_get(c->root, "rope_parameters");
    int r = json_is_object(rp) ? get_num(c, rp, "partial_rotary_factor", &prf) : 1;
    if (r < 0 || (r == 1 && get_num(c, c->root, "partial_rotary_factor", &prf) < 0)) return -1;
    /* the range first: an out-of-range factor (8.9e120, found by
     * fuzz_config) must not reach the conversion to int, which is UB */
    int rd = prf > 0 && prf <= 1 ? (int)(cfg->head_dim * prf) : 0;
    if (!(prf > 0 && prf <= 1) || rd < 2 || rd % 2)
        return err_at(c->e, KIND, c->path, 0, 0, "partial_rotary_factor = %g gives %d rotary dims of %d", prf, rd,
                      cfg->head_dim);
    cfg->rope_dim = rd < cfg->head_dim ? rd : 0;
    cfg->fused = 1;
    return 0;
}

/* Qwen2-VL's mrope_section: the (t, h, w) streams' rotary columns, summing
 * to head_dim/2 ([16, 24, 24] for head size 128). */
static int parse_mrope(const cfg_ctx *c, model_config *cfg, const json_t *rp, const char *rp_key)
{
    const json_t *v = json_object_get(rp, "mrope_section");
    int sum = 0;
    if (!v || json_is_null(v)) return 0;   /* parse_qwen2vl says what is missing */
    if (!json_is_array(v) || json_array_size(v) != 3)
        return err_at(c->e, KIND, c->path, 0, 0, "%s.mrope_section must list 3 numbers (t, h, w)", rp_key);
    for (int i = 0; i < 3; i++) {
        const json_t *x = json_array_get(v, (size_t)i);
        json_int_t k = json_is_integer(x) ? json_integer_value(x) : -1;
        if (k < 0 || k > 4096) return err_at(c->e, KIND, c->path, 0, 0, "%s.mrope_section[%d] is not a count", rp_key, i);
        cfg->mrope[i] = (int)k;
        sum += (int)k;
    }
    if (sum != cfg->head_dim / 2)
        return err_at(c->e, KIND, c->path, 0, 0, "%s.mrope_section sums to %d, not head_dim/2 = %d", rp_key, sum,
                      cfg->head_dim / 2);
    return 0;
}

/* Qwen2VLConfig beyond the text model: the special ids (top level) and
 * vision_config with Qwen2VLVisionConfig's defaults (the hub's configs say
 * in_chans and spatial_patch_size, transformers 5 in_channels, patch_size). */
static int parse_qwen2vl(const cfg_ctx *c, const json_t *top, model_config *cfg)
{
    cfg_ctx t = {top, c->path, c->e};
    static const char *const IDS[3] = {"image_token_id", "vision_start_token_id", "vision_end_token_id"};
    int *dst[3] = {&cfg->image_id, &cfg->vision_start_id, &cfg->vision_end_id};
    const long long def[3] = {151655, 151652, 151653};
    for (int i = 0; i < 3; i++) {
        long long v = def[i];
        if (get_int(&t, top, IDS[i], &v) < 0) return -1;
        if (v < 0 || v >= cfg->vocab)
            return err_at(c->e, KIND, c->path, 0, 0, "%s = %lld is outside the vocabulary (%d)", IDS[i], v, cfg->vocab);
        *dst[i] = (int)v;
    }
    const json_t *vc = json_object_get(top, "vision_config");
    if (vc && !json_is_null(vc) && !json_is_object(vc))
        return err_at(c->e, KIND, c->path, 0, 0, "\"vision_config\" must be an object");
    struct model_vision *m = &cfg->vis;
    *m = (struct model_vision){32, 1280, 16, 4, 3, 14, 2, 2, 3584};
    static const char *const KEY[] = {"depth", "embed_dim", "num_heads", "mlp_ratio", "in_channels", "patch_size",
                                      "temporal_patch_size", "spatial_merge_size", "hidden_size", "in_chans",
                                      "spatial_patch_size"};
    int *field[] = {&m->depth, &m->embed_dim, &m->heads, &m->mlp_ratio, &m->in_ch, &m->patch, &m->temporal,
                    &m->merge, &m->out_dim, &m->in_ch, &m->patch};
    for (size_t i = 0; vc && i < sizeof KEY / sizeof KEY[0]; i++) {
        long long v = *field[i];
        if (get_int(&t, vc, KEY[i], &v) < 0) return -1;
        if (v < 1 || v > (1 << 16))
            return err_at(c->e, KIND, c->path, 0, 0, "vision_config.%s = %lld is out of range", KEY[i], v);
        *field[i] = (int)v;
    }
    const char *act = vc ? json_string_value(json_object_get(vc, "hidden_act")) : NULL;
    if (act && strcmp(act, "quick_gelu"))
        return err_at(c->e, KIND, c->path, 0, 0, "vision_config.hidden_act '%s' is not supported (quick_gelu)", act);
    if (m->out_dim != cfg->d_model)
        return err_at(c->e, KIND, c->path, 0, 0, "vision_config.hidden_size %d is not the text model's %d", m->out_dim,
                      cfg->d_model);
    if (m->embed_dim % m->heads || (m->embed_dim / m->heads) % 4)
        return err_at(c->e, KIND, c->path, 0, 0, "vision_config: embed_dim %d over %d heads is not a multiple of 4",
                      m->embed_dim, m->heads);
    if (!cfg->mrope[0] && !cfg->mrope[1] && !cfg->mrope[2])
        return err_at(c->e, KIND, c->path, 0, 0, "a Qwen2-VL config needs rope_scaling.mrope_section");
    return 0;
}

/* rope_parameters (v5) else rope_scaling (v4); rope_theta inside the
 * former or at top level; "type" is an old alias of "rope_type". */
static int parse_rope(const cfg_ctx *c, model_config *cfg)
{
    const json_t *rp = json_object_get(c->root, "rope_parameters");
    const char *rp_key = "rope_parameters";
    if (!rp || json_is_null(rp)) { rp = json_object_get(c->root, "rope_scaling"); rp_key = "rope_scaling"; }
    if (rp && json_is_null(rp)) rp = NULL;
    if (rp && !json_is_object(rp))
        return err_at(c->e, KIND, c->path, 0, 0, "\"%s\" must be an object or null", rp_key);

    double theta = 10000.0;
    int r = rp ? get_num(c, rp, "rope_theta", &theta) : 1;
    if (r < 0) return -1;
    if (r == 1 && get_num(c, c->root, "rope_theta", &theta) < 0) return -1;
    if (!(theta > 1.0) || !isfinite(theta) || theta > 1e12)
        return err_at(c->e, KIND, c->path, 0, 0, "rope_theta = %g is out of range", theta);
    cfg->rope_theta = (float)theta;

    if (!rp) return 0;
    const json_t *jt = json_object_get(rp, "rope_type");
    if (!jt || json_is_null(jt)) jt = json_object_get(rp, "type");
    const char *type = json_is_string(jt) ? json_string_value(jt) : NULL;
    /* Qwen2-VL: mrope_section beside the default type (transformers 5) or
     * as type "mrope" (the hub's configs) */
    if (cfg->vl == VL_QWEN2 && (!type || !strcmp(type, "default") || !strcmp(type, "mrope")))
        return parse_mrope(c, cfg, rp, rp_key);
    if (!type || !strcmp(type, "default")) return 0;
    if (cfg->arch == ARCH_PHI3 && (!strcmp(type, "longrope") || !strcmp(type, "su")))
        return parse_longrope(c, cfg, rp, rp_key);
    if (strcmp(type, "llama3")) {
        err_at(c->e, KIND, c->path, 0, 0, "%s type '%s' is not supported", rp_key, type);
        return err_hint(c->e, "dlm supports default RoPE and llama3 scaling");
    }
    double f = 0, lo = 0, hi = 0;
    long long orig = 0;
    int r1 = get_num(c, rp, "factor", &f), r2 = get_num(c, rp, "low_freq_factor", &lo);
    int r3 = get_num(c, rp, "high_freq_factor", &hi);
    int r4 = get_int(c, rp, "original_max_position_embeddings", &orig);
    if (r1 < 0 || r2 < 0 || r3 < 0 || r4 < 0) return -1;
    if (r1 || r2 || r3 || r4)
        return err_at(c->e, KIND, c->path, 0, 0,
                      "llama3 %s needs factor, low_freq_factor, high_freq_factor and "
                      "original_max_position_embeddings", rp_key);
    if (!(f >= 1.0 && f < 1e6) || !(lo > 0 && lo < 1e6) || !(hi > lo && hi < 1e6) || orig < 1 || orig > (1 << 24))
        return err_at(c->e, KIND, c->path, 0, 0, "llama3 %s values are out of range", rp_key);
    cfg->rope_llama3 = 1;
    cfg->rope_factor = (float)f;
    cfg->rope_low_freq_factor = (float)lo;
    cfg->rope_high_freq_factor = (float)hi;
    cfg->rope_orig_ctx = (int)orig;
    return 0;
}

/* SmolLM3Config: no_rope_layers[i] = 1 where layer i uses RoPE, by default
 * (i + 1) % no_rope_layer_interval != 0. dlm (like llama.cpp) runs that
 * periodic pattern only: a list that departs from it is refused. */
static int parse_nope(const cfg_ctx *c, model_config *cfg)
{
    long long every = 4;
    if (get_int(c, c->root, "no_rope_layer_interval", &every) < 0) return -1;
    if (every < 1 || every > 1024)
        return err_at(c->e, KIND, c->path, 0, 0, "no_rope_layer_interval = %lld is out of range", every);
    cfg->nope_every = (int)every;
    const json_t *l = json_object_get(c->root, "no_rope_layers");
    if (!l || json_is_null(l)) return 0;
    if (!json_is_array(l) || json_array_size(l) != (size_t)cfg->n_layer)
        return err_at(c->e, KIND, c->path, 0, 0, "\"no_rope_layers\" must list one 0/1 per layer (%d)", cfg->n_layer);
    for (int i = 0; i < cfg->n_layer; i++) {
        const json_t *v = json_array_get(l, (size_t)i);
        if (!json_is_integer(v) || (json_integer_value(v) != 0 && json_integer_value(v) != 1))
            return err_at(c->e, KIND, c->path, 0, 0, "\"no_rope_layers\"[%d] must be 0 or 1", i);
        if ((int)json_integer_value(v) != model_layer_rope(cfg, i)) {
            err_at(c->e, KIND, c->path, 0, 0, "\"no_rope_layers\" is not every %d-th layer without RoPE (layer %d)",
                   cfg->nope_every, i);
            return err_hint(c->e, "dlm and llama.cpp run SmolLM3's periodic NoPE layers only");
        }
    }
    return 0;
}

/* Gemma2Config: the fields past the llama ones, with its defaults. */
static int parse_gemma2(const cfg_ctx *c, model_config *cfg)
{
    const json_t *root = c->root;
    const char *act = json_string_value(json_object_get(root, "hidden_activation"));
    if (!act) act = json_string_value(json_object_get(root, "hidden_act"));
    if (act && strcmp(act, "gelu_pytorch_tanh")) {
        err_at(c->e, KIND, c->path, 0, 0, "hidden_activation '%s' is not supported for gemma2", act);
        return err_hint(c->e, "Gemma 2 uses gelu_pytorch_tanh");
    }
    int b = 0;
    if (get_bool(c, root, "attention_bias", &b) < 0) return -1;
    if (b) return err_at(c->e, KIND, c->path, 0, 0, "attention_bias=true is not supported for gemma2");
    double qpas = 256, acap = 50.0, fcap = 30.0;
    if (get_num(c, root, "query_pre_attn_scalar", &qpas) < 0) return -1;
    if (!(qpas > 0 && qpas < 1e9))
        return err_at(c->e, KIND, c->path, 0, 0, "query_pre_attn_scalar = %g is out of range", qpas);
    /* null turns a cap off (Gemma2Attention tests `is not None`) */
    const json_t *j = json_object_get(root, "attn_logit_softcapping");
    if (j && json_is_null(j)) acap = 0;
    else if (get_num(c, root, "attn_logit_softcapping", &acap) < 0) return -1;
    j = json_object_get(root, "final_logit_softcapping");
    if (j && json_is_null(j)) fcap = 0;
    else if (get_num(c, root, "final_logit_softcapping", &fcap) < 0) return -1;
    if (!(acap >= 0 && acap < 1e6) || !(fcap >= 0 && fcap < 1e6))
        return err_at(c->e, KIND, c->path, 0, 0, "a logit soft-capping value is out of range");
    long long win = 4096;
    j = json_object_get(root, "sliding_window");
    if (j && json_is_null(j)) win = 0;
    else if (get_int(c, root, "sliding_window", &win) < 0) return -1;
    if (win < 0 || win > (1 << 24))
        return err_at(c->e, KIND, c->path, 0, 0, "sliding_window = %lld is out of range", win);
    /* layer_types (transformers >= 4.53): dlm and llama.cpp run the
     * alternation Gemma2Config writes by default, sliding on even layers */
    const json_t *lt = json_object_get(root, "layer_types");
    if (lt && !json_is_null(lt)) {
        if (!json_is_array(lt) || json_array_size(lt) != (size_t)cfg->n_layer)
            return err_at(c->e, KIND, c->path, 0, 0, "\"layer_types\" must name one type per layer (%d)",
                          cfg->n_layer);
        for (int i = 0; i < cfg->n_layer; i++) {
            const char *t = json_string_value(json_array_get(lt, (size_t)i));
            const char *want = i % 2 ? "full_attention" : "sliding_attention";
            if (!t || strcmp(t, want)) {
                err_at(c->e, KIND, c->path, 0, 0, "\"layer_types\"[%d] is not '%s'", i, want);
                return err_hint(c->e, "dlm and llama.cpp run Gemma 2's alternating sliding/full layers only");
            }
        }
    }
    cfg->sandwich = 1;
    cfg->post_norm = 1;
    cfg->act_gelu = 1;
    cfg->embd_scale = sqrtf((float)cfg->d_model);
    cfg->attn_scale = (float)(1.0 / sqrt(qpas));
    cfg->attn_softcap = (float)acap;
    cfg->final_softcap = (float)fcap;
    cfg->sliding_window = (int)win;
    cfg->swa_even = 1;
    return 0;
}

/* GemmaConfig (Gemma 1): hidden_act gelu_pytorch_tanh ("gelu", the
 * released configs' legacy value, means the same: GemmaConfig rewrites it);
 * no attention bias. */
static int parse_gemma(const cfg_ctx *c, model_config *cfg)
{
    const char *act = json_string_value(json_object_get(c->root, "hidden_act"));
    if (act && strcmp(act, "gelu_pytorch_tanh") && strcmp(act, "gelu")) {
        err_at(c->e, KIND, c->path, 0, 0, "hidden_act '%s' is not supported for gemma", act);
        return err_hint(c->e, "Gemma uses gelu_pytorch_tanh");
    }
    int b = 0;
    if (get_bool(c, c->root, "attention_bias", &b) < 0) return -1;
    if (b) return err_at(c->e, KIND, c->path, 0, 0, "attention_bias=true is not supported for gemma");
    int tied = cfg->tied;   /* tie_word_embeddings, read before */
    model_config_gemma(cfg);
    cfg->tied = tied;
    return 0;
}

/* PaliGemmaConfig (transformers models/paligemma/configuration_paligemma.py):
 * the language model is text_config (a GemmaConfig; PaliGemma 2's gemma2
 * text is refused), the tower vision_config (a SiglipVisionConfig, its
 * class defaults where a key is absent), image_token_index and
 * projection_dim at the top. Sets cfg's pali fields and returns the
 * text_config object (borrowed from root), NULL on error. */
static const json_t *parse_paligemma(const cfg_ctx *c, model_config *cfg)
{
    const json_t *root = c->root, *tc = json_object_get(root, "text_config"), *vc = json_object_get(root, "vision_config");
    if (!json_is_object(tc) || !json_is_object(vc)) {
        err_at(c->e, KIND, c->path, 0, 0, "a paligemma config needs \"text_config\" and \"vision_config\" objects");
        return NULL;
    }
    const char *tmt = json_string_value(json_object_get(tc, "model_type"));
    if (tmt && strcmp(tmt, "gemma")) {
        err_at(c->e, KIND, c->path, 0, 0, "PaliGemma with a '%s' language model is not supported", tmt);
        err_hint(c->e, "dlm runs PaliGemma (1): a Gemma text_config (paligemma-3b-mix-224)");
        return NULL;
    }
    const char *vmt = json_string_value(json_object_get(vc, "model_type"));
    if (vmt && strcmp(vmt, "siglip_vision_model")) {
        err_at(c->e, KIND, c->path, 0, 0, "vision_config model_type '%s' is not supported (siglip_vision_model)", vmt);
        return NULL;
    }
    long long v[8] = {256000, 2048, 12, 768, 12, 3072, 224, 16};   /* PaliGemmaConfig / SiglipVisionConfig defaults */
    static const char *const keys[8] = {"image_token_index", "projection_dim", "num_hidden_layers", "hidden_size",
                                        "num_attention_heads", "intermediate_size", "image_size", "patch_size"};
    for (int i = 0; i < 8; i++) {
        if (get_int(c, i < 2 ? root : vc, keys[i], &v[i]) < 0) return NULL;
        if (v[i] < (i ? 1 : 0) || v[i] > (1 << 22)) {
            err_at(c->e, KIND, c->path, 0, 0, "\"%s\" = %lld is out of range", keys[i], v[i]);
            return NULL;
        }
    }
    long long ch = 3;
    double eps = 1e-6;
    const char *act = json_string_value(json_object_get(vc, "hidden_act"));
    if (get_int(c, vc, "num_channels", &ch) < 0 || get_num(c, vc, "layer_norm_eps", &eps) < 0) return NULL;
    if (ch != 3 || eps != 1e-6 || (act && strcmp(act, "gelu_pytorch_tanh"))) {
        err_at(c->e, KIND, c->path, 0, 0, "vision_config: dlm's SigLIP takes 3 channels, layer_norm_eps 1e-6 and "
                                          "gelu_pytorch_tanh");
        return NULL;
    }
    if (v[6] % v[7] || v[3] % v[4]) {
        err_at(c->e, KIND, c->path, 0, 0, "vision_config: image_size %lld is not a multiple of patch_size %lld, "
               "or hidden_size %lld of the %lld heads", v[6], v[7], v[3], v[4]);
        return NULL;
    }
    cfg->pali = 1;
    cfg->vl = VL_PALI;
    cfg->image_id = (int)v[0];
    cfg->pali_image_id = (int)v[0];
    cfg->pali_proj = (int)v[1];
    cfg->pali_vis.layers = (int)v[2];
    cfg->pali_vis.hidden = (int)v[3];
    cfg->pali_vis.heads = (int)v[4];
    cfg->pali_vis.mlp_hidden = (int)v[5];
    cfg->pali_vis.image_size = (int)v[6];
    cfg->pali_vis.patch = (int)v[7];
    cfg->pali_tokens = (int)((v[6] / v[7]) * (v[6] / v[7]));
    return tc;
}

static int is_paligemma(const json_t *root)
{
    const char *mt = json_string_value(json_object_get(root, "model_type"));
    const json_t *a = json_object_get(root, "architectures");
    const char *a0 = json_is_array(a) ? json_string_value(json_array_get(a, 0)) : NULL;
    return (mt && !strcmp(mt, "paligemma")) || (a0 && !strcmp(a0, "PaliGemmaForConditionalGeneration"));
}

static int detect_arch(const cfg_ctx *c, model_config *cfg, int *mistral)
{
    const json_t *archs = json_object_get(c->root, "architectures");
    const char *first = NULL;
    if (json_is_array(archs)) {
        size_t i;
        const json_t *a;
        json_array_foreach(archs, i, a) {
            const char *s = json_string_value(a);
            if (!s) continue;
            if (!first) first = s;
            if (!strcmp(s, "LlamaForCausalLM")) { cfg->arch = ARCH_LLAMA; return 0; }
            /* mistral: the llama layer (llama.cpp converts it as llama) with a sliding window */
            if (!strcmp(s, "MistralForCausalLM")) { cfg->arch = ARCH_LLAMA; *mistral = 1; return 0; }
            /* mixtral: mistral's layer with a sparse MoE block (llama.cpp: llama with experts) */
            if (!strcmp(s, "MixtralForCausalLM")) { cfg->arch = ARCH_LLAMA; *mistral = 2; return 0; }
            if (!strcmp(s, "Qwen2ForCausalLM")) { cfg->arch = ARCH_QWEN2; return 0; }
            if (!strcmp(s, "Qwen3ForCausalLM")) { cfg->arch = ARCH_QWEN3; return 0; }
            if (!strcmp(s, "Olmo2ForCausalLM")) { cfg->arch = ARCH_OLMO2; return 0; }
            if (!strcmp(s, "SmolLM3ForCausalLM")) { cfg->arch = ARCH_SMOLLM3; return 0; }
            if (!strcmp(s, "Gemma2ForCausalLM")) { cfg->arch = ARCH_GEMMA2; return 0; }
            if (!strcmp(s, "GemmaForCausalLM")) { cfg->arch = ARCH_GEMMA; return 0; }
            if (!strcmp(s, "Phi3ForCausalLM")) { cfg->arch = ARCH_PHI3; return 0; }
            if (!strcmp(s, "Qwen2VLForConditionalGeneration")) { cfg->arch = ARCH_QWEN2; cfg->vl = VL_QWEN2; return 0; }
        }
    }
    const char *mt = json_string_value(json_object_get(c->root, "model_type"));
    if (!first && mt) {
        if (!strcmp(mt, "llama")) { cfg->arch = ARCH_LLAMA; return 0; }
        if (!strcmp(mt, "mistral")) { cfg->arch = ARCH_LLAMA; *mistral = 1; return 0; }
        if (!strcmp(mt, "mixtral")) { cfg->arch = ARCH_LLAMA; *mistral = 2; return 0; }
        if (!strcmp(mt, "qwen2")) { cfg->arch = ARCH_QWEN2; return 0; }
        if (!strcmp(mt, "qwen3")) { cfg->arch = ARCH_QWEN3; return 0; }
        if (!strcmp(mt, "olmo2")) { cfg->arch = ARCH_OLMO2; return 0; }
        if (!strcmp(mt, "smollm3")) { cfg->arch = ARCH_SMOLLM3; return 0; }
        if (!strcmp(mt, "gemma2")) { cfg->arch = ARCH_GEMMA2; return 0; }
        if (!strcmp(mt, "gemma")) { cfg->arch = ARCH_GEMMA; return 0; }
        if (!strcmp(mt, "phi3")) { cfg->arch = ARCH_PHI3; return 0; }
        if (!strcmp(mt, "qwen2_vl")) { cfg->arch = ARCH_QWEN2; cfg->vl = VL_QWEN2; return 0; }
    }
    err_at(c->e, "UnsupportedArchitectureError", c->path, 0, 0, "unsupported architecture '%s'",
           first ? first : mt ? mt : "(none given)");
    return err_hint(c->e, "supported: LlamaForCausalLM (model_type llama), MistralForCausalLM (mistral), "
                          "MixtralForCausalLM (mixtral), "
                          "Qwen2ForCausalLM (qwen2), Qwen3ForCausalLM (qwen3), Olmo2ForCausalLM (olmo2), "
                          "SmolLM3ForCausalLM (smollm3), GemmaForCausalLM (gemma), Gemma2ForCausalLM (gemma2), "
                          "Phi3ForCausalLM (phi3), Qwen2VLForConditionalGeneration (qwen2_vl), "
                          "PaliGemmaForConditionalGeneration (paligemma)");
}

/* MixtralConfig (transformers models/mixtral/configuration_mixtral.py):
 * num_local_experts (8), num_experts_per_tok (2), rope_theta 1e6 when
 * absent (max_position_embeddings 4096·32 as MistralConfig's). router_jitter_noise
 * (training-time input noise) is refused rather than ignored; the router's
 * auxiliary load-balancing loss only changes the router, which dlm does
 * not train. */
static int parse_moe(const cfg_ctx *c, model_config *cfg)
{
    cfg->n_expert = 8;
    cfg->n_expert_used = 2;
    if (opt_dim(c, "num_local_experts", 256, &cfg->n_expert) || opt_dim(c, "num_experts_per_tok", 256, &cfg->n_expert_used))
        return -1;
    if (cfg->n_expert_used > cfg->n_expert)
        return err_at(c->e, KIND, c->path, 0, 0, "num_experts_per_tok %d is more than num_local_experts %d",
                      cfg->n_expert_used, cfg->n_expert);
    if (cfg->n_expert_used > MODEL_MAX_EXPERT_USED)
        return err_at(c->e, KIND, c->path, 0, 0, "num_experts_per_tok %d is more than dlm supports (%d)",
                      cfg->n_expert_used, MODEL_MAX_EXPERT_USED);
    double jit = 0;
    if (get_num(c, c->root, "router_jitter_noise", &jit) < 0) return -1;
    if (jit != 0) {
        err_at(c->e, KIND, c->path, 0, 0, "router_jitter_noise = %g is not supported", jit);
        return err_hint(c->e, "dlm trains Mixtral's attention adapters with the router as released (0)");
    }
    const json_t *rp = json_object_get(c->root, "rope_parameters");
    if (!json_object_get(c->root, "rope_theta") && !(json_is_object(rp) && json_object_get(rp, "rope_theta")))
        cfg->rope_theta = 1e6f;
    return 0;
}

/* Qwen2AudioConfig (transformers models/qwen2_audio): the language model
 * is text_config, a Qwen2Config whose hub copy keeps only what differs from
 * Qwen2Config's defaults (Qwen2-Audio-7B's has no hidden_size or layer
 * count), so the defaults are filled in here as transformers fills them;
 * the encoder's audio_config is read by vision/qwen2audio.h. The text
 * config replaces *root (its dtype from the outer one when it has none). */
static int unwrap_qwen2_audio(json_t **root, const char *path, model_config *cfg, dlm_err *e)
{
    json_t *r = *root;
    const char *mt = json_string_value(json_object_get(r, "model_type"));
    int is = mt && !strcmp(mt, "qwen2_audio");
    const json_t *archs = json_object_get(r, "architectures");
    for (size_t i = 0; json_is_array(archs) && i < json_array_size(archs); i++) {
        const char *a = json_string_value(json_array_get(archs, i));
        if (a && !strcmp(a, "Qwen2AudioForConditionalGeneration")) is = 1;
    }
    if (!is) return 0;
    const json_t *tc = json_object_get(r, "text_config");
    if (tc && !json_is_null(tc) && !json_is_object(tc))
        return err_at(e, KIND, path, 0, 0, "Qwen2-Audio's \"text_config\" is not an object");
    const char *tmt = tc ? json_string_value(json_object_get(tc, "model_type")) : NULL;
    if (tmt && strcmp(tmt, "qwen2")) {
        err_at(e, KIND, path, 0, 0, "Qwen2-Audio's text_config.model_type is '%s'", tmt);
        return err_hint(e, "dlm runs Qwen2-Audio with its Qwen2 language model (model_type qwen2)");
    }
    long long tok = 151646;   /* Qwen2AudioConfig's audio_token_index */
    const json_t *t = json_object_get(r, "audio_token_index");
    if (!t) t = json_object_get(r, "audio_token_id");
    if (t && !json_is_null(t)) {
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= (1 << 22))
            return err_at(e, KIND, path, 0, 0, "audio_token_index is not a token id");
        tok = json_integer_value(t);
    }
    json_t *n = json_is_object(tc) ? json_deep_copy(tc) : json_object();
    if (!n) return err_set(e, "MemoryError", "out of memory");
    static const struct { const char *k; long long v; } DEF[] = {
        {"vocab_size", 151936}, {"hidden_size", 4096}, {"intermediate_size", 22016},
        {"num_hidden_layers", 32}, {"num_attention_heads", 32},
    };
    for (size_t i = 0; i < sizeof DEF / sizeof *DEF; i++)
        if (!json_object_get(n, DEF[i].k)) json_object_set_new(n, DEF[i].k, json_integer(DEF[i].v));
    const json_t *kv = json_object_get(n, "num_key_value_heads");
    if (!kv || json_is_null(kv)) json_object_set(n, "num_key_value_heads", json_object_get(n, "num_attention_heads"));
    json_t *arch = json_array();
    json_array_append_new(arch, json_string("Qwen2ForCausalLM"));
    json_object_set_new(n, "architectures", arch);
    json_object_del(n, "model_type");
    const char *keys[] = {"dtype", "torch_dtype"};
    for (int i = 0; i < 2; i++)
        if (!json_object_get(n, keys[i]) && json_object_get(r, keys[i]))
            json_object_set(n, keys[i], json_object_get(r, keys[i]));
    json_decref(r);
    *root = n;
    cfg->audio = 1;
    cfg->audio_token = (int)tok;
    return 0;
}

int model_config_parse(const char *json_text, size_t len, const char *path, model_config *cfg, dlm_err *e)
{
    memset(cfg, 0, sizeof *cfg);
    json_error_t je;
    json_t *doc = json_loadb(json_text, len, JSON_REJECT_DUPLICATES, &je);
    const json_t *root = doc;   /* the language model's object (PaliGemma: text_config) */
    if (!doc)
        return err_at(e, KIND, path, je.line > 0 ? je.line : 0, je.column > 0 ? je.column : 0,
                      "invalid JSON: %s", je.text);
    int rc = -1;
    if (!json_is_object(root)) { err_at(e, KIND, path, 0, 0, "config is not a JSON object"); goto out; }
    if (unwrap_qwen2_audio(&doc, path, cfg, e)) goto out;   /* replaces doc with its text_config */
    root = doc;
    cfg_ctx c = {root, path, e};
    int mistral = 0;
    const json_t *top = root;
    if (is_paligemma(root)) {
        /* the language model's fields come from text_config, a Gemma */
        if (!(c.root = root = parse_paligemma(&c, cfg))) goto out;
        cfg->arch = ARCH_GEMMA;
    } else if (detect_arch(&c, cfg, &mistral)) goto out;
    /* transformers 5 nests a vision-language model's text fields */
    const json_t *tc = json_object_get(top, "text_config");
    if (cfg->vl == VL_QWEN2 && json_is_object(tc)) c.root = tc;

    if (need_dim(&c, "num_hidden_layers", 1024, &cfg->n_layer) ||
        need_dim(&c, "hidden_size", 1 << 17, &cfg->d_model) ||
        need_dim(&c, "intermediate_size", 1 << 20, &cfg->n_ff) ||
        need_dim(&c, "num_attention_heads", 1024, &cfg->n_head) ||
        need_dim(&c, "vocab_size", 1 << 22, &cfg->vocab))
        goto out;
    cfg->n_kv_head = cfg->n_head;
    if (opt_dim(&c, "num_key_value_heads", 1024, &cfg->n_kv_head)) goto out;
    if (cfg->n_head % cfg->n_kv_head) {
        err_at(e, KIND, path, 0, 0, "num_attention_heads %d is not a multiple of num_key_value_heads %d",
               cfg->n_head, cfg->n_kv_head);
        goto out;
    }
    if (cfg->d_model % cfg->n_head && !json_object_get(c.root, "head_dim")) {
        err_at(e, KIND, path, 0, 0, "hidden_size %d is not a multiple of num_attention_heads %d",
               cfg->d_model, cfg->n_head);
        goto out;
    }
    cfg->head_dim = cfg->arch == ARCH_GEMMA ? 256 : cfg->d_model / cfg->n_head;   /* GemmaConfig's default */
    if (opt_dim(&c, "head_dim", 4096, &cfg->head_dim)) goto out;
    if (cfg->head_dim % 2) {
        err_at(e, KIND, path, 0, 0, "head_dim %d is odd (RoPE rotates pairs)", cfg->head_dim);
        goto out;
    }
    cfg->max_pos = mistral ? 131072 : cfg->arch == ARCH_GEMMA2 || cfg->arch == ARCH_GEMMA ? 8192 : cfg->arch == ARCH_PHI3 ? 4096
                 : cfg->arch == ARCH_LLAMA || cfg->arch == ARCH_OLMO2 ? 2048 : 32768;
    if (opt_dim(&c, "max_position_embeddings", 1 << 24, &cfg->max_pos)) goto out;

    /* Olmo2Config and MixtralConfig vs the others' default */
    double eps = cfg->arch == ARCH_OLMO2 || cfg->arch == ARCH_PHI3 || mistral == 2 || cfg->vl == VL_QWEN2 ? 1e-5 : 1e-6;
    if (get_num(&c, c.root, "rms_norm_eps", &eps) < 0) goto out;
    if (!(eps > 0 && eps < 1)) { err_at(e, KIND, path, 0, 0, "rms_norm_eps = %g is out of range", eps); goto out; }
    cfg->rms_eps = (float)eps;
    if (cfg->arch == ARCH_PHI3 && parse_phi3(&c, cfg)) goto out;
    if (parse_rope(&c, cfg)) goto out;
    if (mistral == 2 && parse_moe(&c, cfg)) goto out;

    int tied = cfg->arch == ARCH_GEMMA2 || cfg->arch == ARCH_GEMMA;   /* Gemma(2)Config ties by default */
    if (get_bool(&c, c.root, "tie_word_embeddings", &tied) < 0) goto out;
    if (top != c.root && get_bool(&c, top, "tie_word_embeddings", &tied) < 0) goto out;   /* transformers 5 */
    cfg->tied = tied;

    const char *act = json_string_value(json_object_get(c.root, "hidden_act"));
    if (act && strcmp(act, "silu") && cfg->arch != ARCH_GEMMA2 && cfg->arch != ARCH_GEMMA) {
        err_at(e, KIND, path, 0, 0, "hidden_act '%s' is not supported (every architecture dlm runs uses silu)", act);
        goto out;
    }
    int b = 0;
    if (cfg->arch == ARCH_QWEN2) {
        /* Qwen2's q/k/v projections always carry a bias (not a config flag). */
        cfg->qkv_bias = 1;
        if (get_bool(&c, c.root, "use_sliding_window", &b) < 0) goto out;
        if (b) {
            err_at(e, KIND, path, 0, 0, "use_sliding_window=true is not supported");
            goto out;
        }
    } else if (cfg->arch == ARCH_QWEN3) {
        /* Qwen3Attention: q_norm/k_norm (RMSNorm over head_dim) always;
         * attention_bias would also put a bias on o_proj, which no released
         * Qwen3 has. */
        cfg->qk_norm = QK_NORM_HEAD;
        if (get_bool(&c, c.root, "attention_bias", &b) < 0) goto out;
        if (b) { err_at(e, KIND, path, 0, 0, "attention_bias=true is not supported for qwen3"); goto out; }
        if (get_bool(&c, c.root, "use_sliding_window", &b) < 0) goto out;
        if (b) { err_at(e, KIND, path, 0, 0, "use_sliding_window=true is not supported"); goto out; }
    } else if (cfg->arch == ARCH_OLMO2) {
        /* Olmo2DecoderLayer: q_norm / k_norm over the whole projection,
         * post_attention_layernorm and post_feedforward_layernorm on each
         * block's output, no norm before; attention_bias would bias o_proj too */
        cfg->qk_norm = QK_NORM_FULL;
        cfg->post_norm = 1;
        if (get_bool(&c, c.root, "attention_bias", &b) < 0) goto out;
        if (b) { err_at(e, KIND, path, 0, 0, "attention_bias=true is not supported for olmo2"); goto out; }
    } else if (cfg->arch == ARCH_SMOLLM3) {
        if (parse_nope(&c, cfg)) goto out;
        if (get_bool(&c, c.root, "use_sliding_window", &b) < 0) goto out;
        if (b) { err_at(e, KIND, path, 0, 0, "use_sliding_window=true is not supported"); goto out; }
        if (get_bool(&c, c.root, "attention_bias", &b) < 0) goto out;
        if (b) { err_at(e, KIND, path, 0, 0, "attention_bias=true is not supported for smollm3"); goto out; }
        if (get_bool(&c, c.root, "mlp_bias", &b) < 0) goto out;
        if (b) { err_at(e, KIND, path, 0, 0, "mlp_bias=true is not supported for smollm3"); goto out; }
    } else if (cfg->arch == ARCH_GEMMA2) {
        if (parse_gemma2(&c, cfg)) goto out;
    } else if (cfg->arch == ARCH_GEMMA) {
        if (parse_gemma(&c, cfg)) goto out;
    } else if (cfg->arch == ARCH_PHI3) {
        /* Phi3Attention: sliding_window (none when null); a window as long
         * as the context masks nothing */
        long long win = 0;
        if (get_int(&c, c.root, "sliding_window", &win) < 0) goto out;
        if (win < 0 || win > (1 << 24)) {
            err_at(e, KIND, path, 0, 0, "sliding_window = %lld is out of range", win);
            goto out;
        }
        cfg->sliding_window = win < cfg->max_pos ? (int)win : 0;
    } else if (mistral) {
        /* MistralConfig: sliding_window 4096 when the key is absent, none
         * when null; MixtralConfig: none either way */
        const json_t *sw = json_object_get(c.root, "sliding_window");
        long long win = sw || mistral == 2 ? 0 : 4096;
        if (sw && get_int(&c, c.root, "sliding_window", &win) < 0) goto out;
        if (win < 0 || win > (1 << 24)) {
            err_at(e, KIND, path, 0, 0, "sliding_window = %lld is out of range", win);
            goto out;
        }
        cfg->sliding_window = (int)win;
    } else {
        if (get_bool(&c, c.root, "attention_bias", &b) < 0) goto out;
        if (b) { err_at(e, KIND, path, 0, 0, "attention_bias=true is not supported for llama"); goto out; }
        if (get_bool(&c, c.root, "mlp_bias", &b) < 0) goto out;
        if (b) { err_at(e, KIND, path, 0, 0, "mlp_bias=true is not supported for llama"); goto out; }
    }
    if (get_token_ids(&c, "bos_token_id", &cfg->bos_id, NULL, 0, NULL) ||
        get_token_ids(&c, "eos_token_id", &cfg->eos_id, cfg->eos_ids, 8, &cfg->n_eos))
        goto out;
    if (cfg->vl == VL_QWEN2 && parse_qwen2vl(&c, top, cfg)) goto out;
    if (cfg->pali) {
        /* PaliGemma: the ids sit at the top level too; GemmaConfig's 2 / 1 without either */
        cfg_ctx tp = {top, path, e};
        if (cfg->bos_id < 0 && get_token_ids(&tp, "bos_token_id", &cfg->bos_id, NULL, 0, NULL)) goto out;
        if (cfg->eos_id < 0 && get_token_ids(&tp, "eos_token_id", &cfg->eos_id, cfg->eos_ids, 8, &cfg->n_eos)) goto out;
        if (cfg->bos_id < 0) cfg->bos_id = 2;
        if (cfg->eos_id < 0) { cfg->eos_id = cfg->eos_ids[0] = 1; cfg->n_eos = 1; }
        if (cfg->pali_proj != cfg->d_model) {
            err_at(e, KIND, path, 0, 0, "projection_dim %d is not the language model's hidden_size %d", cfg->pali_proj,
                   cfg->d_model);
            goto out;
        }
    }
    const char *dt = json_string_value(json_object_get(c.root, "dtype"));
    if (!dt) dt = json_string_value(json_object_get(c.root, "torch_dtype"));
    if (!dt) dt = json_string_value(json_object_get(top, "dtype"));
    if (!dt) dt = json_string_value(json_object_get(top, "torch_dtype"));
    if (dt) snprintf(cfg->src_dtype, sizeof cfg->src_dtype, "%s", dt);
    rc = 0;
out:
    json_decref(doc);
    return rc;
}

void model_config_gemma(model_config *c)
{
    c->act_gelu = 1;
    c->tied = 1;
    c->embd_scale = sqrtf((float)c->d_model);
}

void model_config_gemma2(model_config *c)
{
    c->sandwich = c->post_norm = 1;
    c->act_gelu = 1;
    c->tied = 1;
    c->embd_scale = sqrtf((float)c->d_model);
    c->attn_scale = c->n_layer == 46 && c->n_head > 0 ? 1.0f / sqrtf((float)(c->d_model / c->n_head))
                                                      : 1.0f / sqrtf((float)c->head_dim);
    c->attn_softcap = 50.0f;
    c->final_softcap = 30.0f;
    c->sliding_window = 4096;
    c->swa_even = 1;
}

void model_rope_freqs(const model_config *cfg, double *inv_freq)
{
    model_rope_freqs_longrope(cfg, 0, inv_freq);
}

/* inv_freq[i] = 1 / theta^(2i/D) over the D = rope_dim rotary dims, then
 * llama3's per-frequency divisor (docs/reference/formats.md §1.4) or
 * LongRoPE's (1 / (factor·theta^(2i/D)) as transformers computes it), all in double. */
void model_rope_freqs_longrope(const model_config *cfg, int long_f, double *inv_freq)
{
    int D = model_rope_dim(cfg), half = D / 2;
    const double pi = 3.14159265358979323846;
    for (int i = 0; i < half; i++) {
        double f = 1.0 / pow((double)cfg->rope_theta, (double)(2 * i) / (double)D);
        if (cfg->n_rope_factors == half)
            f = 1.0 / ((double)(long_f ? cfg->rope_long[i] : cfg->rope_short[i]) *
                       pow((double)cfg->rope_theta, (double)(2 * i) / (double)D));
        if (cfg->rope_llama3) {
            double lo_wav = (double)cfg->rope_orig_ctx / cfg->rope_low_freq_factor;
            double hi_wav = (double)cfg->rope_orig_ctx / cfg->rope_high_freq_factor;
            double wavelen = 2.0 * pi / f;
            if (wavelen > lo_wav) {
                f /= cfg->rope_factor;
            } else if (wavelen >= hi_wav) {
                double smooth = ((double)cfg->rope_orig_ctx / wavelen - cfg->rope_low_freq_factor) /
                                ((double)cfg->rope_high_freq_factor - cfg->rope_low_freq_factor);
                f = (1.0 - smooth) * f / cfg->rope_factor + smooth * f;
            }
        }
        inv_freq[i] = f;
    }
}
