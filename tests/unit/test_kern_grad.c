/* Finite-difference gradient checks of each backward kernel on its own.
 *
 * For an op y = f(x) and a fixed random R, the loss L = Σ y·R has
 * dL/dx = f's backward applied to dy = R. The numerical side is computed in
 * double: each op's forward is re-implemented here in double, and central
 * differences (h = 1e-4) are taken on it, so the numerical gradient is good
 * to ~1e-8 and the float kernels are held to ~1e-4 relative. A sample of
 * coordinates per tensor is checked. */
#include "check.h"
#include "kern_test_util.h"

#include "kern/kern.h"

#define FD_H 1e-4
#define FD_SAMPLES 48

typedef double (*loss_fn)(void *ctx);

static void fd_check(const char *label, loss_fn f, void *ctx, double *param, size_t n, const float *grad,
                     trng *r, double rtol)
{
    double maxdiff = 0, maxg = 0;
    size_t at = 0;
    double num_at = 0;
    int samples = n < FD_SAMPLES ? (int)n : FD_SAMPLES;
    for (int s = 0; s < samples; s++) {
        size_t i = n <= FD_SAMPLES ? (size_t)s : (size_t)(trng_u64(r) % n);
        double save = param[i];
        param[i] = save + FD_H;
        double lp = f(ctx);
        param[i] = save - FD_H;
        double lm = f(ctx);
        param[i] = save;
        double num = (lp - lm) / (2 * FD_H);
        double d = fabs(num - grad[i]);
        if (!(d <= maxdiff)) { maxdiff = d; at = i; num_at = num; }
        if (fabs(num) > maxg) maxg = fabs(num);
    }
    CHECK_MSG(maxdiff <= rtol * maxg + 1e-6, "%s: max|num-ana| %.3e at %zu (num %.9g ana %.9g), max|num| %.3e",
              label, maxdiff, at, num_at, (double)grad[at], maxg);
}

static double *to_d(const float *x, size_t n)
{
    double *d = xmalloc(n * 8);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

/* ---- RMSNorm ------------------------------------------------------------------------ */

typedef struct rms_ctx { double *x, *w, *R; int64_t N; int C; double eps; } rms_ctx;

static double rms_loss(void *vc)
{
    rms_ctx *c = vc;
    double L = 0;
    for (int64_t n = 0; n < c->N; n++) {
        double ss = 0;
        for (int i = 0; i < c->C; i++) ss += c->x[n * c->C + i] * c->x[n * c->C + i];
        double r = 1 / sqrt(ss / c->C + c->eps);
        for (int i = 0; i < c->C; i++) L += c->x[n * c->C + i] * r * c->w[i] * c->R[n * c->C + i];
    }
    return L;
}

static void test_rmsnorm_grad(trng *r)
{
    const int64_t N = 5;
    const int C = 48;
    float *x = xmalloc(N * C * 4), *w = xmalloc(C * 4), *R = xmalloc(N * C * 4), *y = xmalloc(N * C * 4);
    float *rs = xmalloc(N * 4), *dx = xmalloc(N * C * 4), *dw = xmalloc(C * 4);
    fill_normal(r, x, N * C, 1.f);
    fill_normal(r, w, C, 1.f);
    fill_normal(r, R, N * C, 1.f);
    memset(dw, 0, C * 4);
    kern_rmsnorm_fwd(y, rs, x, w, N, C, 1e-5f);
    kern_rmsnorm_bwd(dx, dw, R, x, w, rs, N, C);
    rms_ctx c = {to_d(x, N * C), to_d(w, C), to_d(R, N * C), N, C, 1e-5};
    fd_check("rmsnorm dx", rms_loss, &c, c.x, N * C, dx, r, 1e-4);
    fd_check("rmsnorm dw", rms_loss, &c, c.w, C, dw, r, 1e-4);
    free(c.x); free(c.w); free(c.R);
    free(x); free(w); free(R); free(y); free(rs); free(dx); free(dw);
}

/* ---- RoPE -------------------------------------------------------------------------- */

typedef struct rope_ctx { double *x, *R; const int32_t *pos; const double *inv; int64_t N; int H, HS; } rope_ctx;

static double rope_loss(void *vc)
{
    rope_ctx *c = vc;
    double L = 0;
    int half = c->HS / 2;
    for (int64_t n = 0; n < c->N; n++)
        for (int h = 0; h < c->H; h++)
            for (int i = 0; i < half; i++) {
                size_t o = ((size_t)n * c->H + h) * c->HS;
                double a = c->pos[n] * c->inv[i], cs = cos(a), sn = sin(a);
                double x1 = c->x[o + i], x2 = c->x[o + i + half];
                L += (x1 * cs - x2 * sn) * c->R[o + i] + (x2 * cs + x1 * sn) * c->R[o + i + half];
            }
    return L;
}

static void test_rope_grad(trng *r)
{
    const int64_t N = 6;
    const int H = 2, HS = 16;
    int32_t pos[6] = {0, 3, 17, 100, 1000, 5};
    double inv[8];
    for (int i = 0; i < HS / 2; i++) inv[i] = 1.0 / pow(10000.0, 2.0 * i / HS);
    float *x = xmalloc(N * H * HS * 4), *R = xmalloc(N * H * HS * 4);
    fill_normal(r, x, N * H * HS, 1.f);
    fill_normal(r, R, N * H * HS, 1.f);
    float *g = xmalloc(N * H * HS * 4);
    memcpy(g, R, N * H * HS * 4);
    kern_rope_bwd(g, pos, N, H, HS, inv);
    rope_ctx c = {to_d(x, N * H * HS), to_d(R, N * H * HS), pos, inv, N, H, HS};
    fd_check("rope dx", rope_loss, &c, c.x, N * H * HS, g, r, 1e-4);
    free(c.x); free(c.R); free(x); free(R); free(g);
}

/* ---- SwiGLU ------------------------------------------------------------------------ */

typedef struct swiglu_ctx { double *g, *u, *R; int64_t n; } swiglu_ctx;

static double swiglu_loss(void *vc)
{
    swiglu_ctx *c = vc;
    double L = 0;
    for (int64_t i = 0; i < c->n; i++) L += c->g[i] / (1 + exp(-c->g[i])) * c->u[i] * c->R[i];
    return L;
}

static void test_swiglu_grad(trng *r)
{
    const int64_t n = 300;
    float *g = xmalloc(n * 4), *u = xmalloc(n * 4), *R = xmalloc(n * 4), *dg = xmalloc(n * 4), *du = xmalloc(n * 4);
    fill_normal(r, g, n, 3.f);
    fill_normal(r, u, n, 1.f);
    fill_normal(r, R, n, 1.f);
    kern_swiglu_bwd(dg, du, R, g, u, n);
    swiglu_ctx c = {to_d(g, n), to_d(u, n), to_d(R, n), n};
    fd_check("swiglu dg", swiglu_loss, &c, c.g, n, dg, r, 1e-4);
    fd_check("swiglu du", swiglu_loss, &c, c.u, n, du, r, 1e-4);
    free(c.g); free(c.u); free(c.R); free(g); free(u); free(R); free(dg); free(du);
}

/* ---- attention ------------------------------------------------------------------------ */

typedef struct attn_ctx { double *q, *k, *v, *R; attn_shape s; } attn_ctx;

static double attn_loss(void *vc)
{
    attn_ctx *c = vc;
    const attn_shape *s = &c->s;
    double L = 0, p[256];
    double scale = 1 / sqrt((double)s->HS);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->NH; h++) {
            int g = h / (s->NH / s->KVH);
            for (int i = 0; i < s->Tq; i++) {
                int pos = s->q_off + i;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < s->Tk; j++) {
                    int vis = j <= pos && (!s->seg || s->seg[b * s->Tk + j] == s->seg[b * s->Tk + pos]) &&
                              (!s->window || pos - j < s->window);
                    if (!vis) { p[j] = -INFINITY; continue; }
                    double a = 0;
                    for (int d = 0; d < s->HS; d++)
                        a += c->q[(((size_t)b * s->Tq + i) * s->NH + h) * s->HS + d] *
                             c->k[(size_t)b * s->kv_bstride + ((size_t)j * s->KVH + g) * s->HS + d];
                    p[j] = a * scale;
                    if (p[j] > mx) mx = p[j];
                }
                for (int j = 0; j < s->Tk; j++) { p[j] = p[j] == -INFINITY ? 0 : exp(p[j] - mx); sum += p[j]; }
                for (int d = 0; d < s->HS; d++) {
                    double o = 0;
                    for (int j = 0; j < s->Tk; j++) o += p[j] * c->v[(size_t)b * s->kv_bstride + ((size_t)j * s->KVH + g) * s->HS + d];
                    L += o / sum * c->R[(((size_t)b * s->Tq + i) * s->NH + h) * s->HS + d];
                }
            }
        }
    return L;
}

static void test_attn_grad(trng *r)
{
    const int32_t seg[2 * 24] = {0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3,
                                 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    /* B=2, Tq=10 queries at positions 14..23 of Tk=24 keys, GQA 4/2, segments */
    /* B=2, Tq=10 … as above with a sliding window of 6, segments too */
    attn_shape cases[4] = {
        {2, 10, 24, 4, 2, 8, 14, (int64_t)26 * 2 * 8, seg, 0, 0, 0, NULL},
        {1, 24, 24, 2, 1, 16, 0, (int64_t)24 * 1 * 16, NULL, 0, 0, 0, NULL},
        {2, 10, 24, 4, 2, 8, 14, (int64_t)26 * 2 * 8, seg, 6, 0, 0, NULL},
        {1, 24, 24, 2, 1, 16, 0, (int64_t)24 * 1 * 16, NULL, 5, 0, 0, NULL},
    };
    for (int ci = 0; ci < 4; ci++) {
        attn_shape s = cases[ci];
        size_t nq = (size_t)s.B * s.Tq * s.NH * s.HS, nkv = (size_t)s.B * s.kv_bstride;
        float *q = xmalloc(nq * 4), *k = xmalloc(nkv * 4), *v = xmalloc(nkv * 4), *R = xmalloc(nq * 4);
        float *out = xmalloc(nq * 4), *lse = xmalloc((size_t)s.B * s.NH * s.Tq * 4);
        float *dq = xmalloc(nq * 4), *dk = xmalloc(nkv * 4), *dv = xmalloc(nkv * 4);
        float *scr = xmalloc(kern_attn_bwd_scratch(&s) * 4);
        fill_normal(r, q, nq, 1.f);
        fill_normal(r, k, nkv, 1.f);
        fill_normal(r, v, nkv, 1.f);
        fill_normal(r, R, nq, 1.f);
        kern_attn_fwd(out, lse, q, k, v, &s, scr);
        kern_attn_bwd(dq, dk, dv, R, out, lse, q, k, v, &s, scr);
        attn_ctx c = {to_d(q, nq), to_d(k, nkv), to_d(v, nkv), to_d(R, nq), s};
        char label[64];
        snprintf(label, sizeof label, "attn dq case %d", ci);
        fd_check(label, attn_loss, &c, c.q, nq, dq, r, 1e-4);
        /* dk/dv only inside [0, Tk) of each batch row (the cache tail is unused) */
        for (int b = 0; b < s.B; b++) {
            size_t off = (size_t)b * s.kv_bstride, n = (size_t)s.Tk * s.KVH * s.HS;
            snprintf(label, sizeof label, "attn dk case %d b=%d", ci, b);
            fd_check(label, attn_loss, &c, c.k + off, n, dk + off, r, 1e-4);
            snprintf(label, sizeof label, "attn dv case %d b=%d", ci, b);
            fd_check(label, attn_loss, &c, c.v + off, n, dv + off, r, 1e-4);
        }
        free(c.q); free(c.k); free(c.v); free(c.R);
        free(q); free(k); free(v); free(R); free(out); free(lse); free(dq); free(dk); free(dv); free(scr);
    }
}

/* ---- cross-entropy -------------------------------------------------------------------- */

typedef struct xent_ctx { double *lg; const int32_t *tg; int64_t N; int V; double scale; } xent_ctx;

static double xent_loss(void *vc)
{
    xent_ctx *c = vc;
    double L = 0;
    for (int64_t n = 0; n < c->N; n++) {
        if (c->tg[n] < 0) continue;
        const double *row = c->lg + n * c->V;
        double mx = -INFINITY, sum = 0;
        for (int i = 0; i < c->V; i++) if (row[i] > mx) mx = row[i];
        for (int i = 0; i < c->V; i++) sum += exp(row[i] - mx);
        L += (mx + log(sum) - row[c->tg[n]]) * c->scale;
    }
    return L;
}

static void test_xent_grad(trng *r)
{
    const int64_t N = 6;
    const int V = 37;
    int32_t tg[6] = {3, -1, 36, 0, -1, 17};
    float *lg = xmalloc(N * V * 4), *d = xmalloc(N * V * 4), *nll = xmalloc(N * 4);
    fill_normal(r, lg, N * V, 2.f);
    kern_xent(d, nll, lg, tg, N, V, 0.25f);
    xent_ctx c = {to_d(lg, N * V), tg, N, V, 0.25};
    fd_check("xent dlogits", xent_loss, &c, c.lg, N * V, d, r, 1e-4);
    free(c.lg); free(lg); free(d); free(nll);
}

/* ---- matmul: input and weight gradients ---------------------------------------------------- */

typedef struct mm_ctx { double *x, *w, *R; int64_t N, O, I; } mm_ctx;

static double mm_loss(void *vc)
{
    mm_ctx *c = vc;
    double L = 0;
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t o = 0; o < c->O; o++) {
            double y = 0;
            for (int64_t i = 0; i < c->I; i++) y += c->x[n * c->I + i] * c->w[o * c->I + i];
            L += y * c->R[n * c->O + o];
        }
    return L;
}

static void test_matmul_grad(trng *r)
{
    const int64_t N = 7, O = 19, I = 256;
    const dtype types[] = {DT_F32, DT_Q8_0, DT_Q4_K};
    for (int t = 0; t < 3; t++) {
        size_t rb = dtype_row_bytes(types[t], I);
        float *wf = xmalloc(O * I * 4), *x = xmalloc(N * I * 4), *R = xmalloc(N * O * 4);
        float *dx = xmalloc(N * I * 4), *dw = xmalloc(O * I * 4), *wdq = xmalloc(O * I * 4);
        uint8_t *wq = xmalloc(rb * O);
        fill_normal(r, wf, O * I, 0.5f);
        fill_normal(r, x, N * I, 1.f);
        fill_normal(r, R, N * O, 1.f);
        for (int64_t o = 0; o < O; o++) kern_quant_row(types[t], wf + o * I, wq + o * rb, I);
        for (int64_t o = 0; o < O; o++) kern_dequant_row(types[t], wq + o * rb, wdq + o * I, I);
        wmat W = {types[t], O, I, rb, wq};
        memset(dx, 0, N * I * 4);
        kern_matmul_dx(dx, R, &W, N);
        memset(dw, 0, O * I * 4);
        kern_sgemm(1, 0, O, I, N, 1.f, R, O, x, I, 0.f, dw, I);      /* dW = Rᵀ·x */
        mm_ctx c = {to_d(x, N * I), to_d(wdq, O * I), to_d(R, N * O), N, O, I};
        char label[64];
        snprintf(label, sizeof label, "matmul dx (%s weight)", dtype_name(types[t]));
        fd_check(label, mm_loss, &c, c.x, N * I, dx, r, 1e-4);
        snprintf(label, sizeof label, "matmul dW (%s weight)", dtype_name(types[t]));
        fd_check(label, mm_loss, &c, c.w, O * I, dw, r, 1e-4);
        free(c.x); free(c.w); free(c.R);
        free(wf); free(x); free(R); free(dx); free(dw); free(wdq); free(wq);
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    trng r = {2024};
    kern_init(2);
    test_rmsnorm_grad(&r);
    test_rope_grad(&r);
    test_swiglu_grad(&r);
    test_attn_grad(&r);
    test_xent_grad(&r);
    test_matmul_grad(&r);
    kern_shutdown();
    int rc = check_done();
    return rerun_lower_levels(argv[0]) ? 1 : rc;
}
