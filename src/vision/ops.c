/* ops — row operations shared by the vision towers (vision/ops.h). */
#include "vision/ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"

void vis_linear(float *y, const float *x, const float *W, const float *b, int64_t N, int64_t I, int64_t O)
{
    kern_sgemm(0, 1, N, O, I, 1.0f, x, I, W, I, 0.0f, y, O);
    if (b)
        for (int64_t n = 0; n < N; n++)
            for (int64_t o = 0; o < O; o++) y[n * O + o] += b[o];
}

void vis_layernorm(float *y, const float *x, const float *w, const float *b, int64_t N, int64_t C, float eps)
{
    for (int64_t n = 0; n < N; n++) {
        const float *r = x + n * C;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < C; i++) mean += r[i];
        mean /= C;
        for (int64_t i = 0; i < C; i++) var += (r[i] - mean) * (r[i] - mean);
        var /= C;
        float rs = (float)(1.0 / sqrt(var + eps));
        for (int64_t i = 0; i < C; i++) y[n * C + i] = (float)(r[i] - mean) * rs * w[i] + b[i];
    }
}

void vis_attention(float *out, const float *q, const float *k, const float *v, int64_t qs, int64_t ks, int64_t vs,
                   int64_t L, int H, int hd, float scale, float *sc)
{
    int64_t od = (int64_t)H * hd;
    for (int h = 0; h < H; h++) {
        /* S[L][L] = scale · Q_h · K_hᵀ, then row softmax, then O_h = P · V_h */
        kern_sgemm(0, 1, L, L, hd, scale, q + (int64_t)h * hd, qs, k + (int64_t)h * hd, ks, 0.0f, sc, L);
        for (int64_t i = 0; i < L; i++) {
            float *r = sc + i * L, mx = -INFINITY;
            for (int64_t j = 0; j < L; j++) mx = r[j] > mx ? r[j] : mx;
            double sum = 0;
            for (int64_t j = 0; j < L; j++) { r[j] = expf(r[j] - mx); sum += r[j]; }
            float inv = (float)(1.0 / sum);
            for (int64_t j = 0; j < L; j++) r[j] *= inv;
        }
        kern_sgemm(0, 0, L, hd, L, 1.0f, sc, L, v + (int64_t)h * hd, vs, 0.0f, out + (int64_t)h * hd, od);
    }
}

float *vis_tensor_f32(const st_file *f, const char *prefix, const char *name, int64_t n0, int64_t n1, dlm_err *e)
{
    char full[512];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    const st_tensor *t = st_find(f, full);
    if (!t) { err_set(e, "WeightsError", "vision tower tensor '%s' is missing", full); return NULL; }
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    if (n != n0 * n1 || (t->ndim && t->shape[0] != n0)) {
        err_set(e, "WeightsError", "vision tower tensor '%s' has %lld values, expected %lld x %lld", full, (long long)n,
                (long long)n0, (long long)n1);
        return NULL;
    }
    float *o = malloc((size_t)n * sizeof *o);
    if (!o) { err_set(e, "MemoryError", "out of memory"); return NULL; }
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *p = (const unsigned char *)t->data;
        switch (t->dtype) {
        case ST_F32: memcpy(&o[i], p + 4 * i, 4); break;
        case ST_BF16: { uint16_t h; memcpy(&h, p + 2 * i, 2); o[i] = bf16_to_f32(h); break; }
        case ST_F16: { uint16_t h; memcpy(&h, p + 2 * i, 2); o[i] = fp16_to_f32(h); break; }
        default:
            free(o);
            err_set(e, "WeightsError", "vision tower tensor '%s' is %s (f32, bf16 or f16 expected)", full, st_dtype_name(t->dtype));
            return NULL;
        }
    }
    return o;
}
