/* mrope — Qwen2-VL's multimodal rotary positions (M-RoPE) for the decoder.
 *
 * qwen2vl_rope_index is transformers' Qwen2VLModel.get_rope_index for one
 * sequence: text tokens get the same position p on the three streams
 * (temporal, height, width), counting on from the previous token; each run
 * of image tokens is one image whose (t, h/merge, w/merge) grid gives it
 * (p + t_i, p + h_i, p + w_i) in row-major order, and the text after it
 * continues at p + max(h, w)/merge (for t = 1). delta = max position + 1 - n
 * (the offset generation adds to later positions).
 *
 * qwen2vl_mrope_table fills kern_rope_fwd_t's [N, HS/2] cos/sin tables:
 * column j rotates by the position of stream s(j), with sections (t, h, w)
 * summing to HS/2 ([16, 24, 24] for head size 128), the angle as
 * kern_rope_table computes it. Text-only rows give kern_rope_table's bits. */
#ifndef DLM_VISION_MROPE_H
#define DLM_VISION_MROPE_H

#include <stdint.h>

#include "util/err.h"

/* pos: [3][n] (stream-major). grid: per image (t, h, w) in patches, in order. */
int qwen2vl_rope_index(const int32_t *ids, int64_t n, int32_t image_token, const int (*grid)[3], int n_images, int merge,
                       int32_t *pos, int64_t *delta, dlm_err *e);

int qwen2vl_mrope_table(float *cs, float *sn, const int32_t *pos, int64_t N, int HS, const double *inv_freq,
                        const int sections[3], dlm_err *e);

#endif
