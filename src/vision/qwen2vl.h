/* qwen2vl — a loaded Qwen2-VL base's image path (docs/images.md): the
 * frozen tower from the base's own safetensors, an image's features, and
 * the splice of a token sequence for the decoder (tokens/batch.h).
 *
 * The prompt holds, per image, <|vision_start|> then t·h·w/merge² copies of
 * the image token then <|vision_end|> (the processor's expansion); the
 * image-token rows take the tower's rows in order, and every row gets its
 * M-RoPE position (vision/mrope.h). */
#ifndef DLM_VISION_QWEN2VL_H
#define DLM_VISION_QWEN2VL_H

#include <stddef.h>
#include <stdint.h>

#include "media/image.h"
#include "media/preprocess.h"
#include "util/err.h"
#include "vision/qwen2vl_vit.h"
#include "weights/model.h"

/* The tower of a Qwen2-VL base (cfg.vl == VL_QWEN2): its tensors under
 * "model.visual." (transformers 5) or "visual." (the hub's checkpoints). */
int qwen2vl_tower_load(const model *m, qwen2vl_vit *v, dlm_err *e);

/* The base's image processor: Qwen/Qwen2-VL-2B-Instruct's, with the
 * tower's patch, temporal patch and merge. */
proc_cfg qwen2vl_proc(const model_config *c);

/* Parameters of the tower of c (patch embedding, blocks, merger). */
uint64_t qwen2vl_tower_params(const model_config *c);

/* Image tokens of an image with grid (t, h, w) in patches. */
int qwen2vl_grid_tokens(const model_config *c, const int grid[3]);

/* One image's features: preprocess, then the tower. *out (malloc'd):
 * [*n_rows][d_model]; grid gets image_grid_thw. */
int qwen2vl_image_features(const qwen2vl_vit *v, const model_config *c, const proc_cfg *pc, const image_rgb *im,
                           float **out, int *n_rows, int grid[3], dlm_err *e);

/* The features cache (<store>/vl-cache/, run/vl_run.h): the key of a base
 * and processor (sha256 of the tower's shape, the processor's settings and
 * the bytes of the tower's first and last weights), a blob's file in it
 * (dir gets its folder), and a read of exactly want bytes (0, or -1 when
 * the file is missing or of another size). */
void qwen2vl_feature_key(const model *m, const proc_cfg *pc, char hex[65]);
void qwen2vl_cache_path(const char *store, const char *sha, const char *key, char *dir, size_t dcap, char *path,
                        size_t pcap);
int qwen2vl_cache_read(const char *path, float *out, size_t want);

/* The splice of ids[0..n): embed_row[i] = the running index of image-token
 * rows (-1 elsewhere), pos3 [3][n] and delta as qwen2vl_rope_index. The
 * image-token runs must match the grids in order. */
int qwen2vl_splice(const model_config *c, const int32_t *ids, int64_t n, const int (*grid)[3], int n_images,
                   int32_t *embed_row, int32_t *pos3, int64_t *delta, dlm_err *e);

#endif
