/* cpu — which instruction-set level the kernels dispatch to.
 *
 * Detected once at start-up with cpuid (via the compiler's builtins). Kernels
 * pick their variant from cpu_level(); cpu_cap_level (the command layer's
 * $DLM_CPU_LEVEL: scalar|avx2|avx512) can lower it for tests and
 * benchmarks, never raise it. */
#ifndef DLM_CPU_H
#define DLM_CPU_H

typedef enum {
    CPU_SCALAR = 0,
    CPU_AVX2 = 1,      /* AVX2 + FMA + F16C */
    CPU_AVX512 = 2,    /* AVX-512 F/BW/DQ/VL + FMA + F16C */
} cpu_level_t;

typedef struct cpu_features {
    int avx2, fma, f16c, avx512f, avx512bw, avx512dq, avx512vl, avx512bf16, avx512vnni, avxvnni;
} cpu_features;

cpu_level_t cpu_level(void);
/* Lower the level to at most `name` (scalar, avx2, avx512); call before any
 * kernel runs. -1 for an unknown name. */
int cpu_cap_level(const char *name);
const char *cpu_level_name(cpu_level_t l);
const cpu_features *cpu_get_features(void);
/* "avx512 (avx512bf16 vnni)" style description. */
void cpu_describe(char *buf, int cap);

/* ---- AMX (Intel tile registers) ---------------------------------------------
 * Three gates, all checked at run time, in this order:
 *   1. CPUID.(EAX=7,ECX=0):EDX bits 24 amx_tile, 22 amx_bf16, 25 amx_int8;
 *   2. XCR0 (xgetbv, when CPUID.1:ECX.OSXSAVE says it may be read) bits 17
 *      XTILECFG and 18 XTILEDATA: the OS saves the tile state;
 *   3. Linux grants the 8 KiB XTILEDATA state per process on request:
 *      arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), confirmed with
 *      ARCH_GET_XCOMP_PERM (a VM or seccomp profile may refuse).
 * Any refusal leaves the AVX-512/AVX2 path, with the first reason kept. The
 * decision is a pure function of the raw facts (cpu_amx_decide) so every
 * branch is unit-tested without AMX hardware (tests/unit/test_amx.c). */
#define CPU_AMX_XCR0_TILECFG (1ull << 17)
#define CPU_AMX_XCR0_TILEDATA (1ull << 18)
#define CPU_AMX_XFEATURE_XTILEDATA 18

typedef struct cpu_amx_facts {
    int has_leaf7;            /* CPUID max leaf >= 7 */
    unsigned leaf7_edx;       /* CPUID.(7,0):EDX */
    int osxsave;              /* CPUID.1:ECX bit 27: xgetbv may be executed */
    unsigned long long xcr0;  /* XCR0, 0 when not read */
    int capped;               /* dispatch level lowered below avx512 ($DLM_CPU_LEVEL) */
    int req_rc, req_errno;    /* arch_prctl(ARCH_REQ_XCOMP_PERM): 0 or -1 and errno */
    int get_rc, get_errno;    /* arch_prctl(ARCH_GET_XCOMP_PERM) */
    unsigned long long perm;  /* the permitted xfeature mask it returned */
    int prctl_tried;          /* 0: the request was not made (an earlier gate said no) */
} cpu_amx_facts;

typedef struct cpu_amx {
    int tile, bf16, int8;     /* CPUID bits as read */
    int usable;               /* tiles with bf16 may be used by this process */
    char reason[96];          /* why not (or "amx_tile amx_bf16 amx_int8" when usable) */
} cpu_amx;

/* Pure: the verdict for these facts. Tiles are usable when amx_tile and
 * amx_bf16 are present, XCR0 has both tile bits, the request succeeded and
 * the confirmed mask holds XTILEDATA. */
void cpu_amx_decide(const cpu_amx_facts *f, cpu_amx *out);
/* The real probe (cpuid, xgetbv, arch_prctl), filled once per process. */
void cpu_amx_probe(cpu_amx_facts *f);
/* The verdict for this process (probed once, after the level cap). */
const cpu_amx *cpu_get_amx(void);
/* "no (cpuid: no amx_tile)" / "yes (amx_tile amx_bf16 amx_int8)". */
void cpu_amx_describe(char *buf, int cap);

#endif
