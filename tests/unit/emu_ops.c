/* Emulated build (CMake DLM_SIMDE, `make emu`): the AVX-512 row kernels of
 * src/kern/ops_avx512.c compiled against SIMDe. The row of RMSNorm's input
 * gradient is checked bit for bit against its plain-loop twin kern_rms_bwd_row_ref
 * (ops.c) for row lengths below, at and past the 8-lane vector and with
 * a tail, with and without accumulation into dx, on rows of mixed
 * magnitudes (so the partial sums' order shows in the last bits); where
 * the CPU has AVX-512 the native row must give the same bits too. The
 * dropout-and-add of the LoRA backward likewise against kern_drop_add_ref. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kern/kern.h"
#include "kern/kern_impl.h"
#include "kern_test_util.h"

/* ops_avx512.c built with -DDLM_SIMDE */
void kern_rms_bwd_row_emu(float *dx, const float *w, const float *dy, const float *x, double r, int C, int add);
void kern_drop_add_emu(float *dst, const float *src, const uint8_t *keep, int64_t n, float scale);

/* kern_drop_add: emulated (and native) against kern_drop_add_ref, bit for
 * bit, signed zeros in dst included, lengths around the 16-lane vector */
static void test_drop_add(void)
{
    trng r = {12};
    const int64_t ns[] = {1, 15, 16, 17, 33, 1000};
    int bad = 0, badn = 0;
    for (int k = 0; k < 6; k++) {
        int64_t n = ns[k];
        float *x = xmalloc(n * 4), *d0 = xmalloc(n * 4), *d1 = xmalloc(n * 4), *d2 = xmalloc(n * 4);
        uint8_t *keep = xmalloc((size_t)(n + 7) / 8 + 2);
        fill_normal(&r, x, n, 1.f);
        fill_normal(&r, d0, n, 1.f);
        for (int64_t i = 0; i < n; i += 3) d0[i] = -0.0f;
        for (int64_t i = 0; i < (n + 7) / 8 + 2; i++) keep[i] = (uint8_t)trng_u64(&r);
        memcpy(d1, d0, n * 4);
        memcpy(d2, d0, n * 4);
        kern_drop_add_ref(d0, x, keep, n, 1.0f / 0.95f);
        kern_drop_add_emu(d1, x, keep, n, 1.0f / 0.95f);
        bad += memcmp(d0, d1, n * 4) != 0;
#if defined(__x86_64__)
        if (cpu_level() >= CPU_AVX512) {
            kern_drop_add_avx512(d2, x, keep, n, 1.0f / 0.95f);
            badn += memcmp(d0, d2, n * 4) != 0;
        }
#endif
        free(x); free(d0); free(d1); free(d2); free(keep);
    }
    CHECK_MSG(bad == 0, "drop_add emulated: %d of 6 lengths differ from the twin", bad);
    CHECK_MSG(badn == 0, "drop_add native: %d of 6 lengths differ from the twin", badn);
    printf("drop_add: 6 lengths bit-identical to the twin (SIMDe-emulated%s)\n",
           cpu_level() >= CPU_AVX512 ? ", and native" : "");
}

typedef void (*row_fn)(float *, const float *, const float *, const float *, double, int, int);

int main(void)
{
    char desc[128];
    cpu_describe(desc, sizeof desc);
    printf("cpu level: %s\n", desc);
    row_fn native = NULL;
#if defined(__x86_64__)
    if (cpu_level() >= CPU_AVX512) native = kern_rms_bwd_row_avx512;
#endif
    trng r = {11};
    const int Cs[] = {1, 3, 7, 8, 9, 16, 63, 64, 65, 576, 896, 901};
    int n = 0, ok = 0, okn = 0;
    for (int ci = 0; ci < 12; ci++)
        for (int add = 0; add < 2; add++) {
            int C = Cs[ci];
            float *w = xmalloc(C * 4), *dy = xmalloc(C * 4), *x = xmalloc(C * 4);
            float *d0 = xmalloc(C * 4), *d1 = xmalloc(C * 4), *d2 = xmalloc(C * 4);
            fill_normal(&r, w, C, 1.f);
            fill_normal(&r, dy, C, 1e-3f);
            fill_normal(&r, x, C, 3.f);
            for (int c = 0; c < C; c += 5) x[c] *= 1e4f;      /* mixed magnitudes */
            fill_normal(&r, d0, C, 1.f);
            memcpy(d1, d0, C * 4);
            memcpy(d2, d0, C * 4);
            double rs = 0.37 + trng_unif(&r);
            kern_rms_bwd_row_ref(d0, w, dy, x, rs, C, add);
            kern_rms_bwd_row_emu(d1, w, dy, x, rs, C, add);
            n++;
            ok += !memcmp(d0, d1, C * 4);
            if (native) {
                native(d2, w, dy, x, rs, C, add);
                okn += !memcmp(d0, d2, C * 4);
            }
            free(w); free(dy); free(x); free(d0); free(d1); free(d2);
        }
    CHECK_MSG(ok == n, "emulated: %d of %d rows differ from the twin", n - ok, n);
    if (native) CHECK_MSG(okn == n, "native: %d of %d rows differ from the twin", n - okn, n);
    printf("rms bwd row: %d of %d rows bit-identical to the twin (SIMDe-emulated)%s\n", ok, n,
           native ? (okn == n ? ", and the native rows too" : ", native rows differ") : "");
    test_drop_add();
    return check_done();
}
