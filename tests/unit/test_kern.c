/* Unit tests for src/kern, part 1: thread pool, fp16/bf16 conversions,
 * vector dequantizers, and the matmul family (kern_matmul for every weight
 * type, kern_matmul_dx, kern_sgemm) against their _ref twins, plus
 * bit-identical results for 1, 2 and 3 threads. The binary re-runs itself
 * at each lower ISA level (avx2, scalar). */
#include "check.h"
#include "kern_test_util.h"

#include <stdatomic.h>

#include "kern/kern.h"
#include "kern/kern_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* ---- pool -------------------------------------------------------------------- */

typedef struct cover { _Atomic int *hits; _Atomic int calls; } cover;

static void cover_fn(void *ctx, int64_t b, int64_t e)
{
    cover *c = ctx;
    atomic_fetch_add(&c->calls, 1);
    for (int64_t i = b; i < e; i++) atomic_fetch_add(&c->hits[i], 1);
}

static void nested_fn(void *ctx, int64_t b, int64_t e)
{
    cover *c = ctx;
    for (int64_t i = b; i < e; i++) kern_parallel_for(1, cover_fn, c);   /* runs inline */
}

static void test_pool(void)
{
    for (int nt = 1; nt <= 3; nt++) {
        CHECK_INT(kern_init(nt), 0);
        CHECK_INT(kern_threads(), nt);
        const int64_t sizes[] = {0, 1, 2, 3, 7, 1000};
        for (int s = 0; s < 6; s++) {
            int64_t n = sizes[s];
            _Atomic int hits[1000];
            for (int i = 0; i < 1000; i++) atomic_store(&hits[i], 0);
            cover c = {hits, 0};
            kern_parallel_for(n, cover_fn, &c);
            int ok = 1;
            for (int64_t i = 0; i < 1000; i++) ok &= atomic_load(&hits[i]) == (i < n ? 1 : 0);
            CHECK_MSG(ok, "parallel_for n=%lld threads=%d", (long long)n, nt);
            /* contiguous chunks, about four per thread (one call with one thread) */
            int calls = atomic_load(&c.calls);
            CHECK_MSG(n == 0 ? calls == 0 : nt == 1 || n == 1 ? calls == 1 : calls >= 1 && calls <= 4 * nt,
                      "parallel_for n=%lld threads=%d calls=%d", (long long)n, nt, calls);
            for (int i = 0; i < 1000; i++) atomic_store(&hits[i], 0);
            kern_parallel_dyn(n, cover_fn, &c);
            ok = 1;
            for (int64_t i = 0; i < 1000; i++) ok &= atomic_load(&hits[i]) == (i < n ? 1 : 0);
            CHECK_MSG(ok, "parallel_dyn n=%lld threads=%d", (long long)n, nt);
        }
        _Atomic int h1[1];
        atomic_store(&h1[0], 0);
        cover c = {h1, 0};
        kern_parallel_for(10, nested_fn, &c);
        CHECK_INT(atomic_load(&h1[0]), 10);
        /* many quick jobs in a row (the spin/sleep handshake) */
        _Atomic int h2[64];
        for (int i = 0; i < 64; i++) atomic_store(&h2[i], 0);
        cover c2 = {h2, 0};
        for (int r = 0; r < 2000; r++) kern_parallel_for(64, cover_fn, &c2);
        int ok = 1;
        for (int i = 0; i < 64; i++) ok &= atomic_load(&h2[i]) == 2000;
        CHECK(ok);
    }
    /* a pool that sleeps (idle > spin time) still wakes up */
    usleep(2000);
    _Atomic int h3[8];
    for (int i = 0; i < 8; i++) atomic_store(&h3[i], 0);
    cover c3 = {h3, 0};
    kern_parallel_for(8, cover_fn, &c3);
    int ok = 1;
    for (int i = 0; i < 8; i++) ok &= atomic_load(&h3[i]) == 1;
    CHECK(ok);
    kern_shutdown();
    CHECK_INT(kern_threads(), 1);   /* lazily back with one thread */
}

/* ---- conversions ---------------------------------------------------------------- */

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

#if defined(__x86_64__)
__attribute__((target("f16c"))) static uint16_t hw_f2h(float f) { return _cvtss_sh(f, 0); }
__attribute__((target("f16c"))) static float hw_h2f(uint16_t h) { return _cvtsh_ss(h); }
#endif

static void test_conversions(void)
{
    /* exact expected values */
    CHECK_INT(f32_to_fp16(1.0f), 0x3C00);
    CHECK_INT(f32_to_fp16(-2.0f), 0xC000);
    CHECK_INT(f32_to_fp16(65504.f), 0x7BFF);
    CHECK_INT(f32_to_fp16(65520.f), 0x7C00);            /* rounds up to inf */
    CHECK_INT(f32_to_fp16(65519.99f), 0x7BFF);
    CHECK_INT(f32_to_fp16(bitsf(0x33000000)), 0x0000);  /* 2^-25: tie → even (0) */
    CHECK_INT(f32_to_fp16(bitsf(0x33000001)), 0x0001);
    CHECK_INT(f32_to_fp16(bitsf(0x33C00000)), 0x0002);  /* 1.5·2^-24: tie → even (2) */
    CHECK_INT(f32_to_fp16(1.0f + 1.0f / 2048), 0x3C00); /* tie → even */
    CHECK_INT(f32_to_fp16(1.0f + 3.0f / 2048), 0x3C02);
    CHECK_INT(f32_to_fp16(NAN), 0x7E00);
    CHECK_INT(f32_to_fp16(-INFINITY), 0xFC00);
    CHECK(fp16_to_f32(0x0001) == bitsf(0x33800000));
    CHECK(fp16_to_f32(0x7BFF) == 65504.f);
    CHECK_INT(f32_to_bf16(1.0f), 0x3F80);
    CHECK_INT(f32_to_bf16(bitsf(0x3F808000)), 0x3F80);  /* tie → even */
    CHECK_INT(f32_to_bf16(bitsf(0x3F818000)), 0x3F82);  /* tie → even (up) */
    CHECK_INT(f32_to_bf16(bitsf(0x3F808001)), 0x3F81);
    CHECK_INT(f32_to_bf16(bitsf(0x7FC00001)), 0x7FC0);
    CHECK_INT(f32_to_bf16(bitsf(0x7F800001)), 0x7F80 | 64);  /* sNaN quieted */
    CHECK(bf16_to_f32(0xC040) == -3.0f);
#if defined(__x86_64__)
    /* against the F16C instructions, every fp16 value and random floats */
    if (cpu_get_features()->f16c) {
        int bad = 0;
        for (uint32_t h = 0; h < 65536; h++) {
            float a = fp16_to_f32((uint16_t)h), b = hw_h2f((uint16_t)h);
            if (fbits(a) != fbits(b)) bad++;
            /* and back: every half round-trips (NaNs aside) */
            if (a == a && f32_to_fp16(a) != h) bad++;
        }
        CHECK_INT(bad, 0);
        trng r = {7};
        bad = 0;
        for (int i = 0; i < 300000; i++) {
            uint32_t u = (uint32_t)trng_u64(&r);
            if (i & 1) u = (u & 0x807FFFFF) | ((uint32_t)(96 + (u >> 24) % 48) << 23); /* near half range */
            float f = bitsf(u);
            if (f != f) continue;
            if (f32_to_fp16(f) != hw_f2h(f)) bad++;
        }
        CHECK_INT(bad, 0);
    }
#endif
}

/* ---- dequantization: vector == scalar ---------------------------------------------- */

static const dtype ALL_TYPES[] = {DT_F32, DT_F16, DT_BF16, DT_Q8_0, DT_Q4_0, DT_Q5_0, DT_Q4_K, DT_Q5_K, DT_Q6_K};
#define NTYPES (int)(sizeof ALL_TYPES / sizeof ALL_TYPES[0])

static void test_dequant(void)
{
    trng r = {11};
    const int64_t n = 1024;
    float *x = xmalloc(n * 4), *a = xmalloc(n * 4), *b = xmalloc(n * 4);
    uint8_t *q = xmalloc(n * 4);
    for (int t = 0; t < NTYPES; t++) {
        fill_rand(&r, x, n, 0.5f);
        size_t bytes = kern_quant_row(ALL_TYPES[t], x, q, n);
        CHECK(bytes == dtype_row_bytes(ALL_TYPES[t], n));
        kern_dequant_row(ALL_TYPES[t], q, a, n);
        dequant_row_scalar(ALL_TYPES[t], q, b, n);
        CHECK_MSG(!memcmp(a, b, n * 4), "dequant %s vector != scalar", dtype_name(ALL_TYPES[t]));
    }
    /* Q4_1 / Q5_1 (dequant only): hand-made block */
    uint8_t blk[24] = {0};
    uint16_t d = f32_to_fp16(0.5f), m = f32_to_fp16(-1.0f);
    memcpy(blk, &d, 2);
    memcpy(blk + 2, &m, 2);
    for (int j = 0; j < 16; j++) blk[4 + j] = (uint8_t)(j | ((15 - j) << 4));
    dequant_row_scalar(DT_Q4_1, blk, a, 32);
    CHECK(a[3] == 0.5f * 3 - 1.0f && a[16 + 3] == 0.5f * 12 - 1.0f);
    memset(blk + 4, 0, 20);
    uint32_t qh = 1u << 5 | 1u << 21;
    memcpy(blk + 4, &qh, 4);
    blk[8 + 5] = 0x21;
    dequant_row_scalar(DT_Q5_1, blk, a, 32);
    CHECK(a[5] == 0.5f * 17 - 1.0f && a[21] == 0.5f * 18 - 1.0f && a[0] == -1.0f);
    free(x); free(a); free(b); free(q);
}

/* Fused dequantize+dot (decode path) == dequantize, then dot_rows, bitwise. */
static void test_dot_fused(void)
{
    const kern_isa *isa = kern_isa_get();
    if (!isa->dot_fused) return;
    trng r = {12};
    const int64_t Ks[] = {1, 15, 16, 17, 64, 100, 256, 288, 576, 1000, 1536};
    float *w = xmalloc(1536 * 4), *x = xmalloc(1536 * 4), *dq = xmalloc(1536 * 4);
    uint8_t *q = xmalloc(1536 * 4);
    int checked = 0;
    for (int t = 0; t < NTYPES; t++)
        for (int ki = 0; ki < 11; ki++) {
            int64_t K = Ks[ki];
            if (ALL_TYPES[t] == DT_F32 || !dtype_row_bytes(ALL_TYPES[t], K)) continue;
            fill_rand(&r, w, K, 1.f);
            fill_rand(&r, x, K, 1.f);
            kern_quant_row(ALL_TYPES[t], w, q, K);
            kern_dequant_row(ALL_TYPES[t], q, dq, K);
            float a = 0, b = 0;
            isa->dot_rows(&a, 1, x, K, 1, dq, K);
            if (!isa->dot_fused(ALL_TYPES[t], q, x, K, &b)) {   /* a level may leave a type to dequant + dot */
                CHECK_MSG(ALL_TYPES[t] != DT_F16 && ALL_TYPES[t] != DT_BF16 && ALL_TYPES[t] != DT_Q8_0,
                          "dot_fused has no %s", dtype_name(ALL_TYPES[t]));
                continue;
            }
            CHECK_MSG(fbits(a) == fbits(b), "dot_fused %s K=%lld: %.9g vs %.9g", dtype_name(ALL_TYPES[t]),
                      (long long)K, a, b);
            checked++;
        }
    CHECK(checked >= 25);   /* F16 and BF16 at every K, Q8_0 at whole blocks */
    free(w); free(x); free(dq); free(q);
}

/* dot_rows over nx rows of x and dot_fused_n (batched decoding) give each
 * row exactly the bits of that row alone, whatever nx and the row's place
 * in the groups of three the kernels take. */
static void test_dot_rows_groups(void)
{
    const kern_isa *isa = kern_isa_get();
    trng r = {13};
    enum { NX = 8, KM = 1040 };
    const int64_t Ks[] = {1, 7, 8, 31, 32, 33, 64, 100, 256, 768, 1024};
    float *x = xmalloc(NX * (KM + 3) * 4), *w = xmalloc(KM * 4), *dq = xmalloc(KM * 4);
    uint8_t *q = xmalloc(KM * 4);
    int fused = 0;
    for (int ki = 0; ki < 11; ki++) {
        int64_t K = Ks[ki], ldx = K + 3;
        fill_rand(&r, x, (size_t)(NX * ldx), 1.f);
        fill_rand(&r, w, (size_t)K, 1.f);
        for (int nx = 1; nx <= NX; nx++) {
            float y[NX * 2], one;
            isa->dot_rows(y, 2, x, ldx, nx, w, K);
            for (int n = 0; n < nx; n++) {
                isa->dot_rows(&one, 1, x + n * ldx, ldx, 1, w, K);
                CHECK_MSG(fbits(one) == fbits(y[2 * n]), "dot_rows K=%lld nx=%d row %d: %.9g vs %.9g",
                          (long long)K, nx, n, y[2 * n], one);
            }
        }
        for (int t = 0; t < NTYPES; t++) {
            dtype ty = ALL_TYPES[t];
            if (ty == DT_F32 || !dtype_row_bytes(ty, K) || !isa->dot_fused_n) continue;
            kern_quant_row(ty, w, q, K);
            kern_dequant_row(ty, q, dq, K);
            for (int nx = 1; nx <= NX; nx++) {
                float y[NX], one;
                if (!isa->dot_fused_n(ty, q, x, ldx, nx, K, y)) break;
                for (int n = 0; n < nx; n++) {
                    isa->dot_rows(&one, 1, x + n * ldx, ldx, 1, dq, K);
                    CHECK_MSG(fbits(one) == fbits(y[n]), "dot_fused_n %s K=%lld nx=%d row %d: %.9g vs %.9g",
                              dtype_name(ty), (long long)K, nx, n, y[n], one);
                }
                fused++;
            }
        }
    }
    if (isa->dot_fused_n) CHECK(fused >= 100);   /* F16, BF16 at every K, Q8_0 at whole blocks */
    free(x); free(w); free(dq); free(q);
}

/* ---- matmul family ---------------------------------------------------------------- */

typedef struct qmat { wmat w; uint8_t *data; } qmat;

static qmat make_w(trng *r, dtype t, int64_t O, int64_t I)
{
    qmat m;
    size_t rb = dtype_row_bytes(t, I);
    m.data = xmalloc(rb * (size_t)O + 64);
    float *row = xmalloc((size_t)I * 4);
    for (int64_t o = 0; o < O; o++) {
        fill_rand(r, row, (size_t)I, 0.3f);
        kern_quant_row(t, row, m.data + (size_t)o * rb, I);
    }
    free(row);
    m.w = (wmat){t, O, I, rb, m.data};
    return m;
}

static int is_kquant(dtype t) { return t == DT_Q4_K || t == DT_Q5_K || t == DT_Q6_K; }

static void test_matmul(void)
{
    trng r = {42};
    const int64_t Ns[] = {1, 3, 5, 40};
    const int64_t Os[] = {1, 7, 33, 70};
    for (int t = 0; t < NTYPES; t++) {
        dtype ty = ALL_TYPES[t];
        int64_t be = (int64_t)dtype_block_elems(ty);
        const int64_t Is_plain[] = {1, 17, 300, 320};
        const int64_t Is_q32[] = {32, 96, 288, 320};
        const int64_t Is_k[] = {256, 512, 256, 512};
        const int64_t *Is = be == 1 ? Is_plain : is_kquant(ty) ? Is_k : Is_q32;
        for (int ii = 0; ii < 4; ii++)
            for (int oi = 0; oi < 4; oi++) {
                int64_t I = Is[ii], O = Os[oi];
                qmat W = make_w(&r, ty, O, I);
                float *bias = xmalloc(O * 4);
                fill_rand(&r, bias, O, 1.f);
                for (int ni = 0; ni < 4; ni++) {
                    int64_t N = Ns[ni];
                    float *x = xmalloc(N * I * 4), *y = xmalloc(N * O * 4), *yr = xmalloc(N * O * 4);
                    fill_rand(&r, x, N * I, 1.f);
                    int acc = (ni + oi) % 2;
                    const float *bp = (ni + ii) % 3 == 0 ? bias : NULL;
                    fill_rand(&r, y, N * O, 1.f);
                    memcpy(yr, y, N * O * 4);
                    kern_matmul(y, x, &W.w, bp, N, acc);
                    kern_matmul_ref(yr, x, &W.w, bp, N, acc);
                    char label[128];
                    snprintf(label, sizeof label, "matmul %s N=%lld O=%lld I=%lld acc=%d bias=%d",
                             dtype_name(ty), (long long)N, (long long)O, (long long)I, acc, bp != NULL);
                    check_tensor(label, y, yr, N * O, 2e-5);
                    /* input gradient */
                    float *dy = xmalloc(N * O * 4), *dx = xmalloc(N * I * 4), *dxr = xmalloc(N * I * 4);
                    fill_rand(&r, dy, N * O, 1.f);
                    fill_rand(&r, dx, N * I, 1.f);
                    memcpy(dxr, dx, N * I * 4);
                    kern_matmul_dx(dx, dy, &W.w, N);
                    kern_matmul_dx_ref(dxr, dy, &W.w, N);
                    snprintf(label, sizeof label, "matmul_dx %s N=%lld O=%lld I=%lld", dtype_name(ty),
                             (long long)N, (long long)O, (long long)I);
                    check_tensor(label, dx, dxr, N * I, 2e-5);
                    free(x); free(y); free(yr); free(dy); free(dx); free(dxr);
                }
                free(bias);
                free(W.data);
            }
    }
}

/* Q4_1/Q5_1 weights (dequant-only types: random blocks with sane scales),
 * and weights the kernels must refuse (y untouched). */
static void test_matmul_other_types(void)
{
    trng r = {43};
    const dtype ts[] = {DT_Q4_1, DT_Q5_1};
    const int64_t N = 6, O = 37, I = 96;
    for (int t = 0; t < 2; t++) {
        size_t bb = dtype_block_bytes(ts[t]), rb = dtype_row_bytes(ts[t], I);
        uint8_t *data = xmalloc(rb * O);
        for (size_t i = 0; i < rb * O; i++) data[i] = (uint8_t)trng_u64(&r);
        for (size_t b = 0; b < rb * O; b += bb) {
            uint16_t d = f32_to_fp16(0.01f * (float)(1 + trng_u64(&r) % 7)), m = f32_to_fp16(-0.05f);
            memcpy(data + b, &d, 2);
            memcpy(data + b + 2, &m, 2);
        }
        wmat W = {ts[t], O, I, rb, data};
        float *x = xmalloc(N * I * 4), *y = xmalloc(N * O * 4), *yr = xmalloc(N * O * 4);
        fill_rand(&r, x, N * I, 1.f);
        kern_matmul(y, x, &W, NULL, N, 0);
        kern_matmul_ref(yr, x, &W, NULL, N, 0);
        check_tensor(ts[t] == DT_Q4_1 ? "matmul Q4_1" : "matmul Q5_1", y, yr, N * O, 2e-5);
        free(x); free(y); free(yr); free(data);
    }
    float x[64], y[8], y0[8];
    uint8_t junk[4096] = {0};
    for (int i = 0; i < 64; i++) x[i] = 1.f;
    for (int i = 0; i < 8; i++) y[i] = y0[i] = (float)i;
    wmat bad1 = {(dtype)99, 4, 64, 256, junk};          /* unknown type */
    wmat bad2 = {DT_Q4_K, 4, 64, 144, junk};            /* 64 is not a whole Q4_K block */
    wmat bad3 = {DT_Q8_0, 4, 64, 10, junk};             /* rows shorter than 64 elements */
    kern_matmul(y, x, &bad1, NULL, 2, 0);
    kern_matmul(y, x, &bad2, NULL, 2, 0);
    kern_matmul(y, x, &bad3, NULL, 2, 0);
    kern_matmul_dx(y, x, &bad1, 2);
    CHECK(!memcmp(y, y0, sizeof y));
}

static void test_sgemm(void)
{
    trng r = {5};
    const int64_t dims[][3] = {{1, 1, 1}, {5, 3, 7}, {13, 33, 17}, {40, 70, 300}, {3, 130, 600}, {100, 9, 260},
                               {64, 64, 0}};
    for (int di = 0; di < 7; di++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int ab = 0; ab < 3; ab++) {
                    int64_t M = dims[di][0], N = dims[di][1], K = dims[di][2];
                    int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
                    float alpha = ab == 0 ? 1.f : ab == 1 ? 0.5f : -2.f;
                    float beta = ab == 0 ? 0.f : ab == 1 ? 1.f : 0.25f;
                    size_t asz = (size_t)(ta ? K : M) * lda + 1, bsz = (size_t)(tb ? N : K) * ldb + 1;
                    float *A = xmalloc(asz * 4), *B = xmalloc(bsz * 4);
                    float *C = xmalloc(M * ldc * 4), *Cr = xmalloc(M * ldc * 4);
                    fill_rand(&r, A, asz, 1.f);
                    fill_rand(&r, B, bsz, 1.f);
                    fill_rand(&r, C, M * ldc, 1.f);
                    if (beta == 0.f)
                        for (int64_t i = 0; i < M; i++) C[i * ldc] = NAN;  /* must not be read */
                    memcpy(Cr, C, M * ldc * 4);
                    kern_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
                    kern_sgemm_ref(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, Cr, ldc);
                    int pad_ok = 1;
                    for (int64_t i = 0; i < M; i++)
                        for (int64_t j = N; j < ldc; j++) pad_ok &= fbits(C[i * ldc + j]) == fbits(Cr[i * ldc + j]);
                    char label[96];
                    snprintf(label, sizeof label, "sgemm ta=%d tb=%d %lldx%lldx%lld a=%g b=%g", ta, tb,
                             (long long)M, (long long)N, (long long)K, alpha, beta);
                    CHECK_MSG(pad_ok, "%s wrote outside N", label);
                    check_tensor(label, C, Cr, M * ldc, 2e-5);
                    free(A); free(B); free(C); free(Cr);
                }
}

/* Narrow outputs (N < one micro-tile, many rows; N = 20 is past the
 * rank-sized kernels of narrow.c) take the operand swap (Cᵀ = op(B)ᵀ·op(A)ᵀ,
 * transposed store): same bits as computing the transposed product directly
 * (a wide problem, no swap), for every transpose combination, and close to
 * the reference. */
static void test_sgemm_narrow(void)
{
    trng r = {6};
    const int64_t M = 300, N = 20, K = 500;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int ab = 0; ab < 2; ab++) {
                float alpha = ab ? 0.5f : 1.f, beta = ab ? 0.75f : 0.f;
                int64_t lda = (ta ? M : K) + 1, ldb = (tb ? K : N) + 2;
                float *A = xmalloc((ta ? K : M) * lda * 4), *B = xmalloc((tb ? N : K) * ldb * 4);
                float *C = xmalloc(M * N * 4), *Cr = xmalloc(M * N * 4), *CT = xmalloc(N * M * 4);
                fill_rand(&r, A, (ta ? K : M) * lda, 1.f);
                fill_rand(&r, B, (tb ? N : K) * ldb, 1.f);
                fill_rand(&r, C, M * N, 1.f);
                memcpy(Cr, C, M * N * 4);
                for (int64_t i = 0; i < M; i++)
                    for (int64_t j = 0; j < N; j++) CT[j * M + i] = C[i * N + j];
                kern_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, N);
                kern_sgemm_ref(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, Cr, N);
                /* Cᵀ = op(B)ᵀ·op(A)ᵀ: B plays A with the opposite transpose flag */
                kern_sgemm(!tb, !ta, N, M, K, alpha, B, ldb, A, lda, beta, CT, M);
                char label[64];
                snprintf(label, sizeof label, "sgemm narrow ta=%d tb=%d", ta, tb);
                check_tensor(label, C, Cr, M * N, 2e-5);
                int same = 1;
                for (int64_t i = 0; i < M; i++)
                    for (int64_t j = 0; j < N; j++) same &= fbits(C[i * N + j]) == fbits(CT[j * M + i]);
                CHECK_MSG(same, "%s: swapped != transposed problem", label);
                free(A); free(B); free(C); free(Cr); free(CT);
            }
}

/* The rank-sized shapes of narrow.c (N or M <= 16, as LoRA's x·Aᵀ, dy·B,
 * dyᵀ·U, dUᵀ·x): close to the reference for alpha/beta, odd sizes and
 * padded leading dimensions, and the same bytes for 1, 2 and 3 threads. */
static void test_sgemm_rank(void)
{
    trng r = {16};
    const int64_t cases[][5] = {   /* ta tb M N K */
        {0, 1, 700, 8, 576}, {0, 1, 33, 16, 100}, {0, 1, 5, 3, 17}, {0, 0, 700, 8, 1536}, {0, 0, 9, 13, 40},
        {1, 0, 576, 8, 512}, {1, 0, 70, 11, 33}, {1, 0, 8, 1536, 512}, {1, 0, 13, 90, 7}, {1, 0, 16, 16, 64},
    };
    for (int ci = 0; ci < 10; ci++) {
        int ta = (int)cases[ci][0], tb = (int)cases[ci][1];
        int64_t M = cases[ci][2], N = cases[ci][3], K = cases[ci][4];
        int64_t lda = (ta ? M : K) + 2, ldb = (tb ? K : N) + 3, ldc = N + 1;
        float *A = xmalloc((ta ? K : M) * lda * 4), *B = xmalloc((tb ? N : K) * ldb * 4);
        float *C0 = xmalloc(M * ldc * 4), *C[3], *Cr = xmalloc(M * ldc * 4);
        fill_rand(&r, A, (ta ? K : M) * lda, 1.f);
        fill_rand(&r, B, (tb ? N : K) * ldb, 1.f);
        fill_rand(&r, C0, M * ldc, 1.f);
        for (int ab = 0; ab < 2; ab++) {
            float alpha = ab ? 0.5f : 1.f, beta = ab ? 1.f : 0.f;
            memcpy(Cr, C0, M * ldc * 4);
            kern_sgemm_ref(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, Cr, ldc);
            for (int t = 0; t < 3; t++) {
                kern_init(t + 1);
                C[t] = xmalloc(M * ldc * 4);
                memcpy(C[t], C0, M * ldc * 4);
                if (!beta)
                    for (int64_t i = 0; i < M; i++) C[t][i * ldc] = NAN;      /* must not be read */
                kern_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C[t], ldc);
            }
            char label[96];
            snprintf(label, sizeof label, "sgemm rank ta=%d tb=%d %lldx%lldx%lld beta=%g", ta, tb, (long long)M,
                     (long long)N, (long long)K, beta);
            check_tensor(label, C[0], Cr, M * ldc, 2e-5);
            CHECK_MSG(!memcmp(C[0], C[1], M * ldc * 4) && !memcmp(C[0], C[2], M * ldc * 4), "%s: threads", label);
            for (int t = 0; t < 3; t++) free(C[t]);
        }
        free(A); free(B); free(C0); free(Cr);
    }
    kern_init(2);
}

/* Same inputs with 1, 2 and 3 threads → identical bytes. */
static void test_determinism(void)
{
    trng r = {99};
    const int64_t N = 77, I = 512, O = 203;
    const dtype types[] = {DT_F32, DT_BF16, DT_Q8_0, DT_Q4_K, DT_Q6_K};
    float *x = xmalloc(N * I * 4), *dy = xmalloc(N * O * 4), *y[3], *dx[3], *dw[3];
    fill_rand(&r, x, N * I, 1.f);
    fill_rand(&r, dy, N * O, 1.f);
    for (int i = 0; i < 3; i++) {
        y[i] = xmalloc(N * O * 4);
        dx[i] = xmalloc(N * I * 4);
        dw[i] = xmalloc(O * I * 4);
    }
    for (int t = 0; t < 5; t++) {
        qmat W = make_w(&r, types[t], O, I);
        for (int nt = 1; nt <= 3; nt++) {
            kern_init(nt);
            kern_matmul(y[nt - 1], x, &W.w, NULL, N, 0);
            memset(dx[nt - 1], 0, N * I * 4);
            kern_matmul_dx(dx[nt - 1], dy, &W.w, N);
            memset(dw[nt - 1], 0, O * I * 4);
            kern_sgemm(1, 0, O, I, N, 1.f, dy, O, x, I, 1.f, dw[nt - 1], I);
        }
        for (int nt = 2; nt <= 3; nt++) {
            CHECK_MSG(!memcmp(y[0], y[nt - 1], N * O * 4), "matmul %s threads %d", dtype_name(types[t]), nt);
            CHECK_MSG(!memcmp(dx[0], dx[nt - 1], N * I * 4), "matmul_dx %s threads %d", dtype_name(types[t]), nt);
            CHECK_MSG(!memcmp(dw[0], dw[nt - 1], O * I * 4), "sgemm dW threads %d", nt);
        }
        free(W.data);
    }
    /* a shape that splits rows too (few columns, many rows) */
    {
        const int64_t M = 600, NN = 40, K = 300;
        float *A = xmalloc(M * K * 4), *B = xmalloc(K * NN * 4), *C[3];
        fill_rand(&r, A, M * K, 1.f);
        fill_rand(&r, B, K * NN, 1.f);
        for (int nt = 1; nt <= 3; nt++) {
            kern_init(nt);
            C[nt - 1] = xmalloc(M * NN * 4);
            kern_sgemm(0, 0, M, NN, K, 1.f, A, K, B, NN, 0.f, C[nt - 1], NN);
        }
        CHECK(!memcmp(C[0], C[1], M * NN * 4) && !memcmp(C[0], C[2], M * NN * 4));
        for (int i = 0; i < 3; i++) free(C[i]);
        free(A); free(B);
    }
    for (int i = 0; i < 3; i++) { free(y[i]); free(dx[i]); free(dw[i]); }
    free(x); free(dy);
    kern_init(2);
}

/* A GEMM with more rows than one row block (ROWS_MAX 768) and, when it is
 * called from inside a parallel job (2 and 3 threads: the packed A then
 * lives in the thread's scratch), a K cut into spans: the same bytes as the
 * plain run with one thread, and close to the reference. */
typedef struct nest_ctx { int64_t M, N, K; const float *A, *B; float *C[2]; } nest_ctx;

static void nested_gemm(void *ctx, int64_t b, int64_t e)
{
    const nest_ctx *c = ctx;
    for (int64_t i = b; i < e; i++)
        kern_sgemm(0, 1, c->M, c->N, c->K, 1.f, c->A, c->K, c->B, c->K, 0.f, c->C[i], c->N);
}

static void test_loop_orders(void)
{
    trng r = {3};
    const int64_t M = 1000, N = 40, K = 4000;
    float *A = xmalloc(M * K * 4), *B = xmalloc(N * K * 4), *Cr = xmalloc(M * N * 4), *C[3][2];
    fill_rand(&r, A, M * K, 1.f);
    fill_rand(&r, B, N * K, 1.f);
    for (int t = 0; t < 3; t++) {
        kern_init(t + 1);
        nest_ctx c = {M, N, K, A, B, {xmalloc(M * N * 4), xmalloc(M * N * 4)}};
        kern_parallel_for(2, nested_gemm, &c);
        C[t][0] = c.C[0];
        C[t][1] = c.C[1];
    }
    kern_sgemm_ref(0, 1, M, N, K, 1.f, A, K, B, K, 0.f, Cr, N);
    check_tensor("sgemm 1000x40x4000", C[0][0], Cr, M * N, 2e-5);
    int same = 1;
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < 2; i++) same &= !memcmp(C[0][0], C[t][i], M * N * 4);
    CHECK_MSG(same, "row blocks / K spans / nesting changed the bytes");
    for (int t = 0; t < 3; t++) { free(C[t][0]); free(C[t][1]); }
    free(A); free(B); free(Cr);
    kern_init(2);
}

/* The LoRA-fused matmuls give the bits of the base call followed by the
 * separate low-rank sgemm, for several weight types, shapes (N < 4 falls
 * back, narrow O), bias, accumulate, and 1-3 threads. */
static void test_matmul_lora(void)
{
    trng r = {12};
    const dtype types[] = {DT_F32, DT_Q8_0, DT_Q4_K};
    const int64_t shapes[][3] = {{3, 40, 256}, {50, 70, 256}, {300, 24, 512}, {129, 300, 768}};
    for (int t = 0; t < 3; t++)
        for (int si = 0; si < 4; si++) {
            int64_t N = shapes[si][0], O = shapes[si][1], I = shapes[si][2];
            const int R = 8;
            qmat W = make_w(&r, types[t], O, I);
            float *x = xmalloc(N * I * 4), *U = xmalloc(N * R * 4), *B = xmalloc(O * R * 4), *A = xmalloc(R * I * 4);
            float *bias = xmalloc(O * 4), *y0 = xmalloc(N * O * 4), *y1 = xmalloc(N * O * 4);
            float *dy = xmalloc(N * O * 4), *dx0 = xmalloc(N * I * 4), *dx1 = xmalloc(N * I * 4);
            fill_rand(&r, x, N * I, 1.f); fill_rand(&r, U, N * R, 1.f); fill_rand(&r, B, O * R, 0.1f);
            fill_rand(&r, A, R * I, 0.1f); fill_rand(&r, bias, O, 1.f); fill_rand(&r, dy, N * O, 1.f);
            for (int acc = 0; acc < 2; acc++)
                for (int nt = 1; nt <= 3; nt++) {
                    kern_init(nt);
                    fill_rand(&r, y0, N * O, 1.f);
                    memcpy(y1, y0, N * O * 4);
                    kern_matmul(y0, x, &W.w, acc ? NULL : bias, N, acc);
                    kern_sgemm(0, 1, N, O, R, 2.f, U, R, B, R, 1.f, y0, O);
                    kern_matmul_lora(y1, x, &W.w, acc ? NULL : bias, N, acc, U, B, R, 2.f);
                    CHECK_MSG(!memcmp(y0, y1, N * O * 4), "matmul_lora %s %lldx%lldx%lld acc=%d threads=%d",
                              dtype_name(types[t]), (long long)N, (long long)O, (long long)I, acc, nt);
                    fill_rand(&r, dx0, N * I, 1.f);
                    memcpy(dx1, dx0, N * I * 4);
                    kern_matmul_dx_to(dx0, dy, &W.w, N, acc);
                    kern_sgemm(0, 0, N, I, R, 1.f, U, R, A, I, 1.f, dx0, I);
                    kern_matmul_dx_lora(dx1, dy, &W.w, N, acc, U, A, R);
                    CHECK_MSG(!memcmp(dx0, dx1, N * I * 4), "matmul_dx_lora %s %lldx%lldx%lld acc=%d threads=%d",
                              dtype_name(types[t]), (long long)N, (long long)O, (long long)I, acc, nt);
                }
            free(W.data); free(x); free(U); free(B); free(A); free(bias); free(y0); free(y1);
            free(dy); free(dx0); free(dx1);
        }
    kern_init(2);
}

int main(int argc, char **argv)
{
    (void)argc;
    char desc[128];
    cpu_describe(desc, sizeof desc);
    printf("cpu level: %s\n", desc);
    test_pool();
    test_conversions();
    test_dequant();
    test_dot_fused();
    test_dot_rows_groups();
    kern_init(2);
    test_matmul();
    test_matmul_other_types();
    test_sgemm();
    test_sgemm_narrow();
    test_sgemm_rank();
    test_determinism();
    test_loop_orders();
    test_matmul_lora();
    kern_shutdown();
    int rc = check_done();
    return rerun_lower_levels(argv[0]) ? 1 : rc;
}
