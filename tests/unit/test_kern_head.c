/* Unit tests for the fused LM head + cross-entropy (src/kern/head.c):
 * against kern_head_xent_ref (matmul_ref + xent_ref + matmul_dx_ref, sums
 * in double) for f32 / f16 / Q8_0 / Q4_K weights, vocabularies that are
 * and are not whole 256-row tiles (one part or many), several row blocks,
 * masked rows; loss-only equals the loss of the full call; identical bytes
 * for 1, 2 and 3 threads; every ISA level. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kern/kern.h"
#include "kern/kern_impl.h"
#include "kern_test_util.h"

typedef struct qw { wmat w; void *data; } qw;

static qw make_weight(trng *r, dtype t, int64_t V, int64_t C, float scale)
{
    float *f = xmalloc((size_t)V * C * 4);
    fill_rand(r, f, (size_t)V * C, scale);
    size_t rb = dtype_row_bytes(t, C);
    qw q = {{t, V, C, rb, NULL}, xmalloc(rb * (size_t)V)};
    for (int64_t v = 0; v < V; v++) kern_quant_row(t, f + v * C, (char *)q.data + v * rb, C);
    q.w.data = q.data;
    free(f);
    return q;
}

static void one_case(trng *r, dtype t, int64_t N, int64_t V, int64_t C, const char *what)
{
    qw W = make_weight(r, t, V, C, 0.5f);
    float *x = xmalloc((size_t)N * C * 4);
    fill_rand(r, x, (size_t)N * C, 1.f);
    int32_t *tg = xmalloc((size_t)N * 4);
    for (int64_t n = 0; n < N; n++) tg[n] = n % 7 == 3 ? -1 : n % 11 == 5 ? (int32_t)V : (int32_t)(trng_u64(r) % V);
    float *dx = xmalloc((size_t)N * C * 4), *dxr = xmalloc((size_t)N * C * 4);
    float *nll = xmalloc((size_t)N * 4), *nllr = xmalloc((size_t)N * 4), *nll2 = xmalloc((size_t)N * 4);
    float *scratch = xmalloc(kern_head_xent_scratch(N, (int)C) * 4);
    for (int64_t i = 0; i < N * C; i++) dx[i] = NAN;    /* overwritten, never read */
    float gs = 1.0f / (float)N;
    double s = kern_head_xent(dx, nll, x, &W.w, tg, N, gs, scratch);
    double sr = kern_head_xent_ref(dxr, nllr, x, &W.w, tg, N, gs);
    char label[128];
    snprintf(label, sizeof label, "head %s %s N=%lld V=%lld C=%lld nll", what, dtype_name(t), (long long)N,
             (long long)V, (long long)C);
    CHECK_CLOSE(label, nll, nllr, N, 2e-6, 1e-6);
    snprintf(label, sizeof label, "head %s %s N=%lld V=%lld C=%lld dx", what, dtype_name(t), (long long)N,
             (long long)V, (long long)C);
    CHECK_CLOSE(label, dx, dxr, N * C, 2e-5, 1e-9);
    CHECK_MSG(fabs(s - sr) <= 2e-6 * fabs(sr) + 1e-6, "%s: loss %.9g vs %.9g", label, s, sr);
    /* masked rows: zero loss, zero gradient */
    int ok = 1;
    for (int64_t n = 0; n < N; n++)
        if (tg[n] < 0 || tg[n] >= V) {
            ok &= nll[n] == 0.f;
            for (int64_t c = 0; c < C; c++) ok &= dx[n * C + c] == 0.f;
        }
    CHECK_MSG(ok, "%s: masked rows", label);
    /* loss only: the same bits */
    double s2 = kern_head_xent(NULL, nll2, x, &W.w, tg, N, gs, scratch);
    CHECK_MSG(s2 == s && !memcmp(nll, nll2, (size_t)N * 4), "%s: loss-only differs", label);
    free(W.data); free(x); free(tg); free(dx); free(dxr); free(nll); free(nllr); free(nll2); free(scratch);
}

static void test_vs_ref(void)
{
    trng r = {41};
    one_case(&r, DT_F32, 1, 7, 16, "tiny");
    one_case(&r, DT_F32, 5, 256, 48, "one tile");
    one_case(&r, DT_F32, 37, 1000, 96, "parts");
    one_case(&r, DT_F32, 13, 2600, 288, "many tiles");
    one_case(&r, DT_F16, 20, 700, 64, "f16");
    one_case(&r, DT_Q8_0, 40, 3000, 96, "q8");
    one_case(&r, DT_Q4_K, 17, 1500, 256, "q4k");
    one_case(&r, DT_F32, 1100, 300, 32, "row blocks");
}

/* 1, 2, 3 threads: same bytes. */
static void test_threads(void)
{
    trng r = {42};
    const int64_t N = 70, V = 2100, C = 128;
    qw W = make_weight(&r, DT_Q8_0, V, C, 0.5f);
    float *x = xmalloc((size_t)N * C * 4);
    fill_rand(&r, x, (size_t)N * C, 1.f);
    int32_t *tg = xmalloc((size_t)N * 4);
    for (int64_t n = 0; n < N; n++) tg[n] = n == 4 ? -1 : (int32_t)(trng_u64(&r) % V);
    float *scratch = xmalloc(kern_head_xent_scratch(N, (int)C) * 4);
    float *dx[3], *nll[3];
    double s[3];
    for (int t = 0; t < 3; t++) {
        kern_init(t + 1);
        dx[t] = xmalloc((size_t)N * C * 4);
        nll[t] = xmalloc((size_t)N * 4);
        s[t] = kern_head_xent(dx[t], nll[t], x, &W.w, tg, N, 0.01f, scratch);
    }
    for (int t = 1; t < 3; t++) {
        CHECK_MSG(s[t] == s[0], "head loss threads=%d", t + 1);
        CHECK_MSG(!memcmp(dx[t], dx[0], (size_t)N * C * 4), "head dx threads=%d", t + 1);
        CHECK_MSG(!memcmp(nll[t], nll[0], (size_t)N * 4), "head nll threads=%d", t + 1);
    }
    for (int t = 0; t < 3; t++) { free(dx[t]); free(nll[t]); }
    free(W.data); free(x); free(tg); free(scratch);
    kern_init(2);
}

int main(int argc, char **argv)
{
    (void)argc;
    kern_init(2);
    test_vs_ref();
    test_threads();
    kern_shutdown();
    int rc = check_done();
    return rerun_lower_levels(argv[0]) ? 1 : rc;
}
