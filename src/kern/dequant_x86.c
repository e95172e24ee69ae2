/* dequant_x86 — vector dequantizers for the hot weight types. Each produces
 * exactly the floats of dequant_row_scalar (same integer values, the same
 * single multiply / subtract per element, no FMA), so the GEMM sees the
 * same weights at every ISA level. Types without a vector version return 0
 * and the caller falls back to the scalar loop. */
#if defined(__x86_64__)
#include <immintrin.h>
#include <string.h>

#include "kern/kern_impl.h"

#define A512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma,f16c")))
#define A2 __attribute__((target("avx2,fma,f16c")))


/* ---- AVX-512 ---------------------------------------------------------------- */


/* The 64 weights of sub-blocks 2j and 2j+1 of a Q4_K (144 bytes) or Q5_K
 * (176 bytes) block b (d, min: its two fp16 scales, read once per block by
 * the caller), as w[0..3] = elements 64j + 0, 16, 32, 48 onwards.
 * Shared by the dequantizer and the fused dot so both see the same floats. */
static inline __attribute__((always_inline)) A512 void qk45_w64(const uint8_t *b, int q5, int j, float d, float min,
                                                                __m512 w[4])
{
    const __m128i lo4 = _mm_set1_epi8(0x0F);
    const __m512i sixteen = _mm512_set1_epi32(16);
    const uint8_t *sc = b + 4, *qh = b + 16, *q = b + (q5 ? 48 : 16) + 32 * j;
    uint8_t s1, m1, s2, m2;
    kern_scmin_k4(sc, 2 * j, &s1, &m1);
    kern_scmin_k4(sc, 2 * j + 1, &s2, &m2);
    const __m512 d1 = _mm512_set1_ps(d * s1), mm1 = _mm512_set1_ps(min * m1);
    const __m512 d2 = _mm512_set1_ps(d * s2), mm2 = _mm512_set1_ps(min * m2);
    for (int h = 0; h < 2; h++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(q + 16 * h));
        __m512i lo = _mm512_cvtepu8_epi32(_mm_and_si128(v, lo4));
        __m512i hi = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(v, 4), lo4));
        if (q5) {
            __m512i hb = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(qh + 16 * h)));
            lo = _mm512_mask_add_epi32(lo, _mm512_test_epi32_mask(hb, _mm512_set1_epi32(1 << (2 * j))), lo, sixteen);
            hi = _mm512_mask_add_epi32(hi, _mm512_test_epi32_mask(hb, _mm512_set1_epi32(2 << (2 * j))), hi, sixteen);
        }
        w[h] = _mm512_sub_ps(_mm512_mul_ps(d1, _mm512_cvtepi32_ps(lo)), mm1);
        w[2 + h] = _mm512_sub_ps(_mm512_mul_ps(d2, _mm512_cvtepi32_ps(hi)), mm2);
    }
}

/* The 128 weights of half n of a Q6_K block b (210 bytes), as
 * w[0..7] = elements 128n + 0, 16, ..., 112 onwards. */
static inline __attribute__((always_inline)) A512 void q6k_w128(const uint8_t *b, int n, __m512 w[8])
{
    const __m512i m4 = _mm512_set1_epi32(0xF), m3 = _mm512_set1_epi32(3), c32 = _mm512_set1_epi32(32);
    const float d = kern_half(b + 208);
    const uint8_t *ql = b + 64 * n, *qh = b + 128 + 32 * n;
    const int8_t *sc = (const int8_t *)(b + 192) + 8 * n;
    for (int o = 0; o < 2; o++) {
        const int l0 = 16 * o;
        __m512i a = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(ql + l0)));
        __m512i c = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(ql + l0 + 32)));
        __m512i h = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(qh + l0)));
        __m512i q1 = _mm512_or_si512(_mm512_and_si512(a, m4), _mm512_slli_epi32(_mm512_and_si512(h, m3), 4));
        __m512i q2 = _mm512_or_si512(_mm512_and_si512(c, m4),
                                     _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, 2), m3), 4));
        __m512i q3 = _mm512_or_si512(_mm512_srli_epi32(a, 4),
                                     _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, 4), m3), 4));
        __m512i q4 = _mm512_or_si512(_mm512_srli_epi32(c, 4),
                                     _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, 6), m3), 4));
        w[0 + o] = _mm512_mul_ps(_mm512_set1_ps(d * sc[o + 0]), _mm512_cvtepi32_ps(_mm512_sub_epi32(q1, c32)));
        w[2 + o] = _mm512_mul_ps(_mm512_set1_ps(d * sc[o + 2]), _mm512_cvtepi32_ps(_mm512_sub_epi32(q2, c32)));
        w[4 + o] = _mm512_mul_ps(_mm512_set1_ps(d * sc[o + 4]), _mm512_cvtepi32_ps(_mm512_sub_epi32(q3, c32)));
        w[6 + o] = _mm512_mul_ps(_mm512_set1_ps(d * sc[o + 6]), _mm512_cvtepi32_ps(_mm512_sub_epi32(q4, c32)));
    }
}

/* nb K-quant blocks → floats, through the helpers above. */
static A512 void kq_avx512(dtype t, const uint8_t *b, float *y, int64_t nb)
{
    __m512 w[8];
    for (int64_t i = 0; i < nb; i++) {
        if (t == DT_Q6_K) {
            for (int n = 0; n < 2; n++, y += 128) {
                q6k_w128(b, n, w);
                for (int v = 0; v < 8; v++) _mm512_storeu_ps(y + 16 * v, w[v]);
            }
            b += 210;
        } else {
            const int q5 = t == DT_Q5_K;
            const float d = kern_half(b), min = kern_half(b + 2);
            for (int j = 0; j < 4; j++, y += 64) {
                qk45_w64(b, q5, j, d, min, w);
                for (int v = 0; v < 4; v++) _mm512_storeu_ps(y + 16 * v, w[v]);
            }
            b += q5 ? 176 : 144;
        }
    }
}

A512 int dequant_avx512(dtype t, const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    switch (t) {
    case DT_F16: {
        int64_t i = 0;
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + 2 * i))));
        for (; i < n; i++) { uint16_t h; memcpy(&h, b + 2 * i, 2); y[i] = fp16_to_f32(h); }
        return 1;
    }
    case DT_BF16: {
        int64_t i = 0;
        for (; i + 16 <= n; i += 16) {
            __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(b + 2 * i)));
            _mm512_storeu_ps(y + i, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
        }
        for (; i < n; i++) { uint16_t h; memcpy(&h, b + 2 * i, 2); y[i] = bf16_to_f32(h); }
        return 1;
    }
    case DT_Q8_0:
        for (int64_t i = 0; i < n / 32; i++, b += 34, y += 32) {
            const __m512 d = _mm512_set1_ps(kern_half(b));
            for (int h = 0; h < 2; h++) {
                __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 2 + 16 * h)));
                _mm512_storeu_ps(y + 16 * h, _mm512_mul_ps(_mm512_cvtepi32_ps(q), d));
            }
        }
        return 1;
    case DT_Q4_0: {
        const __m128i lo4 = _mm_set1_epi8(0x0F);
        const __m512i eight = _mm512_set1_epi32(8);
        for (int64_t i = 0; i < n / 32; i++, b += 18, y += 32) {
            const __m512 d = _mm512_set1_ps(kern_half(b));
            __m128i v = _mm_loadu_si128((const __m128i *)(b + 2));
            __m512i lo = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_and_si128(v, lo4)), eight);
            __m512i hi = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(v, 4), lo4)), eight);
            _mm512_storeu_ps(y, _mm512_mul_ps(_mm512_cvtepi32_ps(lo), d));
            _mm512_storeu_ps(y + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d));
        }
        return 1;
    }
    case DT_Q5_0: {
        const __m128i lo4 = _mm_set1_epi8(0x0F);
        const __m512i sixteen = _mm512_set1_epi32(16);
        for (int64_t i = 0; i < n / 32; i++, b += 22, y += 32) {
            const __m512 d = _mm512_set1_ps(kern_half(b));
            uint32_t qh;
            memcpy(&qh, b + 2, 4);
            __m128i v = _mm_loadu_si128((const __m128i *)(b + 6));
            __m512i lo = _mm512_cvtepu8_epi32(_mm_and_si128(v, lo4));
            __m512i hi = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(v, 4), lo4));
            lo = _mm512_mask_add_epi32(lo, (__mmask16)(qh & 0xFFFF), lo, sixteen);
            hi = _mm512_mask_add_epi32(hi, (__mmask16)(qh >> 16), hi, sixteen);
            _mm512_storeu_ps(y, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(lo, sixteen)), d));
            _mm512_storeu_ps(y + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(hi, sixteen)), d));
        }
        return 1;
    }
    case DT_Q4_K:
    case DT_Q5_K:
    case DT_Q6_K: kq_avx512(t, b, y, n / 256); return 1;
    default: return 0;
    }
}

/* ---- fused dequantize + dot (one-row matmul, i.e. decoding) --------------------
 * y = Σ_k x[k]·w[k] for one weight row, dequantizing 16 weights at a time in
 * registers. The weights are the exact floats of the dequantizers above and
 * they enter the sum in dot_rows' order (four accumulators over 64-element
 * chunks, then single vectors into the first, a partial vector into the
 * second, one horizontal sum), so the result is bit-identical to dequantize
 * + dot_rows; only the store and reload of the row are saved. */

#define FEED4(w0, w1, w2, w3) do { \
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k), w0, a0); \
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k + 16), w1, a1); \
    a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k + 32), w2, a2); \
    a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k + 48), w3, a3); \
    k += 64; } while (0)
#define FEED0(w) do { a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + k), w, a0); k += 16; } while (0)

static inline A512 __m512 q8_vec(const uint8_t *q, __m512 d)
{
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)q))), d);
}

A512 int dot_fused_avx512(dtype t, const void *src, const float *x, int64_t K, float *out)
{
    const uint8_t *b = src;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t k = 0;
    const __m128i lo4 = _mm_set1_epi8(0x0F);
    switch (t) {
    case DT_F16:
    case DT_BF16: {
#define HV(off) (t == DT_F16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + 2 * (off)))) \
        : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(b + 2 * (off)))), 16)))
        while (k + 64 <= K) {
            _mm_prefetch((const char *)(b + 2 * k) + KERN_PREFETCH_AHEAD, _MM_HINT_T0);
            _mm_prefetch((const char *)(b + 2 * k) + KERN_PREFETCH_AHEAD + 64, _MM_HINT_T0);
            FEED4(HV(k), HV(k + 16), HV(k + 32), HV(k + 48));
        }
        while (k + 16 <= K) FEED0(HV(k));
        if (k < K) {
            __mmask16 mk = (__mmask16)((1u << (K - k)) - 1);
            __m256i h = _mm256_maskz_loadu_epi16(mk, b + 2 * k);
            __m512 w = t == DT_F16 ? _mm512_cvtph_ps(h) : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
            a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, x + k), w, a1);
        }
#undef HV
        break;
    }
    case DT_Q8_0:
        for (; k + 64 <= K; b += 68) {
            __m512 d0 = _mm512_set1_ps(kern_half(b)), d1 = _mm512_set1_ps(kern_half(b + 34));
            FEED4(q8_vec(b + 2, d0), q8_vec(b + 18, d0), q8_vec(b + 36, d1), q8_vec(b + 52, d1));
        }
        if (k < K) {
            __m512 d0 = _mm512_set1_ps(kern_half(b));
            FEED0(q8_vec(b + 2, d0));
            FEED0(q8_vec(b + 18, d0));
        }
        break;
    case DT_Q4_0:
    case DT_Q5_0: {
        const int bb = t == DT_Q4_0 ? 18 : 22;
        __m512 w[4];
        while (k < K) {
            int nblk = k + 64 <= K ? 2 : 1;
            for (int i = 0; i < nblk; i++, b += bb) {
                const __m512 d = _mm512_set1_ps(kern_half(b));
                __m128i v = _mm_loadu_si128((const __m128i *)(b + (t == DT_Q4_0 ? 2 : 6)));
                __m512i lo = _mm512_cvtepu8_epi32(_mm_and_si128(v, lo4));
                __m512i hi = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(v, 4), lo4));
                if (t == DT_Q4_0) {
                    lo = _mm512_sub_epi32(lo, _mm512_set1_epi32(8));
                    hi = _mm512_sub_epi32(hi, _mm512_set1_epi32(8));
                } else {
                    uint32_t qh;
                    memcpy(&qh, b + 2, 4);
                    const __m512i sixteen = _mm512_set1_epi32(16);
                    lo = _mm512_sub_epi32(_mm512_mask_add_epi32(lo, (__mmask16)(qh & 0xFFFF), lo, sixteen), sixteen);
                    hi = _mm512_sub_epi32(_mm512_mask_add_epi32(hi, (__mmask16)(qh >> 16), hi, sixteen), sixteen);
                }
                w[2 * i] = _mm512_mul_ps(_mm512_cvtepi32_ps(lo), d);
                w[2 * i + 1] = _mm512_mul_ps(_mm512_cvtepi32_ps(hi), d);
            }
            if (nblk == 2) FEED4(w[0], w[1], w[2], w[3]);
            else { FEED0(w[0]); FEED0(w[1]); }
        }
        break;
    }
    case DT_Q4_K:
    case DT_Q5_K: {
        const int q5 = t == DT_Q5_K;
        __m512 w[4];
        for (; k < K; b += q5 ? 176 : 144) {
            const float d = kern_half(b), min = kern_half(b + 2);
            for (int j = 0; j < 4; j++) {
                qk45_w64(b, q5, j, d, min, w);
                FEED4(w[0], w[1], w[2], w[3]);
            }
        }
        break;
    }
    case DT_Q6_K: {
        __m512 w[8];
        for (; k < K; b += 210)
            for (int n = 0; n < 2; n++) {
                q6k_w128(b, n, w);
                FEED4(w[0], w[1], w[2], w[3]);
                FEED4(w[4], w[5], w[6], w[7]);
            }
        break;
    }
    default:
        return 0;
    }
    *out = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    return 1;
}
#undef FEED4
#undef FEED0

/* ---- AVX2 ----------------------------------------------------------------------- */

A2 int dequant_avx2(dtype t, const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    switch (t) {
    case DT_F16: {
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + 2 * i))));
        for (; i < n; i++) { uint16_t h; memcpy(&h, b + 2 * i, 2); y[i] = fp16_to_f32(h); }
        return 1;
    }
    case DT_BF16: {
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(b + 2 * i)));
            _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
        }
        for (; i < n; i++) { uint16_t h; memcpy(&h, b + 2 * i, 2); y[i] = bf16_to_f32(h); }
        return 1;
    }
    case DT_Q8_0:
        for (int64_t i = 0; i < n / 32; i++, b += 34, y += 32) {
            const __m256 d = _mm256_set1_ps(kern_half(b));
            for (int h = 0; h < 4; h++) {
                __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 2 + 8 * h)));
                _mm256_storeu_ps(y + 8 * h, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
            }
        }
        return 1;
    case DT_Q4_0: {
        const __m256i eight = _mm256_set1_epi32(8), m4 = _mm256_set1_epi32(0xF);
        for (int64_t i = 0; i < n / 32; i++, b += 18, y += 32) {
            const __m256 d = _mm256_set1_ps(kern_half(b));
            for (int h = 0; h < 2; h++) {
                __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(b + 2 + 8 * h)));
                __m256i lo = _mm256_sub_epi32(_mm256_and_si256(v, m4), eight);
                __m256i hi = _mm256_sub_epi32(_mm256_srli_epi32(v, 4), eight);
                _mm256_storeu_ps(y + 8 * h, _mm256_mul_ps(_mm256_cvtepi32_ps(lo), d));
                _mm256_storeu_ps(y + 16 + 8 * h, _mm256_mul_ps(_mm256_cvtepi32_ps(hi), d));
            }
        }
        return 1;
    }
    default: return 0;
    }
}

/* y = Σ_k x[k]·w[k] for one F16, BF16 or Q8_0 weight row, dequantized 8 at
 * a time in registers (the decode step's matvec on an AVX2 CPU). The same
 * order as dot_rows at VL 8 (four accumulators over 32-element chunks, then
 * single vectors into the first, a partial vector into the second, one
 * horizontal sum) and the exact floats of dequant_avx2, so the result is
 * bit-identical to dequant_avx2 + dot_rows (tests/unit/test_kern.c
 * test_dot_fused); the row is never stored. bench/api/RESULTS: the store and
 * reload of each dequantized row was 40% of a tiny F16 decode step. */
static inline A2 float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline A2 __m256 half8(dtype t, const uint8_t *p)
{
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    return t == DT_F16 ? _mm256_cvtph_ps(h) : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* out[i] for R ≤ 3 rows of x (ldx apart) against one weight row: each 8
 * dequantized weights converted once in registers and shared by the rows
 * (three rows' four accumulators and the weights fill the 16 ymm
 * registers). Every row keeps its own accumulators and gets the same
 * operations in the same order whatever R, so a row's result does not
 * depend on the rows beside it (tests/unit/test_kern.c test_dot_rows_groups). */
static inline __attribute__((always_inline)) A2 void fused_rows(dtype t, const uint8_t *b, const float *x,
                                                                int64_t ldx, int R, int64_t K, float *out)
{
    __m256 acc[3][4];
#pragma GCC unroll 3
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int h = 0; h < 4; h++) acc[i][h] = _mm256_setzero_ps();
    int64_t k = 0;
#define FMAR(h, off, wv)                                                                       \
    do {                                                                                       \
        const __m256 w_ = (wv);                                                                \
        _Pragma("GCC unroll 3") for (int i = 0; i < R; i++)                                    \
            acc[i][h] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * ldx + (off)), w_, acc[i][h]);  \
    } while (0)
    if (t == DT_Q8_0) {   /* K is whole blocks of 32: one block per chunk */
        for (; k + 32 <= K; k += 32, b += 34) {
            _mm_prefetch((const char *)b + KERN_PREFETCH_AHEAD, _MM_HINT_T0);
            const __m256 d = _mm256_set1_ps(kern_half(b));
#define Q8(h) _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b + 2 + 8 * (h))))), d)
            FMAR(0, k, Q8(0));
            FMAR(1, k + 8, Q8(1));
            FMAR(2, k + 16, Q8(2));
            FMAR(3, k + 24, Q8(3));
#undef Q8
        }
    } else {
        for (; k + 32 <= K; k += 32) {
            _mm_prefetch((const char *)(b + 2 * k) + KERN_PREFETCH_AHEAD, _MM_HINT_T0);
            FMAR(0, k, half8(t, b + 2 * k));
            FMAR(1, k + 8, half8(t, b + 2 * (k + 8)));
            FMAR(2, k + 16, half8(t, b + 2 * (k + 16)));
            FMAR(3, k + 24, half8(t, b + 2 * (k + 24)));
        }
        for (; k + 8 <= K; k += 8) FMAR(0, k, half8(t, b + 2 * k));
        if (k < K) {   /* the tail as dot_fused_avx2's: zero halves past K */
            int r = (int)(K - k);
            uint8_t tail[16] = {0};
            memcpy(tail, b + 2 * k, (size_t)r * 2);
            const __m256 wt = half8(t, tail);
#pragma GCC unroll 3
            for (int i = 0; i < R; i++) {
                float xt[8] = {0};
                memcpy(xt, x + i * ldx + k, (size_t)r * sizeof(float));
                acc[i][1] = _mm256_fmadd_ps(_mm256_loadu_ps(xt), wt, acc[i][1]);
            }
        }
    }
#undef FMAR
#pragma GCC unroll 3
    for (int i = 0; i < R; i++)
        out[i] = hsum8(_mm256_add_ps(_mm256_add_ps(acc[i][0], acc[i][1]), _mm256_add_ps(acc[i][2], acc[i][3])));
}

A2 int dot_fused_avx2(dtype t, const void *src, const float *x, int64_t K, float *out)
{
    if (t != DT_F16 && t != DT_BF16 && t != DT_Q8_0) return 0;
    fused_rows(t, src, x, 0, 1, K, out);
    return 1;
}

/* out[n] = dot_fused_avx2(t, src, x + n·ldx, K) for nx rows of x (batched
 * decoding: N sequences against one weight row), three rows at a time. */
A2 int dot_fused_n_avx2(dtype t, const void *src, const float *x, int64_t ldx, int nx, int64_t K, float *out)
{
    if (t != DT_F16 && t != DT_BF16 && t != DT_Q8_0) return 0;
    int n = 0;
    for (; n + 3 <= nx; n += 3) fused_rows(t, src, x + n * ldx, ldx, 3, K, out + n);
    if (nx - n == 2) fused_rows(t, src, x + n * ldx, ldx, 2, K, out + n);
    else if (nx - n == 1) fused_rows(t, src, x + n * ldx, ldx, 1, K, out + n);
    return 1;
}
#endif
