/* ops — the vision towers' shared operations: LayerNorm as a plain loop,
 * every matmul (attention's two included) through kern_sgemm, and loading a
 * tensor as f32. Internal to vision/. */
#ifndef DLM_VISION_OPS_H
#define DLM_VISION_OPS_H

#include <stdint.h>

#include "util/err.h"
#include "weights/safetensors.h"

/* y[N][O] = x[N][I] · W[O][I]ᵀ + b (b may be NULL) */
void vis_linear(float *y, const float *x, const float *W, const float *b, int64_t N, int64_t I, int64_t O);
/* y[N][C] = LayerNorm(x) · w + b, biased variance as torch */
void vis_layernorm(float *y, const float *x, const float *w, const float *b, int64_t N, int64_t C, float eps);
/* Full (non-causal) attention over L rows: q, k, v rows of H heads of hd
 * floats at row strides qs, ks, vs; out [L][H*hd]; sc: L*L floats of
 * scratch (one head's score matrix: both products go to kern_sgemm). */
void vis_attention(float *out, const float *q, const float *k, const float *v, int64_t qs, int64_t ks, int64_t vs,
                   int64_t L, int H, int hd, float scale, float *sc);

/* prefix+name as f32 (from f32, bf16 or f16), checked to hold n0 x n1
 * values with n0 outermost; NULL with e set when missing or misshapen. */
float *vis_tensor_f32(const st_file *f, const char *prefix, const char *name, int64_t n0, int64_t n1, dlm_err *e);

#endif
