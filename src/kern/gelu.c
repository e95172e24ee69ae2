/* gelu — Gemma 2's pieces outside attention: GeGLU with the tanh GELU
 * (transformers' gelu_pytorch_tanh, which Gemma2Config's
 * hidden_activation names) and the logit soft cap. Plain loops, split over
 * threads by index (each element's result is independent of the split);
 * they are their own reference. */
#include "kern/kern_impl.h"

#include <math.h>

#define GELU_K 0.7978845608028654f   /* √(2/π) */
#define GELU_A 0.044715f

typedef struct geglu_job {
    float *h, *dg, *du, *x;
    const float *g, *u, *dh, *y;
    float cap;
} geglu_job;

static void geglu_fwd_range(void *ctx, int64_t b, int64_t e)
{
    const geglu_job *j = ctx;
    for (int64_t i = b; i < e; i++) {
        float x = j->g[i];
        float t = tanhf(GELU_K * (x + GELU_A * x * x * x));
        j->h[i] = 0.5f * x * (1.0f + t) * j->u[i];
    }
}

/* d gelu/dx = ½(1 + t) + ½x(1 − t²)·k(1 + 3a x²) */
static void geglu_bwd_range(void *ctx, int64_t b, int64_t e)
{
    const geglu_job *j = ctx;
    for (int64_t i = b; i < e; i++) {
        float x = j->g[i], dh = j->dh[i];
        float t = tanhf(GELU_K * (x + GELU_A * x * x * x));
        float gel = 0.5f * x * (1.0f + t);
        float dgel = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * GELU_K * (1.0f + 3.0f * GELU_A * x * x);
        j->du[i] = dh * gel;
        j->dg[i] = dh * j->u[i] * dgel;
    }
}

static void run(int64_t n, kern_range_fn fn, geglu_job *j)
{
    if (n < 4096) fn(j, 0, n);
    else kern_parallel_for(n, fn, j);
}

void kern_geglu_fwd(float *h, const float *g, const float *u, int64_t n)
{
    geglu_job j = {.h = h, .g = g, .u = u};
    run(n, geglu_fwd_range, &j);
}

void kern_geglu_bwd(float *dg, float *du, const float *dh, const float *g, const float *u, int64_t n)
{
    geglu_job j = {.dg = dg, .du = du, .dh = dh, .g = g, .u = u};
    run(n, geglu_bwd_range, &j);
}

static void cap_range(void *ctx, int64_t b, int64_t e)
{
    const geglu_job *j = ctx;
    for (int64_t i = b; i < e; i++) j->x[i] = j->cap * tanhf(j->x[i] / j->cap);
}

static void cap_bwd_range(void *ctx, int64_t b, int64_t e)
{
    const geglu_job *j = ctx;
    for (int64_t i = b; i < e; i++) {
        float t = j->y[i] / j->cap;
        j->x[i] *= 1.0f - t * t;
    }
}

void kern_softcap(float *x, int64_t n, float cap)
{
    geglu_job j = {.x = x, .cap = cap};
    run(n, cap_range, &j);
}

void kern_softcap_bwd(float *dx, const float *y, int64_t n, float cap)
{
    geglu_job j = {.x = dx, .y = y, .cap = cap};
    run(n, cap_bwd_range, &j);
}
