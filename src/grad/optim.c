#include "grad/optim.h"

#include <math.h>

#include "kern/kern.h"

void optim_defaults(optim_config *c)
{
    c->lr = 2e-4;
    c->beta1 = 0.9;
    c->beta2 = 0.999;
    c->eps = 1e-8;
    c->weight_decay = 0.0;
    c->max_grad_norm = 1.0;
    c->sched = SCHED_COSINE;
    c->warmup_ratio = 0.1;
    c->min_lr_ratio = 0.1;
    c->total_steps = 1;
}

int64_t optim_warmup_steps(const optim_config *c)
{
    return (int64_t)ceil((double)c->total_steps * c->warmup_ratio);
}

double optim_lr_at(const optim_config *c, int64_t k)
{
    int64_t W = optim_warmup_steps(c), T = c->total_steps;
    double f;
    if (k < W) {
        f = (double)k / (double)(W > 1 ? W : 1);
    } else {
        double prog = T > W ? (double)(k - W) / (double)(T - W) : 1.0;
        switch (c->sched) {
        case SCHED_CONSTANT: f = 1.0; break;
        case SCHED_LINEAR: f = T > W ? (double)(T - k) / (double)(T - W) : 0.0; if (f < 0) f = 0; break;
        case SCHED_COSINE: f = 0.5 * (1.0 + cos(M_PI * prog)); if (f < 0) f = 0; break;
        default: { /* transformers' cosine_with_min_lr */
            double cosv = 0.5 * (1.0 + cos(M_PI * prog));
            f = c->min_lr_ratio + (1.0 - c->min_lr_ratio) * cosv;
            if (f < 0) f = 0;
        }
        }
    }
    return c->lr * f;
}

double optim_grad_norm(const float *g, size_t n)
{
    return sqrt(optim_grad_sumsq(g, n));
}

double optim_grad_sumsq(const float *g, size_t n)
{
    /* Blocks of 4096 summed in double, then blocks in order: fixed order. */
    double total = 0;
    for (size_t b = 0; b < n; b += 4096) {
        size_t e = b + 4096 < n ? b + 4096 : n;
        double s = 0;
        for (size_t i = b; i < e; i++) s += (double)g[i] * (double)g[i];
        total += s;
    }
    return total;
}

double optim_clip(float *g, size_t n, float max_norm)
{
    return optim_clip_extra(g, n, max_norm, 0.0);
}

double optim_clip_extra(float *g, size_t n, float max_norm, double extra_sq)
{
    double norm = sqrt(optim_grad_sumsq(g, n) + extra_sq);
    optim_clip_scale(g, n, max_norm, norm);
    return norm;
}

void optim_clip_scale(float *g, size_t n, float max_norm, double norm)
{
    if (max_norm <= 0) return;
    double coef = (double)max_norm / (norm + 1e-6);
    if (coef < 1.0) {
        float cf = (float)coef;
        for (size_t i = 0; i < n; i++) g[i] *= cf;
    }
}

void optim_adamw_step(const optim_config *c, float *p, const float *g, float *m, float *v, size_t n,
                      double lr, int64_t t)
{
    kern_adamw(p, g, m, v, (int64_t)n, lr, c->beta1, c->beta2, c->eps, c->weight_decay, t);
}
