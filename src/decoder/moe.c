/* moe — mixtral's sparse mixture-of-experts block, the MLP of every layer of
 * a model with n_expert > 0 (decoder_impl.h). As transformers'
 * MixtralSparseMoeBlock (models/mixtral/modeling_mixtral.py):
 *
 *   logits = x·Wrᵀ                              router, [N, E]
 *   top-k experts of each row by logit           (ties: the lower index)
 *   w_j = softmax over the k chosen logits      (HF: softmax over all E,
 *                                                 top-k, renormalised: the same)
 *   y = Σ_j w_j · down_e(silu(gate_e(x)) · up_e(x))
 *
 * Rows are grouped by expert (expert-major, rows ascending), each expert
 * runs one GEMM over its rows, and y accumulates expert by expert in that
 * fixed order, so the result does not depend on the thread count. The
 * routed rows' g and u stay in the layer's activations (A->g, A->u hold
 * N·k rows instead of N): only the active experts' activations are kept,
 * which is what the memory plan counts (decoder_plan_parts). */
#include "decoder/decoder_impl.h"

#include <math.h>
#include <string.h>

#include "kern/kern.h"

/* The router's choice for every row: A->moe_sel / moe_w [N·k], and the
 * routed rows grouped by expert: A->moe_idx [N·k] (n·k + j of each routed
 * row), A->moe_first [E+1]. */
static void route(decoder *d, layer_acts *A, int N)
{
    const model_config *c = &d->m->cfg;
    int E = c->n_expert, k = c->n_expert_used;
    for (int n = 0; n < N; n++) {
        const float *l = A->moe_logits + (size_t)n * E;
        int32_t *sel = A->moe_sel + (size_t)n * k;
        float *w = A->moe_w + (size_t)n * k;
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int x = 0; x < E; x++) {
                int taken = 0;
                for (int i = 0; i < j; i++) taken |= sel[i] == x;
                if (!taken && (best < 0 || l[x] > l[best])) best = x;
            }
            sel[j] = best;
        }
        float mx = l[sel[0]], z = 0;
        for (int j = 0; j < k; j++) z += w[j] = expf(l[sel[j]] - mx);
        for (int j = 0; j < k; j++) w[j] /= z;
    }
    int32_t *first = A->moe_first;
    memset(first, 0, (size_t)(E + 1) * sizeof *first);
    for (int i = 0; i < N * k; i++) first[A->moe_sel[i] + 1]++;
    for (int x = 0; x < E; x++) first[x + 1] += first[x];
    int32_t *fill = d->moe_fill;
    memcpy(fill, first, (size_t)E * sizeof *fill);
    for (int i = 0; i < N * k; i++) A->moe_idx[fill[A->moe_sel[i]]++] = i;
}

void dec_moe_fwd(decoder *d, layer_acts *A, int layer, const float *x, float *out, int N)
{
    const model_config *c = &d->m->cfg;
    const layer_weights *w = &d->m->layers[layer];
    int C = d->C, F = d->F, E = c->n_expert, k = c->n_expert_used;
    if (d->obs) d->obs(d->obs_user, layer, DECODER_OBS_ROUTER, -1, x, N, C);
    PROF("fwd.moe_router", kern_matmul(A->moe_logits, x, &w->moe_router, NULL, N, 0));
    route(d, A, N);
    for (int e = 0; e < E; e++) {
        int r0 = A->moe_first[e], cnt = A->moe_first[e + 1] - r0;
        if (!cnt) continue;
        for (int i = 0; i < cnt; i++)
            memcpy(d->moe_x + (size_t)i * C, x + (size_t)(A->moe_idx[r0 + i] / k) * C, (size_t)C * sizeof(float));
        float *g = A->g + (size_t)r0 * F, *u = A->u + (size_t)r0 * F, *act = d->act + (size_t)r0 * F;
        if (d->obs) {
            d->obs(d->obs_user, layer, LM_GATE, e, d->moe_x, cnt, C);
            d->obs(d->obs_user, layer, LM_UP, e, d->moe_x, cnt, C);
        }
        PROF("fwd.moe_expert", kern_matmul(g, d->moe_x, &w->exp_gate[e], NULL, cnt, 0);
             kern_matmul(u, d->moe_x, &w->exp_up[e], NULL, cnt, 0);
             kern_swiglu_fwd(act, g, u, (int64_t)cnt * F));
        if (d->obs) d->obs(d->obs_user, layer, LM_DOWN, e, act, cnt, F);
        PROF("fwd.moe_expert", kern_matmul(d->moe_y, act, &w->exp_down[e], NULL, cnt, 0));
        for (int i = 0; i < cnt; i++) {
            int idx = A->moe_idx[r0 + i];
            float s = A->moe_w[idx], *o = out + (size_t)(idx / k) * C;
            const float *y = d->moe_y + (size_t)i * C;
            for (int j = 0; j < C; j++) o[j] += s * y[j];
        }
    }
}
