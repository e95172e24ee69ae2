/* Unit tests for the quantizers (src/kern/quant.c).
 *
 *  - Fixed inputs: closed-form patterns (exact float32 values from integer
 *    arithmetic) are quantized to every type and the SHA-256 of the bytes is
 *    compared with the hashes that tests/ref/kern/quant_ref.py — an
 *    independent numpy implementation of llama.cpp's reference algorithms —
 *    computes for the same inputs (`quant_ref.py hashes`).
 *  - Hand-worked blocks for Q8_0 and Q4_0.
 *  - Round-trip error bounds per type on Gaussian data (see test_rmse).
 *
 * Tool mode for tests/ref/r0301-quant-blocks.sh:
 *   test_quant --quantize TYPE IN.f32 OUT.bin
 *   test_quant --dequantize TYPE IN.bin OUT.f32 */
#include "check.h"
#include "kern_test_util.h"

#include "kern/kern.h"
#include "util/hash.h"

static const char *TYPE_NAMES[] = {"Q8_0", "Q4_0", "Q5_0", "Q4_K", "Q5_K", "Q6_K", "F16", "BF16"};
#define NT 8

/* Expected sha256 per pattern and type (order of TYPE_NAMES), from
 * `/usr/bin/python3 tests/ref/kern/quant_ref.py hashes`. */
static const struct { const char *name; const char *sha[NT]; } EXPECTED[] = {
#include "test_quant_expected.inc"
};

/* The generator shared with quant_ref.py's lcg_patterns(). */
static uint64_t lcg_s;
static uint64_t lcg_next(void)
{
    lcg_s = lcg_s * 6364136223846793005ull + 1442695040888963407ull;
    return lcg_s;
}

#define PN 512
static void make_patterns(float pats[7][PN])
{
    lcg_s = 12345;
    for (int i = 0; i < PN; i++) pats[0][i] = (float)((int64_t)(lcg_next() >> 40) - (1 << 23)) / (float)(1 << 22);
    for (int i = 0; i < PN; i++) {
        int64_t v = 0;
        for (int k = 0; k < 4; k++) v += (int64_t)(lcg_next() >> 42);
        v -= 2 * (1 << 22);
        pats[1][i] = (float)v / (float)(1 << 22);
    }
    for (int i = 0; i < PN; i++) {
        pats[2][i] = 0.f;
        pats[3][i] = 0.3f;
        pats[4][i] = pats[1][i] * 0.01f;
        pats[5][i] = pats[1][i] * 1e-6f;
        pats[6][i] = (float)((i % 2 ? 1 : -1) * (i % 17) / 8.0);
    }
    pats[4][7] = 50.f;
    pats[4][300] = -31.5f;
}

static int type_of(const char *name, dtype *t) { return dtype_from_name(name, t); }

static void test_expected_hashes(void)
{
    static float pats[7][PN];
    make_patterns(pats);
    static uint8_t buf[PN * 4];
    CHECK_INT(sizeof EXPECTED / sizeof EXPECTED[0], 7);
    for (int p = 0; p < 7; p++)
        for (int t = 0; t < NT; t++) {
            dtype ty;
            CHECK_INT(type_of(TYPE_NAMES[t], &ty), 0);
            size_t n = kern_quant_row(ty, pats[p], buf, PN);
            CHECK_INT(n, dtype_row_bytes(ty, PN));
            char hex[65];
            sha256_hex(buf, n, hex);
            CHECK_MSG(!strcmp(hex, EXPECTED[p].sha[t]), "pattern %s type %s: %s != %s", EXPECTED[p].name,
                      TYPE_NAMES[t], hex, EXPECTED[p].sha[t]);
        }
}

/* Worked by hand from the algorithm description. */
static void test_hand_blocks(void)
{
    float x[32];
    uint8_t q[34];
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16);
    /* Q8_0: amax 16, d = 16/127 → fp16 0x3008, id = 1/d ≈ 7.9375,
     * q = roundf((j−16)·id) */
    CHECK_INT(kern_quant_row(DT_Q8_0, x, q, 32), 34);
    CHECK_INT(q[0] | q[1] << 8, 0x3008);
    CHECK_INT((int8_t)q[2 + 0], -127);
    CHECK_INT((int8_t)q[2 + 31], 119);      /* 15·7.9375 = 119.0625 */
    CHECK_INT((int8_t)q[2 + 17], 8);        /* 7.9375 → 8 */
    CHECK_INT((int8_t)q[2 + 16], 0);
    CHECK_INT((int8_t)q[2 + 14], -16);      /* −15.875 → −16 */
    /* Q4_0: signed max −16 (first of the largest |x|), d = −16/−8 = 2,
     * id = 0.5, q = min(15, (int)(x·0.5 + 8.5)) */
    CHECK_INT(kern_quant_row(DT_Q4_0, x, q, 32), 18);
    CHECK_INT(q[0] | q[1] << 8, 0x4000);    /* fp16(2) */
    CHECK_INT(q[2 + 0], 0 | 8 << 4);        /* x0 = −16: 0.5 → 0;  x16 = 0: 8.5 → 8 */
    CHECK_INT(q[2 + 1], 1 | 9 << 4);        /* x1 = −15: 1.0 → 1;  x17 = 1: 9.0 → 9 */
    CHECK_INT(q[2 + 15], 8 | 15 << 4);      /* x15 = −1: 8.0 → 8;  x31 = 15: 16 → min 15 */
}

/* Round-trip error: relative RMSE = rms(dequant(quant(x)) − x) / rms(x) on
 * 65536 N(0,1) values (fixed seed, so the numbers are fixed too). Expected
 * sizes: a uniform quantizer with step Δ has error RMS Δ/√12, and the max
 * |x| of a 32-block is ≈2.1σ: Q8_0 Δ ≈ 2.1/127 → 0.005, Q5_0 Δ ≈ 2.1/16 →
 * 0.04, Q4_0 Δ ≈ 2.1/8 → 0.08; Q6_K (16-blocks, Δ ≈ 1.9/32) → 0.017; Q4_K /
 * Q5_K fit a scale and a minimum per 32 and land near Q4_0 / Q5_0; F16 and
 * BF16 are half an ulp (2^-11, 2^-8 relative, /√3 for the RMS).
 * Measured: 0.00535 0.0858 0.0427 0.0714 0.0361 0.0178 0.00021 0.00166; the
 * bounds sit 10–25% above, so a real regression (e.g. a wrong rounding or a
 * lost scale bit) fails while the algorithms as specified pass. */
static void test_rmse(void)
{
    trng r = {77};
    const int64_t n = 1 << 16;
    float *x = xmalloc(n * 4), *y = xmalloc(n * 4);
    uint8_t *q = xmalloc(n * 4);
    fill_normal(&r, x, n, 1.f);
    const struct { dtype t; double bound; } B[] = {
        {DT_Q8_0, 0.006}, {DT_Q4_0, 0.095}, {DT_Q5_0, 0.048}, {DT_Q4_K, 0.09},
        {DT_Q5_K, 0.045}, {DT_Q6_K, 0.021}, {DT_F16, 0.0003}, {DT_BF16, 0.0024},
    };
    for (size_t i = 0; i < sizeof B / sizeof B[0]; i++) {
        kern_quant_row(B[i].t, x, q, n);
        kern_dequant_row(B[i].t, q, y, n);
        double se = 0, sx = 0;
        for (int64_t k = 0; k < n; k++) {
            se += ((double)y[k] - x[k]) * ((double)y[k] - x[k]);
            sx += (double)x[k] * x[k];
        }
        double rel = sqrt(se / sx);
        printf("round-trip %-5s relative rmse %.5f (bound %.4f)\n", dtype_name(B[i].t), rel, B[i].bound);
        CHECK_MSG(rel <= B[i].bound, "%s rmse %.5f > %.4f", dtype_name(B[i].t), rel, B[i].bound);
    }
    free(x); free(y); free(q);
}

static void test_api_edges(void)
{
    float x[256] = {0};
    uint8_t q[512];
    CHECK_INT(kern_quant_row(DT_Q4_1, x, q, 32), 0);      /* dequant-only type */
    CHECK_INT(kern_quant_row(DT_Q4_K, x, q, 100), 0);     /* not a multiple of 256 */
    CHECK_INT(kern_quant_row((dtype)99, x, q, 32), 0);
    CHECK_INT(kern_quant_row(DT_F32, x, q, 3), 12);
    /* all-zero blocks quantize to all-zero bytes and back to zeros */
    const dtype ts[] = {DT_Q8_0, DT_Q4_K, DT_Q5_K, DT_Q6_K};
    for (int i = 0; i < 4; i++) {
        memset(q, 0xAB, sizeof q);
        size_t nb = kern_quant_row(ts[i], x, q, 256);
        float y[256];
        kern_dequant_row(ts[i], q, y, 256);
        int zero = 1;
        for (int k = 0; k < 256; k++) zero &= y[k] == 0.f;
        CHECK_MSG(zero && nb > 0, "%s zeros", dtype_name(ts[i]));
    }
    /* NaN / Inf input must not crash (values are garbage, as in llama.cpp) */
    for (int k = 0; k < 256; k++) x[k] = k % 3 ? NAN : INFINITY;
    for (int t = 0; t < NT; t++) {
        dtype ty;
        type_of(TYPE_NAMES[t], &ty);
        CHECK(kern_quant_row(ty, x, q, 256) == dtype_row_bytes(ty, 256));
    }
}

static int tool(const char *mode, const char *tname, const char *in, const char *out)
{
    dtype t;
    if (type_of(tname, &t)) { fprintf(stderr, "unknown type %s\n", tname); return 2; }
    FILE *f = fopen(in, "rb");
    if (!f) { perror(in); return 2; }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = xmalloc((size_t)len);
    if (fread(buf, 1, (size_t)len, f) != (size_t)len) { fclose(f); return 2; }
    fclose(f);
    size_t obytes;
    void *obuf;
    if (!strcmp(mode, "--quantize")) {
        int64_t n = len / 4;
        obuf = xmalloc((size_t)len);
        obytes = kern_quant_row(t, (const float *)buf, obuf, n);
        if (!obytes) { fprintf(stderr, "cannot quantize %lld values to %s\n", (long long)n, tname); return 2; }
    } else {
        size_t bb = dtype_block_bytes(t), be = dtype_block_elems(t);
        if (!bb || len % (long)bb) { fprintf(stderr, "bad length\n"); return 2; }
        int64_t n = (int64_t)(len / (long)bb * (long)be);
        obuf = xmalloc((size_t)n * 4);
        kern_dequant_row(t, buf, obuf, n);
        obytes = (size_t)n * 4;
    }
    f = fopen(out, "wb");
    if (!f || fwrite(obuf, 1, obytes, f) != obytes) { perror(out); return 2; }
    fclose(f);
    free(buf);
    free(obuf);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && (!strcmp(argv[1], "--quantize") || !strcmp(argv[1], "--dequantize")))
        return tool(argv[1], argv[2], argv[3], argv[4]);
    hash_init();
    test_expected_hashes();
    test_hand_blocks();
    test_rmse();
    test_api_edges();
    int rc = check_done();
    return rerun_lower_levels(argv[0]) ? 1 : rc;
}
