/* Unit tests for the dropout kernels (src/kern/dropout.c): every mask bit
 * equals rng_uniform(seed, purpose, step, i) >= p from util/rng.c for
 * several sizes (vector bodies and tails), probabilities (0, tiny, 0.05,
 * 0.5, 1), seeds and 64-bit steps; apply scales kept elements and zeroes
 * the rest (also in place); identical bytes for 1, 2 and 3 threads; every
 * ISA level. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kern/kern.h"
#include "kern_test_util.h"
#include "util/rng.h"

static void test_mask(void)
{
    const int64_t sizes[] = {1, 7, 8, 15, 16, 17, 33, 64, 129, 1000, 70001};   /* 64: the 4-block loop */
    const float ps[] = {0.0f, 1e-7f, 0.05f, 0.5f, 1.0f};
    const uint64_t seeds[] = {0, 42, 0xFFFFFFFFFFFFull};
    const uint64_t steps[] = {0, 12345, 0x100000007ull};
    for (int si = 0; si < 11; si++)
        for (int pi = 0; pi < 5; pi++)
            for (int ki = 0; ki < 3; ki++) {
                int64_t n = sizes[si];
                uint64_t seed = seeds[ki], step = steps[(si + pi) % 3];
                uint8_t *keep = xmalloc((size_t)(n + 7) / 8);
                memset(keep, 0xA5, (size_t)(n + 7) / 8);
                kern_dropout_mask(keep, n, ps[pi], seed, RNG_DROPOUT, step);
                int64_t bad = -1;
                for (int64_t i = 0; i < n && bad < 0; i++) {
                    int want = rng_uniform(seed, RNG_DROPOUT, step, (uint64_t)i) >= ps[pi];
                    if (((keep[i >> 3] >> (i & 7)) & 1) != want) bad = i;
                }
                CHECK_MSG(bad < 0, "mask n=%lld p=%g seed=%llu step=%llu: bit %lld", (long long)n, ps[pi],
                          (unsigned long long)seed, (unsigned long long)step, (long long)bad);
                free(keep);
            }
}

static void test_apply(void)
{
    trng r = {7};
    const int64_t n = 5000;
    float *x = xmalloc(n * 4), *y = xmalloc(n * 4), *z = xmalloc(n * 4);
    fill_rand(&r, x, n, 1.f);
    uint8_t keep[(5000 + 7) / 8];
    kern_dropout_mask(keep, n, 0.3f, 9, RNG_DROPOUT, 4);
    float scale = 1.0f / (1.0f - 0.3f);
    kern_dropout_apply(y, x, keep, n, scale);
    int ok = 1;
    for (int64_t i = 0; i < n; i++) {
        float want = rng_uniform(9, RNG_DROPOUT, 4, (uint64_t)i) >= 0.3f ? x[i] * scale : 0.0f;
        ok &= y[i] == want;
    }
    CHECK(ok);
    memcpy(z, x, n * 4);
    kern_dropout_apply(z, z, keep, n, scale);     /* in place */
    CHECK(!memcmp(z, y, n * 4));
    free(x); free(y); free(z);
}

/* kern_dropout_add against kern_dropout_apply into a buffer and a plain
 * add (the backward's old two passes), bit for bit, signed zeros included;
 * lengths off the 16-element blocks; 1 and 2 threads */
static void test_add(void)
{
    trng r = {8};
    const int64_t ns[] = {1, 15, 16, 17, 100, 40001};
    for (int t = 1; t <= 2; t++) {
        kern_init(t);
        for (int k = 0; k < 6; k++) {
            int64_t n = ns[k];
            float *x = xmalloc(n * 4), *d0 = xmalloc(n * 4), *d1 = xmalloc(n * 4), *tmp = xmalloc(n * 4);
            uint8_t *keep = xmalloc((size_t)(n + 7) / 8);
            fill_rand(&r, x, n, 1.f);
            fill_rand(&r, d0, n, 1.f);
            for (int64_t i = 0; i < n; i += 7) d0[i] = -0.0f;
            memcpy(d1, d0, n * 4);
            kern_dropout_mask(keep, n, 0.2f, 5, RNG_DROPOUT, 11);
            kern_dropout_apply(tmp, x, keep, n, 1.25f);
            for (int64_t i = 0; i < n; i++) d0[i] += tmp[i];
            kern_dropout_add(d1, x, keep, n, 1.25f);
            CHECK_MSG(!memcmp(d0, d1, n * 4), "dropout_add n=%lld threads=%d", (long long)n, t);
            free(x); free(d0); free(d1); free(tmp); free(keep);
        }
    }
    kern_init(2);
}

static void test_threads(void)
{
    const int64_t n = 300001;
    uint8_t *k[3];
    for (int t = 0; t < 3; t++) {
        kern_init(t + 1);
        k[t] = xmalloc((size_t)(n + 7) / 8);
        memset(k[t], 0, (size_t)(n + 7) / 8);
        kern_dropout_mask(k[t], n, 0.1f, 77, RNG_DROPOUT, 3);
    }
    /* the last byte's bits past n are not defined: compare whole bytes before it and the valid bits */
    size_t full = (size_t)n / 8;
    int tailmask = (1 << (n % 8)) - 1;
    for (int t = 1; t < 3; t++)
        CHECK_MSG(!memcmp(k[0], k[t], full) && ((k[0][full] ^ k[t][full]) & tailmask) == 0, "threads=%d", t + 1);
    for (int t = 0; t < 3; t++) free(k[t]);
    kern_init(2);
}

int main(int argc, char **argv)
{
    (void)argc;
    kern_init(2);
    test_mask();
    test_apply();
    test_add();
    test_threads();
    kern_shutdown();
    int rc = check_done();
    return rerun_lower_levels(argv[0]) ? 1 : rc;
}
