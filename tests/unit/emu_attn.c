/* Emulated build (CMake DLM_SIMDE, `make emu`): the bf16 attention
 * products (src/kern/attn_bf16.c) compiled against SIMDe, so they run on
 * any x86-64: the micro-kernel and packers against their plain-loop twins
 * bit for bit, whole bf16 forward/backward runs on the emulated products
 * against runs on the twins, and, where the CPU has AVX512_BF16, against
 * runs on the native products. */
#include "attn_bf16_cases.h"

extern const attn_bf16_ops attn_bf16_ops_emu;   /* attn_bf16.c with -DDLM_SIMDE */

int main(void)
{
    trng r = {3};
    CHECK_INT(abc_check_dp(&attn_bf16_ops_emu, &r), 0);
    CHECK_INT(abc_check_pack(&attn_bf16_ops_emu, &r), 0);
    CHECK_INT(abc_check_attn(&attn_bf16_ops_emu), 0);
#if defined(__x86_64__)
    if (kern_bf16_available(KERN_BF16_AVX512BF16))
        for (size_t ci = 0; ci < sizeof abc_cases / sizeof abc_cases[0]; ci++) {
            abc_run a = abc_attn(&abc_cases[ci], &attn_bf16_ops_emu, 1, 300 + ci, NULL);
            abc_run b = abc_attn(&abc_cases[ci], &attn_bf16_ops_avx512bf16, 1, 300 + ci, NULL);
            CHECK_MSG(abc_same(&abc_cases[ci], &a, &b), "case %zu: emulated and native differ", ci);
            abc_free(&a);
            abc_free(&b);
        }
#endif
    return check_done();
}
