/* test_qdot — the integer decode dots (src/kern/qdot.c, kern_matvec).
 *
 * The exact reference: with x rounded to int8 (qs·d) and w dequantized by
 * the scalar dequantizer (the format's definition), Σ w·x in double must
 * match qx_dot up to the float scaling of each block. The rounding of x is
 * checked against its bound, kern_matvec against the float path within the
 * int8 error, thread counts bitwise. llama.cpp itself is the reference in
 * ref/r0304, through this binary's tool mode:
 *
 *   test_qdot --tool TYPE K W.bin X.f32 XQ.out Y.out
 *       x rounded for weights of TYPE, written in llama.cpp's block layout
 *       (block_q8_K: f32 d, 256 int8, 16 int16 bsums; block_q8_0: fp16 d,
 *       32 int8; block_q8_1: fp16 d, fp16 s, 32 int8), and y[r] =
 *       dot(row r of W, x) as float32. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kern_test_util.h"
#include "kern/kern.h"
#include "kern/kern_impl.h"
#include "export/quant_mix.h"

static _Alignas(64) char qmem[1 << 20];
static kern_q8x qx;

static int blk_of(dtype t) { return t == DT_Q4_K || t == DT_Q5_K || t == DT_Q6_K ? 256 : 32; }

/* Σ_k dequant(w)[k]·qs[k]·d[block] in double, and Σ |·| for the tolerance.
 * Q4_1 / Q5_1 (w = d·q + m) take the min term as llama.cpp's Q8_1 does,
 * m·s with s = fp16(d·Σq) per block: Σ (w − m)·x + m·s. */
static double exact_dot(dtype t, const void *w, const kern_q8x *q, double *mag)
{
    float *wd = xmalloc((size_t)q->K * 4);
    dequant_row_scalar(t, w, wd, q->K);
    const int mins = t == DT_Q4_1 || t == DT_Q5_1, bb = t == DT_Q4_1 ? 20 : 24;
    double s = 0, m = 0;
    for (int64_t k = 0; k < q->K; k++) {
        int64_t blk = k / blk_of(t);
        double mn = 0;
        if (mins) {
            uint16_t h;
            memcpy(&h, (const uint8_t *)w + blk * bb + 2, 2);
            mn = fp16_to_f32(h);
            if (k % 32 == 0) s += mn * q->sx[blk];
        }
        double v = ((double)wd[k] - mn) * ((double)qx_at(q, k) * q->d[blk]);
        s += v;
        m += fabs((double)wd[k] * ((double)qx_at(q, k) * q->d[blk]));
    }
    free(wd);
    *mag = m;
    return s;
}

static void fill_x(trng *r, float *x, int64_t K, int pattern)
{
    fill_rand(r, x, (size_t)K, 1.0f);
    if (pattern == 1)                       /* outliers, as activations have */
        for (int64_t k = 0; k < K; k += 97) x[k] *= 40.f;
    if (pattern == 2 && K >= 512)           /* an all-zero block, a tiny one */
        for (int64_t k = 0; k < 256; k++) { x[k] = 0.f; x[256 + k] *= 1e-30f; }
}

static void test_quantize_bounds(void)
{
    trng r = {7};
    const dtype types[] = {DT_Q8_0, DT_Q4_K, DT_Q5_0};
    float x[1024];
    for (int ti = 0; ti < 3; ti++)
        for (int pat = 0; pat < 3; pat++) {
            dtype t = types[ti];
            kern_q8x *q = &qx;
            fill_x(&r, x, 1024, pat);
            CHECK(qx_quantize(q, qmem, t, x, 1024));
            int be = blk_of(t), bad = 0;
            for (int64_t k = 0; k < 1024; k++) {
                float d = q->d[k / be];
                /* Q8_0 rounds with 1/d before d is stored as fp16: up to
                 * 127·|d − fp16(d)| more, and a d below fp16's range is 0 */
                double tol = be == 32 ? 0.5625 * fabs(d) + 4e-6 : 0.5 * fabs(d) + 1e-6 * fabs(x[k]) + 1e-37;
                if (fabs((double)qx_at(q, k) * d - x[k]) > tol) bad++;
            }
            CHECK_MSG(bad == 0, "type %d pattern %d: %d elements off their rounding bound", t, pat, bad);
            for (int64_t blk = 0; blk < 1024 / be; blk++) {
                int s = 0, amax = 0;
                for (int i = 0; i < be; i++) {
                    s += qx_at(q, blk * be + i);
                    if (abs(qx_at(q, blk * be + i)) > amax) amax = abs(qx_at(q, blk * be + i));
                }
                CHECK(amax == 127 || (amax == 0 && q->d[blk] == 0.f) || (be == 32 && amax >= 126));
                if (be == 32) CHECK_INT(q->bsum32[blk], s);
                else {
                    int s16 = 0;
                    for (int j = 0; j < 16; j++) s16 += q->bsum16[blk * 16 + j];
                    CHECK_INT(s16, s);
                }
            }
        }
    float bad[256];
    fill_rand(&r, bad, 256, 1.f);
    bad[17] = NAN;
    CHECK(!qx_quantize(&qx, qmem, DT_Q4_K, bad, 256));      /* NaN: float path */
    CHECK(!qx_quantize(&qx, qmem, DT_Q4_K, bad, 200));      /* not whole blocks */
}

/* qx_dot = exact integer formula, per type and shape. */
static void test_dot_exact(void)
{
    if (!qx_supported(DT_Q4_K)) { printf("qdot: no AVX512-VNNI at this level, exact tests skipped\n"); return; }
    trng r = {11};
    const dtype types[] = {DT_Q8_0, DT_Q4_0, DT_Q5_0, DT_Q4_1, DT_Q5_1, DT_Q4_K, DT_Q5_K, DT_Q6_K};
    const int64_t Ks[] = {256, 768, 4864, 96, 32, 224};
    for (int ti = 0; ti < 8; ti++)
        for (int ki = 0; ki < 6; ki++)
            for (int pat = 0; pat < 3; pat++) {
                dtype t = types[ti];
                int64_t K = Ks[ki];
                if (K % blk_of(t)) continue;
                float *w = xmalloc((size_t)K * 4), *x = xmalloc((size_t)K * 4);
                uint8_t *wq = xmalloc(dtype_row_bytes(t, K));
                fill_rand(&r, w, (size_t)K, 0.05f);
                fill_x(&r, x, K, pat);
                CHECK(export_quant_row(t, w, wq, K) == dtype_row_bytes(t, K));
                kern_q8x *q = &qx;
                CHECK(qx_quantize(q, qmem, t, x, K));
                double mag, want = exact_dot(t, wq, q, &mag);
                float got = qx_dot(q, wq);
                CHECK_MSG(fabs(got - want) <= 2e-6 * mag + 1e-30, "type %d K %lld pattern %d: got %.9g want %.9g (Σ|·| %.3g)",
                          t, (long long)K, pat, got, want, mag);
                free(w); free(x); free(wq);
            }
}

/* kern_matvec: the float path within the int8 error, bitwise across thread
 * counts, kern_matmul exactly when switched off or unsupported. */
static void test_matvec(void)
{
    trng r = {23};
    const dtype types[] = {DT_Q8_0, DT_Q4_0, DT_Q5_0, DT_Q4_1, DT_Q5_1, DT_Q4_K, DT_Q5_K, DT_Q6_K, DT_F16, DT_BF16};
    const int64_t O = 300, I = 1536;
    float *wf = xmalloc((size_t)O * I * 4), *x = xmalloc((size_t)I * 4), *bias = xmalloc((size_t)O * 4);
    float *y1 = xmalloc((size_t)O * 4), *y2 = xmalloc((size_t)O * 4), *yf = xmalloc((size_t)O * 4);
    fill_rand(&r, wf, (size_t)O * I, 0.05f);
    fill_x(&r, x, I, 1);
    fill_rand(&r, bias, (size_t)O, 1.f);
    for (int ti = 0; ti < 10; ti++) {
        dtype t = types[ti];
        size_t rb = dtype_row_bytes(t, I);
        uint8_t *wq = xmalloc(rb * (size_t)O);
        for (int64_t o = 0; o < O; o++) export_quant_row(t, wf + o * I, wq + o * rb, I);
        wmat W = {.type = t, .rows = O, .cols = I, .row_bytes = rb, .data = wq};
        kern_init(1);
        kern_matvec(y1, x, &W, bias);
        kern_init(2);
        kern_matvec(y2, x, &W, bias);
        CHECK_MSG(!memcmp(y1, y2, (size_t)O * 4), "type %d: 1 vs 2 threads differ", t);
        kern_matmul(yf, x, &W, bias, 1, 0);
        if (!qx_supported(t)) {
            CHECK_MSG(!memcmp(y1, yf, (size_t)O * 4), "type %d: unsupported type must be kern_matmul", t);
        } else {
            /* rounding x to int8 moves each product by at most |w|·d/2
             * (Q8_0: 0.5625·d, see above), plus the float sums' rounding */
            kern_q8x *q = &qx;
            CHECK(qx_quantize(q, qmem, t, x, I));
            double worst = 0;
            float *wd = xmalloc((size_t)I * 4);
            for (int64_t o = 0; o < O; o++) {
                double mag = 0, bound = 0;
                dequant_row_scalar(t, wq + o * rb, wd, I);
                for (int64_t k = 0; k < I; k++) {
                    mag += fabs((double)wd[k] * x[k]);
                    bound += fabs((double)wd[k] * q->d[k / blk_of(t)]) * (blk_of(t) == 32 ? 0.5625 : 0.5);
                }
                double rel = fabs((double)y1[o] - yf[o]) / (bound + 1e-5 * mag);
                if (rel > worst) worst = rel;
            }
            free(wd);
            CHECK_MSG(worst <= 1.0, "type %d: int8 decode off the float path by %.3g of its bound", t, worst);
            CHECK_MSG(worst > 0, "type %d: the integer path did not run", t);
            kern_set_int8_decode(0);
            kern_matvec(y2, x, &W, bias);
            kern_set_int8_decode(1);
            CHECK_MSG(!memcmp(y2, yf, (size_t)O * 4), "type %d: switched off must be kern_matmul", t);
        }
        free(wq);
    }
    free(wf); free(x); free(bias); free(y1); free(y2); free(yf);
    kern_shutdown();
}

static int tool(char **a)
{
    dtype t;
    if (dtype_from_name(a[0], &t)) { fprintf(stderr, "tool: unknown type %s\n", a[0]); return 2; }
    int64_t K = atoll(a[1]);
    FILE *fw = fopen(a[2], "rb"), *fx = fopen(a[3], "rb");
    if (!fw || !fx || K <= 0 || qx_bytes(K) > sizeof qmem || !qx_supported(t)) { fprintf(stderr, "tool: bad arguments\n"); return 2; }
    size_t rb = dtype_row_bytes(t, K);
    fseek(fw, 0, SEEK_END);
    long wbytes = ftell(fw);
    rewind(fw);
    int64_t rows = wbytes / (long)rb;
    uint8_t *w = xmalloc((size_t)wbytes);
    float *x = xmalloc((size_t)K * 4);
    if (fread(w, 1, (size_t)wbytes, fw) != (size_t)wbytes || fread(x, 4, (size_t)K, fx) != (size_t)K) return 2;
    fclose(fw); fclose(fx);
    kern_q8x *q = &qx;
    if (!qx_quantize(q, qmem, t, x, K)) { fprintf(stderr, "tool: x not quantizable\n"); return 2; }
    FILE *fq = fopen(a[4], "wb"), *fy = fopen(a[5], "wb");
    if (!fq || !fy) return 2;
    int be = blk_of(t);
    for (int64_t blk = 0; blk < K / be; blk++) {
        if (be == 32) {
            uint16_t h = f32_to_fp16(q->d[blk]);
            fwrite(&h, 2, 1, fq);
            if (t == DT_Q4_1 || t == DT_Q5_1) {     /* block_q8_1: d, s, qs */
                uint16_t sh = f32_to_fp16(q->sx[blk]);
                fwrite(&sh, 2, 1, fq);
            }
        } else {
            fwrite(&q->d[blk], 4, 1, fq);
        }
        for (int i = 0; i < be; i++) {
            int8_t v = (int8_t)qx_at(q, blk * be + i);
            fwrite(&v, 1, 1, fq);
        }
        if (be == 256)
            for (int j = 0; j < 16; j++) {
                int16_t s = (int16_t)q->bsum16[blk * 16 + j];
                fwrite(&s, 2, 1, fq);
            }
    }
    for (int64_t o = 0; o < rows; o++) {
        float y = qx_dot(q, w + (size_t)o * rb);
        fwrite(&y, 4, 1, fy);
    }
    fclose(fq); fclose(fy);
    free(w); free(x);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 8 && !strcmp(argv[1], "--tool")) return tool(argv + 2);
    test_quantize_bounds();
    test_dot_exact();
    test_matvec();
    int rc = check_done();
    return rerun_lower_levels(argv[0]) ? 1 : rc;
}
