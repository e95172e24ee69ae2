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
#include "vision/mrope.h"
#include "vision/qwen2vl_vit.h"
#include "vision/siglip.h"

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

/* --mrope DIR: positions equal, cos/sin and the rotated q within 1e-5 */
static int mrope_mode(const char *dir)
{
    int H, HS, sec[3], img;
    double theta;
    char p[4096];
    snprintf(p, sizeof p, "%s/cfg.txt", dir);
    FILE *f = fopen(p, "r");
    CHECK(f && fscanf(f, "%d %d %lf %d %d %d %d", &H, &HS, &theta, &sec[0], &sec[1], &sec[2], &img) == 7);
    if (f) fclose(f);
    long long want_delta = 0;
    snprintf(p, sizeof p, "%s/delta.txt", dir);
    f = fopen(p, "r");
    CHECK(f && fscanf(f, "%lld", &want_delta) == 1);
    if (f) fclose(f);
    size_t ni = 0, np = 0, nc = 0, ns = 0, nq = 0, nr = 0;
    int32_t *ids = (int32_t *)read_f32(dir, "ids.i32", &ni), *wpos = (int32_t *)read_f32(dir, "pos.i32", &np);
    float *wcos = read_f32(dir, "cos.f32", &nc), *wsin = read_f32(dir, "sin.f32", &ns);
    float *q = read_f32(dir, "q.f32", &nq), *qr = read_f32(dir, "q_rot.f32", &nr);
    int64_t N = (int64_t)ni;
    CHECK(ids && wpos && wcos && wsin && q && qr && np == 3 * ni && nc == ni * HS && nq == ni * H * HS);
    if (!(ids && wpos && wcos && wsin && q && qr)) return check_done();
    const int grid[2][3] = {{1, 6, 6}, {1, 2, 14}};
    int32_t *pos = calloc(3 * ni, sizeof *pos);
    int64_t delta = 0;
    dlm_err e;
    CHECK(qwen2vl_rope_index(ids, N, img, grid, 2, 2, pos, &delta, &e) == 0);
    CHECK(!memcmp(pos, wpos, 3 * ni * sizeof *pos));
    CHECK_INT(delta, want_delta);
    double inv[512];
    for (int i = 0; i < HS / 2; i++) inv[i] = 1.0 / pow(theta, (double)(2 * i) / HS);
    float *cs = malloc(ni * HS / 2 * sizeof *cs), *sn = malloc(ni * HS / 2 * sizeof *sn);
    CHECK(qwen2vl_mrope_table(cs, sn, pos, N, HS, inv, sec, &e) == 0);
    double dc = 0;
    for (int64_t r = 0; r < N; r++)
        for (int j = 0; j < HS / 2; j++) {   /* transformers' table repeats its first half */
            dc = fmax(dc, fabs((double)cs[r * HS / 2 + j] - wcos[r * HS + j]));
            dc = fmax(dc, fabs((double)sn[r * HS / 2 + j] - wsin[r * HS + j]));
            dc = fmax(dc, fabs((double)cs[r * HS / 2 + j] - wcos[r * HS + HS / 2 + j]));
        }
    CHECK_MSG(dc <= 1e-5, "cos/sin max|diff| %.3g", dc);
    kern_rope_fwd_t(q, cs, sn, N, H, HS);
    CHECK(check_tensor("q rotated", q, qr, nq, 1e-5));
    printf("test_vision --mrope: %lld tokens, positions equal, delta %lld, cos/sin max|diff| %.3g\n", (long long)N,
           (long long)delta, dc);
    /* a run of image tokens that does not fit its grid is refused */
    CHECK(qwen2vl_rope_index(ids, N - 20, img, grid, 2, 2, pos, &delta, &e) != 0);
    free(ids); free(wpos); free(wcos); free(wsin); free(q); free(qr); free(pos); free(cs); free(sn);
    return check_done();
}

/* --siglip DIR: PaliGemma's get_image_features within 1e-4 */
static int siglip_mode(const char *dir)
{
    static const siglip_cfg SC = {.layers = 2, .hidden = 64, .heads = 4, .mlp_hidden = 96, .image_size = 56, .patch = 14,
                                  .in_ch = 3, .proj_dim = 48};
    dlm_err e;
    char p[4096];
    snprintf(p, sizeof p, "%s/siglip.safetensors", dir);
    st_file *f = NULL;
    CHECK(st_open(p, &f, &e) == 0);
    if (!f) return check_done();
    siglip s;
    int rc = siglip_load(f, "model.vision_tower.", "model.multi_modal_projector.linear.", &SC, &s, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    size_t np = 0, no = 0;
    float *px = read_f32(dir, "pixels.f32", &np), *want = read_f32(dir, "out.f32", &no);
    CHECK(px && want && np == 2 * 3 * 56 * 56 && no == 2 * 16 * 48);
    if (!rc && px && want && no == 2 * 16 * 48) {
        float got[2 * 16 * 48];
        for (int i = 0; i < 2; i++) CHECK(siglip_forward(&s, px + (size_t)i * 3 * 56 * 56, got + i * 16 * 48, &e) == 0);
        CHECK(check_tensor("paligemma image features", got, want, no, 1e-4));
        double mx = 0;
        for (size_t i = 0; i < no; i++) mx = fmax(mx, fabs((double)got[i] - want[i]));
        printf("test_vision --siglip: %zu outputs, max|diff| %.3g\n", no, mx);
        siglip_free(&s);
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
    if (argc == 3 && !strcmp(argv[1], "--mrope")) return mrope_mode(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "--siglip")) return siglip_mode(argv[2]);
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
