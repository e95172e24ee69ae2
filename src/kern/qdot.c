/* qdot — integer dot products for decoding. One row of x is rounded to
 * int8 per block exactly as llama.cpp rounds activations (quantize_row_
 * q8_K_ref for the K types, quantize_row_q8_0_ref / _q8_1_ref for the
 * 32-element ones), then each
 * weight row is dotted with it in integers with AVX512-VNNI (vpdpbusd:
 * 64 u8 × s8 products summed into 16 int32 lanes per instruction).
 *
 * Why: a decode step reads every weight once for a single row of x, so it
 * is bound by how fast weights are unpacked, not by FMAs. The f32 path
 * (dot_fused) widens, converts, scales and FMAs every 16 weights; here 64
 * weights cost one multiply-add instruction plus the nibble unpacking.
 * llama.cpp decodes the same way, so dlm's quantized decode also lands on
 * llama.cpp's numerics (r0304 checks the int8 bytes and the dots against
 * llama.cpp's own functions).
 *
 * The formats' offsets are folded in integers: Q4_K/Q5_K/Q4_1/Q5_1's q,
 * Q6_K's q + 32, Q4_0's q + 8 and Q5_0's q + 16 are already unsigned;
 * Q8_0's signed weights are biased by 128; each bias term (bias · Σ x_q of
 * the block) is subtracted spread over the block's lanes, so every block's
 * integer sum is exact. Only the per-block float scaling (and the mins,
 * m·d_x·Σ x_q) rounds, in a fixed order: results do not depend on the
 * thread count (rows are independent). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern_impl.h"

/* The 32-element types: their x is rounded in Q8_0 blocks (Q8_1 for the
 * ones with a min: the same int8, plus s = d·Σq). */
static int qx_blk32(dtype wt)
{
    return wt == DT_Q8_0 || wt == DT_Q4_0 || wt == DT_Q5_0 || wt == DT_Q4_1 || wt == DT_Q5_1;
}
static int qx_nib(dtype wt) { return wt == DT_Q4_0 || wt == DT_Q5_0 || wt == DT_Q4_1 || wt == DT_Q5_1; }

int qx_supported(dtype wt)
{
    if (!qx_blk32(wt) && wt != DT_Q4_K && wt != DT_Q5_K && wt != DT_Q6_K) return 0;
    return cpu_level() >= CPU_AVX512 && cpu_get_features()->avx512vnni;
}

int64_t qx_groups(dtype wt, int64_t K)
{
    return qx_nib(wt) ? K / 128 : 0;
}

int qx_at(const kern_q8x *q, int64_t k)
{
    int64_t ng = qx_groups(q->wt, q->K);
    if (k >= 128 * ng) return q->qs[k];
    int64_t b = k / 32, j = k % 32;
    return q->qs[(b / 4) * 128 + (j < 16 ? 0 : 64) + 16 * (b % 4) + j % 16];
}

static size_t up64(size_t n) { return (n + 63) & ~(size_t)63; }

size_t qx_bytes(int64_t K)
{
    size_t k = (size_t)(K > 0 ? K : 0);
    return up64(k) + 2 * up64(k / 32 * 4) + up64(k / 16 * 4) + up64(k / 32 * 4) + 2 * up64(k);
}

/* quantize_row_q8_0_ref for one block of 32: d = amax/127 stored as fp16
 * (*d its value as float), qs = round(x/d), *s = Σ qs, *sx = fp16(Σqs·d)
 * (quantize_row_q8_1_ref's s). */
void qx_round_q8_0(const float *xb, int8_t *qs, float *d, int *s, float *sx)
{
    float amax = 0.f;
    for (int j = 0; j < 32; j++)
        if (fabsf(xb[j]) > amax) amax = fabsf(xb[j]);
    const float dd = amax / 127.f, id = dd ? 1.0f / dd : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; j++) {
        qs[j] = (int8_t)roundf(xb[j] * id);
        sum += qs[j];
    }
    *d = fp16_to_f32(f32_to_fp16(dd));
    *s = sum;
    *sx = fp16_to_f32(f32_to_fp16((float)sum * dd));
}

/* quantize_row_q8_K_ref for one block of 256: the largest-magnitude
 * element maps to -127; bsum16[16] = Σ qs per 16. */
void qx_round_q8_K(const float *xb, int8_t *qs, float *d, int32_t *bsum16)
{
    float amax = 0.f, max = 0.f;
    for (int j = 0; j < 256; j++) {
        float ax = fabsf(xb[j]);
        if (ax > amax) { amax = ax; max = xb[j]; }
    }
    if (amax == 0.f) {
        *d = 0.f;
        memset(qs, 0, 256);
        for (int j = 0; j < 16; j++) bsum16[j] = 0;
        return;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < 256; j++) {
        int v = nearest_int(iscale * xb[j]);
        qs[j] = (int8_t)(v < 127 ? v : 127);
    }
    for (int j = 0; j < 16; j++) {
        int s = 0;
        for (int i = 0; i < 16; i++) s += qs[16 * j + i];
        bsum16[j] = s;
    }
    *d = 1.f / iscale;
}

int qx_quantize(kern_q8x *q, void *buf, dtype wt, const float *x, int64_t K)
{
    const int q80 = qx_blk32(wt), be = q80 ? 32 : 256;
    if (K <= 0 || K % be) return 0;
    for (int64_t i = 0; i < K; i++)
        if (!isfinite(x[i])) return 0;          /* let the f32 path propagate it */
    char *p = buf;
    size_t k = (size_t)K;
    q->qs = (int8_t *)p;                p += up64(k);
    q->d = (float *)p;                  p += up64(k / 32 * 4);
    q->bsum16 = (int32_t *)p;           p += up64(k / 16 * 4);
    q->bsum32 = (int32_t *)p;           p += up64(k / 32 * 4);
    q->corr = (int32_t *)p;             p += up64(k);
    q->dv = (float *)p;                 p += up64(k);
    q->sx = (float *)p;
    q->wt = wt;
    q->K = K;
    /* The weight format's bias (128 for Q8_0, 8 for Q4_0, 16 for Q5_0)
     * times Σ qs, spread over the lanes a block's products land in: 8 for
     * Q8_0 and the tail blocks, 4 inside the nibble types' groups. */
    const int bias = wt == DT_Q8_0 ? 128 : wt == DT_Q5_0 ? 16 : wt == DT_Q4_0 ? 8 : 0;
    const int64_t ngrp = qx_groups(wt, K);
    for (int64_t b = 0; b < K / be; b++) {
        const float *xb = x + b * be;
        int8_t tmp[32], *qs = q80 && b < 4 * ngrp ? tmp : q->qs + b * be;
        if (q80) {
            int s;
            qx_round_q8_0(xb, qs, &q->d[b], &s, &q->sx[b]);
            q->bsum32[b] = s;
            if (b < 4 * ngrp) {
                /* group layout: see qx_groups */
                int8_t *g = q->qs + (b / 4) * 128;
                memcpy(g + 16 * (b % 4), tmp, 16);
                memcpy(g + 64 + 16 * (b % 4), tmp + 16, 16);
                for (int l = 0; l < 4; l++) {
                    q->corr[16 * (b / 4) + 4 * (b % 4) + l] = s * (bias / 4);
                    q->dv[16 * (b / 4) + 4 * (b % 4) + l] = q->d[b];
                }
            } else {
                for (int l = 0; l < 8; l++) {
                    q->corr[16 * ngrp + 8 * (b - 4 * ngrp) + l] = s * (bias / 8);
                    q->dv[16 * ngrp + 8 * (b - 4 * ngrp) + l] = q->d[b];
                }
            }
            continue;
        }
        qx_round_q8_K(xb, qs, &q->d[b], q->bsum16 + b * 16);
        for (int j = 0; j < 8; j++) q->bsum32[b * 8 + j] = q->bsum16[b * 16 + 2 * j] + q->bsum16[b * 16 + 2 * j + 1];
    }
    return 1;
}

#if defined(__x86_64__)
#include <immintrin.h>

#define AV __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,fma,f16c")))
#define AVI static inline __attribute__((always_inline)) AV


AVI __m512i cat(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
/* The fp16 at offset off of four consecutive blocks of bb bytes, as f32. */
AVI __m128 half4(const uint8_t *b, int bb, int off)
{
    uint16_t h[4];
    for (int k = 0; k < 4; k++) memcpy(&h[k], b + k * bb + off, 2);
    uint64_t v = (uint64_t)h[0] | (uint64_t)h[1] << 16 | (uint64_t)h[2] << 32 | (uint64_t)h[3] << 48;
    return _mm_cvtph_ps(_mm_cvtsi64_si128((long long)v));
}
AVI __m512i cat1(int32_t lo, int32_t hi) { return cat(_mm256_set1_epi32(lo), _mm256_set1_epi32(hi)); }

/* Q4_K (144-byte blocks): d, dmin (fp16), 12 bytes of 6-bit scales/mins,
 * 128 bytes of nibbles; bytes 32j..32j+31 hold elements 64j..64j+31 (low
 * nibbles) and 64j+32..64j+63 (high), so one zmm of [lo | hi] lines up
 * with 64 consecutive int8 of x. w = d·sc·q − dmin·m. Q5_K (176 bytes)
 * adds 32 bytes of fifth bits before the nibbles (q up to 31). */
AVI float dot_qk45(const uint8_t *b, const kern_q8x *x, int q5)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), sixteen = _mm256_set1_epi8(16);
    const int bb = q5 ? 176 : 144;
    __m512 acc = _mm512_setzero_ps();
    __m256 macc = _mm256_setzero_ps();
    for (int64_t i = 0; i < x->K / 256; i++, b += bb) {
        _mm_prefetch((const char *)b + KERN_PREFETCH_AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + KERN_PREFETCH_AHEAD + 64, _MM_HINT_T0);
        _mm_prefetch((const char *)b + KERN_PREFETCH_AHEAD + 128, _MM_HINT_T0);
        const __m256i hb = q5 ? _mm256_loadu_si256((const __m256i *)(b + 16)) : m4;
        const float d = kern_half(b) * x->d[i], dmin = kern_half(b + 2) * x->d[i];
        uint8_t s[8], m[8];
        for (int j = 0; j < 8; j++) kern_scmin_k4(b + 4, j, &s[j], &m[j]);
        const int8_t *q8 = x->qs + 256 * i;
        __m512i isum = _mm512_setzero_si512();
        for (int j = 0; j < 4; j++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(b + (q5 ? 48 : 16) + 32 * j));
            __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            if (q5) {                   /* Q5_K: bit 2j / 2j+1 of qh[l] is element l's fifth bit */
                lo = _mm256_mask_add_epi8(lo, _mm256_test_epi8_mask(hb, _mm256_set1_epi8((char)(1 << (2 * j)))), lo, sixteen);
                hi = _mm256_mask_add_epi8(hi, _mm256_test_epi8_mask(hb, _mm256_set1_epi8((char)(2 << (2 * j)))), hi, sixteen);
            }
            __m512i w = cat(lo, hi);
            __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, _mm512_loadu_si512(q8 + 64 * j));
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(p, cat1(s[2 * j], s[2 * j + 1])));
        }
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d), acc);
        __m256i mv = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)m));
        __m256i bs = _mm256_loadu_si256((const __m256i *)(x->bsum32 + 8 * i));
        macc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_mullo_epi32(mv, bs)), _mm256_set1_ps(dmin), macc);
    }
    __m128 m2 = _mm_add_ps(_mm256_castps256_ps128(macc), _mm256_extractf128_ps(macc, 1));
    m2 = _mm_add_ps(m2, _mm_movehl_ps(m2, m2));
    m2 = _mm_add_ss(m2, _mm_movehdup_ps(m2));
    return _mm512_reduce_add_ps(acc) - _mm_cvtss_f32(m2);
}

/* Q6_K (210-byte blocks): ql[128] low nibbles, qh[64] 2-bit highs, 16
 * int8 scales (one per 16 elements), d (fp16). w = d·sc·(q − 32), q in
 * 0..63; the −32 is folded per block as −32·Σ sc·bsum16 in the lanes. */
AV static float dot_q6k(const uint8_t *b, const kern_q8x *x)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    static const int32_t rep4[4][16] = {
        {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3},
        {4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7},
        {8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11},
        {12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15},
    };
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < x->K / 256; i++, b += 210) {
        for (int l = 0; l < 4; l++) _mm_prefetch((const char *)b + KERN_PREFETCH_AHEAD + 64 * l, _MM_HINT_T0);
        const float d = kern_half(b + 208) * x->d[i];
        const __m512i scv = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(b + 192)));
        const int8_t *q8 = x->qs + 256 * i;
        /* the offset term first: −32·sc[g]·Σx[g] per group g of 16 */
        __m512i isum = _mm512_slli_epi32(
            _mm512_mullo_epi32(scv, _mm512_loadu_si512(x->bsum16 + 16 * i)), 5);
        isum = _mm512_sub_epi32(_mm512_setzero_si512(), isum);
        for (int n = 0; n < 2; n++) {
            const uint8_t *ql = b + 64 * n, *qh = b + 128 + 32 * n;
            __m256i l0 = _mm256_loadu_si256((const __m256i *)ql);
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            __m256i h = _mm256_loadu_si256((const __m256i *)qh);
            __m256i q1 = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
            __m256i q2 = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4));
            __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4));
            __m256i q4 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4));
            __m512i pa = _mm512_dpbusd_epi32(_mm512_setzero_si512(), cat(q1, q2),
                                             _mm512_loadu_si512(q8 + 128 * n));
            __m512i pb = _mm512_dpbusd_epi32(_mm512_setzero_si512(), cat(q3, q4),
                                             _mm512_loadu_si512(q8 + 128 * n + 64));
            __m512i sa = _mm512_permutexvar_epi32(_mm512_loadu_si512(rep4[2 * n]), scv);
            __m512i sb = _mm512_permutexvar_epi32(_mm512_loadu_si512(rep4[2 * n + 1]), scv);
            isum = _mm512_add_epi32(isum, _mm512_add_epi32(_mm512_mullo_epi32(pa, sa), _mm512_mullo_epi32(pb, sb)));
        }
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d), acc);
    }
    return _mm512_reduce_add_ps(acc);
}

/* Layouts of the 32-element types (bytes): Q8_0 34 = fp16 d, 32 int8;
 * Q4_0 18 = d, 16 nibble bytes (element j low, j+16 high); Q5_0 22 = d,
 * 32 high bits, nibbles; Q4_1 20 = d, m, nibbles; Q5_1 24 = d, m, high
 * bits, nibbles. w = d·q (− 8 / − 16 for Q4_0 / Q5_0) + m. */
static inline int blk_bytes(dtype t)
{
    return t == DT_Q8_0 ? 34 : t == DT_Q4_0 ? 18 : t == DT_Q5_0 ? 22 : t == DT_Q4_1 ? 20 : 24;
}
static inline int nib_off(dtype t) { return t == DT_Q4_0 ? 2 : t == DT_Q5_0 ? 6 : t == DT_Q4_1 ? 4 : 8; }
static inline int qh_off(dtype t) { return t == DT_Q5_0 ? 2 : t == DT_Q5_1 ? 4 : 0; }
static inline int has_min(dtype t) { return t == DT_Q4_1 || t == DT_Q5_1; }

/* The 32 weights of a block as unsigned bytes in element order (Q8_0
 * biased by 128, the others their unsigned q). */
AVI __m256i u8_block(dtype t, const uint8_t *b)
{
    if (t == DT_Q8_0) return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(b + 2)), _mm256_set1_epi8((char)0x80));
    const __m128i m4 = _mm_set1_epi8(0x0F);
    __m128i v = _mm_loadu_si128((const __m128i *)(b + nib_off(t)));
    __m256i u = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(v, m4)),
                                        _mm_and_si128(_mm_srli_epi16(v, 4), m4), 1);
    if (qh_off(t)) {
        uint32_t qh;
        memcpy(&qh, b + qh_off(t), 4);
        u = _mm256_mask_add_epi8(u, (__mmask32)qh, u, _mm256_set1_epi8(16));
    }
    return u;
}

/* Blocks i0.. of a 32-element type against x in Q8_0 blocks (element
 * order), two blocks per zmm; x's corr and dv from lane c0 on, 8 per
 * block. */
AVI __m512 dot_q32(dtype t, const uint8_t *b, const kern_q8x *x, int64_t i, int64_t c, __m512 acc)
{
    const int bb = blk_bytes(t);
    float mins = 0.f;                   /* Σ m·s over the blocks (Q4_1 / Q5_1) */
    /* lanes 0-7 take the first fp16 d, lanes 8-15 the second */
    const __m512i two = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const int64_t nb = x->K / 32;
    for (; i + 2 <= nb; i += 2, c += 16, b += 2 * bb) {
        _mm_prefetch((const char *)b + KERN_PREFETCH_AHEAD, _MM_HINT_T0);
        if (t == DT_Q8_0) _mm_prefetch((const char *)b + KERN_PREFETCH_AHEAD + 64, _MM_HINT_T0);
        if (has_min(t)) mins += kern_half(b + 2) * x->sx[i] + kern_half(b + bb + 2) * x->sx[i + 1];
        __m512i w = cat(u8_block(t, b), u8_block(t, b + bb));
        __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, _mm512_loadu_si512(x->qs + 32 * i));
        p = _mm512_sub_epi32(p, _mm512_loadu_si512(x->corr + c));
        uint16_t h0, h1;
        memcpy(&h0, b, 2);
        memcpy(&h1, b + bb, 2);
        __m128i hh = _mm_cvtsi32_si128((int)((uint32_t)h0 | (uint32_t)h1 << 16));
        __m512 dw = _mm512_permutexvar_ps(two, _mm512_castps128_ps512(_mm_cvtph_ps(hh)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw, _mm512_loadu_ps(x->dv + c)), acc);
    }
    if (i < nb) {
        __m512i w = _mm512_zextsi256_si512(u8_block(t, b));
        __m512i xq = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(x->qs + 32 * i)));
        __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w, xq);
        p = _mm512_sub_epi32(p, _mm512_set1_epi32(x->corr[c]));
        acc = _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_set1_ps(kern_half(b) * x->d[i]), acc, 0x00FF);
        if (has_min(t)) mins += kern_half(b + 2) * x->sx[i];
    }
    return _mm512_mask_add_ps(acc, 1, acc, _mm512_set1_ps(mins));
}

/* Q4_0 / Q5_0 / Q4_1 / Q5_1 four blocks at a time: the 4 × 16 nibble bytes in one zmm
 * give the low halves of the four blocks (and, shifted, the high halves)
 * without any byte shuffling, because x was stored in that order
 * (qx_groups); each block's products land in 4 lanes. */
AVI float dot_nib(dtype t, const uint8_t *b, const kern_q8x *x)
{
    const int bb = blk_bytes(t), off = nib_off(t), qo = qh_off(t), q5 = qo != 0;
    const __m512i m4 = _mm512_set1_epi8(0x0F), sixteen = _mm512_set1_epi8(16);
    const __m512i four = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const int64_t ng = qx_groups(t, x->K);
    __m512 acc = _mm512_setzero_ps();
    __m128 macc = _mm_setzero_ps();
    for (int64_t g = 0; g < ng; g++, b += 4 * bb) {
        /* the weights stream from memory once: ask for them early */
        _mm_prefetch((const char *)b + KERN_PREFETCH_AHEAD, _MM_HINT_T0);
        _mm_prefetch((const char *)b + KERN_PREFETCH_AHEAD + 64, _MM_HINT_T0);
        __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(b + off)));
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(b + bb + off)), 1);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(b + 2 * bb + off)), 2);
        v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(b + 3 * bb + off)), 3);
        __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        if (q5) {
            uint32_t h[4];
            for (int k = 0; k < 4; k++) memcpy(&h[k], b + k * bb + qo, 4);
            uint64_t mlo = (uint64_t)(h[0] & 0xFFFF) | (uint64_t)(h[1] & 0xFFFF) << 16 |
                           (uint64_t)(h[2] & 0xFFFF) << 32 | (uint64_t)(h[3] & 0xFFFF) << 48;
            uint64_t mhi = (uint64_t)(h[0] >> 16) | (uint64_t)(h[1] >> 16) << 16 |
                           (uint64_t)(h[2] >> 16) << 32 | (uint64_t)(h[3] >> 16) << 48;
            lo = _mm512_mask_add_epi8(lo, (__mmask64)mlo, lo, sixteen);
            hi = _mm512_mask_add_epi8(hi, (__mmask64)mhi, hi, sixteen);
        }
        const int8_t *xq = x->qs + 128 * g;
        __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_loadu_si512(xq));
        p = _mm512_dpbusd_epi32(p, hi, _mm512_loadu_si512(xq + 64));
        p = _mm512_sub_epi32(p, _mm512_loadu_si512(x->corr + 16 * g));
        __m512 dw = _mm512_permutexvar_ps(four, _mm512_castps128_ps512(half4(b, bb, 0)));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(dw, _mm512_loadu_ps(x->dv + 16 * g)), acc);
        if (has_min(t))                 /* + m·s per block, s = d_x·Σ x_q */
            macc = _mm_fmadd_ps(half4(b, bb, 2), _mm_loadu_ps(x->sx + 4 * g), macc);
    }
    acc = _mm512_add_ps(acc, _mm512_zextps128_ps512(macc));
    acc = dot_q32(t, b, x, 4 * ng, 16 * ng, acc);
    return _mm512_reduce_add_ps(acc);
}
AV static float dot_q80(const uint8_t *b, const kern_q8x *x)
{
    return _mm512_reduce_add_ps(dot_q32(DT_Q8_0, b, x, 0, 0, _mm512_setzero_ps()));
}
AV static float dot_q40(const uint8_t *b, const kern_q8x *x) { return dot_nib(DT_Q4_0, b, x); }
AV static float dot_q41(const uint8_t *b, const kern_q8x *x) { return dot_nib(DT_Q4_1, b, x); }
AV static float dot_q51(const uint8_t *b, const kern_q8x *x) { return dot_nib(DT_Q5_1, b, x); }
AV static float dot_q4k(const uint8_t *b, const kern_q8x *x) { return dot_qk45(b, x, 0); }
AV static float dot_q5k(const uint8_t *b, const kern_q8x *x) { return dot_qk45(b, x, 1); }
AV static float dot_q50(const uint8_t *b, const kern_q8x *x) { return dot_nib(DT_Q5_0, b, x); }

float qx_dot(const kern_q8x *x, const void *w)
{
    switch (x->wt) {
    case DT_Q4_K: return dot_q4k(w, x);
    case DT_Q5_K: return dot_q5k(w, x);
    case DT_Q4_1: return dot_q41(w, x);
    case DT_Q5_1: return dot_q51(w, x);
    case DT_Q6_K: return dot_q6k(w, x);
    case DT_Q8_0: return dot_q80(w, x);
    case DT_Q4_0: return dot_q40(w, x);
    case DT_Q5_0: return dot_q50(w, x);
    default: return 0.f;
    }
}
#else
float qx_dot(const kern_q8x *x, const void *w) { (void)x; (void)w; return 0.f; }
#endif
