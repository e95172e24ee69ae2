/* gemm_amx — gemm_amx.inc built twice: gemm_amx_block_model on the C model
 * of the tile unit (any CPU; the `amx-model` back end of the tests) and
 * gemm_amx_block_native on the AMX instructions (picked where
 * cpu_get_amx() says the tiles are usable; gcc >= 11 or clang). */
#include "kern/kern_impl.h"

#include <math.h>
#include <string.h>

#include "kern/amx_model.h"

#define AMX_FN(n) n##_model
#define AMX_ATTR
#define AMX_LOADCFG(cfg) amxm_ldtilecfg(cfg)
#define AMX_RELEASE() amxm_tilerelease()
#define AMX_ZERO(t) amxm_tilezero(t)
#define AMX_LOAD(t, base, stride) amxm_tileloadd(t, base, stride)
#define AMX_STORE(t, base, stride) amxm_tilestored(t, base, stride)
#define AMX_DPBF16(c, a, b) amxm_tdpbf16ps(c, a, b)
#include "kern/gemm_amx.inc"
#undef AMX_FN
#undef AMX_ATTR
#undef AMX_LOADCFG
#undef AMX_RELEASE
#undef AMX_ZERO
#undef AMX_LOAD
#undef AMX_STORE
#undef AMX_DPBF16

#if defined(KERN_AMX_NATIVE)
#include <immintrin.h>
#define AMX_FN(n) n##_native
#define AMX_ATTR __attribute__((target("amx-tile,amx-bf16,avx512f,fma")))
#define AMX_LOADCFG(cfg) _tile_loadconfig(cfg)
#define AMX_RELEASE() _tile_release()
#define AMX_ZERO(t) _tile_zero(t)
#define AMX_LOAD(t, base, stride) _tile_loadd(t, base, stride)
#define AMX_STORE(t, base, stride) _tile_stored(t, base, stride)
#define AMX_DPBF16(c, a, b) _tile_dpbf16ps(c, a, b)
#include "kern/gemm_amx.inc"
#endif
