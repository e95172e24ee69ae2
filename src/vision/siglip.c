/* siglip — PaliGemma's SigLIP encoder and projector (vision/siglip.h). */
#include "vision/siglip.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vision/ops.h"

void siglip_free(siglip *s)
{
    free(s->patch_w); free(s->patch_b); free(s->pos);
    for (int i = 0; s->l && i < s->c.layers; i++) {
        siglip_layer *L = &s->l[i];
        float *p[] = {L->n1_w, L->n1_b, L->q_w, L->q_b, L->k_w, L->k_b, L->v_w, L->v_b, L->o_w, L->o_b,
                      L->n2_w, L->n2_b, L->fc1_w, L->fc1_b, L->fc2_w, L->fc2_b};
        for (size_t k = 0; k < sizeof p / sizeof *p; k++) free(p[k]);
    }
    free(s->l);
    free(s->post_w); free(s->post_b); free(s->proj_w); free(s->proj_b);
    memset(s, 0, sizeof *s);
}

int siglip_load(const st_file *f, const char *tower, const char *proj, const siglip_cfg *c, siglip *s, dlm_err *e)
{
    memset(s, 0, sizeof *s);
    s->c = *c;
    int64_t D = c->hidden, F = c->mlp_hidden, K = (int64_t)c->in_ch * c->patch * c->patch;
    int64_t np = (int64_t)(c->image_size / c->patch) * (c->image_size / c->patch);
    if (D % c->heads) return err_set(e, "ConfigError", "SigLIP hidden_size %lld is not a multiple of %d heads", (long long)D, c->heads);
    s->l = calloc((size_t)c->layers, sizeof *s->l);
    if (!s->l) return err_set(e, "MemoryError", "out of memory");
    if (!(s->patch_w = vis_tensor_f32(f, tower, "embeddings.patch_embedding.weight", D, K, e)) ||
        !(s->patch_b = vis_tensor_f32(f, tower, "embeddings.patch_embedding.bias", D, 1, e)) ||
        !(s->pos = vis_tensor_f32(f, tower, "embeddings.position_embedding.weight", np, D, e)))
        goto fail;
    for (int i = 0; i < c->layers; i++) {
        siglip_layer *L = &s->l[i];
        struct { float **dst; const char *name; int64_t n0, n1; } w[] = {
            {&L->n1_w, "layer_norm1.weight", D, 1}, {&L->n1_b, "layer_norm1.bias", D, 1},
            {&L->q_w, "self_attn.q_proj.weight", D, D}, {&L->q_b, "self_attn.q_proj.bias", D, 1},
            {&L->k_w, "self_attn.k_proj.weight", D, D}, {&L->k_b, "self_attn.k_proj.bias", D, 1},
            {&L->v_w, "self_attn.v_proj.weight", D, D}, {&L->v_b, "self_attn.v_proj.bias", D, 1},
            {&L->o_w, "self_attn.out_proj.weight", D, D}, {&L->o_b, "self_attn.out_proj.bias", D, 1},
            {&L->n2_w, "layer_norm2.weight", D, 1}, {&L->n2_b, "layer_norm2.bias", D, 1},
            {&L->fc1_w, "mlp.fc1.weight", F, D}, {&L->fc1_b, "mlp.fc1.bias", F, 1},
            {&L->fc2_w, "mlp.fc2.weight", D, F}, {&L->fc2_b, "mlp.fc2.bias", D, 1},
        };
        for (size_t k = 0; k < sizeof w / sizeof *w; k++) {
            char name[160];
            snprintf(name, sizeof name, "encoder.layers.%d.%s", i, w[k].name);
            if (!(*w[k].dst = vis_tensor_f32(f, tower, name, w[k].n0, w[k].n1, e))) goto fail;
        }
    }
    if (!(s->post_w = vis_tensor_f32(f, tower, "post_layernorm.weight", D, 1, e)) ||
        !(s->post_b = vis_tensor_f32(f, tower, "post_layernorm.bias", D, 1, e)) ||
        !(s->proj_w = vis_tensor_f32(f, proj, "weight", c->proj_dim, D, e)) ||
        !(s->proj_b = vis_tensor_f32(f, proj, "bias", c->proj_dim, 1, e)))
        goto fail;
    return 0;
fail:
    siglip_free(s);
    return -1;
}

int siglip_forward(const siglip *s, const float *pixels, float *out, dlm_err *e)
{
    const siglip_cfg *c = &s->c;
    int P = c->patch, G = c->image_size / P, H = c->heads;
    int64_t D = c->hidden, F = c->mlp_hidden, K = (int64_t)c->in_ch * P * P, N = (int64_t)G * G, hd = D / H;
    float *x = malloc((size_t)N * D * sizeof *x), *hb = malloc((size_t)N * D * sizeof *hb);
    float *q = malloc((size_t)N * D * sizeof *q), *k = malloc((size_t)N * D * sizeof *k), *v = malloc((size_t)N * D * sizeof *v);
    float *wide = malloc((size_t)N * (F > K ? F : K) * sizeof *wide), *sc = malloc((size_t)N * N * sizeof *sc);
    int rc = -1;
    if (!x || !hb || !q || !k || !v || !wide || !sc) { err_set(e, "MemoryError", "out of memory"); goto out; }
    /* patches [N][C][P][P] in row-major patch order, as Conv2d's output flattened */
    for (int gy = 0; gy < G; gy++)
        for (int gx = 0; gx < G; gx++) {
            float *o = wide + ((int64_t)gy * G + gx) * K;
            for (int ch = 0; ch < c->in_ch; ch++)
                for (int y = 0; y < P; y++) {
                    memcpy(o, pixels + ((int64_t)ch * c->image_size + gy * P + y) * c->image_size + (int64_t)gx * P,
                           (size_t)P * sizeof *o);
                    o += P;
                }
        }
    vis_linear(x, wide, s->patch_w, s->patch_b, N, K, D);
    for (int64_t i = 0; i < N * D; i++) x[i] += s->pos[i];
    float scale = (float)(1.0 / sqrt((double)hd));
    for (int l = 0; l < c->layers; l++) {
        const siglip_layer *L = &s->l[l];
        vis_layernorm(hb, x, L->n1_w, L->n1_b, N, D, 1e-6f);
        vis_linear(q, hb, L->q_w, L->q_b, N, D, D);
        vis_linear(k, hb, L->k_w, L->k_b, N, D, D);
        vis_linear(v, hb, L->v_w, L->v_b, N, D, D);
        vis_attention(wide, q, k, v, D, D, D, N, H, (int)hd, scale, sc);
        vis_linear(hb, wide, L->o_w, L->o_b, N, D, D);
        for (int64_t i = 0; i < N * D; i++) x[i] += hb[i];
        vis_layernorm(hb, x, L->n2_w, L->n2_b, N, D, 1e-6f);
        vis_linear(wide, hb, L->fc1_w, L->fc1_b, N, D, F);
        for (int64_t i = 0; i < N * F; i++) {   /* gelu_pytorch_tanh */
            float t = wide[i];
            wide[i] = 0.5f * t * (1.0f + tanhf(0.7978845608028654f * (t + 0.044715f * t * t * t)));
        }
        vis_linear(hb, wide, L->fc2_w, L->fc2_b, N, F, D);
        for (int64_t i = 0; i < N * D; i++) x[i] += hb[i];
    }
    vis_layernorm(hb, x, s->post_w, s->post_b, N, D, 1e-6f);
    vis_linear(out, hb, s->proj_w, s->proj_b, N, D, c->proj_dim);
    rc = 0;
out:
    free(x); free(hb); free(q); free(k); free(v); free(wide); free(sc);
    return rc;
}
