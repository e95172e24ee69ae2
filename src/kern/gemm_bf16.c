/* gemm_bf16 — the bf16 GEMM back ends behind kern_set_bf16 and their
 * plain-loop twins.
 *
 * Three back ends, one picked per process from the CPU probe (cpu.c):
 *   amx         AMX tiles, TDPBF16PS (gemm_amx.inc) where cpu_get_amx() says
 *               the tiles are usable;
 *   avx512bf16  VDPBF16PS (isa_avx512bf16.c) where the CPU has AVX512_BF16;
 *   fma         elsewhere: the f32 micro-kernels on panels rounded to bf16
 *               (inputs widened; the speed of f32, the numerics of bf16).
 * `amx-model` runs the AMX kernel source against the C model of the tile
 * unit (amx_model.c): for tests on any CPU, never picked by itself.
 *
 * All of them round the GEMM inputs to bf16 where they are packed and sum
 * in f32 within the engine's fixed K blocks, so each is deterministic for
 * any thread count; their last bits differ (pair order, DAZ/FTZ), hence
 * the back end is part of what a run records. The twins here define each
 * one's bits: gemm_bf16_block_ref (a packed block, the micro-kernel's
 * contract) and kern_sgemm_bf16dp_ref (a whole kern_sgemm). */
#include "kern/kern_impl.h"
#include "kern/bf16_model.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_names[] = {"fma", "avx512bf16", "amx", "amx-model"};

static int g_forced = -1;
static int g_picked;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static kern_isa g_isa_dp, g_isa_amx, g_isa_amx_model;

int kern_bf16_available(kern_bf16_be be)
{
    switch (be) {
    case KERN_BF16_FMA: return 1;
    case KERN_BF16_AVX512BF16:
#if defined(__x86_64__)
        return cpu_level() >= CPU_AVX512 && cpu_get_features()->avx512bf16;
#else
        return 0;
#endif
    case KERN_BF16_AMX:
#if defined(__x86_64__) && defined(KERN_AMX_NATIVE)
        return cpu_level() >= CPU_AVX512 && cpu_get_amx()->usable;
#else
        return 0;
#endif
    case KERN_BF16_AMX_MODEL: return 1;
    }
    return 0;
}

/* kern_isa.pack_n for AMX_NR-wide strips (the f32 tables' pack_n is built
 * for their own NR, 16 at the AVX2 level). */
static void pack_n_amx(float *dst, const float *src, int64_t nc, int64_t sstride)
{
    for (int64_t s = 0; s < nc; s += AMX_NR, dst += sstride)
        for (int j = 0; j < AMX_NR; j++) dst[j] = s + j < nc ? src[s + j] : 0.f;
}

static void pick(void)
{
    g_picked = kern_bf16_available(KERN_BF16_AMX) ? KERN_BF16_AMX
               : kern_bf16_available(KERN_BF16_AVX512BF16) ? KERN_BF16_AVX512BF16
                                                            : KERN_BF16_FMA;
#if defined(__x86_64__)
    g_isa_dp = kern_isa_avx512;
    g_isa_dp.gemm_block = gemm_bf16_block_avx512bf16;
    g_isa_dp.panel = KERN_PANEL_PAIRS;
#endif
    g_isa_amx_model = *kern_isa_get();
    g_isa_amx_model.mr = AMX_MR;
    g_isa_amx_model.nr = AMX_NR;
    g_isa_amx_model.pack_n = pack_n_amx;
    g_isa_amx_model.gemm_block = gemm_amx_block_model;
    g_isa_amx_model.panel = KERN_PANEL_AMX;
#if defined(__x86_64__) && defined(KERN_AMX_NATIVE)
    g_isa_amx = g_isa_amx_model;
    g_isa_amx.gemm_block = gemm_amx_block_native;
#endif
}

kern_bf16_be kern_bf16_backend(void)
{
    pthread_once(&g_once, pick);
    return (kern_bf16_be)(g_forced >= 0 ? g_forced : g_picked);
}

const char *kern_bf16_backend_name(kern_bf16_be be)
{
    return (unsigned)be < sizeof k_names / sizeof k_names[0] ? k_names[be] : "?";
}

int kern_bf16_force(const char *name)
{
    pthread_once(&g_once, pick);
    if (!name) {
        g_forced = -1;
        return 0;
    }
    for (int i = 0; i < (int)(sizeof k_names / sizeof k_names[0]); i++)
        if (!strcmp(name, k_names[i])) {
            if (!kern_bf16_available((kern_bf16_be)i)) return -2;
            g_forced = i;
            return 0;
        }
    return -1;
}

void kern_bf16_describe(char *buf, int cap)
{
    static const char *const how[] = {"f32 FMA on bf16-rounded inputs", "vdpbf16ps", "AMX tdpbf16ps",
                                      "AMX tdpbf16ps on the C model of the tile unit"};
    kern_bf16_be be = kern_bf16_backend();
    snprintf(buf, (size_t)cap, "%s (%s)", kern_bf16_backend_name(be), how[be]);
}

const kern_isa *kern_isa_bf16(void)
{
    switch (kern_bf16_backend()) {
    case KERN_BF16_AVX512BF16: return &g_isa_dp;
    case KERN_BF16_AMX: return &g_isa_amx;
    case KERN_BF16_AMX_MODEL: return &g_isa_amx_model;
    default: return kern_isa_get();
    }
}

/* ---- panels ---------------------------------------------------------------- */

static uint16_t hi16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

/* In place: dword (p, i) = bf16(x[2p][i]) | bf16(x[2p+1][i]) << 16, the odd
 * half 0 past kc. Dword (p, i) sits at or before float (2p, i), and both
 * floats it needs are read before it is written: safe in place. */
void bf16_pack_pairs(float *strip, int R, int64_t kc)
{
    uint32_t *d = (uint32_t *)strip;
    for (int64_t p = 0; p < (kc + 1) / 2; p++)
        for (int i = 0; i < R; i++) {
            uint32_t lo = hi16(strip[2 * p * R + i]);
            uint32_t hi = 2 * p + 1 < kc ? hi16(strip[(2 * p + 1) * R + i]) : 0;
            d[p * R + i] = lo | hi << 16;
        }
}

int64_t bf16_amx_kpad(int64_t kc) { return kc < AMX_KT ? (kc + 1) / 2 * 2 : (kc + AMX_KT - 1) / AMX_KT * AMX_KT; }

/* A strip [kc][R] (rounded f32) into AMX rows: for each chunk of w =
 * min(kpad, AMX_KT) k, R rows of w bf16 (row i's k in order), zero past
 * kc. Not in place (the layouts cross): strip and dst are distinct. */
void bf16_pack_amx_a(uint16_t *dst, const float *strip, int R, int64_t kc)
{
    int64_t kp = bf16_amx_kpad(kc), w = kp < AMX_KT ? kp : AMX_KT;
    for (int64_t c = 0; c < kp; c += w)
        for (int i = 0; i < R; i++)
            for (int64_t k = 0; k < w; k++)
                *dst++ = c + k < kc ? hi16(strip[(c + k) * R + i]) : 0;
}

/* A strip [kc][R] into pairs [kpad/2][R] (zero pairs to the padded K);
 * dst may be strip (every value is read before its place is written). */
void bf16_pack_amx_b(uint16_t *dst, const float *strip, int R, int64_t kc)
{
    int64_t kp = bf16_amx_kpad(kc);
    for (int64_t k = 0; k < kp; k += 2)
        for (int i = 0; i < R; i++) {
            uint16_t lo = k < kc ? hi16(strip[k * R + i]) : 0;
            uint16_t hi = k + 1 < kc ? hi16(strip[(k + 1) * R + i]) : 0;
            *dst++ = lo;
            *dst++ = hi;
        }
}

/* ---- twins ----------------------------------------------------------------- */

/* The epilogue every micro-kernel applies to a K block's sum. */
static void epi_ref(float *c, float acc, const gemm_epi *e, int64_t j)
{
    float base;
    if (!e->first) base = *c;
    else {
        base = e->beta == 0.f ? 0.f : *c;
        if (e->beta != 0.f && e->beta != 1.f) base = base * e->beta;
        if (e->bias && !e->ct) base = base + e->bias[j];
    }
    *c = fmaf(e->alpha, acc, base);
}

void gemm_bf16_block_ref(kern_bf16_be be, int64_t mc, int64_t nc, int64_t kc, const uint16_t *A, int64_t lda,
                         const uint16_t *B, int64_t ldb, float *C, int64_t ldc, const gemm_epi *e)
{
    for (int64_t i = 0; i < mc; i++)
        for (int64_t j = 0; j < nc; j++) {
            float acc = 0.f;
            if (be == KERN_BF16_FMA) {
                for (int64_t k = 0; k < kc; k++)
                    acc = fmaf(bf16_to_f32(A[i * lda + k]), bf16_to_f32(B[j * ldb + k]), acc);
            } else {
                /* pairs, zero-padded to even (avx512bf16) or to AMX_KT (amx) */
                int64_t kp = be == KERN_BF16_AVX512BF16 ? (kc + 1) / 2 * 2 : bf16_amx_kpad(kc);
                for (int64_t k = 0; k < kp; k += 2) {
                    uint32_t a = (k < kc ? A[i * lda + k] : 0) | (uint32_t)(k + 1 < kc ? A[i * lda + k + 1] : 0)
                                                                 << 16;
                    uint32_t b = (k < kc ? B[j * ldb + k] : 0) | (uint32_t)(k + 1 < kc ? B[j * ldb + k + 1] : 0)
                                                                 << 16;
                    acc = be == KERN_BF16_AVX512BF16 ? bf16m_vdp(acc, a, b) : bf16m_tdp(acc, a, b);
                }
            }
            float *c = e->ct ? C + j * ldc + i : C + i * ldc + j;
            epi_ref(c, acc, e, j);
        }
}

/* kern_sgemm under kern_set_bf16 with back end be, as plain loops: every
 * element of op(A) and op(B) rounded to bf16, then per fixed K block of
 * GEMM_KC the back end's sum from zero and the epilogue (beta and the
 * first block's scaling as the engine applies them). The operand swap of
 * narrow outputs gives the same bits (the lane arithmetic is symmetric in
 * a and b), so the twin does not model it. */
void kern_sgemm_bf16dp_ref(kern_bf16_be be, int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                           const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                           int64_t ldc)
{
    uint16_t *a = malloc((size_t)(K > 0 ? K : 1) * 2), *b = malloc((size_t)(K > 0 ? K : 1) * 2);
    if (!a || !b) abort();
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            for (int64_t k = 0; k < K; k++) {
                a[k] = f32_to_bf16(ta ? A[k * lda + i] : A[i * lda + k]);
                b[k] = f32_to_bf16(tb ? B[j * ldb + k] : B[k * ldb + j]);
            }
            if (K <= 0) {
                C[i * ldc + j] = beta == 0.f ? 0.f : beta * C[i * ldc + j];
                continue;
            }
            for (int64_t k0 = 0; k0 < K; k0 += GEMM_KC) {
                int64_t kc = K - k0 < GEMM_KC ? K - k0 : GEMM_KC;
                gemm_epi e = {alpha, beta, NULL, k0 == 0, 0};
                gemm_bf16_block_ref(be, 1, 1, kc, a + k0, kc, b + k0, kc, C + i * ldc + j, ldc, &e);
            }
        }
    free(a);
    free(b);
}
