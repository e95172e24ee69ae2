/* bf16_model — the arithmetic of the bf16 dot-product instructions, one
 * fp32 lane at a time, as plain C. It is the definition every bf16 GEMM
 * back end is checked against bit for bit (the `_ref` twins, the SIMDe
 * build's exact replacement of _mm512_dpbf16_ps, the AMX tile model).
 *
 * Both instructions are, per output lane, two fp32 fused multiply-adds of
 * bf16 pairs with DAZ on the inputs, FTZ on each result, round to nearest
 * even, MXCSR neither read nor written (Intel SDM vol. 2, VDPBF16PS and
 * TDPBF16PS pseudo-code). A product of two bf16 values is exact in fp32,
 * so an FMA here rounds once, at the sum. They differ in pair order:
 *   VDPBF16PS: acc += a[2i+1]·b[2i+1], then acc += a[2i]·b[2i]  (odd first)
 *   TDPBF16PS: acc += a[2k]·b[2k],     then acc += a[2k+1]·b[2k+1]
 * Checked natively on an AMD EPYC Zen 5 (family 26) for VDPBF16PS: odd
 * first, sign-keeping DAZ and FTZ, 9.6M random lanes over the whole exponent
 * range and the signed-zero corner cases (commit message of this file). */
#ifndef DLM_BF16_MODEL_H
#define DLM_BF16_MODEL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* bf16 bits to fp32 with DAZ: a subnormal becomes a zero of its sign. */
static inline float bf16m_in(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    if (!(u & 0x7f800000u)) u &= 0x80000000u;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* VCVTNE2PS2BF16 / VCVTNEPS2BF16 on one lane (SDM, convert_fp32_to_
 * bfloat16): a zero or subnormal becomes a zero of its sign, an infinity
 * stays, a NaN keeps its high half with the quiet bit set (f32_to_bf16's
 * rule), the rest round to nearest even. Differs from f32_to_bf16 only on
 * subnormals, which both dot-product instructions read as zero (DAZ). */
static inline uint16_t bf16m_cvt(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if (!(u & 0x7f800000u)) return (uint16_t)(u >> 16 & 0x8000u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x40u);
    return (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}

/* FTZ: a subnormal result becomes a zero of its sign. */
static inline float bf16m_ftz(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if (!(u & 0x7f800000u)) u &= 0x80000000u;
    memcpy(&x, &u, 4);
    return x;
}

/* One step: acc + a·b, one rounding, DAZ in (acc included), FTZ out. */
static inline float bf16m_fma(uint16_t a, uint16_t b, float acc)
{
    return bf16m_ftz(fmaf(bf16m_in(a), bf16m_in(b), bf16m_ftz(acc)));
}

/* One VDPBF16PS lane: a and b are the lane's dwords (bf16 0 in the low
 * half, bf16 1 in the high half). */
static inline float bf16m_vdp(float acc, uint32_t a, uint32_t b)
{
    acc = bf16m_fma((uint16_t)(a >> 16), (uint16_t)(b >> 16), acc);
    return bf16m_fma((uint16_t)a, (uint16_t)b, acc);
}

/* One TDPBF16PS element step (pair k of one row of A and one column of B). */
static inline float bf16m_tdp(float acc, uint32_t a, uint32_t b)
{
    acc = bf16m_fma((uint16_t)a, (uint16_t)b, acc);
    return bf16m_fma((uint16_t)(a >> 16), (uint16_t)(b >> 16), acc);
}

/* One TDPBUSD element step: four u8·s8 products added to an int32 with
 * wrap-around (no saturation), SDM order (the sum is exact modulo 2^32). */
static inline int32_t bf16m_tdpbusd(int32_t acc, uint32_t a_u8x4, uint32_t b_s8x4)
{
    uint32_t s = (uint32_t)acc;
    for (int i = 0; i < 4; i++)
        s += (uint32_t)((int32_t)(uint8_t)(a_u8x4 >> (8 * i)) * (int32_t)(int8_t)(b_s8x4 >> (8 * i)));
    return (int32_t)s;
}

#endif
