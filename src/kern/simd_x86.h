/* simd_x86 — the one place kernels get x86 vector intrinsics from, so the
 * same kernel source builds two ways:
 *
 *   native (default): <immintrin.h>; each kernel function carries a target
 *     attribute (KX_TARGET_*) and runs only where cpu.c found the ISA;
 *   emulated (-DDLM_SIMDE, the CMake option DLM_SIMDE): SIMDe
 *     (Debian libsimde-dev) implements the AVX-512 F/BW/DQ/VL/BF16/VNNI
 *     intrinsics in portable C (SSE2 or AVX2 underneath), the target
 *     attributes expand to nothing, and the kernels run on any x86-64 —
 *     the tests check them bit for bit against their `_ref` twins on a
 *     CPU without the instructions (tests/unit/emu_kern.c, `make emu`).
 *
 * SIMDe's portable paths are not all exact: its _mm512_fmadd_ps (and the
 * 256/128-bit ones) multiply then add (two roundings), and its
 * _mm512_dpbf16_ps (0.7.4) sums the pair in the wrong order without FMA,
 * DAZ or FTZ. Those are replaced below by exact lane loops (fmaf, and
 * bf16_model.h's VDPBF16PS lane), so an emulated kernel gives the bits the
 * hardware gives. Intrinsics SIMDe 0.7.4 lacks (__mmask16,
 * _mm512_maskz_loadu_ps, _mm512_mask_storeu_ps, _mm512_cmpgt_epu32_mask,
 * _mm512_cvtepi32_epi16, _mm512_cvtepu16_epi32, _mm512_cvtps_pd,
 * _mm512_cvtpd_ps) are supplied the same way.
 * Kernels call kx_dpbf16_ps (integer-vector operands: the
 * __m512bh type differs between compilers and SIMDe) and the usual names
 * for the rest. Add a replacement here whenever a kernel starts to use an
 * intrinsic whose SIMDe version is not exact. */
#ifndef DLM_SIMD_X86_H
#define DLM_SIMD_X86_H

#if defined(__x86_64__) || defined(DLM_SIMDE)

#if defined(DLM_SIMDE)
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <math.h>
#include <simde/x86/avx512.h>
#include "kern/bf16_model.h"

#define KX_EMULATED 1
#define KX_TARGET_AVX512BF16
#define KX_TARGET_AVX512VNNI
#define KX_TARGET_AVX512
#define KX_TARGET_AVX2

/* exact ±a·b+c per lane (SIMDe's portable version rounds twice); neg
 * negates a (exactly: fnmadd) */
static inline __m512 kx_fma512(__m512 a, __m512 b, __m512 c, int neg)
{
    float x[16], y[16], z[16];
    _mm512_storeu_ps(x, a);
    _mm512_storeu_ps(y, b);
    _mm512_storeu_ps(z, c);
    for (int i = 0; i < 16; i++) z[i] = fmaf(neg ? -x[i] : x[i], y[i], z[i]);
    return _mm512_loadu_ps(z);
}
static inline __m256 kx_fma256(__m256 a, __m256 b, __m256 c, int neg)
{
    float x[8], y[8], z[8];
    _mm256_storeu_ps(x, a);
    _mm256_storeu_ps(y, b);
    _mm256_storeu_ps(z, c);
    for (int i = 0; i < 8; i++) z[i] = fmaf(neg ? -x[i] : x[i], y[i], z[i]);
    return _mm256_loadu_ps(z);
}
static inline __m512 kx_fmadd512(__m512 a, __m512 b, __m512 c) { return kx_fma512(a, b, c, 0); }
static inline __m512 kx_fnmadd512(__m512 a, __m512 b, __m512 c) { return kx_fma512(a, b, c, 1); }
static inline __m256 kx_fmadd256(__m256 a, __m256 b, __m256 c) { return kx_fma256(a, b, c, 0); }
static inline __m256 kx_fnmadd256(__m256 a, __m256 b, __m256 c) { return kx_fma256(a, b, c, 1); }
#undef _mm512_fmadd_ps
#undef _mm512_fnmadd_ps
#undef _mm256_fmadd_ps
#undef _mm256_fnmadd_ps
#define _mm512_fmadd_ps(a, b, c) kx_fmadd512(a, b, c)
#define _mm512_fnmadd_ps(a, b, c) kx_fnmadd512(a, b, c)
#define _mm256_fmadd_ps(a, b, c) kx_fmadd256(a, b, c)
#define _mm256_fnmadd_ps(a, b, c) kx_fnmadd256(a, b, c)

/* Missing from SIMDe 0.7.4: the mask type's native name and the masked
 * float load/store (masked-off lanes read as 0, are not written). */
#if !defined(SIMDE_X86_AVX512F_NATIVE)
typedef simde__mmask16 __mmask16;
#endif
static inline __m512 kx_maskz_loadu_ps(__mmask16 k, const float *p)
{
    float t[16];
    for (int i = 0; i < 16; i++) t[i] = (k >> i) & 1 ? p[i] : 0.f;
    return _mm512_loadu_ps(t);
}
static inline void kx_mask_storeu_ps(float *p, __mmask16 k, __m512 v)
{
    float t[16];
    _mm512_storeu_ps(t, v);
    for (int i = 0; i < 16; i++)
        if ((k >> i) & 1) p[i] = t[i];
}
static inline __mmask16 kx_cmpgt_epu32_mask(__m512i a, __m512i b)
{
    uint32_t x[16], y[16];
    _mm512_storeu_si512(x, a);
    _mm512_storeu_si512(y, b);
    __mmask16 m = 0;
    for (int i = 0; i < 16; i++) m = (__mmask16)(m | (x[i] > y[i]) << i);
    return m;
}
static inline __m256i kx_cvtepi32_epi16(__m512i a)
{
    uint32_t x[16];
    uint16_t y[16];
    _mm512_storeu_si512(x, a);
    for (int i = 0; i < 16; i++) y[i] = (uint16_t)x[i];
    return _mm256_loadu_si256((const __m256i *)y);
}
static inline __m512i kx_cvtepu16_epi32(__m256i a)
{
    uint16_t x[16];
    uint32_t y[16];
    _mm256_storeu_si256((__m256i *)x, a);
    for (int i = 0; i < 16; i++) y[i] = x[i];
    return _mm512_loadu_si512(y);
}
/* f32 ↔ f64, 8 lanes (ops_avx512.c): C conversions, exact / round to nearest */
static inline __m512d kx_cvtps_pd(__m256 a)
{
    float x[8];
    double y[8];
    _mm256_storeu_ps(x, a);
    for (int i = 0; i < 8; i++) y[i] = x[i];
    return _mm512_loadu_pd(y);
}
static inline __m256 kx_cvtpd_ps(__m512d a)
{
    double x[8];
    float y[8];
    _mm512_storeu_pd(x, a);
    for (int i = 0; i < 8; i++) y[i] = (float)x[i];
    return _mm256_loadu_ps(y);
}
#undef _mm512_cvtps_pd
#undef _mm512_cvtpd_ps
#define _mm512_cvtps_pd(a) kx_cvtps_pd(a)
#define _mm512_cvtpd_ps(a) kx_cvtpd_ps(a)
#undef _mm512_cmpgt_epu32_mask
#undef _mm512_cvtepi32_epi16
#undef _mm512_cvtepu16_epi32
#define _mm512_cmpgt_epu32_mask(a, b) kx_cmpgt_epu32_mask(a, b)
#define _mm512_cvtepi32_epi16(a) kx_cvtepi32_epi16(a)
#define _mm512_cvtepu16_epi32(a) kx_cvtepu16_epi32(a)
#define _mm512_maskz_loadu_ps(k, p) kx_maskz_loadu_ps(k, p)
#define _mm512_mask_storeu_ps(p, k, v) kx_mask_storeu_ps(p, k, v)

/* VCVTNE2PS2BF16 exactly (bf16_model.h): words 0..15 from lo, 16..31
 * from hi (SIMDe 0.7.4 has no version) */
static inline __m512i kx_cvtne2ps_pbh(__m512 hi, __m512 lo)
{
    float a[16], b[16];
    uint16_t w[32];
    _mm512_storeu_ps(a, hi);
    _mm512_storeu_ps(b, lo);
    for (int i = 0; i < 16; i++) {
        w[i] = bf16m_cvt(b[i]);
        w[16 + i] = bf16m_cvt(a[i]);
    }
    return _mm512_loadu_si512(w);
}

/* VDPBF16PS exactly (bf16_model.h) */
static inline __m512 kx_dpbf16_ps(__m512 acc, __m512i a, __m512i b)
{
    float c[16];
    uint32_t x[16], y[16];
    _mm512_storeu_ps(c, acc);
    _mm512_storeu_si512(x, a);
    _mm512_storeu_si512(y, b);
    for (int i = 0; i < 16; i++) c[i] = bf16m_vdp(c[i], x[i], y[i]);
    return _mm512_loadu_ps(c);
}

#else /* native */
#include <immintrin.h>

#define KX_EMULATED 0
#define KX_TARGET_AVX512BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,fma")))
#define KX_TARGET_AVX512VNNI __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,fma")))
#define KX_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
#define KX_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))

#define kx_dpbf16_ps(acc, a, b) _mm512_dpbf16_ps((acc), (__m512bh)(a), (__m512bh)(b))
#define kx_cvtne2ps_pbh(hi, lo) ((__m512i)_mm512_cvtne2ps_pbh((hi), (lo)))
#endif

#endif
#endif
