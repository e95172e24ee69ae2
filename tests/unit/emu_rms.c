/* Emulated build (CMake DLM_SIMDE, `make emu`): the AVX-512 row of
 * RMSNorm's input gradient (src/kern/rms_avx512.c) compiled against SIMDe,
 * checked bit for bit against its plain-loop twin kern_rms_bwd_row_ref
 * (ops.c) for row lengths below, at and past the 8-lane vector and with
 * a tail, with and without accumulation into dx, on rows of mixed
 * magnitudes (so the partial sums' order shows in the last bits); where
 * the CPU has AVX-512 the native row must give the same bits too. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kern/kern.h"
#include "kern/kern_impl.h"
#include "kern_test_util.h"

/* rms_avx512.c built with -DDLM_SIMDE */
void kern_rms_bwd_row_emu(float *dx, const float *w, const float *dy, const float *x, double r, int C, int add);

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
    return check_done();
}
