/* conv — fp16 and bf16 <-> f32, with ggml's rounding rules (so a tensor
 * converted here is byte-identical to one converted by llama.cpp). */
#include "kern/kern.h"

#include <string.h>

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0x1f)    /* inf / NaN (quieted, as F16C's vcvtph2ps does) */
        return u2f(sign | 0x7f800000 | (mant << 13) | (mant ? 0x400000u : 0));
    if (exp == 0) {
        if (!mant) return u2f(sign);
        /* subnormal: mant·2^-24, exact in f32 */
        float v = (float)mant * u2f(0x33800000);
        return sign ? -v : v;
    }
    return u2f(sign | ((exp + 112) << 23) | (mant << 13));
}

/* Round to nearest even; overflow to inf; NaN → sign|0x7E00 (ggml's
 * fp32_to_fp16 keeps the sign bit of a NaN). */
uint16_t f32_to_fp16(float f)
{
    uint32_t x = f2u(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffff;
    if (ax > 0x7f800000) return sign | 0x7e00;
    if (ax >= 0x477ff000) return sign | 0x7c00;        /* >= 65520 rounds to inf */
    if (ax >= 0x38800000) {                            /* normal half */
        uint32_t h = ((ax >> 23) - 112) << 10 | ((ax & 0x7fffff) >> 13);
        uint32_t rem = ax & 0x1fff;
        if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;  /* carry may bump the exponent: correct */
        return sign | (uint16_t)h;
    }
    if (ax <= 0x33000000) return sign;                 /* <= 2^-25: ties to even zero */
    uint32_t e = ax >> 23, m = (ax & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - e;                          /* 14..24 */
    uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return sign | (uint16_t)h;
}

float bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t f32_to_bf16(float f)
{
    uint32_t u = f2u(f);
    if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 64);  /* quiet NaN */
    return (uint16_t)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

#if defined(__x86_64__)
#include <immintrin.h>
#include "kern/cpu.h"
/* The same bits 8 at a time (it runs over every packed GEMM panel in bf16
 * mode; -O2 leaves the plain loop scalar). NaN: |u| > 0x7F800000 as a
 * signed compare, exact since |u| < 2^31. */
__attribute__((target("avx2"))) static int64_t round_bf16_avx2(float *x, int64_t n)
{
    const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u), absm = _mm256_set1_epi32(0x7fffffff);
    const __m256i inf = _mm256_set1_epi32(0x7f800000), quiet = _mm256_set1_epi32(0x00400000);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_loadu_si256((const __m256i *)(x + i));
        __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
        __m256i r = _mm256_and_si256(_mm256_add_epi32(u, _mm256_add_epi32(bias, lsb)), hi);
        __m256i q = _mm256_and_si256(_mm256_or_si256(u, quiet), hi);
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absm), inf);
        _mm256_storeu_si256((__m256i *)(x + i), _mm256_blendv_epi8(r, q, nan));
    }
    return i;
}
#endif

/* f32_to_bf16 then back, on the bits, without branches. */
void kern_round_bf16(float *x, int64_t n)
{
    int64_t i0 = 0;
#if defined(__x86_64__)
    if (cpu_level() >= CPU_AVX2) i0 = round_bf16_avx2(x, n);
#endif
    for (int64_t i = i0; i < n; i++) {
        uint32_t u = f2u(x[i]);
        uint32_t r = (u + (0x7fffu + ((u >> 16) & 1u))) & 0xffff0000u;
        uint32_t q = (u | 0x00400000u) & 0xffff0000u;     /* NaN: (u >> 16) | 64, as f32_to_bf16 */
        x[i] = u2f((u & 0x7fffffffu) > 0x7f800000u ? q : r);
    }
}
