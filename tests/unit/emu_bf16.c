/* Emulated build (CMake DLM_SIMDE, `make emu`): the AVX512_BF16 GEMM
 * micro-kernel (src/kern/isa_avx512bf16.c) compiled against SIMDe, so it
 * runs on any x86-64, checked bit for bit against its plain-loop twin
 * gemm_bf16_block_ref (bf16_model.h's VDPBF16PS lanes) over packed panels:
 * K odd / even / below and above one block, edge tiles, transposed C,
 * bias, alpha/beta, operands down in the subnormal range (DAZ/FTZ); its
 * pair packers against f32_to_bf16 (ties, carries, Inf, NaN). The
 * AMX kernel on the tile model is checked the same way (it needs no
 * SIMDe). Where the CPU has AVX512_BF16 the native kernel must give the
 * same bits as the emulated one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kern/bf16_model.h"
#include "kern/kern.h"
#include "kern/kern_impl.h"
#include "kern_test_util.h"

/* isa_avx512bf16.c built with -DDLM_SIMDE */
void gemm_bf16_block_emu(int64_t mc, int64_t nc, int64_t kc, const float *Ap, const float *Bp, float *C,
                         int64_t ldc, const gemm_epi *e);
void bf16_pairs_f32_emu(uint32_t *dst, const float *src, int64_t n);
void bf16_zip_f32_emu(uint32_t *dst, const float *r0, const float *r1, int64_t n);
void bf16_zip_bf16_emu(uint32_t *dst, const uint16_t *r0, const uint16_t *r1, int64_t n);

/* The pair packers against f32_to_bf16 on awkward values (ties, carries
 * into the exponent, Inf, NaN, subnormals) and lengths (odd, below and
 * above a vector), emulated and, where present, native. */
static void test_packers(void)
{
    trng r = {5};
    float src[203];
    uint16_t h0[203], h1[203];
    int bad_cvt = 0;
    const uint32_t odd[] = {0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x7f800000u, 0xff800001u, 0x7fc00001u,
                            0x00000001u, 0x80008000u, 0x3f7fffffu, 0x00ff8000u};
    for (int i = 0; i < 203; i++) {
        uint32_t u = (uint32_t)trng_u64(&r);
        if (i % 3 == 0) u = odd[(i / 3) % 10];
        memcpy(&src[i], &u, 4);
        /* VCVTNE2PS2BF16's conversion: f32_to_bf16's bits but a subnormal
         * becomes a zero of its sign (read as zero by VDPBF16PS: DAZ) */
        h0[i] = bf16m_cvt(src[i]);
        if (u & 0x7f800000u) bad_cvt += h0[i] != f32_to_bf16(src[i]);
        else bad_cvt += h0[i] != (uint16_t)(u >> 16 & 0x8000u);
        h1[i] = (uint16_t)trng_u64(&r);
    }
    const int64_t lens[] = {1, 2, 15, 31, 32, 33, 64, 101, 203};
    int bad = 0;
    for (int li = 0; li < 9; li++) {
        int64_t n = lens[li];
        uint32_t want[203], got[203], got2[203];
        for (int64_t p = 0; p < (n + 1) / 2; p++)
            want[p] = (uint32_t)h0[2 * p] | (2 * p + 1 < n ? (uint32_t)h0[2 * p + 1] << 16 : 0);
        bf16_pairs_f32_emu(got, src, n);
        bad += memcmp(got, want, (size_t)(n + 1) / 2 * 4) != 0;
        float inplace[203];
        memcpy(inplace, src, sizeof inplace);
        bf16_pairs_f32_emu((uint32_t *)inplace, inplace, n);
        bad += memcmp(inplace, want, (size_t)(n + 1) / 2 * 4) != 0;
        for (int64_t j = 0; j < n; j++) want[j] = (uint32_t)h0[j] | (uint32_t)bf16m_cvt(src[202 - j]) << 16;
        float rev[203];
        for (int j = 0; j < 203; j++) rev[j] = src[202 - j];
        bf16_zip_f32_emu(got, src, rev, n);
        bad += memcmp(got, want, (size_t)n * 4) != 0;
        for (int64_t j = 0; j < n; j++) want[j] = (uint32_t)h0[j] | (uint32_t)h1[j] << 16;
        bf16_zip_bf16_emu(got, h0, h1, n);
        bad += memcmp(got, want, (size_t)n * 4) != 0;
        bf16_zip_bf16_emu(got, h0, NULL, n);
        for (int64_t j = 0; j < n; j++) bad += got[j] != h0[j];
#if defined(__x86_64__)
        if (kern_bf16_available(KERN_BF16_AVX512BF16)) {
            bf16_pairs_f32_avx512bf16(got2, src, n);
            bf16_pairs_f32_emu(got, src, n);
            bad += memcmp(got, got2, (size_t)(n + 1) / 2 * 4) != 0;
            bf16_zip_f32_avx512bf16(got2, src, rev, n);
            bf16_zip_f32_emu(got, src, rev, n);
            bad += memcmp(got, got2, (size_t)n * 4) != 0;
        }
#endif
    }
    CHECK_INT(bad, 0);
    CHECK_INT(bad_cvt, 0);
}

static uint32_t u_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static float wide(trng *r)
{
    float v = (float)(trng_unif(r) * 2 - 1);
    uint64_t k = trng_u64(r) % 16;
    if (k == 0) v *= 0x1p-63f;
    else if (k == 1) v *= 0x1p-120f;
    else if (k == 2) v = 0.f;
    return bf16_to_f32(f32_to_bf16(v));
}

/* Pack op rows X[n][k] (bf16 values as floats) into f32 strips of R, then
 * the back end's panel, as gemm.c does. */
static void pack(kern_bf16_be be, float *dst, const float *X, int64_t n, int64_t kc, int R, int is_a)
{
    for (int64_t s = 0; s * R < n; s++) {
        float *st = dst + s * kc * R;
        for (int64_t k = 0; k < kc; k++)
            for (int i = 0; i < R; i++) st[k * R + i] = s * R + i < n ? X[(s * R + i) * kc + k] : 0.f;
        if (be == KERN_BF16_AVX512BF16) bf16_pack_pairs(st, R, kc);
        else if (is_a) {
            float *tmp = xmalloc((size_t)(kc * R) * 4);
            memcpy(tmp, st, (size_t)(kc * R) * 4);
            bf16_pack_amx_a((uint16_t *)st, tmp, R, kc);
            free(tmp);
        } else bf16_pack_amx_b((uint16_t *)st, st, R, kc);
    }
}

typedef void (*block_fn)(int64_t, int64_t, int64_t, const float *, const float *, float *, int64_t,
                         const gemm_epi *);

static int run_case(kern_bf16_be be, block_fn fn, trng *r, int64_t mc, int64_t nc, int64_t kc, int ct, int bias,
                    float alpha, float beta, int first, block_fn twin_fn)
{
    const int mr = be == KERN_BF16_AVX512BF16 ? 12 : AMX_MR, nr = 32;
    int64_t mp = (mc + mr - 1) / mr * mr, np = (nc + nr - 1) / nr * nr;
    float *A = xmalloc((size_t)(mc * kc) * 4), *B = xmalloc((size_t)(nc * kc) * 4);
    uint16_t *Ah = xmalloc((size_t)(mc * kc) * 2), *Bh = xmalloc((size_t)(nc * kc) * 2);
    for (int64_t i = 0; i < mc * kc; i++) Ah[i] = f32_to_bf16(A[i] = wide(r));
    for (int64_t i = 0; i < nc * kc; i++) Bh[i] = f32_to_bf16(B[i] = wide(r));
    float *Ap = xmalloc((size_t)(mp * kc) * 4), *Bp = xmalloc((size_t)(np * kc) * 4);
    pack(be, Ap, A, mc, kc, mr, 1);
    pack(be, Bp, B, nc, kc, nr, 0);
    float *bv = xmalloc((size_t)nc * 4);
    fill_rand(r, bv, (size_t)nc, 1.f);
    int64_t ldc = ct ? mc + 3 : nc + 5, csz = ct ? nc * ldc : mc * ldc;
    float *C = xmalloc((size_t)csz * 4), *Cr = xmalloc((size_t)csz * 4), *Cn = xmalloc((size_t)csz * 4);
    fill_rand(r, C, (size_t)csz, 1.f);
    memcpy(Cr, C, (size_t)csz * 4);
    memcpy(Cn, C, (size_t)csz * 4);
    gemm_epi e = {alpha, beta, bias && !ct ? bv : NULL, first, ct};
    fn(mc, nc, kc, Ap, Bp, C, ldc, &e);
    gemm_bf16_block_ref(be, mc, nc, kc, Ah, kc, Bh, kc, Cr, ldc, &e);
    int ok = 1;
    for (int64_t i = 0; i < csz; i++)
        if (u_of(C[i]) != u_of(Cr[i])) {
            fprintf(stderr, "%s mc %lld nc %lld kc %lld ct %d: C[%lld] = %a, twin %a\n", kern_bf16_backend_name(be),
                    (long long)mc, (long long)nc, (long long)kc, ct, (long long)i, C[i], Cr[i]);
            ok = 0;
            break;
        }
    if (twin_fn) {      /* the native kernel on the same panels */
        twin_fn(mc, nc, kc, Ap, Bp, Cn, ldc, &e);
        if (memcmp(C, Cn, (size_t)csz * 4)) {
            fprintf(stderr, "native and emulated kernels differ (mc %lld nc %lld kc %lld)\n", (long long)mc,
                    (long long)nc, (long long)kc);
            ok = 0;
        }
    }
    free(A); free(B); free(Ah); free(Bh); free(Ap); free(Bp); free(bv); free(C); free(Cr); free(Cn);
    return ok;
}

static void run_all(kern_bf16_be be, block_fn fn, block_fn native)
{
    trng r = {99 + (uint64_t)be};
    const int64_t dims[][3] = {{12, 32, 256}, {13, 33, 255}, {5, 7, 1}, {24, 64, 9}, {40, 70, 100}, {1, 1, 2},
                               {36, 17, 31}, {33, 40, 64}};
    int n = 0, ok = 0;
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (int v = 0; v < 4; v++) {
            int ct = v == 3, bias = v == 1;
            float alpha = v == 2 ? 0.5f : 1.f, beta = v == 0 ? 0.f : v == 1 ? 1.f : 0.75f;
            n++;
            ok += run_case(be, fn, &r, dims[d][0], dims[d][1], dims[d][2], ct, bias, alpha, beta, v != 2, native);
        }
    CHECK_MSG(ok == n, "%s: %d of %d blocks differ from the twin", kern_bf16_backend_name(be), n - ok, n);
    printf("%s%s: %d of %d blocks bit-identical to the twin%s\n", kern_bf16_backend_name(be),
           be == KERN_BF16_AVX512BF16 ? " (SIMDe-emulated)" : " (tile model)", ok, n,
           native ? ", and to the native kernel" : "");
}

int main(void)
{
    char desc[128];
    cpu_describe(desc, sizeof desc);
    printf("cpu level: %s\n", desc);
    block_fn native = NULL;
#if defined(__x86_64__)
    if (kern_bf16_available(KERN_BF16_AVX512BF16)) native = gemm_bf16_block_avx512bf16;
#endif
    test_packers();
    run_all(KERN_BF16_AVX512BF16, gemm_bf16_block_emu, native);
    block_fn amx_native = NULL;
#if defined(KERN_AMX_NATIVE)
    if (kern_bf16_available(KERN_BF16_AMX)) amx_native = gemm_amx_block_native;
#endif
    run_all(KERN_BF16_AMX_MODEL, gemm_amx_block_model, amx_native);
    return check_done();
}
