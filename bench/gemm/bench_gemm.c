/* bench_gemm — GFLOPS of kern_matmul (weights in their stored type),
 * kern_matmul_dx and kern_sgemm on the matmul shapes of SmolLM2-135M and
 * Qwen2.5-0.5B, for a given thread count. Prints one line per case:
 *   RESULT <model> <name> <op> <type> N=<rows> O=<out> I=<in> threads=<t> gflops=<best> ms=<best>
 * Build: see run.sh (links build/libdlmcore.a).
 * usage: bench_gemm THREADS [MIN_SECONDS] [FILTER] [TYPES] [cpu]
 *   TYPES: comma-separated weight types to run (default all), e.g. F32,Q8_0
 *   cpu: time with the process CPU clock instead of the wall clock (with one
 *        thread this counts only the time the thread ran: robust on a
 *        machine shared with other jobs), and first print
 *   PEAK fma_fp32 threads=1 gflops=<best>
 *        the AVX-512 FMA peak (24 independent chains) timed the same way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kern/kern.h"

static clockid_t g_clock = CLOCK_MONOTONIC;

static double now(void)
{
    struct timespec t;
    clock_gettime(g_clock, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

#if defined(__x86_64__)
#include <immintrin.h>
/* The FMA peak of one thread: 24 independent FMA chains (more than
 * latency × ports), best of several bursts. */
__attribute__((target("avx512f,fma"))) static double fma_peak(void)
{
    __m512 acc[24];
    for (int i = 0; i < 24; i++) acc[i] = _mm512_set1_ps((float)i);
    const __m512 a = _mm512_set1_ps(1.0000001f), b = _mm512_set1_ps(-1e-7f);
    const long iters = 20000000;
    double best = 0;
    for (int r = 0; r < 7; r++) {
        double t0 = now();
        for (long it = 0; it < iters; it++) {
#pragma GCC unroll 24
            for (int i = 0; i < 24; i++) acc[i] = _mm512_fmadd_ps(a, acc[i], b);
        }
        double g = 2.0 * 16 * 24 * (double)iters / (now() - t0) * 1e-9;
        if (g > best) best = g;
    }
    __m512 sum = acc[0];
    for (int i = 1; i < 24; i++) sum = _mm512_add_ps(sum, acc[i]);
    volatile float sink = _mm512_reduce_add_ps(sum);
    (void)sink;
    return best;
}
#endif

static unsigned long long rs = 88172645463325252ull;
static float frand(void)
{
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (float)((rs >> 40) / 16777216.0 - 0.5);
}

typedef struct shape { const char *model, *name; int O, I; } shape;

static const shape SHAPES[] = {
    {"smollm2-135m", "q/o", 576, 576},
    {"smollm2-135m", "k/v", 192, 576},
    {"smollm2-135m", "gate/up", 1536, 576},
    {"smollm2-135m", "down", 576, 1536},
    {"smollm2-135m", "lm_head", 49152, 576},
    {"qwen2.5-0.5b", "q/o", 896, 896},
    {"qwen2.5-0.5b", "k/v", 128, 896},
    {"qwen2.5-0.5b", "gate/up", 4864, 896},
    {"qwen2.5-0.5b", "down", 896, 4864},
    {"qwen2.5-0.5b", "lm_head", 151936, 896},
};

static double min_sec = 0.3;

/* Best time of repeated calls (at least 3, at least min_sec in total). */
#define TIME_BEST(best, stmt) do { \
    stmt; /* warm-up */ \
    double t_start = now(); best = 1e30; int reps = 0; \
    while (reps < 3 || now() - t_start < min_sec) { \
        double t0 = now(); stmt; double dt = now() - t0; \
        if (dt < best) best = dt; reps++; \
        if (reps >= 50) break; \
    } } while (0)

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (argc > 2) min_sec = atof(argv[2]);
    const char *filter = argc > 3 ? argv[3] : "";
    const char *tfilter = argc > 4 ? argv[4] : "";
    if (argc > 5 && !strcmp(argv[5], "cpu")) {
        g_clock = CLOCK_PROCESS_CPUTIME_ID;
#if defined(__x86_64__)
        if (__builtin_cpu_supports("avx512f"))
            printf("PEAK fma_fp32 threads=1 gflops=%.1f\n", fma_peak());
#endif
    }
    const int N = 512;
    kern_init(threads);
    const dtype types[] = {DT_F32, DT_F16, DT_BF16, DT_Q8_0, DT_Q4_K, DT_Q6_K};
    for (size_t s = 0; s < sizeof SHAPES / sizeof SHAPES[0]; s++) {
        const shape *sh = &SHAPES[s];
        char key[128];
        snprintf(key, sizeof key, "%s/%s", sh->model, sh->name);
        if (*filter && !strstr(key, filter)) continue;
        size_t nw = (size_t)sh->O * sh->I;
        float *wf = malloc(nw * 4), *x = malloc((size_t)N * sh->I * 4), *y = malloc((size_t)N * sh->O * 4);
        float *dy = malloc((size_t)N * sh->O * 4), *dx = malloc((size_t)N * sh->I * 4);
        void *wq = malloc(nw * 4);
        if (!wf || !x || !y || !dy || !dx || !wq) { fprintf(stderr, "out of memory\n"); return 1; }
        for (size_t i = 0; i < nw; i++) wf[i] = frand() * 0.1f;
        for (size_t i = 0; i < (size_t)N * sh->I; i++) x[i] = frand();
        for (size_t i = 0; i < (size_t)N * sh->O; i++) dy[i] = frand();
        memset(y, 0, (size_t)N * sh->O * 4);
        memset(dx, 0, (size_t)N * sh->I * 4);
        double flop = 2.0 * N * sh->O * sh->I, best;
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            dtype ty = types[t];
            if (*tfilter && !strstr(tfilter, dtype_name(ty))) continue;
            size_t rb = dtype_row_bytes(ty, sh->I);
            if (!rb) {
                printf("RESULT %s %s matmul %s N=%d O=%d I=%d threads=%d gflops=n/a (I %% block != 0)\n",
                       sh->model, sh->name, dtype_name(ty), N, sh->O, sh->I, threads);
                continue;
            }
            for (int o = 0; o < sh->O; o++)
                kern_quant_row(ty, wf + (size_t)o * sh->I, (char *)wq + (size_t)o * rb, sh->I);
            wmat W = {ty, sh->O, sh->I, rb, wq};
            TIME_BEST(best, kern_matmul(y, x, &W, NULL, N, 0));
            printf("RESULT %s %s matmul %s N=%d O=%d I=%d threads=%d gflops=%.1f ms=%.2f\n", sh->model,
                   sh->name, dtype_name(ty), N, sh->O, sh->I, threads, flop / best * 1e-9, best * 1e3);
            fflush(stdout);
            if (ty == DT_F32 || ty == DT_Q4_K || ty == DT_Q8_0) {
                TIME_BEST(best, kern_matmul_dx(dx, dy, &W, N));
                printf("RESULT %s %s matmul_dx %s N=%d O=%d I=%d threads=%d gflops=%.1f ms=%.2f\n", sh->model,
                       sh->name, dtype_name(ty), N, sh->O, sh->I, threads, flop / best * 1e-9, best * 1e3);
                fflush(stdout);
            }
        }
        /* weight gradient dW[O,I] += dyᵀ·x, the LoRA/full-grad shape */
        if (sh->O <= 8192 && (!*tfilter || strstr(tfilter, "dW"))) {
            TIME_BEST(best, kern_sgemm(1, 0, sh->O, sh->I, N, 1.f, dy, sh->O, x, sh->I, 1.f, wf, sh->I));
            printf("RESULT %s %s sgemm_dW F32 N=%d O=%d I=%d threads=%d gflops=%.1f ms=%.2f\n", sh->model,
                   sh->name, N, sh->O, sh->I, threads, flop / best * 1e-9, best * 1e3);
        }
        /* decode: one token */
        if (!*tfilter || strstr(tfilter, "N1")) {
            size_t rb = dtype_row_bytes(DT_Q8_0, sh->I);
            for (int o = 0; o < sh->O; o++)
                kern_quant_row(DT_Q8_0, wf + (size_t)o * sh->I, (char *)wq + (size_t)o * rb, sh->I);
            wmat W = {DT_Q8_0, sh->O, sh->I, rb, wq};
            TIME_BEST(best, kern_matvec(y, x, &W, NULL));     /* what a decode step calls */
            printf("RESULT %s %s matmul_N1 Q8_0 N=1 O=%d I=%d threads=%d gflops=%.2f ms=%.3f GB/s=%.1f\n",
                   sh->model, sh->name, sh->O, sh->I, threads, 2.0 * sh->O * sh->I / best * 1e-9, best * 1e3,
                   rb * (double)sh->O / best * 1e-9);
        }
        fflush(stdout);
        free(wf); free(x); free(y); free(dy); free(dx); free(wq);
    }
    kern_shutdown();
    return 0;
}
