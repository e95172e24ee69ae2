/* isa_avx2 — the kernel bodies (isa_body.inc) compiled for AVX2 + FMA + F16C:
 * 8 floats per vector, a 6×16 GEMM micro-tile (12 accumulators of the 16
 * ymm registers, the classic Haswell shape). */
#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#include "kern/kern_impl.h"

#define ISA_SUFFIX(n) n##_avx2
#define ISA_TABLE kern_isa_avx2
#define KATTR __attribute__((target("avx2,fma,f16c")))
#define KINLINE static inline __attribute__((always_inline)) KATTR

#define VL 8
#define GEMM_MR 6
#define GEMM_NV 2
typedef __m256 vf;

static const int32_t k_mask_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
#define vmask(n) _mm256_loadu_si256((const __m256i *)(k_mask_tab + 8 - (n)))

#define vzero() _mm256_setzero_ps()
#define vset1(x) _mm256_set1_ps(x)
#define vload(p) _mm256_loadu_ps(p)
#define vstore(p, v) _mm256_storeu_ps(p, v)
#define vloadn(p, n) _mm256_maskload_ps(p, vmask(n))
#define vstoren(p, v, n) _mm256_maskstore_ps(p, vmask(n), v)
#define sfma(a, b, c) __builtin_fmaf(a, b, c)
#define vfma(a, b, c) _mm256_fmadd_ps(a, b, c)
#define vfnma(a, b, c) _mm256_fnmadd_ps(a, b, c)
#define vmul(a, b) _mm256_mul_ps(a, b)
#define vadd(a, b) _mm256_add_ps(a, b)
#define vsub(a, b) _mm256_sub_ps(a, b)
#define vdiv(a, b) _mm256_div_ps(a, b)
#define vmax(a, b) _mm256_max_ps(a, b)

KINLINE float vhsum(vf v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

KINLINE float vhmax(vf v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* expf to ~1 ulp (Cephes polynomial); exact 0 below -87.33, inf above
 * 88.37, NaN in → NaN out. */
KINLINE vf vexp_v(vf x0)
{
    vf x = _mm256_max_ps(_mm256_set1_ps(-87.33f), x0);
    x = _mm256_min_ps(_mm256_set1_ps(88.37f), x);
    vf n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    vf r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    vf p = _mm256_set1_ps(1.9875691500E-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
    p = _mm256_add_ps(p, _mm256_set1_ps(1.f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    vf y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x0, _mm256_set1_ps(-87.33f), _CMP_LT_OQ));
    y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x0, _mm256_set1_ps(88.37f), _CMP_GT_OQ));
    return _mm256_blendv_ps(y, x0, _mm256_cmp_ps(x0, x0, _CMP_UNORD_Q));
}

/* 8×8 transpose of r[0..7]. */
KINLINE void vtranspose(vf r[8])
{
    vf t[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    vf u[8];
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

int dequant_avx2(dtype t, const void *src, float *dst, int64_t n);
#define ISA_DEQUANT dequant_avx2
int dot_fused_avx2(dtype t, const void *src, const float *x, int64_t K, float *out);
#define ISA_DOT_FUSED dot_fused_avx2
int dot_fused_n_avx2(dtype t, const void *src, const float *x, int64_t ldx, int nx, int64_t K, float *out);
#define ISA_DOT_FUSED_N dot_fused_n_avx2

#include "kern/isa_body.inc"
#endif
