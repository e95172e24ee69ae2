#include "kern/cpu.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

static cpu_features g_feat;
static cpu_level_t g_level, g_cap = CPU_AVX512;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static cpu_amx g_amx;
static pthread_once_t g_amx_once = PTHREAD_ONCE_INIT;

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
    /* already probed: the cap wins over what the probe found */
    if (g_level < CPU_AVX512 && g_amx.usable) {
        g_amx.usable = 0;
        snprintf(g_amx.reason, sizeof g_amx.reason, "capped: dispatch level %s", cpu_level_name(g_level));
    }
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

/* ---- AMX ------------------------------------------------------------------------ */

/* asm/prctl.h's values (Linux 5.16+); spelled out so older headers build. */
#define DLM_ARCH_GET_XCOMP_PERM 0x1022
#define DLM_ARCH_REQ_XCOMP_PERM 0x1023

static const char *errno_name(int e, char *buf, int cap)
{
    switch (e) {
    case EPERM: return "EPERM";
    case EINVAL: return "EINVAL";
    case ENOSYS: return "ENOSYS";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case ENOMEM: return "ENOMEM";
    case EACCES: return "EACCES";
    case EFAULT: return "EFAULT";
    default: snprintf(buf, (size_t)cap, "errno %d", e); return buf;
    }
}

void cpu_amx_decide(const cpu_amx_facts *f, cpu_amx *o)
{
    char eb[24];
    memset(o, 0, sizeof *o);
    if (f->has_leaf7) {
        o->tile = (f->leaf7_edx >> 24) & 1;
        o->bf16 = (f->leaf7_edx >> 22) & 1;
        o->int8 = (f->leaf7_edx >> 25) & 1;
    }
    if (!f->has_leaf7) snprintf(o->reason, sizeof o->reason, "cpuid: no leaf 7");
    else if (!o->tile) snprintf(o->reason, sizeof o->reason, "cpuid: no amx_tile");
    else if (!o->bf16) snprintf(o->reason, sizeof o->reason, "cpuid: no amx_bf16");
    else if (!f->osxsave) snprintf(o->reason, sizeof o->reason, "cpuid: no osxsave (xcr0 unreadable)");
    else if ((f->xcr0 & (CPU_AMX_XCR0_TILECFG | CPU_AMX_XCR0_TILEDATA)) !=
             (CPU_AMX_XCR0_TILECFG | CPU_AMX_XCR0_TILEDATA))
        snprintf(o->reason, sizeof o->reason, "xcr0: tile state off (bit 17 %d, bit 18 %d)",
                 (int)((f->xcr0 >> 17) & 1), (int)((f->xcr0 >> 18) & 1));
    else if (f->capped) snprintf(o->reason, sizeof o->reason, "capped: dispatch level below avx512");
    else if (!f->prctl_tried) snprintf(o->reason, sizeof o->reason, "arch_prctl not tried");
    else if (f->req_rc != 0)
        snprintf(o->reason, sizeof o->reason, "arch_prctl refused: %s", errno_name(f->req_errno, eb, sizeof eb));
    else if (f->get_rc != 0)
        snprintf(o->reason, sizeof o->reason, "arch_prctl get failed: %s", errno_name(f->get_errno, eb, sizeof eb));
    else if (!((f->perm >> CPU_AMX_XFEATURE_XTILEDATA) & 1))
        snprintf(o->reason, sizeof o->reason, "arch_prctl: xtiledata not granted");
    else {
        o->usable = 1;
        snprintf(o->reason, sizeof o->reason, "amx_tile amx_bf16%s", o->int8 ? " amx_int8" : "");
    }
}

void cpu_amx_probe(cpu_amx_facts *f)
{
    unsigned a, b, c, d;
    memset(f, 0, sizeof *f);
    f->capped = cpu_level() < CPU_AVX512;
    if (__get_cpuid_max(0, NULL) >= 7 && __get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        f->has_leaf7 = 1;
        f->leaf7_edx = d;
    }
    if (__get_cpuid(1, &a, &b, &c, &d)) f->osxsave = (c >> 27) & 1;
    if (f->osxsave) {
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        f->xcr0 = ((unsigned long long)hi << 32) | lo;
    }
    /* Ask the kernel only when the hardware and the OS both say yes: the
     * request is harmless elsewhere but its refusal would hide the real
     * reason. */
    cpu_amx v;
    cpu_amx_decide(f, &v);
    if (strcmp(v.reason, "arch_prctl not tried")) return;
    f->prctl_tried = 1;
    errno = 0;
    f->req_rc = (int)syscall(SYS_arch_prctl, DLM_ARCH_REQ_XCOMP_PERM, (unsigned long)CPU_AMX_XFEATURE_XTILEDATA);
    f->req_errno = f->req_rc ? errno : 0;
    if (f->req_rc) return;
    unsigned long long mask = 0;
    errno = 0;
    f->get_rc = (int)syscall(SYS_arch_prctl, DLM_ARCH_GET_XCOMP_PERM, &mask);
    f->get_errno = f->get_rc ? errno : 0;
    f->perm = mask;
}

static void amx_once(void)
{
    cpu_amx_facts f;
    cpu_amx_probe(&f);
    cpu_amx_decide(&f, &g_amx);
}

const cpu_amx *cpu_get_amx(void)
{
    pthread_once(&g_amx_once, amx_once);
    return &g_amx;
}

void cpu_amx_describe(char *buf, int cap)
{
    const cpu_amx *a = cpu_get_amx();
    snprintf(buf, (size_t)cap, "%s (%s)", a->usable ? "yes" : "no", a->reason);
}
