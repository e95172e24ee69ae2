/* ops_avx512 — row kernels on AVX-512 whose plain-loop twins define their
 * bits; the file is also compiled against SIMDe (-DDLM_SIMDE, names _emu)
 * for tests/unit/emu_rms.c.
 *
 * kern_rms_bwd_row: one row of RMSNorm's input gradient, in double as the
 * plain loop of ops.c (kern_rms_bwd_row_ref, its twin):
 *
 *   dot = Σ_c w·dy·x        8 partial sums (element c into sum c mod 8),
 *                           added ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7))
 *   dx  = (float)(r·w·dy − coef·x)   (or dx += that float)
 *
 * The 8 double lanes are the twin's 8 partial sums, each product is the
 * twin's ((double)w·dy)·x, the sums and the difference are separate
 * multiplies and adds (no FMA: the build has -ffp-contract=off), so the
 * bits are the twin's for every C. The scalar loops were a third of the
 * non-GEMM time of a Qwen2.5-0.5B step's backward norms (2 ns per element,
 * SSE2 doubles).
 *
 * kern_drop_add: dst[i] += keep bit i ? src[i]·scale : 0 (dropout's
 * backward added into a gradient), twin kern_drop_add_ref (dropout.c): the
 * masked product is an exact +0 where dropped and is added as the twin
 * adds it, so a −0 in dst becomes +0 in both. */
#include "kern/simd_x86.h"

#include "kern/kern_impl.h"

#if defined(__x86_64__) || defined(DLM_SIMDE)

#if defined(DLM_SIMDE)
#define RMS_FN(n) n##_emu
#else
#define RMS_FN(n) n##_avx512
#endif
#define KT KX_TARGET_AVX512

KT static inline __m512d wide(const float *p) { return _mm512_cvtps_pd(_mm256_loadu_ps(p)); }

KT void RMS_FN(kern_rms_bwd_row)(float *dx, const float *w, const float *dy, const float *x, double r, int C,
                                 int add)
{
    __m512d s = _mm512_setzero_pd();
    int c = 0;
    for (; c + 8 <= C; c += 8) s = _mm512_add_pd(s, _mm512_mul_pd(_mm512_mul_pd(wide(w + c), wide(dy + c)), wide(x + c)));
    double a[8];
    _mm512_storeu_pd(a, s);
    for (; c < C; c++) a[c & 7] += (double)w[c] * dy[c] * x[c];
    const double dot = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    const double coef = r * r * r * dot / C;
    const __m512d vr = _mm512_set1_pd(r), vc = _mm512_set1_pd(coef);
    c = 0;
    for (; c + 8 <= C; c += 8) {
        __m512d t = _mm512_sub_pd(_mm512_mul_pd(_mm512_mul_pd(vr, wide(w + c)), wide(dy + c)),
                                  _mm512_mul_pd(vc, wide(x + c)));
        __m256 f = _mm512_cvtpd_ps(t);
        if (add) f = _mm256_add_ps(_mm256_loadu_ps(dx + c), f);
        _mm256_storeu_ps(dx + c, f);
    }
    for (; c < C; c++) {
        float f = (float)(r * w[c] * dy[c] - coef * x[c]);
        dx[c] = add ? dx[c] + f : f;
    }
}

KT void RMS_FN(kern_drop_add)(float *dst, const float *src, const uint8_t *keep, int64_t n, float scale)
{
    const __m512 sc = _mm512_set1_ps(scale);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __mmask16 k = (__mmask16)(keep[i >> 3] | (unsigned)keep[(i >> 3) + 1] << 8);
        const __m512 t = _mm512_maskz_mul_ps(k, _mm512_loadu_ps(src + i), sc);
        _mm512_storeu_ps(dst + i, _mm512_add_ps(_mm512_loadu_ps(dst + i), t));
    }
    for (; i < n; i++) dst[i] += (keep[i >> 3] >> (i & 7) & 1) ? src[i] * scale : 0.0f;
}
#endif
