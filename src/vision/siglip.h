/* siglip — PaliGemma's image encoder, frozen, forward only: the SigLIP
 * vision transformer and the multi-modal projector.
 *
 * transformers' PaliGemmaModel.get_image_features: a Conv2d patch embedding
 * (kernel = stride = patch, with bias) in row-major patch order plus a
 * learned position embedding, `layers` pre-norm encoder layers (LayerNorm
 * eps 1e-6, q/k/v/out projections with bias, full attention,
 * fc1 → gelu (tanh approximation) → fc2), post_layernorm, then the
 * projector Linear(hidden_size → projection_dim).
 *
 * Input [3][H][W] (media/preprocess.h's PaliGemma output), output
 * [(H/P)·(W/P)][projection_dim]. */
#ifndef DLM_VISION_SIGLIP_H
#define DLM_VISION_SIGLIP_H

#include "util/err.h"
#include "weights/safetensors.h"

typedef struct siglip_cfg {
    int layers, hidden, heads, mlp_hidden;   /* SigLIP's hidden_size, intermediate_size */
    int image_size, patch, in_ch;            /* 224, 14, 3 */
    int proj_dim;                            /* projection_dim (the Gemma width) */
} siglip_cfg;

typedef struct siglip_layer {
    float *n1_w, *n1_b, *q_w, *q_b, *k_w, *k_b, *v_w, *v_b, *o_w, *o_b;
    float *n2_w, *n2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
} siglip_layer;

typedef struct siglip {
    siglip_cfg c;
    float *patch_w, *patch_b, *pos;   /* [D][C*P*P], [D], [n_patches][D] */
    siglip_layer *l;
    float *post_w, *post_b, *proj_w, *proj_b;
} siglip;

/* tower: e.g. "model.vision_tower.vision_model."; proj: e.g.
 * "model.multi_modal_projector.linear." */
int siglip_load(const st_file *f, const char *tower, const char *proj, const siglip_cfg *c, siglip *s, dlm_err *e);
void siglip_free(siglip *s);
int siglip_forward(const siglip *s, const float *pixels, float *out, dlm_err *e);

#endif
