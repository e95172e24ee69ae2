/* test_vision — the Qwen2-VL vision tower. Without arguments: the loader's
 * refusals. `test_vision --ref DIR` compares the forward pass with
 * transformers' Qwen2VisionTransformerPretrainedModel on a small random
 * config (tests/ref/media/vit_hf.py writes DIR; tests/ref/r1302-slow-vit-hf.sh). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kern/kern.h"
#include "util/fs.h"
#include "vision/qwen2vl_vit.h"

static const vit_cfg CFG = {.depth = 2, .embed_dim = 64, .heads = 4, .mlp_hidden = 128, .in_ch = 3, .patch = 14,
                            .temporal = 2, .merge = 2, .hidden_size = 48, .rope_theta = 10000.0};

static float *read_f32(const char *dir, const char *name, size_t *n)
{
    char p[4096], *buf = NULL;
    size_t len = 0;
    dlm_err e;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (fs_read_all(p, 1u << 30, &buf, &len, &e)) { fprintf(stderr, "%s\n", e.msg); return NULL; }
    *n = len / sizeof(float);
    return (float *)buf;
}

static int ref_mode(const char *dir)
{
    dlm_err e;
    char p[4096];
    snprintf(p, sizeof p, "%s/vit.safetensors", dir);
    st_file *f = NULL;
    CHECK(st_open(p, &f, &e) == 0);
    if (!f) return check_done();
    qwen2vl_vit v;
    int rc = qwen2vl_vit_load(f, "", &CFG, &v, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    int grid[8][3], ng = 0;
    snprintf(p, sizeof p, "%s/grid.txt", dir);
    FILE *g = fopen(p, "r");
    CHECK(g != NULL);
    while (g && ng < 8 && fscanf(g, "%d %d %d", &grid[ng][0], &grid[ng][1], &grid[ng][2]) == 3) ng++;
    if (g) fclose(g);
    size_t np = 0, no = 0;
    float *px = read_f32(dir, "pixels.f32", &np), *want = read_f32(dir, "out.f32", &no);
    CHECK(px && want && ng == 2);
    if (!rc && px && want) {
        float *got = calloc(no, sizeof *got);
        CHECK(qwen2vl_vit_forward(&v, px, (const int (*)[3])grid, ng, got, &e) == 0);
        CHECK(check_tensor("vit pooler_output", got, want, no, 1e-4));
        double mx = 0;
        for (size_t i = 0; i < no; i++) mx = fmax(mx, fabs((double)got[i] - want[i]));
        printf("test_vision --ref: %zu outputs, max|diff| %.3g\n", no, mx);
        CHECK(mx <= 1e-4);
        free(got);
        qwen2vl_vit_free(&v);
    }
    free(px);
    free(want);
    st_close(f);
    return check_done();
}

int main(int argc, char **argv)
{
    kern_init(1);
    if (argc == 3 && !strcmp(argv[1], "--ref")) return ref_mode(argv[2]);
    /* a weights file without the tower: the first missing tensor is named */
    st_out t = {.name = "other.weight", .dtype = ST_F32, .ndim = 1, .shape = {1}, .data = "\0\0\0\0"};
    const char *dir = check_tmpdir("vision");
    char p[4096];
    snprintf(p, sizeof p, "%s/x.safetensors", dir);
    dlm_err e;
    CHECK(st_write(p, &t, 1, NULL, &e) == 0);
    st_file *f = NULL;
    CHECK(st_open(p, &f, &e) == 0);
    qwen2vl_vit v;
    CHECK(f && qwen2vl_vit_load(f, "visual.", &CFG, &v, &e) != 0);
    CHECK_MSG(strstr(e.msg, "'visual.patch_embed.proj.weight' is missing") != NULL, "%s", e.msg);
    st_close(f);
    return check_done();
}
