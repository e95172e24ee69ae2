/* ops — row and elementwise ops: RMSNorm, RoPE, SwiGLU, AdamW.
 * Rows are independent and split over threads; the one reduction across
 * rows (RMSNorm's weight gradient) runs per column, rows in order. */
#include "kern/kern_impl.h"

#include <math.h>
#include <string.h>

/* Work below this many elements runs on the calling thread. */
#define PAR_MIN 16384

/* ---- RMSNorm ------------------------------------------------------------------ */

typedef struct rms_job {
    float *y, *rstd, *dx, *dw;
    const float *x, *w, *dy, *rs;
    int C, add;
    int64_t N;
    float eps;
} rms_job;

/* Σ_c x²  (e == NULL) or Σ_c w·dy·x, in double, over 8 interleaved
 * partial sums (element c goes to sum c mod 8) added up in a fixed order:
 * no serial chain of double additions, the same result for any thread. */
static double dsum(const float *restrict w, const float *restrict dy, const float *restrict x, int C)
{
    double a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int c = 0;
    if (!w) {
        for (; c + 8 <= C; c += 8)
            for (int k = 0; k < 8; k++) a[k] += (double)x[c + k] * x[c + k];
        for (; c < C; c++) a[c & 7] += (double)x[c] * x[c];
    } else {
        for (; c + 8 <= C; c += 8)
            for (int k = 0; k < 8; k++) a[k] += (double)w[c + k] * dy[c + k] * x[c + k];
        for (; c < C; c++) a[c & 7] += (double)w[c] * dy[c] * x[c];
    }
    return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/* y = x·r·w (float, in this order: rms_apply_rows must give the same bits) */
static void scale_row(float *restrict y, const float *restrict x, const float *restrict w, float r, int C)
{
    for (int c = 0; c < C; c++) y[c] = x[c] * r * w[c];
}

/* y[N,C] = x·rsqrt(mean(x²) + eps)·w; the mean of squares in double. */
static void rms_fwd_rows(void *ctx, int64_t n0, int64_t n1)
{
    const rms_job *j = ctx;
    const int C = j->C;
    for (int64_t n = n0; n < n1; n++) {
        const float *x = j->x + n * C;
        double ss = dsum(NULL, NULL, x, C);
        float r = 1.0f / sqrtf((float)(ss / C) + j->eps);
        j->rstd[n] = r;
        scale_row(j->y + n * C, x, j->w, r, C);
    }
}

void kern_rmsnorm_fwd(float *y, float *rstd, const float *x, const float *w, int64_t N, int C, float eps)
{
    rms_job j = {.y = y, .rstd = rstd, .x = x, .w = w, .C = C, .eps = eps};
    if (N * C < PAR_MIN) rms_fwd_rows(&j, 0, N);
    else kern_parallel_for(N, rms_fwd_rows, &j);
}

/* y = x·r·w, the expression of rms_fwd_rows (same bits). */
static void rms_apply_rows(void *ctx, int64_t n0, int64_t n1)
{
    const rms_job *j = ctx;
    const int C = j->C;
    for (int64_t n = n0; n < n1; n++) scale_row(j->y + n * C, j->x + n * C, j->w, j->rs[n], C);
}

void kern_rmsnorm_apply(float *y, const float *x, const float *w, const float *rstd, int64_t N, int C)
{
    rms_job j = {.y = y, .x = x, .w = w, .rs = rstd, .C = C};
    if (N * C < PAR_MIN) rms_apply_rows(&j, 0, N);
    else kern_parallel_for(N, rms_apply_rows, &j);
}

/* dx = r·w∘dy − x·r³/C·Σ(w∘dy∘x), per row, in double. */
static void bwd_row(float *restrict dx, const float *restrict w, const float *restrict dy,
                    const float *restrict x, double r, double coef, int C, int add)
{
    if (add)
        for (int c = 0; c < C; c++) dx[c] += (float)(r * w[c] * dy[c] - coef * x[c]);
    else
        for (int c = 0; c < C; c++) dx[c] = (float)(r * w[c] * dy[c] - coef * x[c]);
}

/* One row of the input gradient: the plain loops, twin of
 * kern_rms_bwd_row_avx512 (ops_avx512.c), which gives the same bits. */
void kern_rms_bwd_row_ref(float *dx, const float *w, const float *dy, const float *x, double r, int C, int add)
{
    double dot = dsum(w, dy, x, C);
    double coef = r * r * r * dot / C;
    bwd_row(dx, w, dy, x, r, coef, C, add);
}

static void rms_bwd_rows(void *ctx, int64_t n0, int64_t n1)
{
    const rms_job *j = ctx;
    const int C = j->C;
#if defined(__x86_64__)
    const int v = cpu_level() >= CPU_AVX512;
#else
    const int v = 0;
#endif
    for (int64_t n = n0; n < n1; n++) {
        const float *x = j->x + n * C, *dy = j->dy + n * C;
#if defined(__x86_64__)
        if (v) {
            kern_rms_bwd_row_avx512(j->dx + n * C, j->w, dy, x, j->rs[n], C, j->add);
            continue;
        }
#endif
        (void)v;
        kern_rms_bwd_row_ref(j->dx + n * C, j->w, dy, x, j->rs[n], C, j->add);
    }
}

/* dw[c] += Σ_n dy·x·r for c in [c0, c1): rows in order, in double, in
 * column pieces that fit the thread's scratch. */
static void rms_dw_cols(void *ctx, int64_t c0, int64_t c1)
{
    const rms_job *j = ctx;
    double *acc = kern_scratch();
    const int64_t cap = (int64_t)(KERN_SCRATCH_BYTES / sizeof(double));
    for (int64_t p0 = c0; p0 < c1; p0 += cap) {
        const int64_t nc = c1 - p0 < cap ? c1 - p0 : cap;
        for (int64_t c = 0; c < nc; c++) acc[c] = 0;
        for (int64_t n = 0; n < j->N; n++) {
            const float *x = j->x + n * j->C + p0, *dy = j->dy + n * j->C + p0;
            double r = j->rs[n];
            for (int64_t c = 0; c < nc; c++) acc[c] += (double)dy[c] * x[c] * r;
        }
        for (int64_t c = 0; c < nc; c++) j->dw[p0 + c] += (float)acc[c];
    }
}

static void rms_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w,
                    const float *rstd, int64_t N, int C, int add)
{
    rms_job j = {.dx = dx, .dw = dw, .x = x, .w = w, .dy = dy, .rs = rstd, .C = C, .N = N, .add = add};
    int small = N * C < PAR_MIN;
    if (small) rms_bwd_rows(&j, 0, N);
    else kern_parallel_for(N, rms_bwd_rows, &j);
    if (!dw) return;
    if (small) rms_dw_cols(&j, 0, C);
    else kern_parallel_for(C, rms_dw_cols, &j);
}

void kern_rmsnorm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w,
                      const float *rstd, int64_t N, int C)
{
    rms_bwd(dx, dw, dy, x, w, rstd, N, C, 0);
}

void kern_rmsnorm_bwd_add(float *dx, float *dw, const float *dy, const float *x, const float *w,
                          const float *rstd, int64_t N, int C)
{
    rms_bwd(dx, dw, dy, x, w, rstd, N, C, 1);
}

/* ---- RoPE ----------------------------------------------------------------------- */

typedef struct rope_job {
    float *x;
    const int32_t *pos;
    const double *inv_freq;
    int H, HS;
    int sign;       /* +1 forward, -1 backward (rotate by -angle) */
} rope_job;

static void rope_rows(void *ctx, int64_t n0, int64_t n1)
{
    const rope_job *j = ctx;
    const int half = j->HS / 2;
    float cs[KERN_ROPE_MAX_HS / 2], sn[KERN_ROPE_MAX_HS / 2];
    for (int64_t n = n0; n < n1; n++) {
        for (int i = 0; i < half; i++) {
            double a = (double)j->pos[n] * j->inv_freq[i];
            cs[i] = (float)cos(a);
            sn[i] = (float)sin(a) * (float)j->sign;
        }
        float *row = j->x + n * (int64_t)j->H * j->HS;
        for (int h = 0; h < j->H; h++) {
            float *x1 = row + (int64_t)h * j->HS, *x2 = x1 + half;
            for (int i = 0; i < half; i++) {
                float a = x1[i], b = x2[i];
                x1[i] = a * cs[i] - b * sn[i];
                x2[i] = b * cs[i] + a * sn[i];
            }
        }
    }
}

static void rope_run(float *x, const int32_t *pos, int64_t N, int H, int HS, const double *inv_freq, int sign)
{
    if (HS <= 0 || HS % 2 || HS > KERN_ROPE_MAX_HS) return;
    rope_job j = {x, pos, inv_freq, H, HS, sign};
    if (N * H * HS < PAR_MIN) rope_rows(&j, 0, N);
    else kern_parallel_for(N, rope_rows, &j);
}

/* ---- RoPE with a table (cos/sin once per position, not per layer) ---- */

typedef struct ropet_job {
    float *x, *cs, *sn;
    const int32_t *pos;
    const double *inv_freq;
    int H, HS;
    int RD;         /* rotated dims at the head of each HS-wide head (partial rotary) */
    float sign;
} ropet_job;

static void rope_table_rows(void *ctx, int64_t n0, int64_t n1)
{
    const ropet_job *j = ctx;
    const int half = j->HS / 2;
    for (int64_t n = n0; n < n1; n++)
        for (int i = 0; i < half; i++) {
            double a = (double)j->pos[n] * j->inv_freq[i];
            j->cs[n * half + i] = (float)cos(a);
            j->sn[n * half + i] = (float)sin(a);
        }
}

/* rope_rows' arithmetic with the table: sin is negated exactly for the
 * backward, then the same two products and one add/sub per element. */
static void rot_half(float *restrict x1, float *restrict x2, const float *restrict cs, const float *restrict sn,
                     float sign, int half)
{
    for (int i = 0; i < half; i++) {
        float a = x1[i], b = x2[i], s = sn[i] * sign;
        x1[i] = a * cs[i] - b * s;
        x2[i] = b * cs[i] + a * s;
    }
}

static void rope_t_rows(void *ctx, int64_t n0, int64_t n1)
{
    const ropet_job *j = ctx;
    const int half = j->RD / 2;
    for (int64_t n = n0; n < n1; n++) {
        float *row = j->x + n * (int64_t)j->H * j->HS;
        for (int h = 0; h < j->H; h++)
            rot_half(row + (int64_t)h * j->HS, row + (int64_t)h * j->HS + half, j->cs + n * half, j->sn + n * half,
                     j->sign, half);
    }
}

void kern_rope_table(float *cs, float *sn, const int32_t *pos, int64_t N, int HS, const double *inv_freq)
{
    if (HS <= 0 || HS % 2 || HS > KERN_ROPE_MAX_HS) return;
    ropet_job j = {.cs = cs, .sn = sn, .pos = pos, .inv_freq = inv_freq, .HS = HS};
    if (N * HS < PAR_MIN) rope_table_rows(&j, 0, N);
    else kern_parallel_for(N, rope_table_rows, &j);
}

static void rope_t_run(float *x, const float *cs, const float *sn, int64_t N, int H, int HS, int RD, float sign)
{
    if (HS <= 0 || HS % 2 || HS > KERN_ROPE_MAX_HS || RD <= 0 || RD % 2 || RD > HS) return;
    ropet_job j = {.x = x, .cs = (float *)cs, .sn = (float *)sn, .H = H, .HS = HS, .RD = RD, .sign = sign};
    if (N * H * HS < PAR_MIN) rope_t_rows(&j, 0, N);
    else kern_parallel_for(N, rope_t_rows, &j);
}

void kern_rope_fwd_t(float *x, const float *cs, const float *sn, int64_t N, int H, int HS)
{
    rope_t_run(x, cs, sn, N, H, HS, HS, 1.0f);
}

void kern_rope_bwd_t(float *dx, const float *cs, const float *sn, int64_t N, int H, int HS)
{
    rope_t_run(dx, cs, sn, N, H, HS, HS, -1.0f);
}

void kern_rope_fwd_tp(float *x, const float *cs, const float *sn, int64_t N, int H, int HS, int RD)
{
    rope_t_run(x, cs, sn, N, H, HS, RD, 1.0f);
}

void kern_rope_bwd_tp(float *dx, const float *cs, const float *sn, int64_t N, int H, int HS, int RD)
{
    rope_t_run(dx, cs, sn, N, H, HS, RD, -1.0f);
}

void kern_rope_fwd(float *x, const int32_t *pos, int64_t N, int H, int HS, const double *inv_freq)
{
    rope_run(x, pos, N, H, HS, inv_freq, 1);
}

void kern_rope_bwd(float *dx, const int32_t *pos, int64_t N, int H, int HS, const double *inv_freq)
{
    rope_run(dx, pos, N, H, HS, inv_freq, -1);
}

/* ---- SwiGLU --------------------------------------------------------------------- */

typedef struct swiglu_job {
    float *h, *dg, *du;
    const float *g, *u, *dh;
    const kern_isa *isa;
} swiglu_job;

static void swiglu_fwd_range(void *ctx, int64_t b, int64_t e)
{
    const swiglu_job *j = ctx;
    j->isa->swiglu_fwd(j->h + b, j->g + b, j->u + b, e - b);
}

static void swiglu_bwd_range(void *ctx, int64_t b, int64_t e)
{
    const swiglu_job *j = ctx;
    j->isa->swiglu_bwd(j->dg + b, j->du + b, j->dh + b, j->g + b, j->u + b, e - b);
}

void kern_swiglu_fwd(float *h, const float *g, const float *u, int64_t n)
{
    swiglu_job j = {.h = h, .g = g, .u = u, .isa = kern_isa_get()};
    if (n < PAR_MIN) swiglu_fwd_range(&j, 0, n);
    else kern_parallel_for(n, swiglu_fwd_range, &j);
}

void kern_swiglu_bwd(float *dg, float *du, const float *dh, const float *g, const float *u, int64_t n)
{
    swiglu_job j = {.dg = dg, .du = du, .g = g, .u = u, .dh = dh, .isa = kern_isa_get()};
    if (n < PAR_MIN) swiglu_bwd_range(&j, 0, n);
    else kern_parallel_for(n, swiglu_bwd_range, &j);
}

/* ---- AdamW ---------------------------------------------------------------------- */

typedef struct adamw_job {
    float *p, *m, *v;
    const float *g;
    float decay, b1, omb1, b2, omb2, neg_step, bc2_sqrt, eps;
} adamw_job;

/* torch.optim.AdamW's single-tensor update, in its operation order:
 *   p *= 1 − lr·wd;  m = m·b1 + (1−b1)·g;  v = v·b2 + ((1−b2)·g)·g;
 *   p += (−lr/bc1)·m / (sqrt(v)/sqrt(bc2) + eps) */
static void adamw_range(void *ctx, int64_t b, int64_t e)
{
    const adamw_job *j = ctx;
    for (int64_t i = b; i < e; i++) {
        float g = j->g[i];
        float p = j->p[i] * j->decay;
        float m = j->m[i] * j->b1 + j->omb1 * g;
        float v = j->v[i] * j->b2 + j->omb2 * g * g;
        float denom = sqrtf(v) / j->bc2_sqrt + j->eps;
        j->p[i] = p + j->neg_step * m / denom;
        j->m[i] = m;
        j->v[i] = v;
    }
}

void kern_adamw(float *p, const float *g, float *m, float *v, int64_t n, double lr, double b1, double b2,
                double eps, double wd, int64_t t)
{
    if (t < 1) t = 1;
    double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
    adamw_job j = {
        .p = p, .m = m, .v = v, .g = g,
        .decay = (float)(1.0 - lr * wd),
        .b1 = (float)b1, .omb1 = (float)(1.0 - b1),
        .b2 = (float)b2, .omb2 = (float)(1.0 - b2),
        .neg_step = (float)(-lr / bc1),
        .bc2_sqrt = (float)sqrt(bc2), .eps = (float)eps,
    };
    if (n < PAR_MIN) adamw_range(&j, 0, n);
    else kern_parallel_for(n, adamw_range, &j);
}
