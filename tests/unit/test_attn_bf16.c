/* The training attention under kern_set_bf16 (isa_attn_bf16.inc on
 * attn_bf16.c's VDPBF16PS products):
 *  - where the CPU has AVX512_BF16: the micro-kernel and packers against
 *    their plain-loop twins bit for bit, and whole forward/backward runs on
 *    the native products against runs on the twins (the same bits);
 *  - the same bits on 1 and 2 threads;
 *  - against its rounding points written out in double (abc_model: the
 *    same bf16 operands, exact sums): 1e-6 within one key block;
 *  - accuracy against the f64 reference (kern_ref.c: exact softmax, no
 *    rounding): within what bf16 operands allow, and not the f32 bits (the
 *    mode really rounds). The f32 units' results are checked unchanged by
 *    the mode switch: precision fp32 and the fma back end keep them.
 * The binary reruns itself at the avx2 and scalar levels (the bf16 units
 * of those tables, on the twins' products).
 * The PyTorch comparison of bf16 training is tests/ref r0415; the emulated
 * build of the same kernels is tests/unit/emu_attn.c. */
#include "attn_bf16_cases.h"

static void test_native(void)
{
#if defined(__x86_64__)
    if (!kern_bf16_available(KERN_BF16_AVX512BF16)) {
        printf("no AVX512_BF16: native kernel checks skipped (emu_attn runs them emulated)\n");
        return;
    }
    trng r = {11};
    CHECK_INT(abc_check_dp(&attn_bf16_ops_avx512bf16, &r), 0);
    CHECK_INT(abc_check_pack(&attn_bf16_ops_avx512bf16, &r), 0);
    CHECK_INT(abc_check_attn(&attn_bf16_ops_avx512bf16), 0);
#endif
}

/* Runs on the back end's products (native where present, else the twins:
 * the units' code is the same either way). */
static const attn_bf16_ops *ops_here(void)
{
#if defined(__x86_64__)
    if (kern_bf16_available(KERN_BF16_AVX512BF16)) return &attn_bf16_ops_avx512bf16;
#endif
    return &abc_ref_ops;
}

static void test_threads(void)
{
    for (size_t ci = 0; ci < sizeof abc_cases / sizeof abc_cases[0]; ci++) {
        kern_init(1);
        abc_run a = abc_attn(&abc_cases[ci], ops_here(), 1, 5 + ci, NULL);
        kern_init(2);
        abc_run b = abc_attn(&abc_cases[ci], ops_here(), 1, 5 + ci, NULL);
        CHECK_MSG(abc_same(&abc_cases[ci], &a, &b), "case %zu: 1 and 2 threads differ", ci);
        abc_free(&a);
        abc_free(&b);
    }
    kern_init(1);
}

static void test_accuracy(void)
{
    for (size_t ci = 0; ci < sizeof abc_cases / sizeof abc_cases[0]; ci++) {
        const abc_case *c = &abc_cases[ci];
        size_t nq = (size_t)c->B * c->Tq * c->NH * c->HS, nkv = (size_t)c->B * c->Tk * c->KVH * c->HS;
        abc_run ref;
        abc_run x = abc_attn(c, ops_here(), 1, 900 + ci, &ref);
        abc_run f = abc_attn(c, NULL, 0, 900 + ci, NULL);      /* f32 units */
        char label[80];
        /* bf16 operands: relative errors of a few 2^-9 in the scores and
         * products; the f32 units are ~1e-6 */
        snprintf(label, sizeof label, "bf16 attn out case %zu", ci);
        CHECK_CLOSE(label, x.out, ref.out, nq, 2e-2, 0);
        snprintf(label, sizeof label, "bf16 attn dq case %zu", ci);
        CHECK_CLOSE(label, x.dq, ref.dq, nq, 4e-2, 0);
        snprintf(label, sizeof label, "bf16 attn dk case %zu", ci);
        CHECK_CLOSE(label, x.dk, ref.dk, nkv, 4e-2, 0);
        snprintf(label, sizeof label, "bf16 attn dv case %zu", ci);
        CHECK_CLOSE(label, x.dv, ref.dv, nkv, 2e-2, 0);
        snprintf(label, sizeof label, "f32 attn out case %zu", ci);
        CHECK_CLOSE(label, f.out, ref.out, nq, 1e-5, 0);
        snprintf(label, sizeof label, "f32 attn dq case %zu", ci);
        CHECK_CLOSE(label, f.dq, ref.dq, nq, 1e-5, 0);
        CHECK_MSG(memcmp(x.out, f.out, nq * 4) && memcmp(x.dk, f.dk, nkv * 4), "case %zu: bf16 gave the f32 bits", ci);
        abc_free(&x);
        abc_free(&f);
        abc_free(&ref);
    }
}

/* The fma back end keeps the f32 units: the same bits as precision fp32. */
static void test_fma_is_f32(void)
{
    if (kern_bf16_force("fma")) return;
    for (size_t ci = 0; ci < sizeof abc_cases / sizeof abc_cases[0]; ci++) {
        abc_run a = abc_attn(&abc_cases[ci], NULL, 1, 40 + ci, NULL);
        abc_run b = abc_attn(&abc_cases[ci], NULL, 0, 40 + ci, NULL);
        CHECK_MSG(abc_same(&abc_cases[ci], &a, &b), "case %zu: fma back end changed the attention", ci);
        abc_free(&a);
        abc_free(&b);
    }
    kern_bf16_force(NULL);
}

/* Against the rounding points written out in double (abc_model). */
static void test_model(void)
{
    for (size_t ci = 0; ci < sizeof abc_cases / sizeof abc_cases[0]; ci++) {
        double e[4];
        abc_vs_model(&abc_cases[ci], ops_here(), 600 + ci, e);
        printf("case %zu vs model: out %.2e dq %.2e dk %.2e dv %.2e\n", ci, e[0], e[1], e[2], e[3]);
        /* one key block: the model's P is the kernel's; several: the
         * kernel rounds exp(S − running max), then rescales (as PyTorch's
         * flash kernel), a few 1e-4 from rounding exp(S − final max) */
        const double lim = abc_cases[ci].Tk <= ATTN_BK ? 1e-6 : 2e-3;
        for (int t = 0; t < 4; t++) CHECK_MSG(e[t] <= lim, "case %zu tensor %d: %.3g > %.3g", ci, t, e[t], lim);
    }
}

/* A batch whose f32 dS tiles would exceed ATTN_DS_MAX_FLOATS but whose
 * bf16 tiles (half the size) fit: still the bf16 backward, and every batch
 * row the bits of that row run alone (units are per row). Native only (the
 * twins would take minutes). */
static void test_big_batch(void)
{
#if defined(__x86_64__)
    if (!kern_bf16_available(KERN_BF16_AVX512BF16)) return;
    attn_shape s;
    memset(&s, 0, sizeof s);
    s.B = 4; s.Tq = s.Tk = 512; s.NH = 9; s.KVH = 3; s.HS = 64;
    s.kv_bstride = (int64_t)s.Tk * s.KVH * s.HS;
    const size_t nq = (size_t)s.B * s.Tq * s.NH * s.HS, nkv = (size_t)s.B * s.kv_bstride, nl = (size_t)s.B * s.NH * s.Tq;
    trng r = {21};
    float *q = xmalloc(nq * 4), *k = xmalloc(nkv * 4), *v = xmalloc(nkv * 4), *R = xmalloc(nq * 4);
    fill_normal(&r, q, nq, 1.f);
    fill_normal(&r, k, nkv, 1.f);
    fill_normal(&r, v, nkv, 1.f);
    fill_normal(&r, R, nq, 1.f);
    float *o = xmalloc(nq * 4), *lse = xmalloc(nl * 4), *dq = xmalloc(nq * 4), *dk = xmalloc(nkv * 4), *dv = xmalloc(nkv * 4);
    float *o1 = xmalloc(nq * 4), *lse1 = xmalloc(nl * 4), *dq1 = xmalloc(nq * 4), *dk1 = xmalloc(nkv * 4);
    float *dv1 = xmalloc(nkv * 4), *scr = xmalloc(kern_attn_bwd_scratch(&s) * 4);
    kern_set_bf16(1);
    kern_attn_bf16_ops = &attn_bf16_ops_avx512bf16;
    kern_attn_fwd(o, lse, q, k, v, &s, scr);
    kern_attn_bwd(dq, dk, dv, R, o, lse, q, k, v, &s, scr);
    attn_shape s1 = s;
    s1.B = 1;
    const size_t rq = nq / s.B, rkv = nkv / s.B, rl = nl / s.B;
    for (int b = 0; b < s.B; b++) {
        kern_attn_fwd(o1 + b * rq, lse1 + b * rl, q + b * rq, k + b * rkv, v + b * rkv, &s1, scr);
        kern_attn_bwd(dq1 + b * rq, dk1 + b * rkv, dv1 + b * rkv, R + b * rq, o1 + b * rq, lse1 + b * rl, q + b * rq,
                      k + b * rkv, v + b * rkv, &s1, scr);
    }
    kern_attn_bf16_ops = NULL;
    kern_set_bf16(0);
    CHECK(!memcmp(o, o1, nq * 4) && !memcmp(dq, dq1, nq * 4) && !memcmp(dk, dk1, nkv * 4) && !memcmp(dv, dv1, nkv * 4));
    /* and it is the bf16 backward: within bf16 distance of the f32 one, not it */
    float *fq = xmalloc(nq * 4), *fk = xmalloc(nkv * 4), *fv = xmalloc(nkv * 4);
    kern_attn_bwd(fq, fk, fv, R, o, lse, q, k, v, &s, scr);
    CHECK_CLOSE("big batch dq bf16 vs f32", dq, fq, nq, 3e-2, 0);
    CHECK(memcmp(dq, fq, nq * 4) != 0);
    free(q); free(k); free(v); free(R); free(o); free(lse); free(dq); free(dk); free(dv);
    free(o1); free(lse1); free(dq1); free(dk1); free(dv1); free(scr); free(fq); free(fk); free(fv);
#endif
}

int main(int argc, char **argv)
{
    (void)argc;
    test_model();
    test_native();
    test_threads();
    test_accuracy();
    test_fma_is_f32();
    test_big_batch();
    /* the units of the avx2 and scalar tables (on the twins' products) */
    CHECK_INT(rerun_lower_levels(argv[0]), 0);
    return check_done();
}
