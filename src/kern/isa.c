/* isa — picks the kernel table for the CPU once (cpu_level(), which
 * $DLM_CPU_LEVEL can lower for tests and benchmarks). */
#include "kern/kern_impl.h"

#include <pthread.h>

static const kern_isa *g_isa;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void pick(void)
{
    g_isa = &kern_isa_scalar;
#if defined(__x86_64__)
    switch (cpu_level()) {
    case CPU_AVX512: g_isa = &kern_isa_avx512; break;
    case CPU_AVX2: g_isa = &kern_isa_avx2; break;
    default: break;
    }
#endif
}

const kern_isa *kern_isa_get(void)
{
    pthread_once(&g_once, pick);
    return g_isa;
}
