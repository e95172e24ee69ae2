/* moe — see moe.h. With y_j = down_e(silu(gate_e(x))·up_e(x)) of the j-th
 * chosen expert and w = softmax of the chosen logits l:
 *
 *   dL/dy_j   = w_j · dout                    through each expert's SwiGLU to x
 *   dL/dw_j   = dout · y_j
 *   dL/dl_j   = w_j · (dL/dw_j − Σ_i w_i · dL/dw_i)   (softmax over the chosen;
 *               the other logits do not reach the output)
 *   dL/dx    += dL/dl · Wr
 *
 * Expert by expert in the forward's order, scattered into dx in that fixed
 * order: the bits do not depend on the thread count. */
#include "grad/moe.h"

#include <string.h>

#include "kern/kern.h"

void grad_moe_bwd(decoder *d, layer_acts *A, int layer, const float *dout, float *dx, int N)
{
    const model_config *c = &d->m->cfg;
    const layer_weights *w = &d->m->layers[layer];
    int C = d->C, F = d->F, E = c->n_expert, k = c->n_expert_used;
    memset(dx, 0, (size_t)N * C * sizeof(float));
    for (int e = 0; e < E; e++) {
        int r0 = A->moe_first[e], cnt = A->moe_first[e + 1] - r0;
        if (!cnt) continue;
        const float *g = A->g + (size_t)r0 * F, *u = A->u + (size_t)r0 * F;
        float *act = d->act + (size_t)r0 * F, *dact = d->dact + (size_t)r0 * F;
        float *dg = d->dg + (size_t)r0 * F, *du = d->du + (size_t)r0 * F;
        PROF("bwd.recompute", kern_swiglu_fwd(act, g, u, (int64_t)cnt * F);
             kern_matmul(d->moe_y, act, &w->exp_down[e], NULL, cnt, 0));
        for (int i = 0; i < cnt; i++) {
            int idx = A->moe_idx[r0 + i];
            const float *o = dout + (size_t)(idx / k) * C, *y = d->moe_y + (size_t)i * C;
            float s = A->moe_w[idx], dot = 0, *dy = d->moe_dy + (size_t)i * C;
            for (int j = 0; j < C; j++) {
                dot += o[j] * y[j];
                dy[j] = s * o[j];
            }
            d->moe_dw[idx] = dot;
        }
        PROF("bwd.moe_expert", kern_matmul_dx_to(dact, d->moe_dy, &w->exp_down[e], cnt, 0);
             kern_swiglu_bwd(dg, du, dact, g, u, (int64_t)cnt * F);
             kern_matmul_dx_to(d->moe_x, dg, &w->exp_gate[e], cnt, 0);
             kern_matmul_dx_to(d->moe_x, du, &w->exp_up[e], cnt, 1));
        for (int i = 0; i < cnt; i++) {
            float *t = dx + (size_t)(A->moe_idx[r0 + i] / k) * C;
            const float *s = d->moe_x + (size_t)i * C;
            for (int j = 0; j < C; j++) t[j] += s[j];
        }
    }
    memset(d->moe_dlog, 0, (size_t)N * E * sizeof(float));
    for (int n = 0; n < N; n++) {
        const float *wt = A->moe_w + (size_t)n * k, *dw = d->moe_dw + (size_t)n * k;
        float sum = 0;
        for (int j = 0; j < k; j++) sum += wt[j] * dw[j];
        for (int j = 0; j < k; j++) d->moe_dlog[(size_t)n * E + A->moe_sel[(size_t)n * k + j]] = wt[j] * (dw[j] - sum);
    }
    PROF("bwd.moe_router", kern_matmul_dx_to(dx, d->moe_dlog, &w->moe_router, N, 1));
}
