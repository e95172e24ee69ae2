/* qmm_vnni — the int8 prefill's vector kernels (qmm_body.inc over one
 * panel, see qmm.c), built twice per width:
 *
 *   native: qmm_panel_512 (AVX512-VNNI, 16 lanes) and qmm_panel_256
 *     (AVX-VNNI, the VEX form on Alder Lake / Zen 5 and later, 8 lanes),
 *     each with its target attribute, run where cpu.c found the ISA;
 *   emulated (-DDLM_SIMDE, tests/unit/emu_qmm.c): the same source against
 *     SIMDe as qmm_panel_512_emu / qmm_panel_256_emu, on any x86-64.
 *
 * Integer products are exact in any implementation; the float steps are
 * per lane cvt, mul and one fused multiply-add (simd_x86.h makes SIMDe's
 * FMA exact), so both builds give qmm_panel_ref's bits. */
#include "kern/simd_x86.h"

#include "kern/kern_impl.h"

#include <string.h>

#if defined(__x86_64__) || defined(DLM_SIMDE)

#define TW QMM_TILE_ROWS
#define QMM_CAT2_(a, b) a##b
#define QMM_CAT2(a, b) QMM_CAT2_(a, b)

#if defined(DLM_SIMDE)
#define QMM_T512
#define QMM_T256
#define QMM_S512 _512_emu
#define QMM_S256 _256_emu
/* SIMDe has the AVX512-VL form; AVX-VNNI's VEX form computes the same */
#define QMM_DP256(a, w, x) _mm256_dpbusd_epi32(a, w, x)
#define QMM_DPW256(a, w, x) _mm256_dpwssd_epi32(a, w, x)
/* int32 → float per lane, round to nearest (SIMDe 0.7.4 lacks the 512-bit one) */
static inline __m512 qmm_cvt512(__m512i a)
{
    int32_t v[16];
    float f[16];
    _mm512_storeu_si512((void *)v, a);
    for (int i = 0; i < 16; i++) f[i] = (float)v[i];
    return _mm512_loadu_ps(f);
}
#define QMM_CVT512(a) qmm_cvt512(a)
void qmm_panel_512_emu(const qmm_panel *p, const qmm_x *x, int64_t n0, int R, float *out);
void qmm_panel_256_emu(const qmm_panel *p, const qmm_x *x, int64_t n0, int R, float *out);
int qmm_unpack_row_512_emu(dtype t, const uint8_t *b, int64_t K, uint8_t *u, float *d, float *d2, int32_t *sc,
                           int32_t *mn, int64_t stride);
#else
#define QMM_T512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,fma,f16c")))
#define QMM_T256 __attribute__((target("avx2,avxvnni,fma")))
#define QMM_S512 _512
#define QMM_S256 _256
#define QMM_DP256(a, w, x) _mm256_dpbusd_avx_epi32(a, w, x)
#define QMM_DPW256(a, w, x) _mm256_dpwssd_avx_epi32(a, w, x)
#define QMM_CVT512(a) _mm512_cvtepi32_ps(a)
#endif

#if !defined(DLM_SIMDE)
/* qmm_x_round's two roundings on AVX-512, for the prefill's hot path: the
 * same bits as qx_round_q8_0 / qx_round_q8_K (the maxima are exact, x·id
 * and x·iscale are the same float products, roundf is rebuilt exactly from
 * truncation, nearest_int is round-to-nearest-even; the scalar steps on d
 * and s are the same code). test_qmm compares the bytes. */
static inline __attribute__((always_inline)) QMM_T512 __m512i qmm_roundf512(__m512 v)
{
    const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m512 diff = _mm512_abs_ps(_mm512_sub_ps(v, t));            /* exact */
    const __mmask16 up = _mm512_cmp_ps_mask(diff, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const __m512 one = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(_mm512_set1_ps(1.f)),
                                                           _mm512_and_si512(_mm512_castps_si512(v),
                                                                            _mm512_set1_epi32((int)0x80000000u))));
    return _mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, one));
}

QMM_T512 void qmm_round_q8_0_512(const float *xb, int8_t *qs, float *d, int *s, float *sx)
{
    const __m512 a = _mm512_loadu_ps(xb), b = _mm512_loadu_ps(xb + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a), _mm512_abs_ps(b)));
    const float dd = amax / 127.f, id = dd ? 1.0f / dd : 0.0f;
    const __m512i qa = qmm_roundf512(_mm512_mul_ps(a, _mm512_set1_ps(id)));
    const __m512i qb = qmm_roundf512(_mm512_mul_ps(b, _mm512_set1_ps(id)));
    _mm_storeu_si128((__m128i *)(void *)qs, _mm512_cvtepi32_epi8(qa));
    _mm_storeu_si128((__m128i *)(void *)(qs + 16), _mm512_cvtepi32_epi8(qb));
    const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(qa, qb));
    *d = fp16_to_f32(f32_to_fp16(dd));
    *s = sum;
    *sx = fp16_to_f32(f32_to_fp16((float)sum * dd));
}

QMM_T512 void qmm_round_q8_K_512(const float *xb, int8_t *qs, float *d, int32_t *bsum16)
{
    __m512 m = _mm512_setzero_ps();
    for (int j = 0; j < 16; j++) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(xb + 16 * j)));
    const float amax = _mm512_reduce_max_ps(m);
    if (amax == 0.f) {
        *d = 0.f;
        memset(qs, 0, 256);
        for (int j = 0; j < 16; j++) bsum16[j] = 0;
        return;
    }
    float max = 0.f;                    /* the first element of largest magnitude, as the scalar loop finds */
    for (int j = 0; j < 16; j++) {
        __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(xb + 16 * j)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
        if (hit) {
            max = xb[16 * j + __builtin_ctz(hit)];
            break;
        }
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < 16; j++) {
        __m512i q = _mm512_cvt_roundps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + 16 * j), _mm512_set1_ps(iscale)),
                                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q = _mm512_min_epi32(q, _mm512_set1_epi32(127));
        _mm_storeu_si128((__m128i *)(void *)(qs + 16 * j), _mm512_cvtepi32_epi8(q));
        bsum16[j] = _mm512_reduce_add_epi32(q);
    }
    *d = 1.f / iscale;
}
#endif

/* One weight row unpacked as qmm.c's unpack_row does it (the same bytes
 * and scales; test_qmm and emu_qmm compare them), with AVX-512 BW/VL byte
 * operations instead of a scalar loop per element: the prefill unpacks
 * every weight row once per call, and for Q5_0 (the Q4_K_M file's type
 * where rows are not whole 256-blocks) the scalar loop cost about a third
 * of the panel kernel's time. Returns 0 for the types it leaves to the
 * scalar loop (Q4_1, Q5_1: no Q4_K_M tensor uses them). */
QMM_T512 int QMM_CAT2(qmm_unpack_row, QMM_S512)(dtype t, const uint8_t *b, int64_t K, uint8_t *u, float *d,
                                                 float *d2, int32_t *sc, int32_t *mn, int64_t stride)
{
    const __m256i m4 = _mm256_set1_epi8(15), b4 = _mm256_set1_epi8(0x10);
    const __m128i m4x = _mm_set1_epi8(15);
    switch (t) {
    case DT_Q8_0:
        for (int64_t i = 0; i < K / 32; i++, b += 34, u += 32) {
            d[i * stride] = kern_half(b);
            _mm256_storeu_si256((__m256i *)(void *)u,
                                _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(b + 2)),
                                                 _mm256_set1_epi8((char)0x80)));
        }
        return 1;
    case DT_Q4_0: case DT_Q5_0: {
        const int q5 = t == DT_Q5_0, bb = q5 ? 22 : 18, off = q5 ? 6 : 2;
        for (int64_t i = 0; i < K / 32; i++, b += bb, u += 32) {
            d[i * stride] = kern_half(b);
            const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)(b + off));
            __m256i v = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_and_si128(q, m4x)),
                                                _mm_and_si128(_mm_srli_epi16(q, 4), m4x), 1);
            if (q5) {
                uint32_t qh;
                memcpy(&qh, b + 2, 4);
                v = _mm256_or_si256(v, _mm256_maskz_mov_epi8((uint32_t)qh, b4));
            }
            _mm256_storeu_si256((__m256i *)(void *)u, v);
        }
        return 1;
    }
    case DT_Q4_K: case DT_Q5_K: {
        const int q5 = t == DT_Q5_K;
        for (int64_t i = 0; i < K / 256; i++, b += q5 ? 176 : 144, u += 256) {
            const uint8_t *qh = b + 16, *qs = b + (q5 ? 48 : 16);
            d[i * stride] = kern_half(b);
            d2[i * stride] = kern_half(b + 2);
            for (int j = 0; j < 8; j++) {
                uint8_t s, m;
                kern_scmin_k4(b + 4, j, &s, &m);
                sc[(8 * i + j) * stride] = s;
                mn[(8 * i + j) * stride] = m;
            }
            const __m256i h = q5 ? _mm256_loadu_si256((const __m256i *)(const void *)qh) : _mm256_setzero_si256();
            for (int j = 0; j < 4; j++) {
                const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * j));
                __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                if (q5) {
                    /* bit 2j (lo) and 2j+1 (hi) of each qh byte moved to bit 4 */
                    const __m256i hl = j < 2 ? _mm256_slli_epi16(h, 4 - 2 * j) : _mm256_srli_epi16(h, 2 * j - 4);
                    const __m256i hh = j < 2 ? _mm256_slli_epi16(h, 3 - 2 * j) : _mm256_srli_epi16(h, 2 * j - 3);
                    lo = _mm256_or_si256(lo, _mm256_and_si256(hl, b4));
                    hi = _mm256_or_si256(hi, _mm256_and_si256(hh, b4));
                }
                _mm256_storeu_si256((__m256i *)(void *)(u + 64 * j), lo);
                _mm256_storeu_si256((__m256i *)(void *)(u + 64 * j + 32), hi);
            }
        }
        return 1;
    }
    case DT_Q6_K: {
        const __m256i m30 = _mm256_set1_epi8(0x30);
        for (int64_t i = 0; i < K / 256; i++, b += 210, u += 256) {
            for (int n = 0; n < 2; n++) {
                const __m256i a = _mm256_loadu_si256((const __m256i *)(const void *)(b + 64 * n));
                const __m256i c = _mm256_loadu_si256((const __m256i *)(const void *)(b + 64 * n + 32));
                const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(b + 128 + 32 * n));
                uint8_t *o = u + 128 * n;
                /* 16-bit shifts: the bits a byte takes from its neighbour are masked off */
                _mm256_storeu_si256((__m256i *)(void *)o, _mm256_or_si256(_mm256_and_si256(a, m4),
                                                                 _mm256_and_si256(_mm256_slli_epi16(h, 4), m30)));
                _mm256_storeu_si256((__m256i *)(void *)(o + 32), _mm256_or_si256(_mm256_and_si256(c, m4),
                                                                 _mm256_and_si256(_mm256_slli_epi16(h, 2), m30)));
                _mm256_storeu_si256((__m256i *)(void *)(o + 64),
                                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(h, m30)));
                _mm256_storeu_si256((__m256i *)(void *)(o + 96),
                                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4),
                                                    _mm256_and_si256(_mm256_srli_epi16(h, 2), m30)));
            }
            for (int g = 0; g < 16; g++) sc[(16 * i + g) * stride] = (int8_t)b[192 + g];
            d[i * stride] = kern_half(b + 208);
        }
        return 1;
    }
    default:
        return 0;
    }
}

/* AVX512-VNNI: 16 lanes per vector, both halves of the panel at once. */
#define QMM_SFX QMM_S512
#define QMM_TARGET QMM_T512
#define QMM_LANES 16
#define QMM_RB 4
#define VI __m512i
#define VF __m512
#define LOADI(p) _mm512_loadu_si512((const void *)(p))
#define LOADF(p) _mm512_loadu_ps(p)
#define STOREF(p, v) _mm512_storeu_ps(p, v)
#define SET1I(v) _mm512_set1_epi32(v)
#define SET1F(v) _mm512_set1_ps(v)
#define ZEROI() _mm512_setzero_si512()
#define ZEROF() _mm512_setzero_ps()
#define DPBUSD(a, w, x) _mm512_dpbusd_epi32(a, w, x)
#define DPWSSD(a, w, x) _mm512_dpwssd_epi32(a, w, x)
#define ADDI(a, b) _mm512_add_epi32(a, b)
#define SUBI(a, b) _mm512_sub_epi32(a, b)
#define MULLO(a, b) _mm512_mullo_epi32(a, b)
#define CVT(a) QMM_CVT512(a)
#define MULF(a, b) _mm512_mul_ps(a, b)
#define FMADD(a, b, c) _mm512_fmadd_ps(a, b, c)
#include "kern/qmm_body.inc"

/* AVX-VNNI: 8 lanes, four vectors per panel, two rows of x per pass (16
 * ymm registers). */
#define QMM_SFX QMM_S256
#define QMM_TARGET QMM_T256
#define QMM_LANES 8
#define QMM_RB 2
#define VI __m256i
#define VF __m256
#define LOADI(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define LOADF(p) _mm256_loadu_ps(p)
#define STOREF(p, v) _mm256_storeu_ps(p, v)
#define SET1I(v) _mm256_set1_epi32(v)
#define SET1F(v) _mm256_set1_ps(v)
#define ZEROI() _mm256_setzero_si256()
#define ZEROF() _mm256_setzero_ps()
#define DPBUSD(a, w, x) QMM_DP256(a, w, x)
#define DPWSSD(a, w, x) QMM_DPW256(a, w, x)
#define ADDI(a, b) _mm256_add_epi32(a, b)
#define SUBI(a, b) _mm256_sub_epi32(a, b)
#define MULLO(a, b) _mm256_mullo_epi32(a, b)
#define CVT(a) _mm256_cvtepi32_ps(a)
#define MULF(a, b) _mm256_mul_ps(a, b)
#define FMADD(a, b, c) _mm256_fmadd_ps(a, b, c)
#include "kern/qmm_body.inc"

#endif
