/* bench_siglip — PaliGemma-3B's image path at its real sizes, random
 * weights (bench/media/run.sh):
 *  - the SigLIP So400m/14 tower (hidden 1152, 16 heads, MLP 4304) with ONE
 *    encoder layer, plus the patch embedding, post_layernorm and the
 *    projector to 2048, on a 224x224 image (256 patches); the tower is 27
 *    layers;
 *  - the Gemma decoder's attention at PaliGemma's shape (8 heads, 1 kv
 *    head, head 256) over 256 image + 16 prompt tokens: the prefix-LM mask
 *    (attn_shape.prefix: 264 of 272 rows both ways) vs the causal mask, both
 *    through the tiled kernels,
 *    forward and backward of one layer. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kern/kern.h"
#include "vision/siglip.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static float *rnd(size_t n, float scale, float bias)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = bias + scale * ((float)rand() / RAND_MAX - 0.5f);
    return p;
}

int main(void)
{
    siglip_cfg c = {.layers = 1, .hidden = 1152, .heads = 16, .mlp_hidden = 4304, .image_size = 224, .patch = 14,
                    .in_ch = 3, .proj_dim = 2048};
    int64_t D = c.hidden, F = c.mlp_hidden, K = 3 * 14 * 14, N = 256;
    siglip s = {.c = c};
    s.patch_w = rnd((size_t)D * K, 0.05f, 0); s.patch_b = rnd(D, 0.1f, 0); s.pos = rnd((size_t)N * D, 0.1f, 0);
    s.l = calloc(1, sizeof *s.l);
    siglip_layer *L = s.l;
    L->n1_w = rnd(D, 0.1f, 1); L->n1_b = rnd(D, 0.1f, 0); L->n2_w = rnd(D, 0.1f, 1); L->n2_b = rnd(D, 0.1f, 0);
    L->q_w = rnd(D * D, 0.05f, 0); L->q_b = rnd(D, 0.1f, 0); L->k_w = rnd(D * D, 0.05f, 0); L->k_b = rnd(D, 0.1f, 0);
    L->v_w = rnd(D * D, 0.05f, 0); L->v_b = rnd(D, 0.1f, 0); L->o_w = rnd(D * D, 0.05f, 0); L->o_b = rnd(D, 0.1f, 0);
    L->fc1_w = rnd(F * D, 0.05f, 0); L->fc1_b = rnd(F, 0.1f, 0); L->fc2_w = rnd(D * F, 0.05f, 0); L->fc2_b = rnd(D, 0.1f, 0);
    s.post_w = rnd(D, 0.1f, 1); s.post_b = rnd(D, 0.1f, 0); s.proj_w = rnd(2048 * D, 0.02f, 0); s.proj_b = rnd(2048, 0.1f, 0);
    float *px = rnd(3 * 224 * 224, 2.0f, 0), *out = malloc((size_t)N * 2048 * sizeof *out);
    dlm_err e;
    for (int th = 1; th <= 2; th++) {
        kern_init(th);
        double best = 1e9;
        for (int r = 0; r < 3; r++) {
            double t0 = now();
            if (siglip_forward(&s, px, out, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
            if (now() - t0 < best) best = now() - t0;
        }
        printf("siglip 224 (256 patches), %d thread(s): patch embed + 1 layer + projector %.0f ms\n", th, best * 1e3);
        kern_shutdown();
    }
    /* one Gemma attention layer at PaliGemma's shape */
    enum { T = 272, NH = 8, KVH = 1, HS = 256 };
    int32_t prefix[1] = {T - 8};
    size_t nq = (size_t)T * NH * HS, nk = (size_t)T * KVH * HS;
    float *q = rnd(nq, 1, 0), *k = rnd(nk, 1, 0), *v = rnd(nk, 1, 0), *o = malloc(nq * 4), *lse = malloc(NH * T * 4);
    float *dq = malloc(nq * 4), *dk = malloc(nk * 4), *dv = malloc(nk * 4), *dout = rnd(nq, 1, 0);
    attn_shape as = {.B = 1, .Tq = T, .Tk = T, .NH = NH, .KVH = KVH, .HS = HS, .kv_bstride = (int64_t)T * KVH * HS};
    float *scr = malloc(kern_attn_bwd_scratch(&as) * 4);
    for (int th = 1; th <= 2; th++) {
        kern_init(th);
        for (int pm = 0; pm < 2; pm++) {
            as.prefix = pm ? prefix : NULL;
            double bf = 1e9, bb = 1e9;
            for (int r = 0; r < 5; r++) {
                double t0 = now();
                kern_attn_fwd(o, lse, q, k, v, &as, scr);
                double t1 = now();
                kern_attn_bwd(dq, dk, dv, dout, o, lse, q, k, v, &as, scr);
                double t2 = now();
                if (t1 - t0 < bf) bf = t1 - t0;
                if (t2 - t1 < bb) bb = t2 - t1;
            }
            printf("attention T %d, 8/1 heads of 256, %d thread(s), %s: forward %.2f ms, backward %.2f ms\n", T, th,
                   pm ? "prefix-LM block of 264" : "causal", bf * 1e3, bb * 1e3);
        }
        kern_shutdown();
    }
    return 0;
}
