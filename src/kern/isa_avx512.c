/* isa_avx512 — the kernel bodies (isa_body.inc) compiled for AVX-512
 * F/BW/DQ/VL + FMA: 16 floats per vector, a 12×32 GEMM micro-tile
 * (24 accumulators + 2 B vectors of the 32 zmm registers). */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#include "kern/kern_impl.h"

#define ISA_SUFFIX(n) n##_avx512
#define ISA_TABLE kern_isa_avx512
#define KATTR __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
#define KINLINE static inline __attribute__((always_inline)) KATTR

#define VL 16
#define GEMM_MR 12
#define GEMM_NV 2
#define ATT_ACC 16
#define NARROW_ROWS 2
typedef __m512 vf;

#define vzero() _mm512_setzero_ps()
#define vset1(x) _mm512_set1_ps(x)
#define vload(p) _mm512_loadu_ps(p)
#define vstore(p, v) _mm512_storeu_ps(p, v)
#define vloadn(p, n) _mm512_maskz_loadu_ps((__mmask16)((1u << (n)) - 1), p)
#define vstoren(p, v, n) _mm512_mask_storeu_ps(p, (__mmask16)((1u << (n)) - 1), v)
#define sfma(a, b, c) __builtin_fmaf(a, b, c)
#define vfma(a, b, c) _mm512_fmadd_ps(a, b, c)
#define vfnma(a, b, c) _mm512_fnmadd_ps(a, b, c)
#define vmul(a, b) _mm512_mul_ps(a, b)
#define vadd(a, b) _mm512_add_ps(a, b)
#define vsub(a, b) _mm512_sub_ps(a, b)
#define vdiv(a, b) _mm512_div_ps(a, b)
#define vmax(a, b) _mm512_max_ps(a, b)
#define vhsum(v) _mm512_reduce_add_ps(v)
#define vhmax(v) _mm512_reduce_max_ps(v)

/* expf to ~1 ulp (Cephes polynomial), NaN-propagating, 0 below -104,
 * inf above 89. */
KINLINE vf vexp_v(vf x)
{
    x = _mm512_max_ps(_mm512_set1_ps(-104.f), x);   /* operand order keeps NaN */
    x = _mm512_min_ps(_mm512_set1_ps(89.f), x);
    vf n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    vf r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    vf p = _mm512_set1_ps(1.9875691500E-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
    p = _mm512_add_ps(p, _mm512_set1_ps(1.f));
    return _mm512_scalef_ps(p, n);
}

/* 16×16 transpose of rows r[0..15] (16 floats each) into columns. */
KINLINE void vtranspose(__m512 r[16])
{
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
        r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xdd);
    }
}

int dequant_avx512(dtype t, const void *src, float *dst, int64_t n);
#define ISA_DEQUANT dequant_avx512
int dot_fused_avx512(dtype t, const void *src, const float *x, int64_t K, float *out);
#define ISA_DOT_FUSED dot_fused_avx512

#include "kern/isa_body.inc"
#endif
