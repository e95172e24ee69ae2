/* qmm_unpack_check.h — one check shared by test_qmm.c (native) and
 * emu_qmm.c (the SIMDe build): a vector twin of qmm_unpack_row_ref gives
 * the same bytes and scales, at a panel's stride, for every type it takes
 * (it returns 0 for those it leaves to the plain loop), on quantized rows
 * of random weights with outliers (every nibble and high bit occurs). */
#ifndef QMM_UNPACK_CHECK_H
#define QMM_UNPACK_CHECK_H
#include <string.h>

#include "check.h"
#include "kern_test_util.h"
#include "kern/kern_impl.h"
#include "export/quant_mix.h"

typedef int (*qmm_unpack_fn)(dtype, const uint8_t *, int64_t, uint8_t *, float *, float *, int32_t *, int32_t *,
                             int64_t);

static inline void *qmm_zalloc(size_t n)
{
    void *p = xmalloc(n);
    memset(p, 0, n);
    return p;
}

static inline int qmm_check_unpack(qmm_unpack_fn f, trng *r)
{
    const dtype types[] = {DT_Q8_0, DT_Q4_0, DT_Q5_0, DT_Q4_1, DT_Q5_1, DT_Q4_K, DT_Q5_K, DT_Q6_K};
    const int64_t Ks[] = {256, 1280, 4864}, O = 5, st = QMM_TILE_ROWS;
    int runs = 0;
    for (int ti = 0; ti < 8; ti++)
        for (int ki = 0; ki < 3; ki++) {
            const dtype t = types[ti];
            const int64_t K = Ks[ki];
            float *w = xmalloc((size_t)(O * K) * 4);
            fill_rand(r, w, (size_t)(O * K), 0.05f);
            for (int64_t k = 0; k < O * K; k += 37) w[k] *= 30.f;
            const size_t rb = dtype_row_bytes(t, K), ns = (size_t)(K / 16 * st);
            uint8_t *wq = xmalloc(rb * (size_t)O);
            for (int64_t o = 0; o < O; o++) CHECK(export_quant_row(t, w + o * K, wq + o * rb, K) == rb);
            uint8_t *u1 = qmm_zalloc((size_t)K), *u2 = qmm_zalloc((size_t)K);
            float *d1 = qmm_zalloc(ns * 4), *d2 = qmm_zalloc(ns * 4), *e1 = qmm_zalloc(ns * 4), *e2 = qmm_zalloc(ns * 4);
            int32_t *s1 = qmm_zalloc(ns * 4), *s2 = qmm_zalloc(ns * 4), *m1 = qmm_zalloc(ns * 4), *m2 = qmm_zalloc(ns * 4);
            for (int64_t o = 0; o < O; o++) {
                qmm_unpack_row_ref(t, wq + o * rb, K, u1, d1, e1, s1, m1, st);
                if (!f(t, wq + o * rb, K, u2, d2, e2, s2, m2, st)) continue;
                CHECK_MSG(!memcmp(u1, u2, (size_t)K) && !memcmp(d1, d2, ns * 4) && !memcmp(e1, e2, ns * 4) &&
                              !memcmp(s1, s2, ns * 4) && !memcmp(m1, m2, ns * 4),
                          "type %d K %lld row %lld: the vector unpack differs", t, (long long)K, (long long)o);
                runs++;
            }
            free(w); free(wq); free(u1); free(u2); free(d1); free(d2); free(e1); free(e2);
            free(s1); free(s2); free(m1); free(m2);
        }
    return runs;
}
#endif
