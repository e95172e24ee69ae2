/* backward — gradients of one micro-batch through the decoder.
 *
 * backward_step runs the training forward (decoder/forward.c, dropout on,
 * keeping what this pass needs), the LM head with its cross-entropy
 * gradient, and the layers in reverse. Gradients are accumulated (+=) into
 * the caller's slabs so micro-batches add up; the caller zeroes them per
 * optimizer step. Nothing is allocated: every buffer is the decoder's. */
#ifndef DLM_BACKWARD_H
#define DLM_BACKWARD_H

#include <stdint.h>
#include "decoder/decoder.h"
#include "grad/full.h"

/* Gradients are added into lora_grad (same layout as the adapter's slab)
 * or into fg (full mode). fg with layers NULL (and out_norm NULL) takes the
 * embedding and LM-head gradients only, beside lora_grad (training.cpt's
 * embed warm-up: run/cpt.h); output NULL = tied, both go to tok_embd. dlogits are scaled by grad_scale (normally 1 /
 * tokens-with-loss in the optimizer step). Dropout draws come from (seed,
 * RNG_DROPOUT, micro_step, ...). Returns the summed NLL of the batch;
 * *n_loss = tokens with a target. */
double backward_step(decoder *d, const token_batch *b, float *lora_grad, const full_grads *fg, float grad_scale,
                     uint64_t seed, uint64_t micro_step, int64_t *n_loss);

/* Per-row weights (preference training): the loss is a function of each
 * row's NLL, L = f(nll), known only after the forward. After the head, fn
 * gets every position's NLL (nll[B*T], 0 where target = -1) and writes
 * scale[B*T] = dL/dnll; the head's input gradient is linear in the
 * cross-entropy's upstream gradient, so scaling its rows is exact (one
 * forward, one backward). Buffers are the caller's, [B*T] each. */
typedef struct bwd_rows {
    void (*fn)(void *ctx, const token_batch *b, const float *nll, float *scale);
    void *ctx;
    float *nll, *scale;
} bwd_rows;
double backward_step_rows(decoder *d, const token_batch *b, float *lora_grad, uint64_t seed, uint64_t micro_step,
                          const bwd_rows *rows, int64_t *n_loss);

#endif
