/* qwen2vl_vit — Qwen2-VL's vision tower, frozen, forward only.
 *
 * transformers' Qwen2VisionTransformerPretrainedModel: the patch embedding
 * (a Conv3d whose kernel equals its stride, so one matmul per patch row of
 * media/preprocess.h), `depth` pre-norm blocks (LayerNorm eps 1e-6, qkv with
 * bias, 2-D rotary over (h, w) with theta 10000 — head_dim/4 frequencies
 * for the row, the same for the column, repeated over both halves —, full
 * attention within each image's frames, proj, fc1 → quick_gelu → fc2), then
 * the patch merger: LayerNorm, each 2x2 group of consecutive rows (the
 * processor's merge order) concatenated, Linear → GELU (erf) → Linear to the
 * language model's width.
 *
 * Shapes: pixels [N][C*T*P*P] (N = sum of t*h*w over the images), output
 * [N/merge²][hidden_size]. Weights are held in f32. */
#ifndef DLM_VISION_QWEN2VL_VIT_H
#define DLM_VISION_QWEN2VL_VIT_H

#include <stdint.h>

#include "util/err.h"
#include "weights/safetensors.h"

typedef struct vit_cfg {
    int depth, embed_dim, heads, mlp_hidden;   /* mlp_hidden = embed_dim * mlp_ratio */
    int in_ch, patch, temporal, merge;         /* 3, 14, 2, 2 */
    int hidden_size;                           /* the language model's width */
    double rope_theta;                         /* 10000 */
} vit_cfg;

typedef struct vit_block {
    float *n1_w, *n1_b, *qkv_w, *qkv_b, *proj_w, *proj_b;   /* qkv_w [3D][D], proj_w [D][D] */
    float *n2_w, *n2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;     /* fc1_w [F][D], fc2_w [D][F] */
} vit_block;

typedef struct qwen2vl_vit {
    vit_cfg c;
    float *patch_w;      /* [D][C*T*P*P] */
    vit_block *blk;
    float *lnq_w, *lnq_b, *m0_w, *m0_b, *m2_w, *m2_b;   /* m0_w [4D][4D], m2_w [hidden][4D] */
} qwen2vl_vit;

/* Load the tower's tensors named prefix + "patch_embed.proj.weight",
 * "blocks.N.norm1.weight", ..., "merger.mlp.2.bias" (f32, bf16 or f16). */
int qwen2vl_vit_load(const st_file *f, const char *prefix, const vit_cfg *c, qwen2vl_vit *v, dlm_err *e);
void qwen2vl_vit_free(qwen2vl_vit *v);

/* grid[i] = (t, h, w) of image i in patches (image_grid_thw). out:
 * [N / merge²][hidden_size]. */
int qwen2vl_vit_forward(const qwen2vl_vit *v, const float *pixels, const int (*grid)[3], int n_images, float *out,
                        dlm_err *e);

#endif
