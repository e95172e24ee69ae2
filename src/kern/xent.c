/* xent — softmax cross-entropy over logits[N,V], rows split over threads
 * (each row's max, sum and gradient are computed by one thread in one
 * fixed order, see xent_row in isa_ops.inc); the loss sum runs in row order
 * in double afterwards. */
#include "kern/kern_impl.h"

typedef struct xent_job {
    float *dlogits, *nll;
    const float *logits;
    const int32_t *targets;
    int V;
    float grad_scale;
    const kern_isa *isa;
} xent_job;

static void xent_rows(void *ctx, int64_t n0, int64_t n1)
{
    const xent_job *j = ctx;
    for (int64_t n = n0; n < n1; n++) {
        const float *row = j->logits + n * j->V;
        float *drow = j->dlogits ? j->dlogits + n * j->V : NULL;
        int32_t t = j->targets[n];
        if (t < 0 || t >= j->V) {       /* masked (a target >= V is treated the same) */
            j->nll[n] = 0.f;
            if (drow)
                for (int i = 0; i < j->V; i++) drow[i] = 0.f;
            continue;
        }
        j->nll[n] = j->isa->xent_row(drow, row, j->V, t, j->grad_scale);
    }
}

double kern_xent(float *dlogits, float *nll, const float *logits, const int32_t *targets,
                 int64_t N, int V, float grad_scale)
{
    if (N <= 0 || V <= 0) return 0;
    xent_job j = {dlogits, nll, logits, targets, V, grad_scale, kern_isa_get()};
    if (N * (int64_t)V < 16384) xent_rows(&j, 0, N);
    else kern_parallel_for(N, xent_rows, &j);
    double sum = 0;
    for (int64_t n = 0; n < N; n++)
        if (targets[n] >= 0 && targets[n] < V) sum += nll[n];
    return sum;
}
