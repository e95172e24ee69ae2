/* pali — a loaded PaliGemma base's image path (docs/images.md): the frozen
 * SigLIP tower and projector from the base's own safetensors, an image's
 * features as the decoder splices them, and the prefix-LM layout of a
 * prompt.
 *
 * transformers' PaliGemmaProcessor lays a prompt out as
 *   <image>×pali_tokens  <bos> prompt "\n"   | suffix <eos>
 * with token_type_ids 0 on the prefix (image + bos + prompt + "\n") and 1 on
 * the suffix; PaliGemmaModel attends both ways within the prefix and
 * causally elsewhere (block_sequence_ids), with RoPE positions from 1. */
#ifndef DLM_VISION_PALI_H
#define DLM_VISION_PALI_H

#include <stdint.h>

#include "media/image.h"
#include "media/preprocess.h"
#include "util/err.h"
#include "vision/siglip.h"
#include "weights/model.h"

/* The tower of a PaliGemma base (cfg.pali): its tensors under
 * "vision_tower.vision_model." (the hub's checkpoints), "vision_tower."
 * (transformers 5.23's save_pretrained) or "model.vision_tower.[vision_model.]"
 * (its in-memory names), the projector under "[model.]multi_modal_projector.
 * linear.", read from the folder m was loaded from. */
int pali_tower_load(const model *m, siglip *s, dlm_err *e);

/* The base's image processor: google/paligemma-3b-mix-224's at the tower's
 * image size. */
proc_cfg pali_proc(const model_config *c);

/* One image's rows for the splice: preprocess, SigLIP, projector, then
 * divided by the embedding scale √hidden (as transformers 4's
 * get_image_features; the decoder multiplies every input row by it, and
 * transformers 5 puts the projector's output in unscaled). *out
 * (malloc'd): [pali_tokens][d_model]. */
int pali_image_features(const siglip *s, const model_config *c, const proc_cfg *pc, const image_rgb *im, float **out,
                        dlm_err *e);

/* The vl-cache key of a (PaliGemma base, processor): sha256 of the
 * tower's shape, the processor's settings, the embedding scale and the
 * bytes of the patch embedding and the projector (whichever layout the
 * base has), in hex; files as qwen2vl_cache_path names them. */
void pali_feature_key(const model *m, const proc_cfg *pc, char hex[65]);

/* The splice of ids[0..n): embed_row[i] = the running index of the image
 * token's rows (-1 elsewhere). Every image is one run of pali_tokens image
 * tokens; their count must be n_images runs. */
int pali_splice(const model_config *c, const int32_t *ids, int64_t n, int n_images, int32_t *embed_row, dlm_err *e);

#endif
