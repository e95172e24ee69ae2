/* bf16 numerics of the kernels (training.precision: bf16, kern_set_bf16):
 *  - kern_round_bf16 against values PyTorch gives for
 *    torch.tensor([x]).to(torch.bfloat16).float() (RNE ties, carries into
 *    the exponent, overflow to Inf, subnormals, signs; NaN stays NaN), and
 *    against its plain twin on random bit patterns;
 *  - every GEMM entry point (kern_matmul for F32 / F16 / BF16 / Q8_0 /
 *    Q4_K weights, kern_matmul_dx, kern_sgemm in all transposes including
 *    the narrow LoRA shapes, the fused LoRA products, the fused LM head)
 *    against plain loops over the bf16-rounded inputs with sums in double;
 *  - the bf16 results differ from the f32 ones by the size bf16 rounding
 *    makes (so the mode really rounds), and kern_set_bf16(0) gives the f32
 *    bytes back;
 *  - identical bytes for 1, 2 and 3 threads; every ISA level. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kern/kern.h"
#include "kern/kern_impl.h"
#include "kern_test_util.h"

static float f_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t u_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static void test_round(void)
{
    /* {input bits, torch's bf16 value as f32 bits} (python3-torch 2.x) */
    static const uint32_t torch_pairs[][2] = {
        {0x3F800000, 0x3F800000}, {0x3F808000, 0x3F800000}, {0x3F818000, 0x3F820000},
        {0x3F808001, 0x3F810000}, {0x3F80FFFF, 0x3F810000}, {0x7F7FFFFF, 0x7F800000},
        {0x7F800000, 0x7F800000}, {0xFF800000, 0xFF800000}, {0x00008000, 0x00000000},
        {0x00018000, 0x00020000}, {0x80018001, 0x80020000}, {0x477FE000, 0x47800000},
        {0xC2F6E979, 0xC2F70000},
    };
    for (size_t i = 0; i < sizeof torch_pairs / sizeof torch_pairs[0]; i++) {
        float x = f_of(torch_pairs[i][0]);
        kern_round_bf16(&x, 1);
        CHECK_MSG(u_of(x) == torch_pairs[i][1], "round(0x%08X) = 0x%08X, torch 0x%08X", torch_pairs[i][0], u_of(x),
                  torch_pairs[i][1]);
    }
    float nan[2] = {f_of(0x7FC00001), f_of(0x7F800001)};   /* a quiet and a signalling NaN */
    kern_round_bf16(nan, 2);
    CHECK(isnan(nan[0]) && isnan(nan[1]));
    /* the vector loop against the twin, bit for bit, on random patterns */
    enum { N = 100003 };
    float *a = xmalloc(N * 4), *b = xmalloc(N * 4);
    trng r = {42};
    for (int i = 0; i < N; i++) a[i] = f_of((uint32_t)trng_u64(&r));
    memcpy(b, a, N * 4);
    kern_round_bf16(a + 1, N - 1);   /* unaligned start, odd length */
    kern_round_bf16_ref(b + 1, N - 1);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += u_of(a[i]) != u_of(b[i]);
    CHECK_INT(bad, 0);
    /* idempotent: a second rounding changes nothing */
    memcpy(b, a, N * 4);
    kern_round_bf16(b, N);
    bad = 0;
    for (int i = 1; i < N; i++) bad += u_of(a[i]) != u_of(b[i]) && !isnan(a[i]);
    CHECK_INT(bad, 0);
    free(a);
    free(b);
}

typedef struct qw { wmat w; void *data; float *deq; } qw;

static qw make_weight(trng *r, dtype t, int64_t O, int64_t I)
{
    float *f = xmalloc((size_t)O * I * 4);
    fill_rand(r, f, (size_t)O * I, 0.5f);
    size_t rb = dtype_row_bytes(t, I);
    qw q = {{t, O, I, rb, NULL}, xmalloc(rb * (size_t)O), f};
    for (int64_t o = 0; o < O; o++) {
        kern_quant_row(t, f + o * I, (char *)q.data + o * rb, I);
        dequant_row_scalar(t, (char *)q.data + o * rb, f + o * I, I);   /* the values the kernels see */
    }
    q.w.data = q.data;
    return q;
}

/* max|a − b| / max|b| */
static double rel_err(const float *a, const float *b, size_t n)
{
    double md = 0, mb = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs((double)a[i] - b[i]) > md) md = fabs((double)a[i] - b[i]);
        if (fabs((double)b[i]) > mb) mb = fabs((double)b[i]);
    }
    return mb > 0 ? md / mb : md;
}

/* y = x·Wᵀ and dx = dy·W through the weight types, plus the fused LoRA
 * products, against the bf16 plain loops; the f32 path is farther off. */
static void test_matmul_types(void)
{
    const dtype types[] = {DT_F32, DT_F16, DT_BF16, DT_Q8_0, DT_Q4_K};
    trng r = {7};
    const int64_t N = 37, O = 70, I = 512, R = 8;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        dtype t = types[ti];
        qw W = make_weight(&r, t, O, I);
        float *x = xmalloc((size_t)N * I * 4), *dy = xmalloc((size_t)N * O * 4);
        float *U = xmalloc((size_t)N * R * 4), *B = xmalloc((size_t)O * R * 4), *A = xmalloc((size_t)R * I * 4);
        float *dU = xmalloc((size_t)N * R * 4);
        fill_rand(&r, x, (size_t)N * I, 1.f);
        fill_rand(&r, dy, (size_t)N * O, 1.f);
        fill_rand(&r, U, (size_t)N * R, 1.f);
        fill_rand(&r, B, (size_t)O * R, 0.3f);
        fill_rand(&r, A, (size_t)R * I, 0.3f);
        fill_rand(&r, dU, (size_t)N * R, 1.f);
        float *y = xmalloc((size_t)N * O * 4), *yr = xmalloc((size_t)N * O * 4), *yf = xmalloc((size_t)N * O * 4);
        float *dx = xmalloc((size_t)N * I * 4), *dxr = xmalloc((size_t)N * I * 4), *dxf = xmalloc((size_t)N * I * 4);
        char lab[96];

        kern_set_bf16(1);
        kern_matmul(y, x, &W.w, NULL, N, 0);
        kern_set_bf16(0);
        kern_matmul(yf, x, &W.w, NULL, N, 0);
        kern_sgemm_bf16_ref(0, 1, N, O, I, 1.f, x, I, W.deq, I, 0.f, yr, O);
        snprintf(lab, sizeof lab, "matmul %s bf16", dtype_name(t));
        CHECK_CLOSE(lab, y, yr, (size_t)N * O, 2e-6, 0);
        /* the f32 path misses the bf16 reference by bf16's rounding (~2^-9
         * relative per input): the mode is not a no-op */
        double ef = rel_err(yf, yr, (size_t)N * O), eb = rel_err(y, yr, (size_t)N * O);
        CHECK_MSG(ef > 50 * eb && ef > 1e-4, "%s: f32 %.3g vs bf16 %.3g", lab, ef, eb);

        kern_set_bf16(1);
        kern_matmul_dx_to(dx, dy, &W.w, N, 0);
        kern_set_bf16(0);
        kern_sgemm_bf16_ref(0, 0, N, I, O, 1.f, dy, O, W.deq, I, 0.f, dxr, I);
        snprintf(lab, sizeof lab, "matmul_dx %s bf16", dtype_name(t));
        CHECK_CLOSE(lab, dx, dxr, (size_t)N * I, 2e-6, 0);

        /* y = x·Wᵀ + s·U·Bᵀ: both products rounded */
        kern_set_bf16(1);
        kern_matmul_lora(y, x, &W.w, NULL, N, 0, U, B, (int)R, 2.f);
        kern_set_bf16(0);
        kern_sgemm_bf16_ref(0, 1, N, O, R, 2.f, U, R, B, R, 1.f, yr, O);
        snprintf(lab, sizeof lab, "matmul_lora %s bf16", dtype_name(t));
        CHECK_CLOSE(lab, y, yr, (size_t)N * O, 2e-6, 0);
        /* dx = dy·W + dU·A */
        kern_set_bf16(1);
        kern_matmul_dx_lora(dx, dy, &W.w, N, 0, dU, A, (int)R);
        kern_set_bf16(0);
        kern_sgemm_bf16_ref(0, 0, N, I, R, 1.f, dU, R, A, I, 1.f, dxr, I);
        snprintf(lab, sizeof lab, "matmul_dx_lora %s bf16", dtype_name(t));
        CHECK_CLOSE(lab, dx, dxr, (size_t)N * I, 2e-6, 0);

        /* off again: the exact f32 bytes */
        kern_matmul(y, x, &W.w, NULL, N, 0);
        CHECK(!memcmp(y, yf, (size_t)N * O * 4));
        free(W.data); free(W.deq); free(x); free(dy); free(U); free(B); free(A); free(dU);
        free(y); free(yr); free(yf); free(dx); free(dxr); free(dxf);
    }
}

/* kern_sgemm's shapes: all transposes, the narrow ones (N <= 16) included,
 * alpha/beta, against the bf16 twin. */
static void test_sgemm(void)
{
    trng r = {11};
    const int64_t shapes[][3] = {{33, 8, 300}, {64, 70, 129}, {8, 300, 40}, {300, 4, 64}, {5, 3, 7}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
                float *A = xmalloc((size_t)M * K * 4), *B = xmalloc((size_t)K * N * 4);
                float *C = xmalloc((size_t)M * N * 4), *Cr = xmalloc((size_t)M * N * 4);
                fill_rand(&r, A, (size_t)M * K, 1.f);
                fill_rand(&r, B, (size_t)K * N, 1.f);
                fill_rand(&r, C, (size_t)M * N, 1.f);
                memcpy(Cr, C, (size_t)M * N * 4);
                int64_t lda = ta ? M : K, ldb = tb ? K : N;
                kern_set_bf16(1);
                kern_sgemm(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 1.f, C, N);
                kern_set_bf16(0);
                kern_sgemm_bf16_ref(ta, tb, M, N, K, 0.5f, A, lda, B, ldb, 1.f, Cr, N);
                char lab[96];
                snprintf(lab, sizeof lab, "sgemm %lldx%lldx%lld ta%d tb%d bf16", (long long)M, (long long)N,
                         (long long)K, ta, tb);
                CHECK_CLOSE(lab, C, Cr, (size_t)M * N, 3e-6, 0);
                free(A); free(B); free(C); free(Cr);
            }
}

/* The fused head in bf16: logits from rounded x and W, the gradient of the
 * logits in f32 times the rounded W (kern.h), against plain loops. */
static void test_head(void)
{
    trng r = {5};
    const int64_t N = 40, V = 600, C = 96;
    qw W = make_weight(&r, DT_F16, V, C);
    float *x = xmalloc((size_t)N * C * 4), *dx = xmalloc((size_t)N * C * 4), *nll = xmalloc((size_t)N * 4);
    float *scratch = xmalloc(kern_head_xent_scratch(N, (int)C) * 4);
    int32_t *tg = xmalloc((size_t)N * 4);
    fill_rand(&r, x, (size_t)N * C, 1.f);
    for (int64_t n = 0; n < N; n++) tg[n] = n % 9 == 4 ? -1 : (int32_t)(trng_u64(&r) % V);
    kern_set_bf16(1);
    double tot = kern_head_xent(dx, nll, x, &W.w, tg, N, 0.25f, scratch);
    kern_set_bf16(0);
    float *xr = xmalloc((size_t)N * C * 4), *wr = xmalloc((size_t)V * C * 4);
    memcpy(xr, x, (size_t)N * C * 4);
    memcpy(wr, W.deq, (size_t)V * C * 4);
    kern_round_bf16_ref(xr, N * C);
    kern_round_bf16_ref(wr, V * C);
    float *dxr = xmalloc((size_t)N * C * 4), *nllr = xmalloc((size_t)N * 4);
    double totr = 0;
    double *lg = xmalloc((size_t)V * 8);
    for (int64_t n = 0; n < N; n++) {
        double mx = -INFINITY, s = 0;
        for (int64_t v = 0; v < V; v++) {
            double a = 0;
            for (int64_t c = 0; c < C; c++) a += (double)xr[n * C + c] * wr[v * C + c];
            lg[v] = a;
            if (a > mx) mx = a;
        }
        for (int64_t v = 0; v < V; v++) s += exp(lg[v] - mx);
        for (int64_t c = 0; c < C; c++) dxr[n * C + c] = 0;
        if (tg[n] < 0) { nllr[n] = 0; continue; }
        nllr[n] = (float)(mx + log(s) - lg[tg[n]]);
        totr += nllr[n];
        for (int64_t v = 0; v < V; v++) {
            double gv = 0.25 * (exp(lg[v] - mx) / s - (v == tg[n]));
            for (int64_t c = 0; c < C; c++) dxr[n * C + c] += (float)(gv * wr[v * C + c]);
        }
    }
    CHECK_CLOSE("head nll bf16", nll, nllr, (size_t)N, 2e-6, 1e-6);
    /* the bf16 instructions take P's tiles rounded to bf16 too (head.c):
     * each term then carries up to 2^-9 relative error, not f32's */
    int p_rounded = kern_bf16_backend() != KERN_BF16_FMA;
    CHECK_CLOSE("head dx bf16", dx, dxr, (size_t)N * C, p_rounded ? 2e-3 : 2e-5, 1e-7);
    CHECK_NEAR(tot, totr, 1e-5 * fabs(totr));
    free(W.data); free(W.deq); free(x); free(dx); free(nll); free(scratch); free(tg); free(xr); free(wr);
    free(dxr); free(nllr); free(lg);
}

/* bf16 bytes do not depend on the thread count */
static void test_threads(void)
{
    trng r = {3};
    const int64_t N = 300, O = 256, I = 768, R = 8;
    qw W = make_weight(&r, DT_Q8_0, O, I);
    float *x = xmalloc((size_t)N * I * 4), *U = xmalloc((size_t)N * R * 4), *B = xmalloc((size_t)O * R * 4);
    fill_rand(&r, x, (size_t)N * I, 1.f);
    fill_rand(&r, U, (size_t)N * R, 1.f);
    fill_rand(&r, B, (size_t)O * R, 1.f);
    float *y[3], *g[3], *h[3];
    for (int t = 0; t < 3; t++) {
        kern_init(t + 1);
        y[t] = xmalloc((size_t)N * O * 4);
        g[t] = xmalloc((size_t)O * R * 4);
        h[t] = xmalloc((size_t)N * R * 4);
        kern_set_bf16(1);
        kern_matmul_lora(y[t], x, &W.w, NULL, N, 0, U, B, (int)R, 2.f);
        kern_sgemm(1, 0, O, R, N, 1.f, y[t], O, U, R, 0.f, g[t], R);   /* a dB-shaped product */
        kern_sgemm(0, 1, N, R, I, 1.f, x, I, W.deq, I, 0.f, h[t], R);  /* x·Aᵀ-shaped, K over 3 blocks */
        kern_set_bf16(0);
    }
    for (int t = 1; t < 3; t++) {
        CHECK_MSG(!memcmp(y[0], y[t], (size_t)N * O * 4), "matmul_lora bytes differ at %d threads", t + 1);
        CHECK_MSG(!memcmp(g[0], g[t], (size_t)O * R * 4), "sgemm bytes differ at %d threads", t + 1);
        CHECK_MSG(!memcmp(h[0], h[t], (size_t)N * R * 4), "narrow sgemm bytes differ at %d threads", t + 1);
    }
    for (int t = 0; t < 3; t++) { free(y[t]); free(g[t]); free(h[t]); }
    free(W.data); free(W.deq); free(x); free(U); free(B);
    kern_init(2);
}

int main(int argc, char **argv)
{
    (void)argc;
    char desc[128];
    cpu_describe(desc, sizeof desc);
    printf("cpu level: %s\n", desc);
    test_round();
    kern_init(2);
    test_matmul_types();
    test_sgemm();
    test_head();
    test_threads();
    kern_shutdown();
    int rc = check_done();
    return rerun_lower_levels(argv[0]) ? 1 : rc;
}
