/* bench_vit — one Qwen2-VL-2B vision block (embed 1280, 16 heads, MLP 5120)
 * and the merger on N patches with random weights, 1 and 2 threads; the
 * tower's time is about depth (32) blocks (bench/media/run.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kern/kern.h"
#include "vision/qwen2vl_vit.h"

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

int main(int argc, char **argv)
{
    int gh = argc > 1 ? atoi(argv[1]) : 42, gw = argc > 2 ? atoi(argv[2]) : 36;
    vit_cfg c = {.depth = 1, .embed_dim = 1280, .heads = 16, .mlp_hidden = 5120, .in_ch = 3, .patch = 14,
                 .temporal = 2, .merge = 2, .hidden_size = 1536, .rope_theta = 10000};
    int64_t D = c.embed_dim, F = c.mlp_hidden, K = 1176, M = 4 * D;
    qwen2vl_vit v = {.c = c};
    v.patch_w = rnd((size_t)D * K, 0.05f, 0);
    v.blk = calloc(1, sizeof *v.blk);
    vit_block *b = v.blk;
    b->n1_w = rnd(D, 0.1f, 1); b->n1_b = rnd(D, 0.1f, 0); b->qkv_w = rnd(3 * D * D, 0.05f, 0); b->qkv_b = rnd(3 * D, 0.1f, 0);
    b->proj_w = rnd(D * D, 0.05f, 0); b->proj_b = rnd(D, 0.1f, 0); b->n2_w = rnd(D, 0.1f, 1); b->n2_b = rnd(D, 0.1f, 0);
    b->fc1_w = rnd(F * D, 0.05f, 0); b->fc1_b = rnd(F, 0.1f, 0); b->fc2_w = rnd(D * F, 0.05f, 0); b->fc2_b = rnd(D, 0.1f, 0);
    v.lnq_w = rnd(D, 0.1f, 1); v.lnq_b = rnd(D, 0.1f, 0); v.m0_w = rnd(M * M, 0.02f, 0); v.m0_b = rnd(M, 0.1f, 0);
    v.m2_w = rnd(1536 * M, 0.02f, 0); v.m2_b = rnd(1536, 0.1f, 0);
    int64_t N = (int64_t)gh * gw;
    float *px = rnd((size_t)N * K, 2.0f, 0), *out = malloc((size_t)N / 4 * 1536 * sizeof *out);
    int grid[1][3] = {{1, gh, gw}};
    dlm_err e;
    for (int th = 1; th <= 2; th++) {
        kern_init(th);
        double best = 1e9;
        for (int r = 0; r < 3; r++) {
            double t0 = now();
            if (qwen2vl_vit_forward(&v, px, (const int (*)[3])grid, 1, out, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
            if (now() - t0 < best) best = now() - t0;
        }
        printf("%lld patches, %d thread(s): patch embed + 1 block + merger %.0f ms\n", (long long)N, th, best * 1e3);
        kern_shutdown();
    }
    return 0;
}
