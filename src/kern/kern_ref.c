/* kern_ref — plain-loop twins of the tuned kernels, the ground truth the
 * tests compare against. Straightforward loops, sums in double, full score
 * matrices; slow by design. They allocate (tests only). */
#include "kern/kern_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* y[N,O] = x[N,I]·W[O,I]ᵀ (+bias) (+y) */
void kern_matmul_ref(float *y, const float *x, const wmat *W, const float *bias, int64_t N, int accumulate)
{
    const int64_t O = W->rows, I = W->cols;
    float *row = malloc((size_t)(I > 0 ? I : 1) * sizeof(float));
    if (!row) return;
    for (int64_t o = 0; o < O; o++) {
        dequant_row_scalar(W->type, (const uint8_t *)W->data + (size_t)o * W->row_bytes, row, I);
        for (int64_t n = 0; n < N; n++) {
            double acc = 0;
            for (int64_t i = 0; i < I; i++) acc += (double)x[n * I + i] * row[i];
            if (bias) acc += bias[o];
            if (accumulate) acc += y[n * O + o];
            y[n * O + o] = (float)acc;
        }
    }
    free(row);
}

/* dx[N,I] += dy[N,O]·W[O,I] */
void kern_matmul_dx_ref(float *dx, const float *dy, const wmat *W, int64_t N)
{
    const int64_t O = W->rows, I = W->cols;
    float *w = malloc((size_t)(O * I > 0 ? O * I : 1) * sizeof(float));
    if (!w) return;
    for (int64_t o = 0; o < O; o++)
        dequant_row_scalar(W->type, (const uint8_t *)W->data + (size_t)o * W->row_bytes, w + o * I, I);
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < I; i++) {
            double acc = 0;
            for (int64_t o = 0; o < O; o++) acc += (double)dy[n * O + o] * w[o * I + i];
            dx[n * I + i] = (float)(dx[n * I + i] + acc);
        }
    free(w);
}

void kern_sgemm_ref(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                    const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++) {
                double a = ta ? A[k * lda + i] : A[i * lda + k];
                double b = tb ? B[j * ldb + k] : B[k * ldb + j];
                acc += a * b;
            }
            double c = beta == 0.f ? 0.0 : (double)beta * C[i * ldc + j];
            C[i * ldc + j] = (float)(alpha * acc + c);
        }
}

void kern_rmsnorm_fwd_ref(float *y, float *rstd, const float *x, const float *w, int64_t N, int C, float eps)
{
    for (int64_t n = 0; n < N; n++) {
        double ss = 0;
        for (int c = 0; c < C; c++) ss += (double)x[n * C + c] * x[n * C + c];
        double r = 1.0 / sqrt(ss / C + eps);
        rstd[n] = (float)r;
        for (int c = 0; c < C; c++) y[n * C + c] = (float)(x[n * C + c] * r * w[c]);
    }
}

void kern_rmsnorm_bwd_ref(float *dx, float *dw, const float *dy, const float *x, const float *w,
                          const float *rstd, int64_t N, int C)
{
    for (int64_t n = 0; n < N; n++) {
        double r = rstd[n], dot = 0;
        for (int c = 0; c < C; c++) dot += (double)dy[n * C + c] * w[c] * x[n * C + c];
        for (int c = 0; c < C; c++)
            dx[n * C + c] = (float)(r * w[c] * dy[n * C + c] - r * r * r / C * dot * x[n * C + c]);
    }
    if (dw)
        for (int c = 0; c < C; c++) {
            double acc = 0;
            for (int64_t n = 0; n < N; n++) acc += (double)dy[n * C + c] * x[n * C + c] * rstd[n];
            dw[c] = (float)(dw[c] + acc);
        }
}

void kern_swiglu_fwd_ref(float *h, const float *g, const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++) h[i] = (float)((double)g[i] / (1.0 + exp(-(double)g[i])) * u[i]);
}

void kern_swiglu_bwd_ref(float *dg, float *du, const float *dh, const float *g, const float *u, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        double s = 1.0 / (1.0 + exp(-(double)g[i]));
        du[i] = (float)(dh[i] * g[i] * s);
        dg[i] = (float)(dh[i] * (double)u[i] * s * (1.0 + g[i] * (1.0 - s)));
    }
}

/* visible(i, j): key j seen by query i (position q_off + i) */
static int ref_visible(const attn_shape *s, int b, int i, int j)
{
    int pos = s->q_off + i;
    int in_prefix = s->prefix && pos < s->prefix[b] && j < s->prefix[b];   /* paligemma's prefix-LM */
    if (j > pos && !in_prefix) return 0;
    if (s->seg && s->seg[(int64_t)b * s->Tk + j] != s->seg[(int64_t)b * s->Tk + pos]) return 0;
    if (s->window > 0 && pos - j >= s->window) return 0;
    return 1;
}

#define QI(b, i, h, d) ((((int64_t)(b) * s->Tq + (i)) * s->NH + (h)) * s->HS + (d))
#define KI(b, j, g, d) ((int64_t)(b) * s->kv_bstride + ((int64_t)(j) * s->KVH + (g)) * s->HS + (d))

void kern_attn_fwd_ref(float *out, float *lse, const float *q, const float *k, const float *v, const attn_shape *s)
{
    double *p = malloc((size_t)s->Tk * sizeof(double));
    if (!p) return;
    double scale = 1.0 / sqrt((double)s->HS);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->NH; h++) {
            int g = h / (s->NH / s->KVH);
            for (int i = 0; i < s->Tq; i++) {
                double mx = -INFINITY;
                for (int j = 0; j < s->Tk; j++) {
                    if (!ref_visible(s, b, i, j)) { p[j] = -INFINITY; continue; }
                    double acc = 0;
                    for (int d = 0; d < s->HS; d++) acc += (double)q[QI(b, i, h, d)] * k[KI(b, j, g, d)];
                    p[j] = acc * scale;
                    if (p[j] > mx) mx = p[j];
                }
                double sum = 0;
                for (int j = 0; j < s->Tk; j++) { p[j] = p[j] == -INFINITY ? 0 : exp(p[j] - mx); sum += p[j]; }
                for (int d = 0; d < s->HS; d++) {
                    double acc = 0;
                    for (int j = 0; j < s->Tk; j++) acc += p[j] * v[KI(b, j, g, d)];
                    out[QI(b, i, h, d)] = (float)(acc / sum);
                }
                if (lse) lse[((int64_t)b * s->NH + h) * s->Tq + i] = (float)(mx + log(sum));
            }
        }
    free(p);
}

void kern_attn_bwd_ref(float *dq, float *dk, float *dv, const float *dout, const float *q, const float *k,
                       const float *v, const attn_shape *s)
{
    const int64_t kvn = (int64_t)s->B * s->kv_bstride;
    double *p = malloc((size_t)s->Tk * sizeof(double)), *dp = malloc((size_t)s->Tk * sizeof(double));
    double *gk = calloc((size_t)kvn, sizeof(double)), *gv = calloc((size_t)kvn, sizeof(double));
    if (!p || !dp || !gk || !gv) goto done;
    double scale = 1.0 / sqrt((double)s->HS);
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->NH; h++) {
            int g = h / (s->NH / s->KVH);
            for (int i = 0; i < s->Tq; i++) {
                double mx = -INFINITY;
                for (int j = 0; j < s->Tk; j++) {
                    if (!ref_visible(s, b, i, j)) { p[j] = -INFINITY; continue; }
                    double acc = 0;
                    for (int d = 0; d < s->HS; d++) acc += (double)q[QI(b, i, h, d)] * k[KI(b, j, g, d)];
                    p[j] = acc * scale;
                    if (p[j] > mx) mx = p[j];
                }
                double sum = 0;
                for (int j = 0; j < s->Tk; j++) { p[j] = p[j] == -INFINITY ? 0 : exp(p[j] - mx); sum += p[j]; }
                double D = 0;
                for (int j = 0; j < s->Tk; j++) {
                    p[j] /= sum;
                    double acc = 0;
                    for (int d = 0; d < s->HS; d++) acc += (double)dout[QI(b, i, h, d)] * v[KI(b, j, g, d)];
                    dp[j] = acc;
                    D += p[j] * acc;
                }
                for (int d = 0; d < s->HS; d++) {
                    double acc = 0;
                    for (int j = 0; j < s->Tk; j++) acc += p[j] * (dp[j] - D) * k[KI(b, j, g, d)];
                    dq[QI(b, i, h, d)] = (float)(acc * scale);
                }
                for (int j = 0; j < s->Tk; j++) {
                    double ds = p[j] * (dp[j] - D) * scale;
                    for (int d = 0; d < s->HS; d++) {
                        gk[KI(b, j, g, d)] += ds * q[QI(b, i, h, d)];
                        gv[KI(b, j, g, d)] += p[j] * dout[QI(b, i, h, d)];
                    }
                }
            }
        }
    for (int b = 0; b < s->B; b++)
        for (int j = 0; j < s->Tk; j++)
            for (int g = 0; g < s->KVH; g++)
                for (int d = 0; d < s->HS; d++) {
                    dk[KI(b, j, g, d)] = (float)gk[KI(b, j, g, d)];
                    dv[KI(b, j, g, d)] = (float)gv[KI(b, j, g, d)];
                }
done:
    free(p);
    free(dp);
    free(gk);
    free(gv);
}

double kern_xent_ref(float *dlogits, float *nll, const float *logits, const int32_t *targets, int64_t N, int V,
                     float grad_scale)
{
    double total = 0;
    for (int64_t n = 0; n < N; n++) {
        const float *row = logits + n * V;
        int t = targets[n];
        if (t < 0 || t >= V) {
            nll[n] = 0;
            if (dlogits) for (int i = 0; i < V; i++) dlogits[n * V + i] = 0;
            continue;
        }
        double mx = -INFINITY, sum = 0;
        for (int i = 0; i < V; i++) if (row[i] > mx) mx = row[i];
        for (int i = 0; i < V; i++) sum += exp(row[i] - mx);
        double l = mx + log(sum) - row[t];
        nll[n] = (float)l;
        total += l;
        if (dlogits) {
            double xt = row[t];
            (void)xt;
            for (int i = 0; i < V; i++) {
                double pr = exp(row[i] - mx) / sum;
                dlogits[n * V + i] = (float)((pr - (i == t)) * grad_scale);
            }
        }
    }
    return total;
}

double kern_head_xent_ref(float *dx, float *nll, const float *x, const wmat *W, const int32_t *targets,
                          int64_t N, float grad_scale)
{
    const int64_t V = W->rows, C = W->cols;
    float *lg = malloc((size_t)N * (size_t)V * sizeof(float));
    if (!lg) return NAN;
    kern_matmul_ref(lg, x, W, NULL, N, 0);
    double tot = kern_xent_ref(dx ? lg : NULL, nll, lg, targets, N, (int)V, grad_scale);
    if (dx) {
        memset(dx, 0, (size_t)N * (size_t)C * sizeof(float));
        kern_matmul_dx_ref(dx, lg, W, N);
    }
    free(lg);
    return tot;
}

/* ---- 8-bit AdamW ------------------------------------------------------------ */

uint8_t kern_q8_encode_ref(const float *map, int is_signed, float x)
{
    int best = 0;
    double bd = INFINITY;
    for (int c = 0; c < 256; c++) {
        double d = fabs((double)x - (double)map[c]);
        if (d < bd) { bd = d; best = c; }
    }
    if (is_signed && x < 0.0f && map[best] >= 0.0f) best--;
    return (uint8_t)best;
}

void kern_adamw8_ref(float *p, const float *g, uint8_t *c1, uint8_t *c2, float *absmax1, float *absmax2, int64_t n,
                     const kern_adamw_bnb *s)
{
    const float *q1 = kern_q8_map(1), *q2 = kern_q8_map(0);
    float *m = malloc((size_t)(n > 0 ? n : 1) * sizeof(float)), *v = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!m || !v) { free(m); free(v); return; }
    int64_t nb = (n + KERN_Q8_BLOCK - 1) / KERN_Q8_BLOCK;
    for (int64_t i = 0; i < n; i++) {
        int64_t b = i / KERN_Q8_BLOCK;
        m[i] = q1[c1[i]] * absmax1[b] * s->b1 + s->omb1 * g[i];
        v[i] = q2[c2[i]] * absmax2[b] * s->b2 + s->omb2 * g[i] * g[i];
        p[i] = (p[i] + s->step_size * (m[i] / (sqrtf(v[i]) + s->eps_c2))) * s->decay;
    }
    for (int64_t b = 0; b < nb; b++) {
        int64_t o = b * KERN_Q8_BLOCK, e = o + KERN_Q8_BLOCK < n ? o + KERN_Q8_BLOCK : n;
        float a1 = 0, a2 = 0;
        for (int64_t i = o; i < e; i++) {
            if (fabsf(m[i]) > a1) a1 = fabsf(m[i]);
            if (fabsf(v[i]) > a2) a2 = fabsf(v[i]);
        }
        absmax1[b] = a1;
        absmax2[b] = a2;
        for (int64_t i = o; i < e; i++) {
            c1[i] = a1 > 0 ? kern_q8_encode_ref(q1, 1, m[i] / a1) : 127;
            c2[i] = a2 > 0 ? kern_q8_encode_ref(q2, 0, v[i] / a2) : 0;
        }
    }
    free(m);
    free(v);
}

void kern_round_bf16_ref(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) x[i] = bf16_to_f32(f32_to_bf16(x[i]));
}

static double rb(float v) { return (double)bf16_to_f32(f32_to_bf16(v)); }

void kern_sgemm_bf16_ref(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                         const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += rb(ta ? A[k * lda + i] : A[i * lda + k]) * rb(tb ? B[j * ldb + k] : B[k * ldb + j]);
            double c = beta == 0.f ? 0.0 : (double)beta * C[i * ldc + j];
            C[i * ldc + j] = (float)(alpha * acc + c);
        }
}

/* ---- bf16 attention products (attn_bf16.c's twins) ------------------------------ */

#include "kern/bf16_model.h"

/* out[o][j] (+)= Σ_p one VDPBF16PS lane of A[o·ao + p·ap] and B[p·ldb + j],
 * the pairs in order (bf16_model.h). */
void attn_dp_ref(float *out, int64_t ldo, const uint32_t *A, int64_t ao, int64_t ap, const uint32_t *B, int64_t ldb,
                 int np, int nout, int ncols, int acc)
{
    for (int o = 0; o < nout; o++)
        for (int j = 0; j < ncols; j++) {
            float c = acc ? out[o * ldo + j] : 0.f;
            for (int p = 0; p < np; p++) c = bf16m_vdp(c, A[o * ao + p * ap], B[(int64_t)p * ldb + j]);
            out[o * ldo + j] = c;
        }
}

void attn_bf16_rows_ref(uint32_t *dst, const float *src, int n, int npairs, float mul)
{
    for (int p = 0; p < npairs; p++) {
        uint32_t lo = 2 * p < n ? f32_to_bf16(src[2 * p] * mul) : 0;
        uint32_t hi = 2 * p + 1 < n ? f32_to_bf16(src[2 * p + 1] * mul) : 0;
        dst[p] = lo | hi << 16;
    }
}

void attn_bf16_zip_ref(uint32_t *dst, const float *r0, const float *r1, int n, int npad, float mul)
{
    for (int j = 0; j < npad; j++)
        dst[j] = j >= n ? 0
                        : (uint32_t)f32_to_bf16(r0[j] * mul) | (r1 ? (uint32_t)f32_to_bf16(r1[j] * mul) << 16 : 0);
}
