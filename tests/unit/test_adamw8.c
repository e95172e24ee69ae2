/* Unit tests for the 8-bit block-wise AdamW (kern/q8.c, grad/optim8.c) and
 * its checkpoint state (adapter/state.c, version 2):
 *   - the dynamic maps' shape; the binary-search encoder against the
 *     linear-search twin on random values, codes and midpoints;
 *   - kern_adamw8 against kern_adamw8_ref for 10 steps (bitwise), and the
 *     same bytes for 1, 2 and 3 threads;
 *   - the layout the plan counts equals the one optim8_create allocates;
 *   - training_state.bin v2 round trip, v1 unchanged, malformed v2 refused.
 *
 * `test_adamw8 --ref DIR` instead compares with the independent numpy
 * implementation tests/ref/adamw8/adamw8_ref.py wrote to DIR
 * (tests/ref/r0406-adamw8-ref.sh): maps equal, quantized codes equal,
 * 10 optimizer steps' params within 1e-6 relative with equal codes. */
#include "check.h"
#include "kern_test_util.h"

#include "adapter/state.h"
#include "grad/optim8.h"
#include "kern/kern.h"
#include "kern/kern_impl.h"
#include "util/err.h"

static void test_maps(void)
{
    const float *s = kern_q8_map(1), *u = kern_q8_map(0);
    for (int i = 1; i < 256; i++) {
        CHECK(s[i] > s[i - 1]);
        CHECK(u[i] > u[i - 1]);
    }
    CHECK(s[127] == 0.0f && s[255] == 1.0f && s[126] < 0 && s[128] > 0 && s[0] > -1.0f);
    CHECK(u[0] == 0.0f && u[255] == 1.0f);
    CHECK_INT(kern_q8_zero_code(1), 127);
    CHECK_INT(kern_q8_zero_code(0), 0);
    /* the smallest magnitudes: 10^-6 times the middle of [0.1, 1] (signed)
     * and of [0.1, 0.55] (unsigned: one more fraction bit) */
    CHECK_NEAR(s[128], 0.55e-6, 1e-12);
    CHECK_NEAR(u[1], 0.325e-6, 1e-12);
}

static void test_encode(void)
{
    trng r = {7};
    for (int sgn = 0; sgn < 2; sgn++) {
        const float *map = kern_q8_map(sgn);
        int bad = 0;
        for (int i = 0; i < 200000; i++) {
            float x;
            int k = (int)(trng_u64(&r) % 255);
            switch (i % 4) {
            case 0: x = map[k]; break;                                    /* on a code */
            case 1: x = (map[k] + map[k + 1]) * 0.5f; break;              /* a midpoint */
            case 2: x = (float)(trng_unif(&r) * 2 - 1) * (sgn ? 1.f : 0.5f) + (sgn ? 0 : 0.5f); break;
            default: x = (float)(trng_unif(&r) * exp(-16 * trng_unif(&r))) * (sgn && (i & 8) ? -1.f : 1.f);
            }
            if (!sgn && x < 0) x = -x;
            if (kern_q8_encode(map, sgn, x) != kern_q8_encode_ref(map, sgn, x)) bad++;
        }
        CHECK_MSG(bad == 0, "%d encodes differ from the linear search (signed %d)", bad, sgn);
    }
    const float *s = kern_q8_map(1);
    CHECK_INT(kern_q8_encode(s, 1, -1e-9f), 126);   /* a negative value keeps its sign */
    CHECK_INT(kern_q8_encode(s, 1, 1e-9f), 127);
    CHECK_INT(kern_q8_encode(s, 1, -1.0f), 0);
    CHECK_INT(kern_q8_encode(s, 1, 1.0f), 255);
}

/* 10 steps on n values: the tuned kernel with `threads` vs the reference */
static void run_steps(int threads, int64_t n, float *p, uint8_t *c1, uint8_t *c2, float *a1, float *a2, int ref)
{
    trng r = {99};
    float *g = malloc((size_t)n * 4);
    kern_init(threads);
    for (int t = 1; t <= 10; t++) {
        fill_normal(&r, g, (size_t)n, (float)exp(-(double)t));
        for (int64_t i = 2048; i < 4096 && i < n; i++) g[i] *= 1e-5f;
        if (t == 4) memset(g, 0, 2048 * 4);   /* a block with no gradient */
        kern_adamw_bnb s;
        kern_adamw_bnb_scalars(&s, 2e-3, 0.9, 0.999, 1e-8, t > 5 ? 0.01 : 0.0, t);
        if (ref) kern_adamw8_ref(p, g, c1, c2, a1, a2, n, &s);
        else kern_adamw8(p, g, c1, c2, a1, a2, n, &s);
    }
    free(g);
}

static void test_adamw8_kernel(void)
{
    const int64_t n = 5 * 2048 + 999;
    const int64_t nb = 6;
    float *p[4], *a1[4], *a2[4];
    uint8_t *c1[4], *c2[4];
    trng r = {3};
    float *p0 = malloc((size_t)n * 4);
    fill_normal(&r, p0, (size_t)n, 0.1f);
    for (int k = 0; k < 4; k++) {
        p[k] = malloc((size_t)n * 4);
        memcpy(p[k], p0, (size_t)n * 4);
        c1[k] = malloc((size_t)n);
        c2[k] = malloc((size_t)n);
        memset(c1[k], 127, (size_t)n);
        memset(c2[k], 0, (size_t)n);
        a1[k] = calloc((size_t)nb, 4);
        a2[k] = calloc((size_t)nb, 4);
        run_steps(k == 0 ? 1 : k, n, p[k], c1[k], c2[k], a1[k], a2[k], k == 0);
    }
    for (int k = 1; k < 4; k++) {
        CHECK_MSG(!memcmp(p[k], p[0], (size_t)n * 4), "params differ from the reference (%d threads)", k);
        CHECK_MSG(!memcmp(c1[k], c1[0], (size_t)n) && !memcmp(c2[k], c2[0], (size_t)n), "codes differ (%d threads)", k);
        CHECK_MSG(!memcmp(a1[k], a1[0], (size_t)nb * 4) && !memcmp(a2[k], a2[0], (size_t)nb * 4),
                  "absmax differ (%d threads)", k);
    }
    /* the moments are really 8-bit: many distinct codes, params moved */
    int seen[256] = {0}, distinct = 0;
    for (int64_t i = 0; i < n; i++) seen[c1[1][i]] = 1;
    for (int i = 0; i < 256; i++) distinct += seen[i];
    CHECK_MSG(distinct > 100, "only %d distinct m codes", distinct);
    CHECK(p[1][0] != p0[0]);
    for (int k = 0; k < 4; k++) {
        free(p[k]); free(c1[k]); free(c2[k]); free(a1[k]); free(a2[k]);
    }
    free(p0);
    kern_init(1);
}

static void test_layout(void)
{
    model_config mc;
    memset(&mc, 0, sizeof mc);
    mc.n_layer = 2;
    mc.d_model = 256;
    mc.n_ff = 768;
    mc.n_head = 4;
    mc.n_kv_head = 2;
    mc.head_dim = 64;
    mc.vocab = 100;
    for (int dora = 0; dora < 2; dora++) {
        lora_config lc = {.rank = 16, .alpha = 32, .targets = LM_ALL, .dora = dora};
        lora *l;
        dlm_err e;
        CHECK(lora_create(&mc, &lc, &l, &e) == 0);
        optim8 *o;
        CHECK(optim8_create(l, &o, &e) == 0);
        optim8_counts k;
        optim8_plan_counts(&mc, &lc, &k);
        CHECK(k.n8 == o->k.n8 && k.nblk == o->k.nblk && k.n32 == o->k.n32);
        CHECK(k.n8 + k.n32 == l->n);
        CHECK(k.n8 > 0 && k.n32 > 0);
        /* segments tile the slab, each once */
        char *hit = calloc(l->n, 1);
        for (int i = 0; i < o->nseg; i++) {
            CHECK(o->seg[i].q8 == (o->seg[i].len >= OPTIM8_MIN_SIZE));
            for (size_t j = 0; j < o->seg[i].len; j++) hit[o->seg[i].off + j]++;
        }
        int ok = 1;
        for (size_t j = 0; j < l->n; j++) ok &= hit[j] == 1;
        CHECK_MSG(ok, "segments do not tile the adapter (dora %d)", dora);
        free(hit);
        /* q_proj A is [16, 256] = 4096 values: 8-bit, 2 blocks; k_proj B [128, 16] = 2048: 32-bit */
        CHECK(o->seg[0].q8 && o->seg[0].len == 4096);
        CHECK(!o->seg[dora ? 4 : 3].q8);
        CHECK(optim8_state_bytes(&k) < (uint64_t)l->n * 8 / 2);
        /* a step with zero gradient changes nothing but keeps a valid state */
        float *g = calloc(l->n, 4);
        optim_config oc;
        optim_defaults(&oc);
        optim8_step(o, &oc, l->w, g, 1e-3, 1);
        free(g);
        optim8_free(o);
        lora_free(l);
    }
}

static void test_state(void)
{
    const char *dir = check_tmpdir("adamw8_state");
    char path[4200];
    snprintf(path, sizeof path, "%s/training_state.bin", dir);
    float params[5000], best[5000], m[904], v[904], a1[2] = {1.5f, 2.5f}, a2[2] = {3.5f, 4.5f};
    uint8_t c1[4096], c2[4096];
    for (int i = 0; i < 5000; i++) params[i] = (float)i, best[i] = -(float)i;
    for (int i = 0; i < 904; i++) m[i] = (float)i * 0.5f, v[i] = (float)i * 0.25f;
    for (int i = 0; i < 4096; i++) c1[i] = (uint8_t)i, c2[i] = (uint8_t)(i * 7);
    train_state s = {.step = 3, .total_steps = 9, .micro = 6, .seed = 42, .n = 5000, .best_val = 1.25, .best_step = 2,
                     .last_loss = 2.5, .params = params, .m = m, .v = v, .best = best,
                     .optim_kind = STATE_OPTIM_ADAMW8, .n8 = 4096, .nblk = 2, .n32 = 904,
                     .c1 = c1, .c2 = c2, .a1 = a1, .a2 = a2};
    dlm_err e;
    CHECK(state_save(path, &s, &e) == 0);
    train_state t;
    CHECK(state_load(path, &t, &e) == 0);
    CHECK(t.optim_kind == STATE_OPTIM_ADAMW8 && t.n == 5000 && t.n8 == 4096 && t.nblk == 2 && t.n32 == 904);
    CHECK(!memcmp(t.params, params, sizeof params) && !memcmp(t.best, best, sizeof best));
    CHECK(!memcmp(t.c1, c1, 4096) && !memcmp(t.c2, c2, 4096) && !memcmp(t.a1, a1, 8) && !memcmp(t.a2, a2, 8));
    CHECK(!memcmp(t.m, m, sizeof m) && !memcmp(t.v, v, sizeof v));
    state_free(&t);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    /* state_size is what the checkpoint buffer reserves: 88 header bytes
     * (+24 counts) and the arrays, within the 96-byte header allowance */
    CHECK_INT(ftell(f) + 8, (long)state_size(&s));
    fclose(f);
    /* 32-bit state: still version 1, as before */
    float m2[5000] = {0}, v2[5000] = {0};
    train_state s1 = {.n = 5000, .params = params, .m = m2, .v = v2};
    CHECK(state_save(path, &s1, &e) == 0);
    CHECK(state_load(path, &t, &e) == 0);
    CHECK(t.optim_kind == STATE_OPTIM_ADAMW && t.n == 5000 && t.c1 == NULL);
    state_free(&t);
    f = fopen(path, "rb");
    unsigned char hdr[12];
    CHECK(fread(hdr, 1, 12, f) == 12);
    fclose(f);
    CHECK(hdr[8] == 1 && hdr[9] == 0);
    CHECK_INT(state_bytes(5000, 0), state_size(&s1));
    /* counts that do not add up are refused, not trusted */
    s.n32 = 903;
    s.n = 4999;
    CHECK(state_save(path, &s, &e) == 0);   /* consistent counts: read back */
    CHECK(state_load(path, &t, &e) == 0);
    state_free(&t);
    s.nblk = 1;                             /* 4096 codes need 2 blocks */
    CHECK(state_save(path, &s, &e) == 0);
    CHECK(state_load(path, &t, &e) != 0);
    CHECK_STR(e.kind, "ResumeIntegrityError");
}

/* ---- --ref DIR: compare with tests/ref/adamw8/adamw8_ref.py ---------------- */

static void *slurp(const char *dir, const char *name, size_t want)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s.bin", dir, name);
    FILE *f = fopen(p, "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", p); exit(1); }
    void *b = malloc(want ? want : 1);
    size_t got = fread(b, 1, want, f);
    int extra = fgetc(f) != EOF;
    fclose(f);
    if (got != want || extra) { fprintf(stderr, "%s: expected %zu bytes\n", p, want); exit(1); }
    return b;
}

static double meta(const char *dir, const char *key)
{
    char p[4200], k[64];
    double v;
    snprintf(p, sizeof p, "%s/meta.txt", dir);
    FILE *f = fopen(p, "r");
    if (!f) { fprintf(stderr, "cannot open %s\n", p); exit(1); }
    while (fscanf(f, "%63s %lf", k, &v) == 2)
        if (!strcmp(k, key)) { fclose(f); return v; }
    fclose(f);
    fprintf(stderr, "meta.txt: no %s\n", key);
    exit(1);
}

static int count_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    int d = 0;
    for (size_t i = 0; i < n; i++) d += a[i] != b[i];
    return d;
}

static int run_ref(const char *dir)
{
    float *ms = slurp(dir, "map_signed", 1024), *mu = slurp(dir, "map_unsigned", 1024);
    CHECK_MSG(!memcmp(ms, kern_q8_map(1), 1024), "the signed map differs from the paper's");
    CHECK_MSG(!memcmp(mu, kern_q8_map(0), 1024), "the unsigned map differs from the paper's");
    /* block-wise quantization of random tensors */
    size_t nq = (size_t)meta(dir, "nq"), nbq = (nq + 2047) / 2048;
    for (int sgn = 1; sgn >= 0; sgn--) {
        float *x = slurp(dir, sgn ? "q_xs" : "q_xu", nq * 4), *a = slurp(dir, sgn ? "q_as" : "q_au", nbq * 4);
        float *dq = slurp(dir, sgn ? "q_ds" : "q_du", nq * 4);
        uint8_t *c = slurp(dir, sgn ? "q_cs" : "q_cu", nq);
        uint8_t *mc = malloc(nq);
        float *ma = malloc(nbq * 4), *md = malloc(nq * 4);
        kern_q8_quantize(mc, ma, x, (int64_t)nq, sgn);
        kern_q8_dequantize(md, mc, ma, (int64_t)nq, sgn);
        int d = count_diff(mc, c, nq);
        CHECK_MSG(d == 0, "%d of %zu codes differ (signed %d)", d, nq, sgn);
        CHECK(!memcmp(ma, a, nbq * 4));
        CHECK(!memcmp(md, dq, nq * 4));
        printf("quantize (signed %d): %zu values, %d codes differ\n", sgn, nq, d);
        free(x); free(a); free(dq); free(c); free(mc); free(ma); free(md);
    }
    /* 10 steps */
    size_t n = (size_t)meta(dir, "n"), steps = (size_t)meta(dir, "steps"), nb = (n + 2047) / 2048;
    double lr = meta(dir, "lr"), b1 = meta(dir, "b1"), b2 = meta(dir, "b2"), eps = meta(dir, "eps"),
           wd = meta(dir, "wd");
    float *p = slurp(dir, "o_p0", n * 4), *g = slurp(dir, "o_g", steps * n * 4), *ep = slurp(dir, "o_p", steps * n * 4);
    uint8_t *e1 = slurp(dir, "o_c1", steps * n), *e2 = slurp(dir, "o_c2", steps * n);
    float *ea1 = slurp(dir, "o_a1", steps * nb * 4), *ea2 = slurp(dir, "o_a2", steps * nb * 4);
    uint8_t *c1 = malloc(n), *c2 = malloc(n);
    float *a1 = calloc(nb, 4), *a2 = calloc(nb, 4);
    memset(c1, kern_q8_zero_code(1), n);
    memset(c2, kern_q8_zero_code(0), n);
    kern_init(2);
    for (size_t t = 1; t <= steps; t++) {
        kern_adamw_bnb s;
        kern_adamw_bnb_scalars(&s, lr, b1, b2, eps, wd, (int64_t)t);
        kern_adamw8(p, g + (t - 1) * n, c1, c2, a1, a2, (int64_t)n, &s);
        char lab[64];
        snprintf(lab, sizeof lab, "step %zu params", t);
        check_tensor(lab, p, ep + (t - 1) * n, n, 1e-6);
        int d1 = count_diff(c1, e1 + (t - 1) * n, n), d2 = count_diff(c2, e2 + (t - 1) * n, n);
        CHECK_MSG(d1 == 0 && d2 == 0, "step %zu: %d m codes and %d v codes differ", t, d1, d2);
        check_tensor("absmax m", a1, ea1 + (t - 1) * nb, nb, 1e-6);
        check_tensor("absmax v", a2, ea2 + (t - 1) * nb, nb, 1e-6);
        int bitwise = !memcmp(p, ep + (t - 1) * n, n * 4);
        printf("step %zu: params %s, %d + %d codes differ\n", t, bitwise ? "bit-identical" : "within 1e-6", d1, d2);
    }
    /* a tensor under min_8bit_size: f32 moments */
    size_t ns = (size_t)meta(dir, "ns");
    float *sp = slurp(dir, "s_p0", ns * 4), *sg = slurp(dir, "s_g", steps * ns * 4), *sp_e = slurp(dir, "s_p", ns * 4);
    float *sm = calloc(ns, 4), *sv = calloc(ns, 4);
    for (size_t t = 1; t <= steps; t++) {
        kern_adamw_bnb s;
        kern_adamw_bnb_scalars(&s, lr, b1, b2, eps, wd, (int64_t)t);
        kern_adamw32_bnb(sp, sg + (t - 1) * ns, sm, sv, (int64_t)ns, &s);
    }
    check_tensor("32-bit tensor params", sp, sp_e, ns, 1e-6);
    free(ms); free(mu);
    free(p); free(g); free(ep); free(e1); free(e2); free(ea1); free(ea2);
    free(c1); free(c2); free(a1); free(a2);
    free(sp); free(sg); free(sp_e); free(sm); free(sv);
    kern_init(1);
    return check_done();
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--ref")) return run_ref(argv[2]);
    test_maps();
    test_encode();
    test_adamw8_kernel();
    test_layout();
    test_state();
    return check_done();
}
