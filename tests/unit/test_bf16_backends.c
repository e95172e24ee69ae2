/* The bf16 GEMM back ends (src/kern/gemm_bf16.c) bit for bit against their
 * plain-loop twins (kern_sgemm_bf16dp_ref, which models each instruction's
 * lane arithmetic: bf16_model.h), through the whole engine (packing,
 * K blocks, edges, the operand swap, the fused LoRA term, the LM head):
 *   - fma (f32 FMA on rounded inputs) at the AVX2 and AVX-512 levels;
 *   - avx512bf16 (VDPBF16PS) where this CPU has AVX512_BF16;
 *   - amx-model: the AMX kernel source on the C model of the tile unit, on
 *     any CPU; amx (the same source on the tiles) where AMX is usable;
 * with operands that reach the subnormal range (DAZ/FTZ), odd K, K below
 * one tile chunk and over several K blocks. Also: identical bytes for 1, 2
 * and 3 threads per back end; each back end within bf16 tolerance of the
 * double-sum twin; the tile model's own rules (SDM pseudo-code order,
 * tdpbusd wrap-around, zeroing, the shapes the hardware refuses). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kern/amx_model.h"
#include "kern/bf16_model.h"
#include "kern/kern.h"
#include "kern/kern_impl.h"
#include "kern_test_util.h"

static uint32_t u_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* values over many binades, some far down (products and sums that land in
 * the subnormal range exercise DAZ and FTZ) */
static void fill_wide(trng *r, float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float v = (float)(trng_unif(r) * 2 - 1);
        uint64_t k = trng_u64(r) % 16;
        if (k == 0) v *= 0x1p-63f;
        else if (k == 1) v *= 0x1p-120f;
        else if (k == 2) v = 0.f;
        x[i] = v;
    }
}

static int same_bits(const float *a, const float *b, size_t n, size_t *at)
{
    for (size_t i = 0; i < n; i++)
        if (u_of(a[i]) != u_of(b[i]) && !(isnan(a[i]) && isnan(b[i]))) {
            *at = i;
            return 0;
        }
    return 1;
}

static const char *const k_be[] = {"fma", "avx512bf16", "amx", "amx-model"};

static void test_sgemm_twins(void)
{
    const int64_t shapes[][3] = {{33, 40, 300}, {64, 70, 129}, {8, 300, 40}, {300, 4, 64},
                                 {5, 3, 7},     {40, 33, 1},  {70, 65, 513}, {100, 2, 9},
                                 /* the LoRA ranks over several K blocks (narrow.c's bf16 path) */
                                 {70, 8, 600},  {8, 90, 513}, {16, 17, 300}};
    for (int bi = 0; bi < 4; bi++) {
        int rc = kern_bf16_force(k_be[bi]);
        if (rc == -2) {
            printf("bf16 back end %s: not on this CPU, skipped\n", k_be[bi]);
            continue;
        }
        CHECK_INT(rc, 0);
        if (bi == KERN_BF16_FMA && cpu_level() < CPU_AVX2) continue;   /* scalar: a·b+c rounds twice */
        trng r = {7 + (uint64_t)bi};
        int bad = 0, n = 0;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int t = 0; t < 4; t++) {
                int ta = t & 1, tb = t >> 1;
                int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2];
                float *A = xmalloc((size_t)M * K * 4), *B = xmalloc((size_t)K * N * 4);
                float *C = xmalloc((size_t)M * N * 4), *Cr = xmalloc((size_t)M * N * 4);
                fill_wide(&r, A, (size_t)M * K);
                fill_wide(&r, B, (size_t)K * N);
                fill_rand(&r, C, (size_t)M * N, 1.f);
                memcpy(Cr, C, (size_t)M * N * 4);
                float alpha = t == 3 ? 1.f : 0.5f, beta = si % 3 == 0 ? 0.f : si % 3 == 1 ? 1.f : 0.75f;
                int64_t lda = ta ? M : K, ldb = tb ? K : N;
                kern_set_bf16(1);
                kern_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, N);
                kern_set_bf16(0);
                kern_sgemm_bf16dp_ref((kern_bf16_be)bi, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, Cr, N);
                size_t at = 0;
                n++;
                if (!same_bits(C, Cr, (size_t)M * N, &at)) {
                    if (bad++ < 3)
                        fprintf(stderr, "%s sgemm %lldx%lldx%lld ta%d tb%d: element %zu is %a, twin %a\n", k_be[bi],
                                (long long)M, (long long)N, (long long)K, ta, tb, at, C[at], Cr[at]);
                }
                free(A); free(B); free(C); free(Cr);
            }
        CHECK_MSG(bad == 0, "%s: %d of %d products differ from the twin", k_be[bi], bad, n);
        printf("bf16 back end %s: %d sgemm shapes bit-identical to the twin\n", k_be[bi], n - bad);
    }
    kern_bf16_force(NULL);
}

/* kern_matmul (F32, BF16 and Q8_0 weights: the direct pair packers read
 * each type its own way), the fused LoRA product and kern_matmul_dx
 * against the twin, plus the tolerance to the double-sum twin and thread
 * independence. */
static void test_entry_points(void)
{
    const int64_t N = 50, O = 96, I = 288, R = 8;
    trng r = {21};
    float *x = xmalloc((size_t)N * I * 4), *W = xmalloc((size_t)O * I * 4), *U = xmalloc((size_t)N * R * 4);
    float *Bm = xmalloc((size_t)O * R * 4), *dy = xmalloc((size_t)N * O * 4), *Wd = xmalloc((size_t)O * I * 4);
    uint8_t *Wq = xmalloc((size_t)O * I * 4);
    fill_rand(&r, x, (size_t)N * I, 1.f);
    fill_rand(&r, W, (size_t)O * I, 0.2f);
    fill_rand(&r, U, (size_t)N * R, 1.f);
    fill_rand(&r, Bm, (size_t)O * R, 1.f);
    fill_rand(&r, dy, (size_t)N * O, 1.f);
    float *y = xmalloc((size_t)N * O * 4), *yr = xmalloc((size_t)N * O * 4), *yd = xmalloc((size_t)N * O * 4);
    float *dx = xmalloc((size_t)N * I * 4), *dxr = xmalloc((size_t)N * I * 4);
    const dtype types[] = {DT_F32, DT_BF16, DT_Q8_0};
    for (int ti = 0; ti < 3; ti++) {
        dtype t = types[ti];
        size_t rb = dtype_row_bytes(t, I);
        for (int64_t o = 0; o < O; o++) {
            kern_quant_row(t, W + o * I, Wq + (size_t)o * rb, I);
            kern_dequant_row(t, Wq + (size_t)o * rb, Wd + o * I, I);     /* the values the twin multiplies */
        }
        wmat w = {.type = t, .rows = O, .cols = I, .row_bytes = rb, .data = Wq};
        for (int bi = 0; bi < 4; bi++) {
            if (kern_bf16_force(k_be[bi]) || (bi == KERN_BF16_FMA && cpu_level() < CPU_AVX2)) continue;
            kern_set_bf16(1);
            kern_matmul_lora(y, x, &w, NULL, N, 0, U, Bm, (int)R, 2.f);
            kern_matmul_dx_to(dx, dy, &w, N, 0);
            kern_set_bf16(0);
            kern_sgemm_bf16dp_ref((kern_bf16_be)bi, 0, 1, N, O, I, 1.f, x, I, Wd, I, 0.f, yr, O);
            kern_sgemm_bf16dp_ref((kern_bf16_be)bi, 0, 1, N, O, R, 2.f, U, R, Bm, R, 1.f, yr, O);
            kern_sgemm_bf16dp_ref((kern_bf16_be)bi, 0, 0, N, I, O, 1.f, dy, O, Wd, I, 0.f, dxr, I);
            size_t at = 0;
            CHECK_MSG(same_bits(y, yr, (size_t)N * O, &at), "%s %s matmul_lora: element %zu %a vs twin %a", k_be[bi],
                      dtype_name(t), at, y[at], yr[at]);
            CHECK_MSG(same_bits(dx, dxr, (size_t)N * I, &at), "%s %s matmul_dx: element %zu %a vs twin %a", k_be[bi],
                      dtype_name(t), at, dx[at], dxr[at]);
            /* within bf16's error of the exact sums of the rounded inputs */
            kern_sgemm_bf16_ref(0, 1, N, O, I, 1.f, x, I, Wd, I, 0.f, yd, O);
            kern_sgemm_bf16_ref(0, 1, N, O, R, 2.f, U, R, Bm, R, 1.f, yd, O);
            CHECK_CLOSE(k_be[bi], y, yd, (size_t)N * O, 3e-6, 0);
            /* the same bytes for any thread count */
            for (int th = 1; th <= 3; th++) {
                kern_init(th);
                kern_set_bf16(1);
                kern_matmul_lora(yd, x, &w, NULL, N, 0, U, Bm, (int)R, 2.f);
                kern_set_bf16(0);
                CHECK_MSG(!memcmp(y, yd, (size_t)N * O * 4), "%s: bytes differ at %d threads", k_be[bi], th);
            }
            kern_init(2);
        }
    }
    kern_bf16_force(NULL);
    free(x); free(W); free(U); free(Bm); free(dy); free(y); free(yr); free(yd); free(dx); free(dxr);
    free(Wd); free(Wq);
}

/* The tile model's rules on small hand-checked cases. */
static void test_amx_model(void)
{
    amx_tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette_id = 1;
    /* C 2×2 fp32, A 2 rows × 2 pairs, B 2 pair rows × 2 columns */
    cfg.rows[0] = 2; cfg.colsb[0] = 8;
    cfg.rows[1] = 2; cfg.colsb[1] = 8;
    cfg.rows[2] = 2; cfg.colsb[2] = 8;
    amxm_fault_clear();
    amxm_ldtilecfg(&cfg);
    /* A[m] = pairs (a0,a1),(a2,a3); B[k][n] = pair (b_k0n, b_k1n) */
    float af[2][4] = {{1.f, 2.f, 3.f, 4.f}, {0x1p-127f * 0 + 1e-3f, -1.f, 0.5f, 0.25f}};
    float bf[2][2][2] = {{{1.f, 1.f}, {2.f, -1.f}}, {{0.5f, 0.5f}, {1.f, 1.f}}};
    uint16_t a[2][4], b[2][2][2];
    for (int m = 0; m < 2; m++)
        for (int k = 0; k < 4; k++) a[m][k] = f32_to_bf16(af[m][k]);
    for (int k = 0; k < 2; k++)
        for (int n = 0; n < 2; n++)
            for (int t = 0; t < 2; t++) b[k][n][t] = f32_to_bf16(bf[k][n][t]);
    amxm_tileloadd(1, a, 8);
    amxm_tileloadd(2, b, 8);
    amxm_tilezero(0);
    amxm_tdpbf16ps(0, 1, 2);
    float c[2][2];
    amxm_tilestored(0, c, 8);
    for (int m = 0; m < 2; m++)
        for (int n = 0; n < 2; n++) {
            /* SDM order: pair k = 0 even, odd, then pair 1 even, odd */
            float want = 0.f;
            for (int k = 0; k < 2; k++)
                for (int t = 0; t < 2; t++)
                    want = fmaf(bf16_to_f32(a[m][2 * k + t]), bf16_to_f32(b[k][n][t]), want);
            CHECK_MSG(u_of(c[m][n]) == u_of(want), "tdpbf16ps C[%d][%d] = %a, want %a", m, n, c[m][n], want);
        }
    CHECK_INT(amxm_fault(), 0);
    /* even before odd, unlike VDPBF16PS: 1 + 2^-24·... shows the order */
    uint32_t pa = (uint32_t)f32_to_bf16(1.f) | (uint32_t)f32_to_bf16(0x1p-24f) << 16;
    uint32_t pb = (uint32_t)f32_to_bf16(1.f) | (uint32_t)f32_to_bf16(1.f) << 16;
    float tdp = bf16m_tdp(0x1p-24f, pa, pb), vdp = bf16m_vdp(0x1p-24f, pa, pb);
    CHECK(u_of(tdp) == u_of(1.f));               /* (2^-24 + 1) rounds to 1, then + 2^-24 again */
    CHECK(u_of(vdp) == u_of(1.f + 0x1p-23f));    /* 2^-24 + 2^-24 first, then + 1 is exact */
    /* DAZ and FTZ */
    CHECK(u_of(bf16m_fma(0x0001, 0x3f80, 0.f)) == 0);        /* subnormal bf16 input is 0 */
    CHECK(u_of(bf16m_fma(0x2000, 0x9f80, 0.f)) == 0x80000000u); /* 2^-63·−2^-64: −0 after FTZ */
    /* tdpbusd: u8·s8 in fours, int32 wrap-around */
    memset(&cfg, 0, sizeof cfg);
    cfg.palette_id = 1;
    cfg.rows[0] = 1; cfg.colsb[0] = 4;
    cfg.rows[1] = 1; cfg.colsb[1] = 4;
    cfg.rows[2] = 1; cfg.colsb[2] = 4;
    amxm_ldtilecfg(&cfg);
    uint8_t ua[4] = {255, 255, 1, 0};
    int8_t sb[4] = {-128, 127, -1, 5};
    int32_t c0 = 0x7fffffff;
    amxm_tileloadd(0, &c0, 4);
    amxm_tileloadd(1, ua, 4);
    amxm_tileloadd(2, sb, 4);
    amxm_tdpbusd(0, 1, 2);
    int32_t got;
    amxm_tilestored(0, &got, 4);
    CHECK_INT(got, (int32_t)(0x7fffffffu + (uint32_t)(255 * -128 + 255 * 127 - 1)));
    CHECK_INT(amxm_fault(), 0);
    /* a mismatched K is refused (the hardware raises #UD) */
    cfg.colsb[1] = 8;
    amxm_ldtilecfg(&cfg);
    amxm_tdpbusd(0, 1, 2);
    CHECK_INT(amxm_fault(), 1);
    amxm_fault_clear();
    amxm_tilerelease();
    amxm_tilezero(0);
    CHECK_INT(amxm_fault(), 1);     /* no tile configured */
    amxm_fault_clear();
}

/* The back end picked by the CPU probe (precision null's choice). */
static void test_pick(void)
{
    char d[96];
    kern_bf16_describe(d, sizeof d);
    printf("bf16 back end: %s\n", d);
    kern_bf16_be be = kern_bf16_backend();
    if (kern_bf16_available(KERN_BF16_AMX)) CHECK_INT(be, KERN_BF16_AMX);
    else if (cpu_level() >= CPU_AVX512 && cpu_get_features()->avx512bf16) CHECK_INT(be, KERN_BF16_AVX512BF16);
    else CHECK_INT(be, KERN_BF16_FMA);
    CHECK_INT(kern_bf16_force("nope"), -1);
}

int main(int argc, char **argv)
{
    (void)argc;
    char desc[128];
    cpu_describe(desc, sizeof desc);
    printf("cpu level: %s\n", desc);
    kern_init(2);
    test_pick();
    test_amx_model();
    test_sgemm_twins();
    test_entry_points();
    kern_shutdown();
    int rc = check_done();
    return rerun_lower_levels(argv[0]) ? 1 : rc;
}
