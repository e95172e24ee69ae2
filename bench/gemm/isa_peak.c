/* isa_peak — one core's throughput of the multiply-add instructions a
 * matmul could be built on, 24 independent chains each, process CPU clock:
 *   vfmadd231ps zmm (f32, what dlm's GEMM uses), vdpbf16ps (AVX512-BF16:
 *   bf16 pairs into f32), vfmadd231ph (AVX512-FP16: fp16 in and out) and
 *   vpdpbusd (AVX512-VNNI: u8 × s8 into s32, what decoding uses).
 * Prints one line per instruction: GFLOPS (GOPS for int8) and the ratio to
 * the f32 FMA. Instructions this CPU lacks are skipped.
 * Build: gcc -O2 isa_peak.c -o isa_peak (see bench/run.sh). */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

#define CHAINS 24
#define ITERS 20000000L

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static double g_f32;     /* the f32 FMA's rate, the yardstick */

static void report(const char *name, double ops_per_instr, double dt, double sink)
{
    double r = (double)ITERS * CHAINS * ops_per_instr / dt / 1e9;
    if (!g_f32) g_f32 = r;
    printf("%-12s %7.1f G%s/s  %.2fx the f32 FMA  (sink %g)\n", name, r, ops_per_instr == 128 ? "OP" : "FLOP",
           r / g_f32, sink);
}

__attribute__((target("avx512f"))) static double f32fma(double *dt)
{
    __m512 a[CHAINS], x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(-1e-7f);
    for (int i = 0; i < CHAINS; i++) a[i] = _mm512_set1_ps((float)i);
    double t0 = now();
    for (long k = 0; k < ITERS; k++)
#pragma GCC unroll 24
        for (int i = 0; i < CHAINS; i++) a[i] = _mm512_fmadd_ps(a[i], x, y);
    *dt = now() - t0;
    float s = 0;
    for (int i = 0; i < CHAINS; i++) s += _mm512_reduce_add_ps(a[i]);
    return s;
}

__attribute__((target("avx512f,avx512bf16"))) static double bf16dot(double *dt)
{
    __m512 a[CHAINS];
    __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80);
    for (int i = 0; i < CHAINS; i++) a[i] = _mm512_set1_ps((float)i);
    double t0 = now();
    for (long k = 0; k < ITERS; k++)
#pragma GCC unroll 24
        for (int i = 0; i < CHAINS; i++) a[i] = _mm512_dpbf16_ps(a[i], x, x);
    *dt = now() - t0;
    float s = 0;
    for (int i = 0; i < CHAINS; i++) s += _mm512_reduce_add_ps(a[i]);
    return s;
}

__attribute__((target("avx512f,avx512fp16"))) static double f16fma(double *dt)
{
    __m512h a[CHAINS], x = _mm512_set1_ph((_Float16)1.0f), y = _mm512_set1_ph((_Float16)0.0f);
    for (int i = 0; i < CHAINS; i++) a[i] = _mm512_set1_ph((_Float16)(float)i);
    double t0 = now();
    for (long k = 0; k < ITERS; k++)
#pragma GCC unroll 24
        for (int i = 0; i < CHAINS; i++) a[i] = _mm512_fmadd_ph(a[i], x, y);
    *dt = now() - t0;
    __m512h s = a[0];
    for (int i = 1; i < CHAINS; i++) s = _mm512_add_ph(s, a[i]);
    _Float16 o[32];
    _mm512_storeu_ph(o, s);
    return (double)o[0];
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) static double vnni(double *dt)
{
    __m512i a[CHAINS], x = _mm512_set1_epi8(1);
    for (int i = 0; i < CHAINS; i++) a[i] = _mm512_set1_epi32(i);
    double t0 = now();
    for (long k = 0; k < ITERS; k++)
#pragma GCC unroll 24
        for (int i = 0; i < CHAINS; i++) a[i] = _mm512_dpbusd_epi32(a[i], x, x);
    *dt = now() - t0;
    long long s = 0;
    for (int i = 0; i < CHAINS; i++) s += _mm512_reduce_add_epi32(a[i]);
    return (double)s;
}

int main(void)
{
    __builtin_cpu_init();
    double dt, s;
    if (__builtin_cpu_supports("avx512f")) { s = f32fma(&dt); report("vfmadd231ps", 32, dt, s); }
    if (__builtin_cpu_supports("avx512bf16")) { s = bf16dot(&dt); report("vdpbf16ps", 64, dt, s); }
    if (__builtin_cpu_supports("avx512fp16")) { s = f16fma(&dt); report("vfmadd231ph", 64, dt, s); }
    if (__builtin_cpu_supports("avx512vnni")) { s = vnni(&dt); report("vpdpbusd", 128, dt, s); }
    return 0;
}
