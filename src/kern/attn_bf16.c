/* attn_bf16 — the products of the training attention on VDPBF16PS
 * (AVX512_BF16), used by the bf16 attention units (isa_attn_bf16.inc) when
 * kern_set_bf16 is on and the bf16 back end is avx512bf16 or amx.
 *
 * One micro-kernel serves all eight products of the forward and backward
 * (S = q̃·kᵀ, O += P·V, dP = dO·Vᵀ, dV += Pᵀ·dO, dK += dSᵀ·q̃, dQ += dS·k):
 *
 *   out[o][j] (+)= Σ_{p<np} vdp(A[o·ao + p·ap], B[p·ldb + j])
 *        o < nout, j < ncols (a multiple of 16), out rows ldo floats apart
 *
 * where A and B hold bf16 pairs along the reduction (dword = element 2p in
 * the low half, 2p + 1 in the high half) and vdp is one VDPBF16PS lane
 * (bf16_model.h: odd product first, fused, DAZ/FTZ). Each out element is
 * that chain over p in order, from 0 or from out's value (acc): the
 * register blocking changes no bit. attn_dp_ref (kern_ref.c) is the
 * plain-loop twin; tests/unit/emu_attn.c checks this file native and
 * compiled against SIMDe (-DDLM_SIMDE, names _emu) against it bit for bit.
 *
 * The packers round f32 operands to bf16 pairs with f32_to_bf16's rule
 * (round to nearest even, NaN quieted), after a multiply by mul (the
 * query's 1/√HS, as the f32 kernels scale it):
 *   attn_bf16_rows: dst[p] = bf16(src[2p]·mul) | bf16(src[2p+1]·mul) << 16,
 *                   p < npairs, halves past n zero;
 *   attn_bf16_zip:  dst[j] = bf16(r0[j]·mul) | bf16(r1[j]·mul) << 16,
 *                   j < n (r1 NULL: high half 0), zero for n <= j < npad. */
#include "kern/simd_x86.h"

#include "kern/kern_impl.h"

#if defined(__x86_64__) || defined(DLM_SIMDE)

#if defined(DLM_SIMDE)
#define AB_FN(n) n##_emu
#else
#define AB_FN(n) n##_avx512bf16
#endif
#define KT KX_TARGET_AVX512BF16

/* RB rows × NV vectors of out, the whole reduction: RB·NV accumulators
 * (16 at most, of the 32 zmm), NV B loads and RB broadcasts per pair. */
KT static inline __attribute__((always_inline)) void tile(float *out, int64_t ldo, const uint32_t *A, int64_t ao,
                                                           int64_t ap, const uint32_t *B, int64_t ldb, int np,
                                                           int acc, const int RB, const int NV)
{
    __m512 c[8][4];
#pragma GCC unroll 8
    for (int i = 0; i < RB; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) c[i][v] = acc ? _mm512_loadu_ps(out + i * ldo + v * 16) : _mm512_setzero_ps();
    for (int p = 0; p < np; p++) {
        __m512i b[4];
        const uint32_t *bp = B + (int64_t)p * ldb, *a = A + (int64_t)p * ap;
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) b[v] = _mm512_loadu_si512(bp + v * 16);
#pragma GCC unroll 8
        for (int i = 0; i < RB; i++) {
            const __m512i x = _mm512_set1_epi32((int)a[i * ao]);
#pragma GCC unroll 4
            for (int v = 0; v < NV; v++) c[i][v] = kx_dpbf16_ps(c[i][v], x, b[v]);
        }
    }
#pragma GCC unroll 8
    for (int i = 0; i < RB; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) _mm512_storeu_ps(out + i * ldo + v * 16, c[i][v]);
}

/* Rows in blocks of RB (then one at a time) for one column chunk of NV
 * vectors. */
#define DP_ROWS(RB, NV)                                                                                        \
    do {                                                                                                       \
        int o = 0;                                                                                             \
        for (; o + (RB) <= nout; o += (RB))                                                                    \
            tile(out + o * ldo + j, ldo, A + o * ao, ao, ap, B + j, ldb, np, acc, (RB), (NV));                  \
        for (; o < nout; o++) tile(out + o * ldo + j, ldo, A + o * ao, ao, ap, B + j, ldb, np, acc, 1, (NV));  \
    } while (0)

/* out[nout][ncols] (+)= A·B over np pairs (see the top of the file). 4×4
 * tiles where 64 columns remain, 8×2 for 32 (the query lanes): 16
 * accumulators cover the instruction's latency on two pipes. */
KT void AB_FN(attn_dp)(float *out, int64_t ldo, const uint32_t *A, int64_t ao, int64_t ap, const uint32_t *B,
                       int64_t ldb, int np, int nout, int ncols, int acc)
{
    for (int j = 0; j < ncols; j += 64) {
        int nv = (ncols - j) / 16 < 4 ? (ncols - j) / 16 : 4;
        if (nv == 4) DP_ROWS(4, 4);
        else if (nv == 3) DP_ROWS(4, 3);
        else if (nv == 2) DP_ROWS(8, 2);
        else DP_ROWS(8, 1);
    }
}

/* f32_to_bf16 on 16 lanes (isa_avx512bf16.c's rounding). */
KT static inline __attribute__((always_inline)) __m512i rnd16(__m512 v)
{
    const __m512i u = _mm512_castps_si512(v);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    const __m512i q = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(64));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                  _mm512_set1_epi32(0x7f800000));
    return _mm512_mask_blend_epi32(nan, r, q);
}

KT void AB_FN(attn_bf16_rows)(uint32_t *dst, const float *src, int n, int npairs, float mul)
{
    const __m512 vm = _mm512_set1_ps(mul);
    int p = 0;
    for (; 2 * p + 32 <= n && p + 16 <= npairs; p += 16) {
        const __m512i a = rnd16(_mm512_mul_ps(_mm512_loadu_ps(src + 2 * p), vm));
        const __m512i b = rnd16(_mm512_mul_ps(_mm512_loadu_ps(src + 2 * p + 16), vm));
        _mm256_storeu_si256((__m256i *)(dst + p), _mm512_cvtepi32_epi16(a));
        _mm256_storeu_si256((__m256i *)(dst + p + 8), _mm512_cvtepi32_epi16(b));
    }
    for (; p < npairs; p++) {
        uint32_t lo = 2 * p < n ? f32_to_bf16(src[2 * p] * mul) : 0;
        uint32_t hi = 2 * p + 1 < n ? f32_to_bf16(src[2 * p + 1] * mul) : 0;
        dst[p] = lo | hi << 16;
    }
}

KT void AB_FN(attn_bf16_zip)(uint32_t *dst, const float *r0, const float *r1, int n, int npad, float mul)
{
    const __m512 vm = _mm512_set1_ps(mul);
    int j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512i a = rnd16(_mm512_mul_ps(_mm512_loadu_ps(r0 + j), vm));
        if (r1) a = _mm512_or_si512(a, _mm512_slli_epi32(rnd16(_mm512_mul_ps(_mm512_loadu_ps(r1 + j), vm)), 16));
        _mm512_storeu_si512(dst + j, a);
    }
    for (; j < n; j++)
        dst[j] = (uint32_t)f32_to_bf16(r0[j] * mul) | (r1 ? (uint32_t)f32_to_bf16(r1[j] * mul) << 16 : 0);
    for (; j < npad; j++) dst[j] = 0;
}

#if !defined(DLM_SIMDE)
const attn_bf16_ops attn_bf16_ops_avx512bf16 = {attn_dp_avx512bf16, attn_bf16_rows_avx512bf16,
                                                attn_bf16_zip_avx512bf16};
#else
const attn_bf16_ops attn_bf16_ops_emu = {attn_dp_emu, attn_bf16_rows_emu, attn_bf16_zip_emu};
#endif
#endif
