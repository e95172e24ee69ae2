/* Unit tests for src/kern, part 2: RMSNorm, RoPE, SwiGLU, attention,
 * cross-entropy and AdamW against their references, the KV-cache attention
 * call against the full causal run, and bit-identical results for 1, 2 and
 * 3 threads. Re-runs itself at each lower ISA level.
 *
 * `test_kern_ops --torch DIR` instead compares every op, forward and
 * backward, with the PyTorch results that tests/ref/kern/ops_torch.py wrote
 * to DIR (tests/ref/r0302-ops-torch.sh). */
#include "check.h"
#include "kern_test_util.h"

#include "kern/kern.h"
#include "kern/kern_impl.h"

static void test_rmsnorm(void)
{
    trng r = {1};
    const int64_t Ns[] = {1, 7, 100};
    const int Cs[] = {1, 5, 64, 576};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 4; b++) {
            int64_t N = Ns[a];
            int C = Cs[b];
            float *x = xmalloc(N * C * 4), *w = xmalloc(C * 4), *y = xmalloc(N * C * 4), *yr = xmalloc(N * C * 4);
            float *rs = xmalloc(N * 4), *rsr = xmalloc(N * 4), *dy = xmalloc(N * C * 4);
            float *dx = xmalloc(N * C * 4), *dxr = xmalloc(N * C * 4), *dw = xmalloc(C * 4), *dwr = xmalloc(C * 4);
            fill_normal(&r, x, N * C, 2.f);
            fill_normal(&r, w, C, 1.f);
            fill_normal(&r, dy, N * C, 1.f);
            fill_normal(&r, dw, C, 1.f);
            memcpy(dwr, dw, C * 4);
            kern_rmsnorm_fwd(y, rs, x, w, N, C, 1e-5f);
            kern_rmsnorm_fwd_ref(yr, rsr, x, w, N, C, 1e-5f);
            check_tensor("rmsnorm y", y, yr, N * C, 1e-6);
            check_tensor("rmsnorm rstd", rs, rsr, N, 1e-6);
            kern_rmsnorm_bwd(dx, dw, dy, x, w, rs, N, C);
            kern_rmsnorm_bwd_ref(dxr, dwr, dy, x, w, rs, N, C);
            check_tensor("rmsnorm dx", dx, dxr, N * C, 1e-6);
            check_tensor("rmsnorm dw", dw, dwr, C, 1e-6);
            kern_rmsnorm_bwd(dx, NULL, dy, x, w, rs, N, C);     /* frozen weight */
            check_tensor("rmsnorm dx (no dw)", dx, dxr, N * C, 1e-6);
            free(x); free(w); free(y); free(yr); free(rs); free(rsr); free(dy); free(dx); free(dxr); free(dw); free(dwr);
        }
}

static void test_rope(void)
{
    trng r = {2};
    const int64_t N = 9;
    const int H = 3, HS = 64;
    double inv[32];
    for (int i = 0; i < HS / 2; i++) inv[i] = 1.0 / pow(10000.0, 2.0 * i / HS);
    int32_t pos[9] = {0, 1, 2, 5, 100, 511, 4095, 32767, 7};
    float *x = xmalloc(N * H * HS * 4), *x0 = xmalloc(N * H * HS * 4), *want = xmalloc(N * H * HS * 4);
    fill_normal(&r, x, N * H * HS, 1.f);
    memcpy(x0, x, N * H * HS * 4);
    for (int64_t n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < HS / 2; i++) {
                const float *v = x0 + (n * H + h) * HS;
                double a = (double)pos[n] * inv[i];
                float c = (float)cos(a), s = (float)sin(a);
                want[(n * H + h) * HS + i] = v[i] * c - v[i + HS / 2] * s;
                want[(n * H + h) * HS + i + HS / 2] = v[i + HS / 2] * c + v[i] * s;
            }
    kern_rope_fwd(x, pos, N, H, HS, inv);
    CHECK(!memcmp(x, want, N * H * HS * 4));    /* same float ops: exact */
    CHECK(!memcmp(x, x0, H * HS * 4));          /* position 0 is the identity */
    kern_rope_bwd(x, pos, N, H, HS, inv);       /* rotation back */
    check_tensor("rope bwd(fwd(x))", x, x0, N * H * HS, 1e-6);
    /* with a table: the same bits both ways */
    float *cs = xmalloc(N * HS / 2 * 4), *sn = xmalloc(N * HS / 2 * 4), *xt = xmalloc(N * H * HS * 4);
    kern_rope_table(cs, sn, pos, N, HS, inv);
    memcpy(xt, x0, N * H * HS * 4);
    kern_rope_fwd_t(xt, cs, sn, N, H, HS);
    CHECK(!memcmp(xt, want, N * H * HS * 4));
    memcpy(x, want, N * H * HS * 4);
    kern_rope_bwd(x, pos, N, H, HS, inv);
    kern_rope_bwd_t(xt, cs, sn, N, H, HS);
    CHECK(!memcmp(xt, x, N * H * HS * 4));
    free(cs); free(sn); free(xt);
    free(x); free(x0); free(want);
}

static void test_swiglu(void)
{
    trng r = {3};
    const int64_t n = 1003;
    float *g = xmalloc(n * 4), *u = xmalloc(n * 4), *h = xmalloc(n * 4), *hr = xmalloc(n * 4);
    float *dh = xmalloc(n * 4), *dg = xmalloc(n * 4), *du = xmalloc(n * 4), *dgr = xmalloc(n * 4), *dur = xmalloc(n * 4);
    fill_normal(&r, g, n, 3.f);
    fill_normal(&r, u, n, 1.f);
    fill_normal(&r, dh, n, 1.f);
    g[0] = 0.f; g[1] = 100.f; g[2] = -100.f; g[3] = 20.f; g[4] = -20.f; g[5] = -87.5f; g[6] = 88.5f;
    kern_swiglu_fwd(h, g, u, n);
    kern_swiglu_fwd_ref(hr, g, u, n);
    check_tensor("swiglu h", h, hr, n, 1e-6);
    kern_swiglu_bwd(dg, du, dh, g, u, n);
    kern_swiglu_bwd_ref(dgr, dur, dh, g, u, n);
    check_tensor("swiglu dg", dg, dgr, n, 1e-6);
    check_tensor("swiglu du", du, dur, n, 1e-6);
    int finite = 1;
    for (int64_t i = 0; i < n; i++) finite &= isfinite(h[i]) && isfinite(dg[i]) && isfinite(du[i]);
    CHECK(finite);
    free(g); free(u); free(h); free(hr); free(dh); free(dg); free(du); free(dgr); free(dur);
}

/* ---- attention ------------------------------------------------------------------- */

typedef struct attn_case { int B, Tq, Tk, NH, KVH, HS, q_off, extra, use_seg, window; } attn_case;

typedef struct attn_bufs {
    attn_shape s;
    int32_t *seg;
    float *q, *k, *v, *out, *lse, *dout, *dq, *dk, *dv, *scr;
    size_t nq, nkv;
} attn_bufs;

static void attn_alloc(attn_bufs *a, const attn_case *c, trng *r)
{
    memset(a, 0, sizeof *a);
    a->s = (attn_shape){c->B, c->Tq, c->Tk, c->NH, c->KVH, c->HS, c->q_off,
                        (int64_t)(c->Tk + c->extra) * c->KVH * c->HS, NULL, 0, 0, 0, NULL};
    a->nq = (size_t)c->B * c->Tq * c->NH * c->HS;
    a->nkv = (size_t)c->B * a->s.kv_bstride;
    a->q = xmalloc(a->nq * 4); a->out = xmalloc(a->nq * 4); a->dout = xmalloc(a->nq * 4); a->dq = xmalloc(a->nq * 4);
    a->k = xmalloc(a->nkv * 4); a->v = xmalloc(a->nkv * 4); a->dk = xmalloc(a->nkv * 4); a->dv = xmalloc(a->nkv * 4);
    a->lse = xmalloc((size_t)c->B * c->NH * c->Tq * 4);
    fill_normal(r, a->q, a->nq, 1.f);
    fill_normal(r, a->k, a->nkv, 1.f);
    fill_normal(r, a->v, a->nkv, 1.f);
    fill_normal(r, a->dout, a->nq, 1.f);
    if (c->use_seg) {
        a->seg = xmalloc((size_t)c->B * c->Tk * 4);
        for (int b = 0; b < c->B; b++) {
            int sid = 0;
            for (int j = 0; j < c->Tk; j++) {
                if (j > 0 && trng_u64(r) % 9 == 0) sid++;
                a->seg[b * c->Tk + j] = sid;
            }
        }
        a->s.seg = a->seg;
    }
    a->s.window = c->window;
    size_t ns = kern_attn_bwd_scratch(&a->s);
    if (kern_attn_scratch(&a->s) > ns) ns = kern_attn_scratch(&a->s);
    a->scr = xmalloc(ns * 4);
}

static void attn_free(attn_bufs *a)
{
    free(a->q); free(a->out); free(a->dout); free(a->dq); free(a->k); free(a->v); free(a->dk); free(a->dv);
    free(a->lse); free(a->seg); free(a->scr);
}

static const attn_case CASES[] = {
    {1, 1, 1, 1, 1, 16, 0, 0, 0, 0},
    {2, 37, 37, 4, 2, 16, 0, 0, 0, 0},
    {1, 70, 70, 6, 2, 64, 0, 0, 0, 0},
    {2, 33, 33, 2, 2, 24, 0, 5, 0, 0},      /* HS not a multiple of 16, strided kv */
    {1, 5, 40, 4, 1, 32, 35, 3, 0, 0},      /* q_off > 0: chunk of a longer sequence */
    {2, 50, 50, 4, 2, 16, 0, 0, 1, 0},      /* packed segments */
    {1, 20, 90, 2, 1, 16, 70, 0, 1, 0},     /* segments + q_off */
    {1, 130, 130, 3, 3, 128, 0, 0, 0, 0},   /* several query and key blocks */
    {2, 100, 100, 4, 2, 16, 0, 0, 0, 7},     /* sliding window, across key blocks */
    {1, 70, 70, 2, 1, 64, 0, 0, 1, 20},      /* window + segments */
    {1, 5, 90, 4, 2, 32, 85, 2, 0, 33},      /* window over a cache chunk (q_off > 0) */
    {1, 130, 130, 3, 3, 128, 0, 0, 0, 64},   /* window of a key block's size */
    {1, 40, 40, 2, 2, 16, 0, 0, 0, 2},       /* window 2: each query sees itself and the key before */
};

/* A scratch sized once for the largest shape serves a smaller one: with
 * B = 64 the dS tiles exceed ATTN_DS_MAX_FLOATS, with B = 1 they are kept,
 * and must fit the reservation made for B = 64 (the short last batch of a
 * run; ASan sees any overflow of the exact-size buffer). */
static void test_attention_scratch_shrinks(void)
{
    trng r = {9};
    attn_case big = {64, 512, 512, 4, 2, 16, 0, 0, 0, 0};
    attn_shape sb = {big.B, big.Tq, big.Tk, big.NH, big.KVH, big.HS, 0, (int64_t)big.Tk * big.KVH * big.HS, NULL, 0, 0, 0, NULL};
    size_t need = kern_attn_bwd_scratch(&sb);
    attn_case small = big;
    small.B = 1;
    attn_bufs a;
    attn_alloc(&a, &small, &r);
    CHECK(kern_attn_bwd_scratch(&a.s) <= need);
    free(a.scr);
    a.scr = xmalloc(need * 4);
    float *dqr = xmalloc(a.nq * 4), *dkr = xmalloc(a.nkv * 4), *dvr = xmalloc(a.nkv * 4);
    kern_attn_fwd(a.out, a.lse, a.q, a.k, a.v, &a.s, a.scr);
    kern_attn_bwd(a.dq, a.dk, a.dv, a.dout, a.out, a.lse, a.q, a.k, a.v, &a.s, a.scr);
    kern_attn_bwd_ref(dqr, dkr, dvr, a.dout, a.q, a.k, a.v, &a.s);
    CHECK_CLOSE("attn dq, scratch of a larger shape", a.dq, dqr, a.nq, 1e-5, 1e-6);
    CHECK_CLOSE("attn dk, scratch of a larger shape", a.dk, dkr, a.nkv, 1e-5, 1e-6);
    free(dqr); free(dkr); free(dvr);
    attn_free(&a);
}

static void test_attention(void)
{
    trng r = {4};
    for (size_t ci = 0; ci < sizeof CASES / sizeof CASES[0]; ci++) {
        const attn_case *c = &CASES[ci];
        attn_bufs a;
        attn_alloc(&a, c, &r);
        float *outr = xmalloc(a.nq * 4), *lser = xmalloc((size_t)c->B * c->NH * c->Tq * 4);
        float *dqr = xmalloc(a.nq * 4), *dkr = xmalloc(a.nkv * 4), *dvr = xmalloc(a.nkv * 4);
        kern_attn_fwd(a.out, a.lse, a.q, a.k, a.v, &a.s, a.scr);
        kern_attn_fwd_ref(outr, lser, a.q, a.k, a.v, &a.s);
        char label[96];
        snprintf(label, sizeof label, "attn fwd case %zu", ci);
        check_tensor(label, a.out, outr, a.nq, 2e-6);
        snprintf(label, sizeof label, "attn lse case %zu", ci);
        check_tensor(label, a.lse, lser, (size_t)c->B * c->NH * c->Tq, 2e-6);
        /* rows of k/v beyond Tk (the cache's unused tail) must stay untouched */
        memset(a.dk, 0x7f, a.nkv * 4);
        memset(a.dv, 0x7f, a.nkv * 4);
        memcpy(dkr, a.dk, a.nkv * 4);
        memcpy(dvr, a.dv, a.nkv * 4);
        kern_attn_bwd(a.dq, a.dk, a.dv, a.dout, a.out, a.lse, a.q, a.k, a.v, &a.s, a.scr);
        kern_attn_bwd_ref(dqr, dkr, dvr, a.dout, a.q, a.k, a.v, &a.s);
        snprintf(label, sizeof label, "attn dq case %zu", ci);
        CHECK_CLOSE(label, a.dq, dqr, a.nq, 1e-5, 1e-6);
        snprintf(label, sizeof label, "attn dk case %zu", ci);
        CHECK_CLOSE(label, a.dk, dkr, a.nkv, 1e-5, 1e-6);
        snprintf(label, sizeof label, "attn dv case %zu", ci);
        CHECK_CLOSE(label, a.dv, dvr, a.nkv, 1e-5, 1e-6);
        /* dQ from the kept dS tiles == dQ with dS recomputed, bit for bit */
        kern_attn_ds_off = 1;
        memcpy(dkr, a.dk, a.nkv * 4);
        memcpy(dvr, a.dv, a.nkv * 4);
        kern_attn_bwd(dqr, dkr, dvr, a.dout, a.out, a.lse, a.q, a.k, a.v, &a.s, a.scr);
        kern_attn_ds_off = 0;
        CHECK_MSG(!memcmp(dqr, a.dq, a.nq * 4) && !memcmp(dkr, a.dk, a.nkv * 4) && !memcmp(dvr, a.dv, a.nkv * 4),
                  "attn case %zu: kept dS tiles change the bits", ci);
        free(outr); free(lser); free(dqr); free(dkr); free(dvr);
        attn_free(&a);
    }
}

/* A decode step (Tq=1 at q_off = Tk−1, k/v in a larger cache) gives the
 * last row of the full causal run, bit for bit: per row the kernel does the
 * same operations whatever the query block. */
static void test_attention_kvcache(void)
{
    trng r = {5};
    enum { Tk = 150, NH = 4, KVH = 2, HS = 64, Tmax = 256 };
    attn_case c = {1, Tk, Tk, NH, KVH, HS, 0, Tmax - Tk, 0, 0};
    attn_bufs a;
    attn_alloc(&a, &c, &r);
    kern_attn_fwd(a.out, a.lse, a.q, a.k, a.v, &a.s, a.scr);
    attn_shape s1 = a.s;
    s1.Tq = 1;
    s1.q_off = Tk - 1;
    float out1[NH * HS], lse1[NH];
    kern_attn_fwd(out1, lse1, a.q + (size_t)(Tk - 1) * NH * HS, a.k, a.v, &s1, a.scr);
    CHECK(!memcmp(out1, a.out + (size_t)(Tk - 1) * NH * HS, sizeof out1));
    int ok = 1;
    for (int h = 0; h < NH; h++) ok &= lse1[h] == a.lse[h * Tk + Tk - 1];
    CHECK(ok);
    /* inference without lse */
    kern_attn_fwd(out1, NULL, a.q + (size_t)(Tk - 1) * NH * HS, a.k, a.v, &s1, NULL);
    CHECK(!memcmp(out1, a.out + (size_t)(Tk - 1) * NH * HS, sizeof out1));
    attn_free(&a);
}

/* Decode-sized steps (rep·Tq <= 8 lanes per kv head) take the key-vectorised
 * unit: the same bits as the 32-lane tiles, for several head layouts, head
 * sizes (with a tail), cache lengths around block edges, two queries,
 * segments and a strided cache. */
static void test_attention_decode_unit(void)
{
    trng r = {15};
    const int shapes[][4] = {{4, 2, 16, 1}, {14, 2, 64, 1}, {9, 3, 24, 2}, {8, 1, 64, 1}, {2, 2, 40, 2}};
    const int tks[] = {1, 37, 64, 65, 200};
    for (int si = 0; si < 5; si++)
        for (int ti = 0; ti < 5; ti++)
            for (int sg = 0; sg < 3; sg++) {   /* 1: segments, 2: a sliding window of 13 */
                int NH = shapes[si][0], KVH = shapes[si][1], HS = shapes[si][2], Tq = shapes[si][3];
                int Tk = tks[ti] < Tq ? Tq : tks[ti];
                attn_case c = {2, Tq, Tk, NH, KVH, HS, Tk - Tq, 3, sg == 1, sg == 2 ? 13 : 0};
                attn_bufs a;
                attn_alloc(&a, &c, &r);
                float *o2 = xmalloc(a.nq * 4), *l2 = xmalloc((size_t)2 * NH * Tq * 4);
                kern_attn_fwd(a.out, a.lse, a.q, a.k, a.v, &a.s, a.scr);
                kern_attn_dec_off = 1;
                kern_attn_fwd(o2, l2, a.q, a.k, a.v, &a.s, a.scr);
                kern_attn_dec_off = 0;
                CHECK_MSG(!memcmp(o2, a.out, a.nq * 4) && !memcmp(l2, a.lse, (size_t)2 * NH * Tq * 4),
                          "decode unit NH=%d KVH=%d HS=%d Tq=%d Tk=%d seg=%d", NH, KVH, HS, Tq, Tk, sg);
                free(o2); free(l2);
                attn_free(&a);
            }
}

/* ---- cross-entropy ------------------------------------------------------------------ */

static void test_xent(void)
{
    trng r = {6};
    const int Vs[] = {1, 7, 100, 1000, 4099};
    for (int vi = 0; vi < 5; vi++) {
        int V = Vs[vi];
        const int64_t N = 9;
        float *lg = xmalloc(N * V * 4), *d = xmalloc(N * V * 4), *dr = xmalloc(N * V * 4);
        float *nll = xmalloc(N * 4), *nllr = xmalloc(N * 4), *nll2 = xmalloc(N * 4);
        int32_t tg[9];
        fill_normal(&r, lg, N * V, 3.f);
        for (int n = 0; n < N; n++) tg[n] = (int32_t)(trng_u64(&r) % V);
        tg[2] = -1;
        tg[5] = -1;
        if (V > 3) lg[3 * V + 1] = 80.f;   /* a dominant logit */
        double s = kern_xent(d, nll, lg, tg, N, V, 0.25f);
        double sr = kern_xent_ref(dr, nllr, lg, tg, N, V, 0.25f);
        CHECK_NEAR(s, sr, 1e-5 * fabs(sr) + 1e-6);
        check_tensor("xent nll", nll, nllr, N, 2e-6);
        check_tensor("xent dlogits", d, dr, N * V, 2e-6);
        CHECK(nll[2] == 0.f && nll[5] == 0.f);
        int zero = 1;
        for (int i = 0; i < V; i++) zero &= d[2 * V + i] == 0.f && d[5 * V + i] == 0.f;
        CHECK(zero);
        /* loss only, then in place (dlogits aliasing logits) */
        double s2 = kern_xent(NULL, nll2, lg, tg, N, V, 0.25f);
        CHECK(s2 == s && !memcmp(nll, nll2, N * 4));
        kern_xent(lg, nll2, lg, tg, N, V, 0.25f);
        CHECK(!memcmp(lg, d, N * V * 4));
        free(lg); free(d); free(dr); free(nll); free(nllr); free(nll2);
    }
}

/* ---- AdamW -------------------------------------------------------------------------- */

static void test_adamw(void)
{
    trng r = {7};
    const int64_t n = 1000;
    float *p = xmalloc(n * 4), *g = xmalloc(n * 4), *m = xmalloc(n * 4), *v = xmalloc(n * 4);
    double *pd = xmalloc(n * 8), *md = xmalloc(n * 8), *vd = xmalloc(n * 8);
    fill_normal(&r, p, n, 1.f);
    for (int64_t i = 0; i < n; i++) { m[i] = v[i] = 0; pd[i] = p[i]; md[i] = vd[i] = 0; }
    const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
    for (int t = 1; t <= 5; t++) {
        fill_normal(&r, g, n, 0.1f);
        kern_adamw(p, g, m, v, n, lr, b1, b2, eps, wd, t);
        for (int64_t i = 0; i < n; i++) {
            pd[i] -= lr * wd * pd[i];
            md[i] = b1 * md[i] + (1 - b1) * g[i];
            vd[i] = b2 * vd[i] + (1 - b2) * g[i] * g[i];
            double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
            pd[i] -= lr / bc1 * md[i] / (sqrt(vd[i]) / sqrt(bc2) + eps);
        }
    }
    float *pdf = xmalloc(n * 4);
    for (int64_t i = 0; i < n; i++) pdf[i] = (float)pd[i];
    check_tensor("adamw p", p, pdf, n, 1e-6);
    /* first step with wd = 0 moves each param by lr·g/(|g| + eps') ≈ ±lr */
    float p1 = 1.f, g1 = 0.5f, m1 = 0, v1 = 0;
    kern_adamw(&p1, &g1, &m1, &v1, 1, 0.1f, 0.9f, 0.999f, 1e-8f, 0.f, 1);
    CHECK_NEAR(p1, 0.9f, 1e-6);
    free(p); free(g); free(m); free(v); free(pd); free(md); free(vd); free(pdf);
}

/* ---- determinism across thread counts --------------------------------------------------- */

static void test_threads(void)
{
    trng r = {8};
    attn_case c = {2, 100, 100, 6, 2, 64, 0, 0, 1, 0};
    attn_bufs a;
    attn_alloc(&a, &c, &r);
    size_t nl = (size_t)c.B * c.NH * c.Tq;
    float *o[3], *l[3], *dq[3], *dk[3], *dv[3];
    const int64_t N = 64, V = 3001, C = 300;
    float *lg = xmalloc(N * V * 4), *dl[3], *nl3[3];
    int32_t tg[64];
    fill_normal(&r, lg, N * V, 2.f);
    for (int i = 0; i < N; i++) tg[i] = i % 5 == 0 ? -1 : (int32_t)(trng_u64(&r) % V);
    float *x = xmalloc(N * C * 4), *w = xmalloc(C * 4), *dy = xmalloc(N * C * 4), *rs = xmalloc(N * 4);
    float *y[3], *dx[3], *dw[3];
    fill_normal(&r, x, N * C, 1.f);
    fill_normal(&r, w, C, 1.f);
    fill_normal(&r, dy, N * C, 1.f);
    double loss[3];
    for (int t = 0; t < 3; t++) {
        kern_init(t + 1);
        o[t] = xmalloc(a.nq * 4); l[t] = xmalloc(nl * 4); dq[t] = xmalloc(a.nq * 4);
        dk[t] = xmalloc(a.nkv * 4); dv[t] = xmalloc(a.nkv * 4);
        kern_attn_fwd(o[t], l[t], a.q, a.k, a.v, &a.s, a.scr);
        kern_attn_bwd(dq[t], dk[t], dv[t], a.dout, o[t], l[t], a.q, a.k, a.v, &a.s, a.scr);
        dl[t] = xmalloc(N * V * 4); nl3[t] = xmalloc(N * 4);
        loss[t] = kern_xent(dl[t], nl3[t], lg, tg, N, (int)V, 1.f / 51);
        y[t] = xmalloc(N * C * 4); dx[t] = xmalloc(N * C * 4); dw[t] = xmalloc(C * 4);
        memset(dw[t], 0, C * 4);
        kern_rmsnorm_fwd(y[t], rs, x, w, N, (int)C, 1e-6f);
        kern_rmsnorm_bwd(dx[t], dw[t], dy, x, w, rs, N, (int)C);
    }
    for (int t = 1; t < 3; t++) {
        CHECK_MSG(!memcmp(o[0], o[t], a.nq * 4) && !memcmp(l[0], l[t], nl * 4), "attn fwd threads=%d", t + 1);
        CHECK_MSG(!memcmp(dq[0], dq[t], a.nq * 4), "attn dq threads=%d", t + 1);
        CHECK_MSG(!memcmp(dk[0], dk[t], a.nkv * 4) && !memcmp(dv[0], dv[t], a.nkv * 4), "attn dk/dv threads=%d", t + 1);
        CHECK_MSG(loss[0] == loss[t] && !memcmp(dl[0], dl[t], N * V * 4) && !memcmp(nl3[0], nl3[t], N * 4),
                  "xent threads=%d", t + 1);
        CHECK_MSG(!memcmp(y[0], y[t], N * C * 4) && !memcmp(dx[0], dx[t], N * C * 4) &&
                  !memcmp(dw[0], dw[t], C * 4), "rmsnorm threads=%d", t + 1);
    }
    for (int t = 0; t < 3; t++) {
        free(o[t]); free(l[t]); free(dq[t]); free(dk[t]); free(dv[t]); free(dl[t]); free(nl3[t]);
        free(y[t]); free(dx[t]); free(dw[t]);
    }
    free(lg); free(x); free(w); free(dy); free(rs);
    attn_free(&a);
    kern_init(2);
}

/* ---- --torch DIR: comparison with PyTorch (tests/ref/r0302-ops-torch.sh) ----------------- */

static char t_dir[2048];

static double meta(const char *key)
{
    char path[2100], line[256], k[128];
    snprintf(path, sizeof path, "%s/meta.txt", t_dir);
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "cannot open %s\n", path); exit(2); }
    double v = 0;
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        double x;
        if (sscanf(line, "%127s %lf", k, &x) == 2 && !strcmp(k, key)) { v = x; found = 1; break; }
    }
    fclose(f);
    if (!found) { fprintf(stderr, "meta key %s missing\n", key); exit(2); }
    return v;
}

/* Reads DIR/name.bin, which must hold exactly n 4-byte values. */
static void *tload(const char *name, size_t n)
{
    char path[2100];
    snprintf(path, sizeof path, "%s/%s.bin", t_dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", path); exit(2); }
    void *p = xmalloc(n * 4 + 4);
    size_t got = fread(p, 4, n + 1, f);
    fclose(f);
    if (got != n) { fprintf(stderr, "%s: %zu values, expected %zu\n", path, got, n); exit(2); }
    return p;
}

static int torch_mode(const char *dir)
{
    snprintf(t_dir, sizeof t_dir, "%s", dir);
    kern_init(2);
    /* RMSNorm */
    {
        int64_t N = (int64_t)meta("rms_N");
        int C = (int)meta("rms_C");
        float *x = tload("rms_x", N * C), *w = tload("rms_w", C), *dy = tload("rms_dy", N * C);
        float *yt = tload("rms_y", N * C), *dxt = tload("rms_dx", N * C), *dwt = tload("rms_dw", C);
        float *y = xmalloc(N * C * 4), *rs = xmalloc(N * 4), *dx = xmalloc(N * C * 4), *dw = xmalloc(C * 4);
        memset(dw, 0, C * 4);
        kern_rmsnorm_fwd(y, rs, x, w, N, C, (float)meta("rms_eps"));
        kern_rmsnorm_bwd(dx, dw, dy, x, w, rs, N, C);
        check_tensor("torch rmsnorm y", y, yt, N * C, 1e-5);
        check_tensor("torch rmsnorm dx", dx, dxt, N * C, 1e-5);
        check_tensor("torch rmsnorm dw", dw, dwt, C, 1e-5);
        free(x); free(w); free(dy); free(yt); free(dxt); free(dwt); free(y); free(rs); free(dx); free(dw);
    }
    /* RoPE */
    {
        int64_t N = (int64_t)meta("rope_N");
        int H = (int)meta("rope_H"), HS = (int)meta("rope_HS");
        double theta = meta("rope_theta"), inv[512];
        for (int i = 0; i < HS / 2; i++) inv[i] = 1.0 / pow(theta, (double)(2 * i) / HS);
        int32_t *pos = tload("rope_pos", N);
        float *x = tload("rope_x", N * H * HS), *dy = tload("rope_dy", N * H * HS);
        float *yt = tload("rope_y", N * H * HS), *dxt = tload("rope_dx", N * H * HS);
        kern_rope_fwd(x, pos, N, H, HS, inv);
        kern_rope_bwd(dy, pos, N, H, HS, inv);
        check_tensor("torch rope y", x, yt, N * H * HS, 1e-5);
        check_tensor("torch rope dx", dy, dxt, N * H * HS, 1e-5);
        free(pos); free(x); free(dy); free(yt); free(dxt);
    }
    /* attention */
    for (int ci = 0; ci < (int)meta("attn_cases"); ci++) {
        char k[64], name[64];
#define M(key) (snprintf(k, sizeof k, "attn%d_" key, ci), (int)meta(k))
#define L(key, n) (snprintf(name, sizeof name, "attn%d_%s", ci, key), tload(name, n))
        attn_shape s = {M("B"), M("Tq"), M("Tk"), M("NH"), M("KVH"), M("HS"), M("q_off"), 0, NULL, 0, 0, 0, NULL};
        s.kv_bstride = (int64_t)s.Tk * s.KVH * s.HS;
        size_t nq = (size_t)s.B * s.Tq * s.NH * s.HS, nkv = (size_t)s.B * s.kv_bstride;
        size_t nl = (size_t)s.B * s.NH * s.Tq;
        int32_t *seg = L("segids", (size_t)s.B * s.Tk);
        if (M("seg")) s.seg = seg;
        float *q = L("q", nq), *kk = L("k", nkv), *v = L("v", nkv), *dout = L("dout", nq);
        float *ot = L("out", nq), *lt = L("lse", nl), *dqt = L("dq", nq), *dkt = L("dk", nkv), *dvt = L("dv", nkv);
        float *o = xmalloc(nq * 4), *l = xmalloc(nl * 4), *dq = xmalloc(nq * 4), *dk = xmalloc(nkv * 4);
        float *dv = xmalloc(nkv * 4), *scr = xmalloc(kern_attn_bwd_scratch(&s) * 4);
        kern_attn_fwd(o, l, q, kk, v, &s, scr);
        kern_attn_bwd(dq, dk, dv, dout, o, l, q, kk, v, &s, scr);
        char lab[64];
        snprintf(lab, sizeof lab, "torch attn%d out", ci); check_tensor(lab, o, ot, nq, 1e-5);
        snprintf(lab, sizeof lab, "torch attn%d lse", ci); check_tensor(lab, l, lt, nl, 1e-5);
        snprintf(lab, sizeof lab, "torch attn%d dq", ci); check_tensor(lab, dq, dqt, nq, 1e-5);
        snprintf(lab, sizeof lab, "torch attn%d dk", ci); check_tensor(lab, dk, dkt, nkv, 1e-5);
        snprintf(lab, sizeof lab, "torch attn%d dv", ci); check_tensor(lab, dv, dvt, nkv, 1e-5);
#undef M
#undef L
        free(seg); free(q); free(kk); free(v); free(dout); free(ot); free(lt); free(dqt); free(dkt); free(dvt);
        free(o); free(l); free(dq); free(dk); free(dv); free(scr);
    }
    /* SwiGLU */
    {
        int64_t n = (int64_t)meta("swiglu_n");
        float *g = tload("swiglu_g", n), *u = tload("swiglu_u", n), *dh = tload("swiglu_dh", n);
        float *ht = tload("swiglu_h", n), *dgt = tload("swiglu_dg", n), *dut = tload("swiglu_du", n);
        float *h = xmalloc(n * 4), *dg = xmalloc(n * 4), *du = xmalloc(n * 4);
        kern_swiglu_fwd(h, g, u, n);
        kern_swiglu_bwd(dg, du, dh, g, u, n);
        check_tensor("torch swiglu h", h, ht, n, 1e-5);
        check_tensor("torch swiglu dg", dg, dgt, n, 1e-5);
        check_tensor("torch swiglu du", du, dut, n, 1e-5);
        free(g); free(u); free(dh); free(ht); free(dgt); free(dut); free(h); free(dg); free(du);
    }
    /* cross-entropy */
    {
        int64_t N = (int64_t)meta("xent_N");
        int V = (int)meta("xent_V");
        float *lg = tload("xent_logits", N * V), *nllt = tload("xent_nll", N), *dt = tload("xent_dlogits", N * V);
        int32_t *tg = tload("xent_targets", N);
        float *nll = xmalloc(N * 4), *d = xmalloc(N * V * 4);
        double sum = kern_xent(d, nll, lg, tg, N, V, (float)meta("xent_scale"));
        double want = meta("xent_sum");
        CHECK_MSG(fabs(sum - want) <= 1e-5 * fabs(want), "torch xent sum %.9g vs %.9g", sum, want);
        check_tensor("torch xent nll", nll, nllt, N, 1e-5);
        check_tensor("torch xent dlogits", d, dt, N * V, 1e-5);
        free(lg); free(nllt); free(dt); free(tg); free(nll); free(d);
    }
    /* AdamW: torch.optim.AdamW, 3 steps */
    {
        int64_t n = (int64_t)meta("adamw_n");
        int steps = (int)meta("adamw_steps");
        float *p = tload("adamw_p0", n), *gr = tload("adamw_grads", n * steps);
        float *pt = tload("adamw_p", n), *mt = tload("adamw_m", n), *vt = tload("adamw_v", n);
        float *m = xmalloc(n * 4), *v = xmalloc(n * 4);
        memset(m, 0, n * 4);
        memset(v, 0, n * 4);
        for (int t = 1; t <= steps; t++) kern_adamw(p, gr + (t - 1) * n, m, v, n, 1e-3, 0.9, 0.999, 1e-8, 0.01, t);
        check_tensor("torch adamw p", p, pt, n, 1e-6);
        check_tensor("torch adamw m", m, mt, n, 1e-6);
        check_tensor("torch adamw v", v, vt, n, 1e-6);
        free(p); free(gr); free(pt); free(mt); free(vt); free(m); free(v);
    }
    kern_shutdown();
    return check_done();
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--torch")) return torch_mode(argv[2]);
    (void)argc;
    kern_init(2);
    test_rmsnorm();
    test_rope();
    test_swiglu();
    test_attention();
    test_attention_scratch_shrinks();
    test_attention_kvcache();
    test_attention_decode_unit();
    test_xent();
    test_adamw();
    test_threads();
    kern_shutdown();
    int rc = check_done();
    return rerun_lower_levels(argv[0]) ? 1 : rc;
}
