/* dropout — keep masks drawn from Philox-4x32-10 (util/rng.c), 16 (AVX-512)
 * or 8 (AVX2) counters at a time, and their application.
 *
 * Element i is kept iff rng_uniform(seed, purpose, step, i) >= p, i.e. iff
 * (word0 >> 8) >= ceil(p·2^24) for word 0 of the Philox block of counter
 * (step, i): the same draws as rng_uniform, bit for bit, so a mask does not
 * depend on the ISA level, the thread count or how [0, n) is cut. */
#include "kern/kern_impl.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

typedef struct drop_job {
    uint8_t *keep;
    const float *src;
    float *dst;
    const uint8_t *mask;
    int64_t n;
    uint32_t thr, k0, k1, c0, c1;
    float scale;
} drop_job;

/* word 0 of Philox-4x32-10 for counter (c0, c1, index lo, index hi) */
static uint32_t philox_w0(const drop_job *j, uint64_t i)
{
    uint32_t c0 = j->c0, c1 = j->c1, c2 = (uint32_t)i, c3 = (uint32_t)(i >> 32), k0 = j->k0, k1 = j->k1;
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0, p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    return c0;
}

/* mask bits [b, e) (multiples of 8 except at n) */
static void mask_scalar(const drop_job *j, int64_t b, int64_t e)
{
    for (int64_t i = b; i < e; i++) {
        uint8_t bit = (uint8_t)(1u << (i & 7));
        if ((philox_w0(j, (uint64_t)i) >> 8) >= j->thr) j->keep[i >> 3] |= bit;
        else j->keep[i >> 3] &= (uint8_t)~bit;
    }
}

#if defined(__x86_64__)
#define A512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl")))
#define A2 __attribute__((target("avx2")))

/* hi and lo 32 bits of m·a for 16 lanes */
static inline A512 void mulhilo16(__m512i a, __m512i m, __m512i *hi, __m512i *lo)
{
    __m512i pe = _mm512_mul_epu32(a, m);
    __m512i po = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m);
    *hi = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(pe, 32), po);
    *lo = _mm512_mask_blend_epi32(0xAAAA, pe, _mm512_slli_epi64(po, 32));
}

/* counters i .. i+15: (c2, c3) = the 64-bit index, lane by lane */
static inline A512 void index16(int64_t i, __m512i lane, __m512i *c2, __m512i *c3)
{
    *c2 = _mm512_add_epi32(_mm512_set1_epi32((int)(uint32_t)i), lane);
    /* index hi: +1 in the lanes whose low word wrapped */
    __mmask16 wrap = _mm512_cmplt_epu32_mask(*c2, _mm512_set1_epi32((int)(uint32_t)i));
    const __m512i hi = _mm512_set1_epi32((int)(uint32_t)((uint64_t)i >> 32));
    *c3 = _mm512_mask_add_epi32(hi, wrap, hi, _mm512_set1_epi32(1));
}

#define DROP_W 4    /* 16-lane Philox blocks in flight: one block's rounds are a serial chain */

static A512 void mask_avx512(const drop_job *j, int64_t b, int64_t e)
{
    const __m512i m0 = _mm512_set1_epi32((int)PHILOX_M0), m1 = _mm512_set1_epi32((int)PHILOX_M1);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i thr = _mm512_set1_epi32((int)j->thr);
    int64_t i = b;
    /* DROP_W blocks at a time, each the same rounds as the single-block
     * loop below (interleaved for the multiplier's latency): same bits */
    for (; i + 16 * DROP_W <= e; i += 16 * DROP_W) {
        __m512i c0[DROP_W], c1[DROP_W], c2[DROP_W], c3[DROP_W];
#pragma GCC unroll 4
        for (int w = 0; w < DROP_W; w++) {
            c0[w] = _mm512_set1_epi32((int)j->c0);
            c1[w] = _mm512_set1_epi32((int)j->c1);
            index16(i + 16 * w, lane, &c2[w], &c3[w]);
        }
        uint32_t k0 = j->k0, k1 = j->k1;
        for (int r = 0; r < 10; r++) {
            const __m512i vk0 = _mm512_set1_epi32((int)k0), vk1 = _mm512_set1_epi32((int)k1);
#pragma GCC unroll 4
            for (int w = 0; w < DROP_W; w++) {
                __m512i hi0, lo0, hi1, lo1;
                mulhilo16(c0[w], m0, &hi0, &lo0);
                mulhilo16(c2[w], m1, &hi1, &lo1);
                c0[w] = _mm512_xor_si512(_mm512_xor_si512(hi1, c1[w]), vk0);
                c2[w] = _mm512_xor_si512(_mm512_xor_si512(hi0, c3[w]), vk1);
                c1[w] = lo1;
                c3[w] = lo0;
            }
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
#pragma GCC unroll 4
        for (int w = 0; w < DROP_W; w++) {
            __mmask16 keep = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(c0[w], 8), thr);
            memcpy(j->keep + ((i + 16 * w) >> 3), &keep, 2);
        }
    }
    for (; i + 16 <= e; i += 16) {
        __m512i c0 = _mm512_set1_epi32((int)j->c0), c1 = _mm512_set1_epi32((int)j->c1);
        __m512i c2 = _mm512_add_epi32(_mm512_set1_epi32((int)(uint32_t)i), lane);
        /* index hi: +1 in the lanes whose low word wrapped */
        __mmask16 wrap = _mm512_cmplt_epu32_mask(c2, _mm512_set1_epi32((int)(uint32_t)i));
        __m512i c3 = _mm512_mask_add_epi32(_mm512_set1_epi32((int)(uint32_t)((uint64_t)i >> 32)), wrap,
                                           _mm512_set1_epi32((int)(uint32_t)((uint64_t)i >> 32)),
                                           _mm512_set1_epi32(1));
        uint32_t k0 = j->k0, k1 = j->k1;
        for (int r = 0; r < 10; r++) {
            __m512i hi0, lo0, hi1, lo1;
            mulhilo16(c0, m0, &hi0, &lo0);
            mulhilo16(c2, m1, &hi1, &lo1);
            c0 = _mm512_xor_si512(_mm512_xor_si512(hi1, c1), _mm512_set1_epi32((int)k0));
            c2 = _mm512_xor_si512(_mm512_xor_si512(hi0, c3), _mm512_set1_epi32((int)k1));
            c1 = lo1;
            c3 = lo0;
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        __mmask16 keep = _mm512_cmpge_epu32_mask(_mm512_srli_epi32(c0, 8), thr);
        memcpy(j->keep + (i >> 3), &keep, 2);
    }
    mask_scalar(j, i, e);
}

static inline A2 void mulhilo8(__m256i a, __m256i m, __m256i *hi, __m256i *lo)
{
    __m256i pe = _mm256_mul_epu32(a, m);
    __m256i po = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
    *hi = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);
    *lo = _mm256_blend_epi32(pe, _mm256_slli_epi64(po, 32), 0xAA);
}

static A2 void mask_avx2(const drop_job *j, int64_t b, int64_t e)
{
    const __m256i m0 = _mm256_set1_epi32((int)PHILOX_M0), m1 = _mm256_set1_epi32((int)PHILOX_M1);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
    /* unsigned >= through signed compare of sign-flipped values */
    const __m256i thr1 = _mm256_xor_si256(_mm256_set1_epi32((int)j->thr - 1), sign);
    int64_t i = b;
    for (; i + 8 <= e; i += 8) {
        if ((uint32_t)i > 0xFFFFFFF7u) break;     /* index low word wraps inside: scalar */
        __m256i c0 = _mm256_set1_epi32((int)j->c0), c1 = _mm256_set1_epi32((int)j->c1);
        __m256i c2 = _mm256_add_epi32(_mm256_set1_epi32((int)(uint32_t)i), lane);
        __m256i c3 = _mm256_set1_epi32((int)(uint32_t)((uint64_t)i >> 32));
        uint32_t k0 = j->k0, k1 = j->k1;
        for (int r = 0; r < 10; r++) {
            __m256i hi0, lo0, hi1, lo1;
            mulhilo8(c0, m0, &hi0, &lo0);
            mulhilo8(c2, m1, &hi1, &lo1);
            c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32((int)k0));
            c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32((int)k1));
            c1 = lo1;
            c3 = lo0;
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        __m256i u = _mm256_xor_si256(_mm256_srli_epi32(c0, 8), sign);
        uint8_t keep;
        if (j->thr == 0) keep = 0xFF;
        else keep = (uint8_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(u, thr1)));
        j->keep[i >> 3] = keep;
    }
    mask_scalar(j, i, e);
}
#endif

static void mask_range(void *ctx, int64_t b, int64_t e)
{
    const drop_job *j = ctx;
    /* whole bytes per chunk: [8b, 8e) */
    int64_t lo = b * 8, hi = e * 8 < j->n ? e * 8 : j->n;
#if defined(__x86_64__)
    switch (cpu_level()) {
    case CPU_AVX512: mask_avx512(j, lo, hi); return;
    case CPU_AVX2: mask_avx2(j, lo, hi); return;
    default: break;
    }
#endif
    mask_scalar(j, lo, hi);
}

static void setup(drop_job *j, float p, uint64_t seed, uint32_t purpose, uint64_t step)
{
    /* the key and counter words of rng_philox (util/rng.c) */
    j->k0 = (uint32_t)seed ^ (purpose * 0x85EBCA6Bu);
    j->k1 = (uint32_t)(seed >> 32) ^ (purpose * 0xC2B2AE35u);
    j->c0 = (uint32_t)step;
    j->c1 = (uint32_t)(step >> 32);
    /* u = (w0 >> 8)·2^-24 >= p  ⟺  (w0 >> 8) >= ceil(p·2^24) (exact in double) */
    double t = ceil((double)p * 16777216.0);
    j->thr = !(t > 0) ? 0 : t > 16777216.0 ? 16777216u : (uint32_t)t;
}

void kern_dropout_mask(uint8_t *keep, int64_t n, float p, uint64_t seed, uint32_t purpose, uint64_t step)
{
    if (n <= 0) return;
    drop_job j = {.keep = keep, .n = n};
    setup(&j, p, seed, purpose, step);
    int64_t bytes = (n + 7) / 8;
    if (n < 4096) mask_range(&j, 0, bytes);
    else kern_parallel_for(bytes, mask_range, &j);
}

static void apply_scalar(const drop_job *j, int64_t b, int64_t e)
{
    for (int64_t i = b; i < e; i++)
        j->dst[i] = (j->mask[i >> 3] >> (i & 7) & 1) ? j->src[i] * j->scale : 0.0f;
}

#if defined(__x86_64__)
static A512 void apply_avx512(const drop_job *j, int64_t b, int64_t e)
{
    const __m512 sc = _mm512_set1_ps(j->scale);
    int64_t i = b;
    for (; i < e && (i & 7); i++) apply_scalar(j, i, i + 1);
    for (; i + 16 <= e; i += 16) {
        __mmask16 k;
        memcpy(&k, j->mask + (i >> 3), 2);
        _mm512_storeu_ps(j->dst + i, _mm512_maskz_mul_ps(k, _mm512_loadu_ps(j->src + i), sc));
    }
    apply_scalar(j, i, e);
}
#endif

/* keep bit ? src·scale : 0 — a product or an exact zero, so the vector and
 * scalar paths agree bit for bit */
static void apply_range(void *ctx, int64_t b, int64_t e)
{
    const drop_job *j = ctx;
#if defined(__x86_64__)
    if (cpu_level() == CPU_AVX512) { apply_avx512(j, b, e); return; }
#endif
    apply_scalar(j, b, e);
}

void kern_dropout_apply(float *dst, const float *src, const uint8_t *keep, int64_t n, float scale)
{
    if (n <= 0) return;
    drop_job j = {.dst = dst, .src = src, .mask = keep, .n = n, .scale = scale};
    if (n < 16384) apply_range(&j, 0, n);
    else kern_parallel_for(n, apply_range, &j);
}

/* dst += keep ? src·scale : 0, the plain loop: twin of kern_drop_add_avx512
 * (ops_avx512.c). The dropped term is +0 and still added (−0 + 0 = +0), so
 * this is exactly kern_dropout_apply into a buffer, then dst[i] += it. */
void kern_drop_add_ref(float *dst, const float *src, const uint8_t *keep, int64_t n, float scale)
{
    for (int64_t i = 0; i < n; i++) dst[i] += (keep[i >> 3] >> (i & 7) & 1) ? src[i] * scale : 0.0f;
}

/* blocks of 16 elements [b, e) (whole mask bytes) */
static void add_range(void *ctx, int64_t b, int64_t e)
{
    const drop_job *j = ctx;
    int64_t lo = b * 16, hi = e * 16 < j->n ? e * 16 : j->n;
#if defined(__x86_64__)
    if (cpu_level() == CPU_AVX512) {
        kern_drop_add_avx512(j->dst + lo, j->src + lo, j->mask + lo / 8, hi - lo, j->scale);
        return;
    }
#endif
    kern_drop_add_ref(j->dst + lo, j->src + lo, j->mask + lo / 8, hi - lo, j->scale);
}

void kern_dropout_add(float *dst, const float *src, const uint8_t *keep, int64_t n, float scale)
{
    if (n <= 0) return;
    drop_job j = {.dst = dst, .src = src, .mask = keep, .n = n, .scale = scale};
    int64_t blocks = (n + 15) / 16;
    if (n < 16384) add_range(&j, 0, blocks);
    else kern_parallel_for(blocks, add_range, &j);
}
