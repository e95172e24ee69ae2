/* qwen2vl_vit — Qwen2-VL's vision tower forward (vision/qwen2vl_vit.h). */
#include "vision/qwen2vl_vit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"
#include "vision/ops.h"

/* ---- weights ---------------------------------------------------------------------- */

void qwen2vl_vit_free(qwen2vl_vit *v)
{
    free(v->patch_w);
    for (int l = 0; v->blk && l < v->c.depth; l++) {
        vit_block *b = &v->blk[l];
        float *p[] = {b->n1_w, b->n1_b, b->qkv_w, b->qkv_b, b->proj_w, b->proj_b,
                      b->n2_w, b->n2_b, b->fc1_w, b->fc1_b, b->fc2_w, b->fc2_b};
        for (size_t i = 0; i < sizeof p / sizeof *p; i++) free(p[i]);
    }
    free(v->blk);
    free(v->lnq_w); free(v->lnq_b); free(v->m0_w); free(v->m0_b); free(v->m2_w); free(v->m2_b);
    memset(v, 0, sizeof *v);
}

int qwen2vl_vit_load(const st_file *f, const char *prefix, const vit_cfg *c, qwen2vl_vit *v, dlm_err *e)
{
    memset(v, 0, sizeof *v);
    v->c = *c;
    int64_t D = c->embed_dim, F = c->mlp_hidden, K = (int64_t)c->in_ch * c->temporal * c->patch * c->patch;
    int64_t M = D * c->merge * c->merge;
    if (D % c->heads || (D / c->heads) % 4) return err_set(e, "ConfigError", "vision embed_dim %lld / %d heads: head_dim must be a multiple of 4", (long long)D, c->heads);
    v->blk = calloc((size_t)c->depth, sizeof *v->blk);
    if (!v->blk) return err_set(e, "MemoryError", "out of memory");
    if (!(v->patch_w = vis_tensor_f32(f, prefix, "patch_embed.proj.weight", D, K, e))) goto fail;
    for (int l = 0; l < c->depth; l++) {
        vit_block *b = &v->blk[l];
        struct { float **dst; const char *name; int64_t n0, n1; } w[] = {
            {&b->n1_w, "norm1.weight", D, 1}, {&b->n1_b, "norm1.bias", D, 1},
            {&b->qkv_w, "attn.qkv.weight", 3 * D, D}, {&b->qkv_b, "attn.qkv.bias", 3 * D, 1},
            {&b->proj_w, "attn.proj.weight", D, D}, {&b->proj_b, "attn.proj.bias", D, 1},
            {&b->n2_w, "norm2.weight", D, 1}, {&b->n2_b, "norm2.bias", D, 1},
            {&b->fc1_w, "mlp.fc1.weight", F, D}, {&b->fc1_b, "mlp.fc1.bias", F, 1},
            {&b->fc2_w, "mlp.fc2.weight", D, F}, {&b->fc2_b, "mlp.fc2.bias", D, 1},
        };
        for (size_t i = 0; i < sizeof w / sizeof *w; i++) {
            char name[128];
            snprintf(name, sizeof name, "blocks.%d.%s", l, w[i].name);
            if (!(*w[i].dst = vis_tensor_f32(f, prefix, name, w[i].n0, w[i].n1, e))) goto fail;
        }
    }
    if (!(v->lnq_w = vis_tensor_f32(f, prefix, "merger.ln_q.weight", D, 1, e)) ||
        !(v->lnq_b = vis_tensor_f32(f, prefix, "merger.ln_q.bias", D, 1, e)) ||
        !(v->m0_w = vis_tensor_f32(f, prefix, "merger.mlp.0.weight", M, M, e)) ||
        !(v->m0_b = vis_tensor_f32(f, prefix, "merger.mlp.0.bias", M, 1, e)) ||
        !(v->m2_w = vis_tensor_f32(f, prefix, "merger.mlp.2.weight", c->hidden_size, M, e)) ||
        !(v->m2_b = vis_tensor_f32(f, prefix, "merger.mlp.2.bias", c->hidden_size, 1, e)))
        goto fail;
    return 0;
fail:
    qwen2vl_vit_free(v);
    return -1;
}

/* ---- forward ---------------------------------------------------------------------- */

/* x[N][H][hd]: rotate_half rotary with per-row cos/sin [N][hd] */
static void rotary(float *x, const float *cs, const float *sn, int64_t N, int H, int hd, int64_t stride)
{
    int half = hd / 2;
    for (int64_t n = 0; n < N; n++)
        for (int h = 0; h < H; h++) {
            float *q = x + n * stride + (int64_t)h * hd;
            const float *c = cs + n * hd, *s = sn + n * hd;
            for (int i = 0; i < half; i++) {
                float a = q[i], b2 = q[i + half];
                q[i] = a * c[i] - b2 * s[i];
                q[i + half] = b2 * c[i + half] + a * s[i + half];
            }
        }
}

int qwen2vl_vit_forward(const qwen2vl_vit *v, const float *pixels, const int (*grid)[3], int n_images, float *out,
                        dlm_err *e)
{
    const vit_cfg *c = &v->c;
    int64_t D = c->embed_dim, F = c->mlp_hidden, H = c->heads, hd = D / H, K = (int64_t)c->in_ch * c->temporal * c->patch * c->patch;
    int m = c->merge;
    int64_t N = 0;
    for (int i = 0; i < n_images; i++) {
        if (grid[i][0] < 1 || grid[i][1] % m || grid[i][2] % m)
            return err_set(e, "ImageError", "image grid (%d, %d, %d) is not a multiple of the merge size %d", grid[i][0],
                           grid[i][1], grid[i][2], m);
        N += (int64_t)grid[i][0] * grid[i][1] * grid[i][2];
    }
    size_t big = (size_t)N * (size_t)(3 * D > F ? 3 * D : F);
    float *x = malloc((size_t)N * D * sizeof *x), *hbuf = malloc((size_t)N * D * sizeof *hbuf);
    float *wide = malloc(big * sizeof *wide), *att = malloc((size_t)N * D * sizeof *att);
    float *cs = malloc((size_t)N * hd * sizeof *cs), *sn = malloc((size_t)N * hd * sizeof *sn);
    int64_t maxseg = 0;
    for (int i = 0; i < n_images; i++)
        if ((int64_t)grid[i][1] * grid[i][2] > maxseg) maxseg = (int64_t)grid[i][1] * grid[i][2];
    float *sc = malloc((size_t)maxseg * maxseg * sizeof *sc);
    if (!x || !hbuf || !wide || !att || !cs || !sn || !sc) {
        free(x); free(hbuf); free(wide); free(att); free(cs); free(sn); free(sc);
        return err_set(e, "MemoryError", "out of memory for %lld vision patches", (long long)N);
    }
    /* patch embedding: Conv3d with kernel = stride is one matmul per row */
    vis_linear(x, pixels, v->patch_w, NULL, N, K, D);
    /* rotary angles: rows in merge order, (h, w) = (bh*m + mh, bw*m + mw);
     * angle j < hd/4 uses h, the next hd/4 use w, then both again */
    int q4 = (int)hd / 4;
    int64_t r = 0;
    for (int i = 0; i < n_images; i++)
        for (int t = 0; t < grid[i][0]; t++)
            for (int bh = 0; bh < grid[i][1] / m; bh++)
                for (int bw = 0; bw < grid[i][2] / m; bw++)
                    for (int mh = 0; mh < m; mh++)
                        for (int mw = 0; mw < m; mw++, r++) {
                            float ph = (float)(bh * m + mh), pw = (float)(bw * m + mw);
                            for (int j = 0; j < q4; j++) {
                                /* inv_freq in float32 as torch: 1 / theta^(2j / (hd/2)) */
                                float inv = (float)(1.0 / pow(c->rope_theta, (double)(float)(2 * j) / (double)(hd / 2)));
                                float ah = ph * inv, aw = pw * inv;
                                float ch = cosf(ah), shh = sinf(ah), cw = cosf(aw), sw = sinf(aw);
                                for (int rep = 0; rep < 2; rep++) {
                                    cs[r * hd + rep * 2 * q4 + j] = ch; sn[r * hd + rep * 2 * q4 + j] = shh;
                                    cs[r * hd + rep * 2 * q4 + q4 + j] = cw; sn[r * hd + rep * 2 * q4 + q4 + j] = sw;
                                }
                            }
                        }
    float scale = (float)(1.0 / sqrt((double)hd));
    for (int l = 0; l < c->depth; l++) {
        const vit_block *b = &v->blk[l];
        vis_layernorm(hbuf, x, b->n1_w, b->n1_b, N, D, 1e-6f);
        vis_linear(wide, hbuf, b->qkv_w, b->qkv_b, N, D, 3 * D);   /* [N][3][H][hd] */
        rotary(wide, cs, sn, N, (int)H, (int)hd, 3 * D);
        rotary(wide + D, cs, sn, N, (int)H, (int)hd, 3 * D);
        /* full attention inside each frame of each image */
        int64_t s0 = 0;
        for (int i = 0; i < n_images; i++)
            for (int t = 0; t < grid[i][0]; t++) {
                int64_t L = (int64_t)grid[i][1] * grid[i][2];
                const float *q = wide + s0 * 3 * D;
                vis_attention(att + s0 * D, q, q + D, q + 2 * D, 3 * D, 3 * D, 3 * D, L, (int)H, (int)hd, scale, sc);
                s0 += L;
            }
        vis_linear(hbuf, att, b->proj_w, b->proj_b, N, D, D);
        for (int64_t i = 0; i < N * D; i++) x[i] += hbuf[i];
        vis_layernorm(hbuf, x, b->n2_w, b->n2_b, N, D, 1e-6f);
        vis_linear(wide, hbuf, b->fc1_w, b->fc1_b, N, D, F);
        for (int64_t i = 0; i < N * F; i++) wide[i] = wide[i] / (1.0f + expf(-1.702f * wide[i]));   /* quick_gelu */
        vis_linear(hbuf, wide, b->fc2_w, b->fc2_b, N, F, D);
        for (int64_t i = 0; i < N * D; i++) x[i] += hbuf[i];
    }
    /* merger: LayerNorm per patch, then m*m consecutive rows as one */
    int64_t M = D * m * m, NM = N / (m * m);
    vis_layernorm(hbuf, x, v->lnq_w, v->lnq_b, N, D, 1e-6f);
    float *mid = realloc(att, (size_t)NM * M * sizeof *mid);
    if (!mid) { free(x); free(hbuf); free(wide); free(att); free(cs); free(sn); free(sc); return err_set(e, "MemoryError", "out of memory"); }
    vis_linear(mid, hbuf, v->m0_w, v->m0_b, NM, M, M);
    for (int64_t i = 0; i < NM * M; i++) mid[i] = 0.5f * mid[i] * (1.0f + erff(mid[i] * (float)M_SQRT1_2));
    vis_linear(out, mid, v->m2_w, v->m2_b, NM, M, c->hidden_size);
    free(x); free(hbuf); free(wide); free(mid); free(cs); free(sn); free(sc);
    return 0;
}
