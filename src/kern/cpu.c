#include "kern/cpu.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cpuid.h>

static cpu_features g_feat;
static cpu_level_t g_level, g_cap = CPU_AVX512;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void detect(void)
{
    __builtin_cpu_init();
    g_feat.avx2 = __builtin_cpu_supports("avx2");
    g_feat.fma = __builtin_cpu_supports("fma");
    g_feat.avx512f = __builtin_cpu_supports("avx512f");
    g_feat.avx512bw = __builtin_cpu_supports("avx512bw");
    g_feat.avx512dq = __builtin_cpu_supports("avx512dq");
    g_feat.avx512vl = __builtin_cpu_supports("avx512vl");
    g_feat.avx512vnni = __builtin_cpu_supports("avx512vnni");
    /* gcc 12 has no builtin name for these two: read cpuid leaf 7 directly. */
    unsigned a, b, c, d;
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
        g_feat.avx512bf16 = (a >> 5) & 1;
        g_feat.avxvnni = (a >> 4) & 1;
    }
    if (__get_cpuid(1, &a, &b, &c, &d)) g_feat.f16c = (c >> 29) & 1;
    /* The OS must save the wide registers too (XCR0); __builtin_cpu_supports
     * already accounts for that on current gcc. */
    /* F16C comes with every AVX2 CPU; the kernels use it for fp16 weights. */
    if (g_feat.avx512f && g_feat.avx512bw && g_feat.avx512dq && g_feat.avx512vl && g_feat.fma && g_feat.f16c)
        g_level = CPU_AVX512;
    else if (g_feat.avx2 && g_feat.fma && g_feat.f16c)
        g_level = CPU_AVX2;
    else
        g_level = CPU_SCALAR;
    if (g_cap < g_level) g_level = g_cap;
    if (g_level < CPU_AVX512) g_feat.avx512bf16 = 0;
}

int cpu_cap_level(const char *name)
{
    cpu_level_t want;
    if (!strcmp(name, "scalar")) want = CPU_SCALAR;
    else if (!strcmp(name, "avx2")) want = CPU_AVX2;
    else if (!strcmp(name, "avx512")) want = CPU_AVX512;
    else return -1;
    pthread_once(&g_once, detect);
    g_cap = want;
    if (g_cap < g_level) g_level = g_cap;
    if (g_level < CPU_AVX512) g_feat.avx512bf16 = 0;
    return 0;
}

cpu_level_t cpu_level(void)
{
    pthread_once(&g_once, detect);
    return g_level;
}

const cpu_features *cpu_get_features(void)
{
    pthread_once(&g_once, detect);
    return &g_feat;
}

const char *cpu_level_name(cpu_level_t l)
{
    switch (l) {
    case CPU_AVX512: return "avx512";
    case CPU_AVX2: return "avx2";
    default: return "scalar";
    }
}

void cpu_describe(char *buf, int cap)
{
    const cpu_features *f = cpu_get_features();
    snprintf(buf, (size_t)cap, "%s%s%s%s", cpu_level_name(cpu_level()),
             f->avx512bf16 ? " +bf16" : "", f->avx512vnni ? " +vnni" : "",
             f->f16c ? " +f16c" : "");
}
