/* optim — AdamW over one flat parameter vector, learning-rate schedules and
 * gradient clipping, with the semantics of torch.optim.AdamW,
 * torch.nn.utils.clip_grad_norm_ and transformers' get_scheduler. */
#ifndef DLM_OPTIM_H
#define DLM_OPTIM_H

#include <stddef.h>
#include <stdint.h>

typedef enum { SCHED_CONSTANT, SCHED_LINEAR, SCHED_COSINE, SCHED_COSINE_MIN_LR } sched_kind;

typedef struct optim_config {
    /* doubles, as Python floats: torch computes 1 - beta2 in double */
    double lr;
    double beta1, beta2, eps;   /* 0.9, 0.999, 1e-8 */
    double weight_decay;        /* decoupled; default 0 */
    double max_grad_norm;       /* 1.0; <= 0 disables clipping */
    sched_kind sched;
    double warmup_ratio;        /* warmup steps = ceil(ratio · total); double as Python computes it */
    double min_lr_ratio;        /* cosine_min_lr floor, as a fraction of lr */
    int64_t total_steps;
} optim_config;

void optim_defaults(optim_config *c);

/* Warmup steps as transformers computes them: ceil(total · ratio). */
int64_t optim_warmup_steps(const optim_config *c);
/* The learning rate used by optimizer step k (0-based: the first update
 * uses k = 0, which is 0 during warmup, exactly as HF's LambdaLR). */
double optim_lr_at(const optim_config *c, int64_t k);

/* ‖g‖₂ over n floats, summed in a fixed order (double accumulators over
 * fixed-size blocks, blocks added in order): independent of threads. */
double optim_grad_norm(const float *g, size_t n);
/* Σ g² in optim_grad_norm's order (double). */
double optim_grad_sumsq(const float *g, size_t n);
/* optim_clip with extra_sq (Σ x² of gradients outside g, which count in the
 * norm as torch's clip_grad_norm_ over every parameter with a gradient)
 * added to g's: only g is scaled. extra_sq = 0 is optim_clip. */
double optim_clip_extra(float *g, size_t n, float max_norm, double extra_sq);
/* Scale g by the coefficient optim_clip_extra used for this norm (the
 * other gradients of the same clip: training.cpt's embeddings). */
void optim_clip_scale(float *g, size_t n, float max_norm, double norm);
/* Scale g so its norm is at most max_norm (torch: coef = max/(norm+1e-6),
 * applied only when coef < 1). Returns the pre-clip norm. */
double optim_clip(float *g, size_t n, float max_norm);

/* One AdamW update at step t (1-based) with learning rate lr. m, v are the
 * moments (same length as p). decay_mask (may be NULL = all decay) marks, per
 * element range, which params take weight decay: not used for LoRA. */
void optim_adamw_step(const optim_config *c, float *p, const float *g, float *m, float *v, size_t n,
                      double lr, int64_t t);

#endif
