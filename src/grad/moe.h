/* moe — the backward of mixtral's sparse MoE block (decoder/moe.c): the
 * input gradient through the frozen router and experts. dlm trains LoRA on
 * the attention of such a model; the experts and the router pass the
 * gradient down to the layers below (through the expert MLPs and through
 * the routing weights' dependence on the router logits). */
#ifndef DLM_GRAD_MOE_H
#define DLM_GRAD_MOE_H

#include "decoder/decoder_impl.h"

/* dx[N,C] = d(MoE(x))ᵀ·dout for the layer's block, with A holding the
 * forward's routing and routed g, u (the forward or its recompute ran). */
void grad_moe_bwd(decoder *d, layer_acts *A, int layer, const float *dout, float *dx, int N);

#endif
