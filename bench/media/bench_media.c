/* bench_media — wall time of image_decode and proc_image (PaliGemma 224,
 * Qwen2-VL) on one file, best of R runs (bench/media/run.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "media/image.h"
#include "media/preprocess.h"
#include "util/fs.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 2) { fprintf(stderr, "usage: bench_media FILE [RUNS]\n"); return 2; }
    int runs = argc > 2 ? atoi(argv[2]) : 20;
    char *data;
    size_t n;
    dlm_err e;
    if (fs_read_all(argv[1], 1u << 30, &data, &n, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    double best[3] = {1e9, 1e9, 1e9};
    image_rgb im = {0};
    for (int r = 0; r < runs; r++) {
        double t0 = now();
        if (image_decode((const uint8_t *)data, n, &im, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
        double t1 = now();
        proc_out po;
        if (proc_image(&im, &PROC_PALIGEMMA_224, &po, &e)) return 1;
        double t2 = now();
        proc_out_free(&po);
        double t3 = now();
        if (proc_image(&im, &PROC_QWEN2_VL, &po, &e)) return 1;
        double t4 = now();
        proc_out_free(&po);
        if (r < runs - 1) image_free(&im);
        if (t1 - t0 < best[0]) best[0] = t1 - t0;
        if (t2 - t1 < best[1]) best[1] = t2 - t1;
        if (t4 - t3 < best[2]) best[2] = t4 - t3;
    }
    printf("%dx%d decode %.2f ms, paligemma-224 %.2f ms, qwen2-vl %.2f ms\n", im.w, im.h, best[0] * 1e3, best[1] * 1e3,
           best[2] * 1e3);
    image_free(&im);
    free(data);
    return 0;
}
