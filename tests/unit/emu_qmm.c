/* Emulated build (CMake DLM_SIMDE, `make emu`): the int8 prefill's
 * AVX512-VNNI and AVX-VNNI kernels (src/kern/qmm_vnni.c) compiled against
 * SIMDe, so they run on any x86-64, checked bit for bit against the plain
 * loop model of their lanes (qmm_panel_ref) for every quantized type,
 * several K and 1..20 rows of x; and against the native kernels where this
 * CPU has the instructions (they must agree with the emulation). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kern/kern.h"
#include "kern/kern_impl.h"
#include "kern_test_util.h"
#include "export/quant_mix.h"
#include "qmm_unpack_check.h"

void qmm_panel_512_emu(const qmm_panel *p, const qmm_x *x, int64_t n0, int R, float *out);
void qmm_panel_256_emu(const qmm_panel *p, const qmm_x *x, int64_t n0, int R, float *out);
int qmm_unpack_row_512_emu(dtype t, const uint8_t *b, int64_t K, uint8_t *u, float *d, float *d2, int32_t *sc,
                           int32_t *mn, int64_t stride);

static _Alignas(64) char pbuf[1 << 20], xbuf[1 << 20];

int main(void)
{
    const dtype types[] = {DT_Q8_0, DT_Q4_0, DT_Q5_0, DT_Q4_1, DT_Q5_1, DT_Q4_K, DT_Q5_K, DT_Q6_K};
    const int64_t Ks[] = {256, 1280};
    const int Rs[] = {1, 3, 4, 9};
    trng r = {53};
    int runs = 0, native = 0;
    for (int ti = 0; ti < 8; ti++)
        for (int ki = 0; ki < 2; ki++) {
            const dtype t = types[ti];
            const int64_t K = Ks[ki], O = 40, N = 9;
            float *w = xmalloc((size_t)(O * K) * 4), *x = xmalloc((size_t)(N * K) * 4);
            fill_rand(&r, w, (size_t)(O * K), 0.05f);
            fill_rand(&r, x, (size_t)(N * K), 1.f);
            for (int64_t k = 0; k < N * K; k += 101) x[k] *= 50.f;
            size_t rb = dtype_row_bytes(t, K);
            uint8_t *wq = xmalloc(rb * (size_t)O);
            for (int64_t o = 0; o < O; o++) export_quant_row(t, w + o * K, wq + o * rb, K);
            wmat W = {.type = t, .rows = O, .cols = K, .row_bytes = rb, .data = wq};
            qmm_x q;
            CHECK(qmm_x_init(&q, xbuf, t, N, K));
            for (int64_t n = 0; n < N; n++) qmm_x_round(&q, n, x + n * K);
            for (int64_t o0 = 0; o0 < O; o0 += QMM_TILE_ROWS) {
                qmm_panel p;
                qmm_panel_build(&p, pbuf, &W, o0);
                for (int ri = 0; ri < 4; ri++) {
                    const int R = Rs[ri];
                    float want[9 * QMM_TILE_ROWS], got[9 * QMM_TILE_ROWS], nat[9 * QMM_TILE_ROWS];
                    const size_t nbytes = sizeof want[0] * (size_t)R * QMM_TILE_ROWS;
                    qmm_panel_ref(&p, &q, N - R, R, want);
                    qmm_panel_512_emu(&p, &q, N - R, R, got);
                    CHECK_MSG(!memcmp(want, got, nbytes), "type %d K %lld R %d: emulated AVX512-VNNI differs", t,
                              (long long)K, R);
                    qmm_panel_256_emu(&p, &q, N - R, R, got);
                    CHECK_MSG(!memcmp(want, got, nbytes), "type %d K %lld R %d: emulated AVX-VNNI differs", t,
                              (long long)K, R);
                    runs += 2;
                    if (qmm_isa() == QMM_ISA_VNNI512) {
                        qmm_panel_run(QMM_ISA_VNNI512, &p, &q, N - R, R, nat);
                        CHECK_MSG(!memcmp(nat, want, nbytes), "type %d: native AVX512-VNNI differs", t);
                        native++;
                    }
                    if (cpu_get_features()->avxvnni && cpu_level() >= CPU_AVX2) {
                        qmm_panel_run(QMM_ISA_VNNI256, &p, &q, N - R, R, nat);
                        CHECK_MSG(!memcmp(nat, want, nbytes), "type %d: native AVX-VNNI differs", t);
                        native++;
                    }
                }
            }
            free(w); free(x); free(wq);
        }
    const int nu = qmm_check_unpack(qmm_unpack_row_512_emu, &r);
    CHECK(nu > 0);
    printf("emu_qmm: %d rows unpacked bitwise by the emulated qmm_unpack_row_512\n", nu);
    printf("emu_qmm: %d emulated panel runs and %d native ones bitwise equal to qmm_panel_ref\n", runs, native);
    return check_done();
}
