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

#endif
