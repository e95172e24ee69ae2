/* qwen2audio — Qwen2-Audio's audio encoder and projector (vision/qwen2audio.h). */
#include "vision/qwen2audio.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/json.h"
#include "vision/ops.h"

int qwen2audio_cfg_load(const char *config_json, qwen2audio_cfg *c, dlm_err *e)
{
    memset(c, 0, sizeof *c);
    json_t *j = json_load_path(config_json, 1u << 22, e);
    if (!j) return -1;
    const json_t *a = json_object_get(j, "audio_config"), *t = json_object_get(j, "text_config");
    struct { const json_t *o; const char *sec, *key; int *dst; } k[] = {
        {a, "audio_config", "encoder_layers", &c->layers}, {a, "audio_config", "d_model", &c->d_model},
        {a, "audio_config", "encoder_attention_heads", &c->heads}, {a, "audio_config", "encoder_ffn_dim", &c->ffn},
        {a, "audio_config", "num_mel_bins", &c->n_mels}, {a, "audio_config", "max_source_positions", &c->max_pos},
        {t, "text_config", "hidden_size", &c->text_hidden},
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof k / sizeof *k && !rc; i++) {
        long long v;
        if (!json_is_object(k[i].o) || jget_int(k[i].o, k[i].key, &v) || v < 1 || v > 1 << 20)
            rc = err_set(e, "ConfigError", "%s: %s.%s is missing or not a positive integer", config_json, k[i].sec,
                         k[i].key);
        else
            *k[i].dst = (int)v;
    }
    json_decref(j);
    return rc;
}

void qwen2audio_cfg_7b(qwen2audio_cfg *c)
{
    *c = (qwen2audio_cfg){.layers = 32, .d_model = 1280, .heads = 20, .ffn = 5120, .n_mels = 128, .max_pos = 1500,
                          .text_hidden = 4096};
}

void qwen2audio_plan_bytes(const qwen2audio_cfg *c, uint64_t *weights, uint64_t *scratch)
{
    uint64_t D = (uint64_t)c->d_model, F = (uint64_t)c->ffn, M = (uint64_t)c->n_mels, H = (uint64_t)c->text_hidden;
    uint64_t per = 4 * D * D + 2 * F * D + 8 * D + F;
    *weights = 4 * (D * M * 3 + D + D * D * 3 + D + (uint64_t)c->max_pos * D + (uint64_t)c->layers * per + 2 * D +
                    H * D + H);
    /* qwen2audio_forward at n_mel = 2·max_pos: cols, h1, x hb qq k v, wide, sc */
    uint64_t T = 2 * (uint64_t)c->max_pos, N = (T - 1) / 2 + 1, N1 = 2 * N + 1 < T ? 2 * N + 1 : T;
    uint64_t W = F > 3 * D ? F : 3 * D;
    if (3 * M > W) W = 3 * M;
    uint64_t out = (uint64_t)qwen2audio_out_len((int)T);
    *scratch = 4 * (N1 * W + N1 * D + 5 * N * D + N * W + N * N + M * T + out * H);
}

int qwen2audio_out_len(int n_mel)
{
    /* Python's floor division, as the processor computes it: 0 for 1 or 2 frames */
    int rows = (n_mel - 1) / 2 + 1;
    return rows < 2 ? 0 : (rows - 2) / 2 + 1;
}

void qwen2audio_free(qwen2audio_enc *q)
{
    free(q->c1_w); free(q->c1_b); free(q->c2_w); free(q->c2_b); free(q->pos);
    for (int i = 0; q->l && i < q->c.layers; i++) {
        qwen2audio_layer *L = &q->l[i];
        free(L->n1_w); free(L->n1_b); free(L->q_w); free(L->q_b); free(L->k_w); free(L->v_w); free(L->v_b);
        free(L->o_w); free(L->o_b); free(L->n2_w); free(L->n2_b); free(L->fc1_w); free(L->fc1_b); free(L->fc2_w);
        free(L->fc2_b);
    }
    free(q->l);
    free(q->ln_w); free(q->ln_b); free(q->proj_w); free(q->proj_b);
    memset(q, 0, sizeof *q);
}

int qwen2audio_load(const st_file *f, const char *tower, const char *proj, const qwen2audio_cfg *c, qwen2audio_enc *q,
                    dlm_err *e)
{
    memset(q, 0, sizeof *q);
    q->c = *c;
    int64_t D = c->d_model, F = c->ffn;
    if (c->heads < 1 || D % c->heads)
        return err_set(e, "ConfigError", "Qwen2-Audio d_model %lld is not a multiple of %d heads", (long long)D, c->heads);
    q->l = calloc((size_t)c->layers, sizeof *q->l);
    if (!q->l) return err_set(e, "MemoryError", "out of memory");
    if (!(q->c1_w = vis_tensor_f32(f, tower, "conv1.weight", D, (int64_t)c->n_mels * 3, e)) ||
        !(q->c1_b = vis_tensor_f32(f, tower, "conv1.bias", D, 1, e)) ||
        !(q->c2_w = vis_tensor_f32(f, tower, "conv2.weight", D, D * 3, e)) ||
        !(q->c2_b = vis_tensor_f32(f, tower, "conv2.bias", D, 1, e)) ||
        !(q->pos = vis_tensor_f32(f, tower, "embed_positions.weight", c->max_pos, D, e)))
        goto fail;
    for (int i = 0; i < c->layers; i++) {
        qwen2audio_layer *L = &q->l[i];
        struct { float **dst; const char *name; int64_t n0, n1; } w[] = {
            {&L->n1_w, "self_attn_layer_norm.weight", D, 1}, {&L->n1_b, "self_attn_layer_norm.bias", D, 1},
            {&L->q_w, "self_attn.q_proj.weight", D, D}, {&L->q_b, "self_attn.q_proj.bias", D, 1},
            {&L->k_w, "self_attn.k_proj.weight", D, D},
            {&L->v_w, "self_attn.v_proj.weight", D, D}, {&L->v_b, "self_attn.v_proj.bias", D, 1},
            {&L->o_w, "self_attn.out_proj.weight", D, D}, {&L->o_b, "self_attn.out_proj.bias", D, 1},
            {&L->n2_w, "final_layer_norm.weight", D, 1}, {&L->n2_b, "final_layer_norm.bias", D, 1},
            {&L->fc1_w, "fc1.weight", F, D}, {&L->fc1_b, "fc1.bias", F, 1},
            {&L->fc2_w, "fc2.weight", D, F}, {&L->fc2_b, "fc2.bias", D, 1},
        };
        for (size_t k = 0; k < sizeof w / sizeof *w; k++) {
            char name[160];
            snprintf(name, sizeof name, "layers.%d.%s", i, w[k].name);
            if (!(*w[k].dst = vis_tensor_f32(f, tower, name, w[k].n0, w[k].n1, e))) goto fail;
        }
    }
    if (!(q->ln_w = vis_tensor_f32(f, tower, "layer_norm.weight", D, 1, e)) ||
        !(q->ln_b = vis_tensor_f32(f, tower, "layer_norm.bias", D, 1, e)) ||
        !(q->proj_w = vis_tensor_f32(f, proj, "weight", c->text_hidden, D, e)) ||
        !(q->proj_b = vis_tensor_f32(f, proj, "bias", c->text_hidden, 1, e)))
        goto fail;
    return 0;
fail:
    qwen2audio_free(q);
    return -1;
}

/* torch's exact GELU, 0.5 x (1 + erf(x / sqrt 2)) */
static void gelu_erf(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

int qwen2audio_forward(const qwen2audio_enc *q, const float *mel, int n_mel, float *out, dlm_err *e)
{
    const qwen2audio_cfg *c = &q->c;
    int T = 2 * c->max_pos, M = c->n_mels, H = c->heads;
    if (n_mel < 1 || n_mel > T) return err_set(e, "ValueError", "Qwen2-Audio: %d mel frames (1..%d)", n_mel, T);
    int64_t D = c->d_model, F = c->ffn, hd = D / H;
    int64_t N = (n_mel - 1) / 2 + 1;          /* conv2's rows the clip covers */
    int64_t N1 = 2 * N + 1 < T ? 2 * N + 1 : T; /* conv1's rows they read */
    int n_out = qwen2audio_out_len(n_mel);
    int64_t K1 = (int64_t)M * 3, K2 = D * 3, W = F > K2 ? F : K2;
    if (K1 > W) W = K1;
    float *cols = malloc((size_t)N1 * W * sizeof *cols), *h1 = malloc((size_t)N1 * D * sizeof *h1);
    float *x = malloc((size_t)N * D * sizeof *x), *hb = malloc((size_t)N * D * sizeof *hb);
    float *qq = malloc((size_t)N * D * sizeof *qq), *k = malloc((size_t)N * D * sizeof *k), *v = malloc((size_t)N * D * sizeof *v);
    float *wide = malloc((size_t)N * W * sizeof *wide), *sc = malloc((size_t)N * N * sizeof *sc);
    int rc = -1;
    if (!cols || !h1 || !x || !hb || !qq || !k || !v || !wide || !sc) { err_set(e, "MemoryError", "out of memory"); goto out; }
    /* conv1 (k3, p1) as one matmul: cols[t][i·3 + j] = mel[i][t + j - 1], zero outside */
    for (int64_t t = 0; t < N1; t++)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < 3; j++) {
                int64_t s = t + j - 1;
                cols[t * K1 + i * 3 + j] = s >= 0 && s < T ? mel[(int64_t)i * T + s] : 0.0f;
            }
    vis_linear(h1, cols, q->c1_w, q->c1_b, N1, K1, D);
    gelu_erf(h1, N1 * D);
    /* conv2 (k3, s2, p1): row t reads conv1's rows 2t-1, 2t, 2t+1 (all < T) */
    for (int64_t t = 0; t < N; t++)
        for (int64_t i = 0; i < D; i++)
            for (int j = 0; j < 3; j++) {
                int64_t s = 2 * t + j - 1;
                cols[t * K2 + i * 3 + j] = s >= 0 && s < N1 ? h1[s * D + i] : 0.0f;
            }
    vis_linear(x, cols, q->c2_w, q->c2_b, N, K2, D);
    gelu_erf(x, N * D);
    for (int64_t i = 0; i < N * D; i++) x[i] += q->pos[i];
    float scale = (float)(1.0 / sqrt((double)hd));
    for (int l = 0; l < c->layers; l++) {
        const qwen2audio_layer *L = &q->l[l];
        vis_layernorm(hb, x, L->n1_w, L->n1_b, N, D, 1e-5f);
        vis_linear(qq, hb, L->q_w, L->q_b, N, D, D);
        vis_linear(k, hb, L->k_w, NULL, N, D, D);
        vis_linear(v, hb, L->v_w, L->v_b, N, D, D);
        vis_attention(wide, qq, k, v, D, D, D, N, H, (int)hd, scale, sc);
        vis_linear(hb, wide, L->o_w, L->o_b, N, D, D);
        for (int64_t i = 0; i < N * D; i++) x[i] += hb[i];
        vis_layernorm(hb, x, L->n2_w, L->n2_b, N, D, 1e-5f);
        vis_linear(wide, hb, L->fc1_w, L->fc1_b, N, D, F);
        gelu_erf(wide, N * F);
        vis_linear(hb, wide, L->fc2_w, L->fc2_b, N, F, D);
        for (int64_t i = 0; i < N * D; i++) x[i] += hb[i];
    }
    /* AvgPool1d(2, 2) over time, then the encoder's LayerNorm and the projector */
    for (int t = 0; t < n_out; t++)
        for (int64_t i = 0; i < D; i++) hb[t * D + i] = (x[2 * t * D + i] + x[(2 * t + 1) * D + i]) / 2.0f;
    vis_layernorm(qq, hb, q->ln_w, q->ln_b, n_out, D, 1e-5f);
    vis_linear(out, qq, q->proj_w, q->proj_b, n_out, D, c->text_hidden);
    rc = 0;
out:
    free(cols); free(h1); free(x); free(hb); free(qq); free(k); free(v); free(wide); free(sc);
    return rc;
}
