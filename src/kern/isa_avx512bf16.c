/* isa_avx512bf16 — the bf16 GEMM micro-kernel on VDPBF16PS (AVX512_BF16:
 * Cooper Lake, Sapphire Rapids and later, AMD Zen 4/5).
 *
 *   C tile [mv ≤ 12, nv ≤ 32] (+)= A pairs [kp][12] · B pairs [kp][32]
 *
 * The panels are bf16 pairs along K (gemm.c, bf16_pack_pairs): dword
 * (p, i) holds element k = 2p in its low half and k = 2p + 1 in its high
 * half, a zero pads an odd K block. Each step broadcasts one A dword and
 * issues two VDPBF16PS per row of the tile: 32 multiply-adds per
 * instruction where the f32 kernel does 16, on panels half the bytes. The
 * 12×32 tile is the f32 one (24 accumulators + 2 B vectors of the 32 zmm).
 *
 * Every C element is, per K block, Σ over pairs in order of the
 * instruction's lane arithmetic (bf16_model.h: odd product first, fused,
 * DAZ/FTZ), then combined with C as the f32 kernel does (alpha·acc + base
 * in one FMA). gemm_bf16_block_ref is the plain-loop twin; the tests check
 * both builds of this file against it bit for bit: native on a CPU with
 * AVX512_BF16, and compiled against SIMDe (-DDLM_SIMDE) on any x86-64. */
#include "kern/simd_x86.h"

#include "kern/kern_impl.h"
#include "kern/bf16_model.h"

#include <math.h>

#if defined(__x86_64__) || defined(DLM_SIMDE)

#if defined(DLM_SIMDE)
#define BF_FN(n) n##_emu
#else
#define BF_FN(n) n##_avx512bf16
#endif
#define KT KX_TARGET_AVX512BF16
#define MR 12
#define NV 2
#define NR 32

KT static inline __attribute__((always_inline)) void ukr(int64_t kp, const uint32_t *A, const uint32_t *B, float *C,
                                                          int64_t ldc, int mv, int nv, const gemm_epi *e)
{
    __m512 acc[MR][NV];
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
        acc[i][0] = _mm512_setzero_ps();
        acc[i][1] = _mm512_setzero_ps();
    }
    /* The epilogue reads and writes this tile's C rows; asking for them
     * now hides their miss (L2/L3: the C block of a column unit is about
     * as large as L2) behind the K loop. */
    if (!e->ct)
        for (int i = 0; i < mv; i++) {
            _mm_prefetch((const char *)(C + i * ldc), _MM_HINT_T0);
            _mm_prefetch((const char *)(C + i * ldc + 16), _MM_HINT_T0);
        }
    for (int64_t p = 0; p < kp; p++, A += MR, B += NR) {
        const __m512i b0 = _mm512_loadu_si512(B), b1 = _mm512_loadu_si512(B + 16);
#pragma GCC unroll 12
        for (int i = 0; i < MR; i++) {
            const __m512i a = _mm512_set1_epi32((int)A[i]);
            acc[i][0] = kx_dpbf16_ps(acc[i][0], a, b0);
            acc[i][1] = kx_dpbf16_ps(acc[i][1], a, b1);
        }
    }
    if (e->ct) {
        /* transposed C (the operand swap of narrow outputs), one scalar at
         * a time with the f32 kernel's arithmetic */
        float t[MR][NR];
        for (int i = 0; i < MR; i++) {
            _mm512_storeu_ps(&t[i][0], acc[i][0]);
            _mm512_storeu_ps(&t[i][16], acc[i][1]);
        }
        for (int i = 0; i < mv; i++)
            for (int j = 0; j < nv; j++) {
                float *c = C + (int64_t)j * ldc + i, base;
                if (!e->first) base = *c;
                else {
                    base = e->beta == 0.f ? 0.f : *c;
                    if (e->beta != 0.f && e->beta != 1.f) base = base * e->beta;
                }
                *c = fmaf(e->alpha, t[i][j], base);
            }
        return;
    }
    const __m512 va = _mm512_set1_ps(e->alpha);
    for (int i = 0; i < mv; i++) {
        float *c = C + i * ldc;
        for (int j = 0; j < NV; j++) {
            int w = nv - j * 16;
            if (w <= 0) break;
            const __mmask16 m = w >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << w) - 1);
            float *cj = c + j * 16;
            __m512 base;
            if (!e->first) base = _mm512_maskz_loadu_ps(m, cj);
            else {
                base = e->beta == 0.f ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m, cj);
                if (e->beta != 0.f && e->beta != 1.f) base = _mm512_mul_ps(base, _mm512_set1_ps(e->beta));
                if (e->bias) base = _mm512_add_ps(base, _mm512_maskz_loadu_ps(m, e->bias + j * 16));
            }
            _mm512_mask_storeu_ps(cj, m, _mm512_fmadd_ps(va, acc[i][j], base));
        }
    }
}

/* kern_isa.gemm_block over pair panels: strips at the f32 panel offsets
 * (Ap + ir·kc floats), each holding ceil(kc/2)·MR dwords. Row strips
 * outside, column strips inside: the C tile's rows are then walked along,
 * which the prefetchers follow (perf: the epilogue's C load fell from 21%
 * to 17% of the kernel; 512×4864×896 went from 253–263 to 300–311
 * GFLOPS, one thread, Zen 5, three interleaved rounds). Tiles are
 * independent: the order changes no bit. */
KT void BF_FN(gemm_bf16_block)(int64_t mc, int64_t nc, int64_t kc, const float *Ap, const float *Bp, float *C,
                               int64_t ldc, const gemm_epi *e)
{
    const int64_t kp = (kc + 1) / 2;
    for (int64_t ir = 0; ir < mc; ir += MR) {
        int mv = (int)(mc - ir < MR ? mc - ir : MR);
        for (int64_t jr = 0; jr < nc; jr += NR) {
            int nv = (int)(nc - jr < NR ? nc - jr : NR);
            gemm_epi ej = *e;
            if (ej.bias) ej.bias += jr;
            float *ct = e->ct ? C + jr * ldc + ir : C + ir * ldc + jr;
            ukr(kp, (const uint32_t *)(Ap + ir * kc), (const uint32_t *)(Bp + jr * kc), ct, ldc, mv, nv, &ej);
        }
    }
}
#endif

/* ---- pair packers --------------------------------------------------------------
 * The panels of the bf16 pairs layout straight from the operands' rows, one
 * pass each (gemm_bf16.c), converted by VCVTNE2PS2BF16 (bf16_model.h's
 * bf16m_cvt, the tails too): f32_to_bf16's bits except that a subnormal
 * becomes a zero of its sign, which VDPBF16PS reads as zero anyway (DAZ),
 * so the products are the ones f32_to_bf16's panels give. One instruction
 * per 32 floats where the rounding took 14 (perf: bf16_pairs_f32 was 3.5%
 * of a Qwen2.5-0.5B bf16 step). */
#if defined(__x86_64__) || defined(DLM_SIMDE)
/* dst[p] = cvt(src[2p]) | cvt(src[2p+1]) << 16, p < ceil(n/2), the high
 * half 0 past n. dst may be src (each dword is stored after the floats it
 * needs, and never past them). */
KT void BF_FN(bf16_pairs_f32)(uint32_t *dst, const float *src, int64_t n)
{
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 lo = _mm512_loadu_ps(src + i), hi = _mm512_loadu_ps(src + i + 16);
        _mm512_storeu_si512(dst + i / 2, kx_cvtne2ps_pbh(hi, lo));
    }
    for (; i < n; i += 2) {
        uint32_t lo = bf16m_cvt(src[i]), hi = i + 1 < n ? bf16m_cvt(src[i + 1]) : 0;
        dst[i / 2] = lo | hi << 16;
    }
}

/* dst[j] = cvt(r0[j]) | cvt(r1[j]) << 16 (r1 NULL: 0), j < n. */
KT void BF_FN(bf16_zip_f32)(uint32_t *dst, const float *r0, const float *r1, int64_t n)
{
    /* words r0[0..15] then r1[0..15] → dwords (r0[j], r1[j]) */
    const __m512i ix = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                        21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m512 a = _mm512_loadu_ps(r0 + j), b = r1 ? _mm512_loadu_ps(r1 + j) : _mm512_setzero_ps();
        _mm512_storeu_si512(dst + j, _mm512_permutexvar_epi16(ix, kx_cvtne2ps_pbh(b, a)));
    }
    for (; j < n; j++) dst[j] = (uint32_t)bf16m_cvt(r0[j]) | (r1 ? (uint32_t)bf16m_cvt(r1[j]) << 16 : 0);
}

/* The same from bf16 rows (no rounding). */
KT void BF_FN(bf16_zip_bf16)(uint32_t *dst, const uint16_t *r0, const uint16_t *r1, int64_t n)
{
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m512i a = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(r0 + j)));
        if (r1)
            a = _mm512_or_si512(a, _mm512_slli_epi32(
                                       _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(r1 + j))), 16));
        _mm512_storeu_si512(dst + j, a);
    }
    for (; j < n; j++) dst[j] = (uint32_t)r0[j] | (r1 ? (uint32_t)r1[j] << 16 : 0);
}
#endif
