/* qmm_amx — the int8 prefill on AMX-INT8 tiles: qmm_amx.inc built twice,
 * qmm_panel_amx_model on the C model of the tile unit (amx_model.c; any
 * CPU, what the tests run here) and qmm_panel_amx_native on TDPBSUD
 * (picked where cpu_get_amx() reports usable tiles with amx_int8; gcc >=
 * 11 or clang). The native build has not run on AMX hardware yet: the
 * machines this was written on (AMD Zen 5) have none. */
#include "kern/kern_impl.h"

#include <math.h>
#include <string.h>

#include "kern/amx_model.h"

#define TW QMM_TILE_ROWS

#define AMX_FN(n) n##_model
#define AMX_ATTR
#define AMX_LOADCFG(cfg) amxm_ldtilecfg(cfg)
#define AMX_RELEASE() amxm_tilerelease()
#define AMX_ZERO(t) amxm_tilezero(t)
#define AMX_LOAD(t, base, stride) amxm_tileloadd(t, base, stride)
#define AMX_STORE(t, base, stride) amxm_tilestored(t, base, stride)
#define AMX_DPBSUD(c, a, b) amxm_tdpbsud(c, a, b)
#include "kern/qmm_amx.inc"
#undef AMX_FN
#undef AMX_ATTR
#undef AMX_LOADCFG
#undef AMX_RELEASE
#undef AMX_ZERO
#undef AMX_LOAD
#undef AMX_STORE
#undef AMX_DPBSUD

#if defined(KERN_AMX_NATIVE)
#include <immintrin.h>
#define AMX_FN(n) n##_native
#define AMX_ATTR __attribute__((target("amx-tile,amx-int8")))
#define AMX_LOADCFG(cfg) _tile_loadconfig(cfg)
#define AMX_RELEASE() _tile_release()
#define AMX_ZERO(t) _tile_zero(t)
#define AMX_LOAD(t, base, stride) _tile_loadd(t, base, stride)
#define AMX_STORE(t, base, stride) _tile_stored(t, base, stride)
#define AMX_DPBSUD(c, a, b) _tile_dpbsud(c, a, b)
#include "kern/qmm_amx.inc"
#else
void qmm_panel_amx_native(const qmm_panel *p, const qmm_x *x, int64_t n0, int R, float *out)
{
    qmm_panel_amx_model(p, x, n0, R, out);
}
#endif
