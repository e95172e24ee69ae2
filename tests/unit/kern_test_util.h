/* kern_test_util — shared helpers of the kernel tests (test_kern*.c,
 * test_quant.c): a seeded generator, and re-running the test binary once
 * per lower CPU level (DLM_CPU_LEVEL) so every ISA variant is exercised. */
#ifndef DLM_KERN_TEST_UTIL_H
#define DLM_KERN_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kern/cpu.h"

typedef struct trng { uint64_t s; } trng;

static inline uint64_t trng_u64(trng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline double trng_unif(trng *r) { return (double)(trng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }

static inline float trng_normal(trng *r)
{
    double u1 = trng_unif(r), u2 = trng_unif(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static inline void fill_normal(trng *r, float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) x[i] = trng_normal(r) * scale;
}

/* Cheap bell-shaped values (sum of four 16-bit uniforms, unit variance)
 * for tests that only need varied data. */
static inline void fill_rand(trng *r, float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++) {
        uint64_t u = trng_u64(r);
        int s = (int)(u & 0xFFFF) + (int)((u >> 16) & 0xFFFF) + (int)((u >> 32) & 0xFFFF) + (int)(u >> 48) - 131070;
        x[i] = (float)s * (scale * 3.0f / 65536.0f) * 0.57735027f;
    }
}

static inline void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "out of memory\n"); exit(2); }
    return p;
}

/* max|got − want| <= rtol·max|want| + atol (for results that may be
 * exactly zero in exact arithmetic). Prints like check_tensor. */
#define CHECK_CLOSE(label, got, want, n, rtol, atol) do { \
    double _md = 0, _mr = 0; size_t _at = 0; \
    for (size_t _i = 0; _i < (size_t)(n); _i++) { \
        double _d = fabs((double)(got)[_i] - (double)(want)[_i]); \
        if (!(_d <= _md)) { _md = _d; _at = _i; } \
        if (fabs((double)(want)[_i]) > _mr) _mr = fabs((double)(want)[_i]); } \
    CHECK_MSG(_md <= (rtol) * _mr + (atol), "%s: max|diff| %.3e at %zu (got %.9g want %.9g), max|ref| %.3e", \
              label, _md, _at, (double)(got)[_at], (double)(want)[_at], _mr); } while (0)

/* The child runs below take their level from DLM_CPU_LEVEL, as the dlm
 * binary does at start-up (src/cmd/setup.c). */
__attribute__((constructor)) static void kern_test_cap_level(void)
{
    const char *l = getenv("DLM_CPU_LEVEL");
    if (l && *l) cpu_cap_level(l);
}

/* Re-run this binary with DLM_CPU_LEVEL set to each level below the
 * native one. Returns the number of failing children. */
static inline int rerun_lower_levels(const char *argv0)
{
    if (getenv("DLM_KERN_TEST_CHILD")) return 0;
    int fails = 0;
    const char *levels[] = {"avx2", "scalar"};
    for (int i = 0; i < 2; i++) {
        if ((int)cpu_level() <= (i == 0 ? CPU_AVX2 : CPU_SCALAR)) continue;
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            setenv("DLM_CPU_LEVEL", levels[i], 1);
            setenv("DLM_KERN_TEST_CHILD", "1", 1);
            execl("/proc/self/exe", argv0, (char *)NULL);
            _exit(127);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "child run at DLM_CPU_LEVEL=%s FAILED\n", levels[i]);
            fails++;
        } else {
            printf("child run at DLM_CPU_LEVEL=%s passed\n", levels[i]);
        }
    }
    return fails;
}

#endif
