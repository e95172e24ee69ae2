/* test_qmm — the int8 prefill (src/kern/qmm.c, kern_matmul_infer).
 *
 * Bit for bit: every back end this CPU has (AVX512-VNNI, AVX-VNNI; the
 * child run at DLM_CPU_LEVEL=avx2 takes AVX-VNNI alone) and the AMX-INT8
 * kernel on the tile model (any CPU; tests/unit/emu_qmm.c runs the VNNI
 * kernels emulated) against the plain
 * loop model of its lanes (qmm_panel_ref) and the whole-row plain loop
 * (kern_matmul_int8_ref), for every type, ragged O and N, bias and
 * accumulate, and 1 vs 2 threads. Within rounding: against the exact
 * integer formula in double (x as qs·d, w by the scalar dequantizer), and
 * against the float path within the int8 bound. llama.cpp itself is the
 * reference in ref/r0430, through the tool mode:
 *
 *   test_qmm --tool TYPE K N W.bin X.f32 Y.out
 *       y[n][o] = kern_matmul_infer(x, W) as float32, N rows of x. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kern_test_util.h"
#include "kern/kern.h"
#include "kern/kern_impl.h"
#include "export/quant_mix.h"
#include "kern/amx_model.h"
#include "qmm_unpack_check.h"

static const dtype TYPES[] = {DT_Q8_0, DT_Q4_0, DT_Q5_0, DT_Q4_1, DT_Q5_1, DT_Q4_K, DT_Q5_K, DT_Q6_K};
#define NTYPES 8

static int blk_of(dtype t) { return t == DT_Q4_K || t == DT_Q5_K || t == DT_Q6_K ? 256 : 32; }

static uint8_t *quant_rows(dtype t, const float *w, int64_t O, int64_t K)
{
    size_t rb = dtype_row_bytes(t, K);
    uint8_t *q = xmalloc(rb * (size_t)O);
    for (int64_t o = 0; o < O; o++) CHECK(export_quant_row(t, w + o * K, q + o * rb, K) == rb);
    return q;
}

static void fill_x(trng *r, float *x, int64_t n, int pattern)
{
    fill_rand(r, x, (size_t)n, 1.0f);
    if (pattern == 1)
        for (int64_t k = 0; k < n; k += 97) x[k] *= 40.f;
    if (pattern == 2)
        for (int64_t k = 0; k < n && k < 256; k++) x[k] = 0.f;
}

/* Every back end's panel kernel = the lanes' plain-loop model, bitwise. */
static void test_panel_bits(void)
{
    trng r = {31};
    static _Alignas(64) char pbuf[1 << 20], xbuf[1 << 20];
    const int64_t Ks[] = {256, 768, 2304};
    int runs = 0;
    for (int ti = 0; ti < NTYPES; ti++)
        for (int ki = 0; ki < 3; ki++) {
            const dtype t = TYPES[ti];
            const int64_t K = Ks[ki], O = 45, N = 20;
            float *w = xmalloc((size_t)(O * K) * 4), *x = xmalloc((size_t)(N * K) * 4);
            fill_rand(&r, w, (size_t)(O * K), 0.05f);
            fill_x(&r, x, N * K, ki);
            uint8_t *wq = quant_rows(t, w, O, K);
            wmat W = {.type = t, .rows = O, .cols = K, .row_bytes = dtype_row_bytes(t, K), .data = wq};
            qmm_x q;
            CHECK(qmm_x_bytes(N, K) <= sizeof xbuf && qmm_panel_bytes(K) <= sizeof pbuf);
            CHECK(qmm_x_init(&q, xbuf, t, N, K));
            for (int64_t n = 0; n < N; n++) qmm_x_round(&q, n, x + n * K);
            for (int64_t o0 = 0; o0 < O; o0 += QMM_TILE_ROWS) {
                qmm_panel p;
                qmm_panel_build(&p, pbuf, &W, o0);
                const int Rs[] = {1, 2, 3, 4, 7, 16, 20};
                for (int ri = 0; ri < 7; ri++) {
                    const int R = Rs[ri];
                    float want[20 * QMM_TILE_ROWS], got[20 * QMM_TILE_ROWS];
                    qmm_panel_ref(&p, &q, N - R, R, want);
                    /* the VNNI widths this CPU runs at this level, and the AMX kernel on the tile model */
                    const int isas[] = {QMM_ISA_VNNI256, QMM_ISA_VNNI512, QMM_ISA_MODEL};
                    for (int ii = 0; ii < 3; ii++) {
                        const int isa = isas[ii];
                        if (isa == QMM_ISA_VNNI256 && (!cpu_get_features()->avxvnni || cpu_level() < CPU_AVX2)) continue;
                        if (isa == QMM_ISA_VNNI512 && qmm_isa() != QMM_ISA_VNNI512) continue;
                        amxm_fault_clear();
                        qmm_panel_run(isa, &p, &q, N - R, R, got);
                        CHECK_MSG(!amxm_fault(), "type %d: a tile shape the hardware refuses", t);
                        runs++;
                        CHECK_MSG(!memcmp(want, got, sizeof want[0] * (size_t)R * QMM_TILE_ROWS),
                                  "type %d K %lld R %d %s: differs from qmm_panel_ref", t, (long long)K, R,
                                  qmm_isa_name(isa));
                    }
                }
            }
            free(w); free(x); free(wq);
        }
    printf("qmm: %d panel runs bitwise against the lanes' model (back end here: %s)\n", runs, qmm_isa_name(qmm_isa()));
}

/* qmm_x_round_fast (AVX-512 on that back end) = qmm_x_round, byte for
 * byte: halves (roundf's ties), equal magnitudes of both signs (Q8_K's
 * first maximum), zero blocks, outliers. */
static void test_round_fast(void)
{
    trng r = {61};
    static _Alignas(64) char b1[1 << 18], b2[1 << 18];
    const int64_t K = 1024, N = 4;
    float *x = xmalloc((size_t)(N * K) * 4);
    for (int ti = 0; ti < NTYPES; ti++)
        for (int pat = 0; pat < 4; pat++) {
            const dtype t = TYPES[ti];
            fill_x(&r, x, N * K, pat % 3);
            if (pat == 3)
                for (int64_t k = 0; k < N * K; k++) x[k] = (float)((int)(trng_u64(&r) % 255) - 127) * 0.5f;
            x[5] = -x[7];                   /* a tie of magnitudes, opposite signs */
            qmm_x q1, q2;
            CHECK(qmm_x_init(&q1, b1, t, N, K) && qmm_x_init(&q2, b2, t, N, K));
            for (int64_t n = 0; n < N; n++) {
                qmm_x_round(&q1, n, x + n * K);
                qmm_x_round_fast(&q2, n, x + n * K);
            }
            CHECK_MSG(!memcmp(q1.qs, q2.qs, (size_t)(N * K)) && !memcmp(q1.d, q2.d, (size_t)(N * q1.nb) * 4) &&
                          !memcmp(q1.bs32, q2.bs32, (size_t)(N * K / 32) * 4) &&
                          (blk_of(t) == 32 ? !memcmp(q1.sx, q2.sx, (size_t)(N * K / 32) * 4)
                                           : !memcmp(q1.bs16, q2.bs16, (size_t)(N * K / 16) * 4)),
                      "type %d pattern %d: the fast rounding differs", t, pat);
        }
    free(x);
}

/* exact Σ w·x in double for row o, x row n (x as llama.cpp rounds it) */
static double exact(dtype t, const uint8_t *wrow, const qmm_x *q, int64_t n, double *mag)
{
    const int64_t K = q->K;
    float *wd = xmalloc((size_t)K * 4);
    dequant_row_scalar(t, wrow, wd, K);
    const int mins = t == DT_Q4_1 || t == DT_Q5_1, bb = t == DT_Q4_1 ? 20 : 24;
    double s = 0, m = 0;
    for (int64_t k = 0; k < K; k++) {
        int64_t blk = k / blk_of(t);
        double mn = 0;
        if (mins) {
            uint16_t h;
            memcpy(&h, wrow + blk * bb + 2, 2);
            mn = fp16_to_f32(h);
            if (k % 32 == 0) s += mn * q->sx[n * (K / 32) + blk];
        }
        double xv = (double)q->qs[n * K + k] * q->d[n * q->nb + blk];
        s += ((double)wd[k] - mn) * xv;
        m += fabs((double)wd[k] * xv);
    }
    free(wd);
    *mag = m;
    return s;
}

/* kern_matmul_infer: = kern_matmul_int8_ref bitwise (bias, accumulate,
 * ragged shapes, threads), = the exact formula within float rounding, =
 * the float path within the int8 rounding bound. */
static void test_matmul(void)
{
    if (qmm_isa() == QMM_ISA_NONE) { printf("qmm: no VNNI at this level, int8 prefill tests skipped\n"); return; }
    trng r = {41};
    /* N 40: x's rows are rounded and checked on the pool (N·K ≥ 2^15) */
    const int64_t O = 200, K = 1536, Ns[] = {1, 5, 13, 40}, NM = 40;
    float *w = xmalloc((size_t)(O * K) * 4), *x = xmalloc((size_t)(NM * K) * 4), *bias = xmalloc((size_t)O * 4);
    float *y1 = xmalloc((size_t)(NM * O) * 4), *y2 = xmalloc((size_t)(NM * O) * 4), *yr = xmalloc((size_t)(NM * O) * 4);
    float *yf = xmalloc((size_t)(NM * O) * 4), *y3 = xmalloc((size_t)(NM * O) * 4);
    fill_rand(&r, w, (size_t)(O * K), 0.05f);
    fill_rand(&r, bias, (size_t)O, 1.f);
    for (int ti = 0; ti < NTYPES; ti++) {
        const dtype t = TYPES[ti];
        uint8_t *wq = quant_rows(t, w, O, K);
        const size_t rb = dtype_row_bytes(t, K);
        wmat W = {.type = t, .rows = O, .cols = K, .row_bytes = rb, .data = wq};
        for (int ni = 0; ni < 4; ni++) {
            const int64_t N = Ns[ni];
            fill_x(&r, x, N * K, ni % 3);
            for (int acc = 0; acc < 2; acc++) {
                fill_rand(&r, y1, (size_t)(N * O), 1.f);
                memcpy(y2, y1, (size_t)(N * O) * 4);
                memcpy(yr, y1, (size_t)(N * O) * 4);
                memcpy(y3, y1, (size_t)(N * O) * 4);
                kern_init(3);
                kern_matmul_infer(y3, x, &W, acc ? NULL : bias, N, acc);
                kern_init(1);
                kern_matmul_infer(y1, x, &W, acc ? NULL : bias, N, acc);
                kern_init(2);
                kern_matmul_infer(y2, x, &W, acc ? NULL : bias, N, acc);
                CHECK(kern_matmul_int8_ref(yr, x, &W, acc ? NULL : bias, N, acc));
                CHECK_MSG(!memcmp(y1, y2, (size_t)(N * O) * 4), "type %d N %lld: 1 vs 2 threads differ", t, (long long)N);
                CHECK_MSG(!memcmp(y1, y3, (size_t)(N * O) * 4), "type %d N %lld: 1 vs 3 threads differ", t, (long long)N);
                CHECK_MSG(!memcmp(y1, yr, (size_t)(N * O) * 4), "type %d N %lld acc %d: differs from kern_matmul_int8_ref", t,
                          (long long)N, acc);
            }
            /* the exact integer formula and the float path */
            static _Alignas(64) char xbuf[1 << 20];
            qmm_x q;
            CHECK(qmm_x_init(&q, xbuf, t, N, K));
            for (int64_t n = 0; n < N; n++) qmm_x_round(&q, n, x + n * K);
            kern_matmul_infer(y1, x, &W, NULL, N, 0);
            kern_matmul(yf, x, &W, NULL, N, 0);
            double worst = 0, worstf = 0;
            float *wd = xmalloc((size_t)K * 4);
            for (int64_t o = 0; o < O; o++) {
                dequant_row_scalar(t, wq + o * rb, wd, K);
                for (int64_t n = 0; n < N; n++) {
                    double mag, want = exact(t, wq + o * rb, &q, n, &mag);
                    double e = fabs(y1[n * O + o] - want) / (mag + 1e-30);
                    if (e > worst) worst = e;
                    double bound = 0, fm = 0;
                    for (int64_t k = 0; k < K; k++) {
                        bound += fabs((double)wd[k] * q.d[n * q.nb + k / blk_of(t)]) * (blk_of(t) == 32 ? 0.5625 : 0.5);
                        fm += fabs((double)wd[k] * x[n * K + k]);
                    }
                    double ef = fabs((double)y1[n * O + o] - yf[n * O + o]) / (bound + 1e-5 * fm);
                    if (ef > worstf) worstf = ef;
                }
            }
            free(wd);
            CHECK_MSG(worst <= 4e-6, "type %d N %lld: %.3g of Σ|w·x| off the exact integer formula", t, (long long)N, worst);
            CHECK_MSG(worstf <= 1.0 && worstf > 0, "type %d N %lld: %.3g of the int8 bound off the float path", t,
                      (long long)N, worstf);
        }
        /* switched off: exactly kern_matmul */
        kern_set_int8_decode(0);
        kern_matmul_infer(y1, x, &W, bias, 5, 0);
        kern_set_int8_decode(1);
        kern_matmul(yf, x, &W, bias, 5, 0);
        CHECK_MSG(!memcmp(y1, yf, (size_t)(5 * O) * 4), "type %d: switched off must be kern_matmul", t);
        free(wq);
    }
    /* a NaN goes the float way (and propagates) */
    uint8_t *wq = quant_rows(DT_Q8_0, w, O, K);
    wmat W = {.type = DT_Q8_0, .rows = O, .cols = K, .row_bytes = dtype_row_bytes(DT_Q8_0, K), .data = wq};
    fill_x(&r, x, 5 * K, 0);
    x[3 * K + 7] = NAN;
    kern_matmul_infer(y1, x, &W, NULL, 5, 0);
    CHECK(isnan(y1[3 * O]) && !isnan(y1[0]));
    /* and an Inf in a row checked on the pool: y all from the float path */
    fill_x(&r, x, NM * K, 0);
    x[31 * K + 100] = INFINITY;
    kern_matmul_infer(y1, x, &W, NULL, NM, 0);
    kern_matmul(yf, x, &W, NULL, NM, 0);
    CHECK_MSG(!memcmp(y1, yf, (size_t)(NM * O) * 4) && !isfinite(y1[31 * O]), "an Inf must take the float path");
    free(wq);
    free(w); free(x); free(bias); free(y1); free(y2); free(yr); free(yf); free(y3);
    kern_shutdown();
}

static int tool(char **a)
{
    dtype t;
    if (dtype_from_name(a[0], &t)) { fprintf(stderr, "tool: unknown type %s\n", a[0]); return 2; }
    int64_t K = atoll(a[1]), N = atoll(a[2]);
    FILE *fw = fopen(a[3], "rb"), *fx = fopen(a[4], "rb");
    if (!fw || !fx || K <= 0 || N <= 0 || !qmm_type_ok(t)) { fprintf(stderr, "tool: bad arguments\n"); return 2; }
    size_t rb = dtype_row_bytes(t, K);
    fseek(fw, 0, SEEK_END);
    long wbytes = ftell(fw);
    rewind(fw);
    int64_t O = wbytes / (long)rb;
    uint8_t *w = xmalloc((size_t)wbytes);
    float *x = xmalloc((size_t)(N * K) * 4), *y = xmalloc((size_t)(N * O) * 4);
    if (fread(w, 1, (size_t)wbytes, fw) != (size_t)wbytes || fread(x, 4, (size_t)(N * K), fx) != (size_t)(N * K)) return 2;
    fclose(fw); fclose(fx);
    wmat W = {.type = t, .rows = O, .cols = K, .row_bytes = rb, .data = w};
    if (!qmm_supported(&W)) { fprintf(stderr, "tool: no int8 prefill on this CPU\n"); return 3; }
    kern_init(2);
    kern_matmul_infer(y, x, &W, NULL, N, 0);
    FILE *fy = fopen(a[5], "wb");
    if (!fy || fwrite(y, 4, (size_t)(N * O), fy) != (size_t)(N * O)) return 2;
    fclose(fy);
    printf("%s\n", qmm_isa_name(qmm_isa()));
    free(w); free(x); free(y);
    kern_shutdown();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 8 && !strcmp(argv[1], "--tool")) return tool(argv + 2);
    test_panel_bits();
    test_round_fast();
#if defined(__x86_64__)
    if (cpu_level() >= CPU_AVX512) {
        trng r = {71};
        const int nu = qmm_check_unpack(qmm_unpack_row_512, &r);
        CHECK(nu > 0);
        printf("qmm: %d rows unpacked bitwise by qmm_unpack_row_512\n", nu);
    }
#endif
    test_matmul();
    int rc = check_done();
    return rerun_lower_levels(argv[0]) ? 1 : rc;
}
