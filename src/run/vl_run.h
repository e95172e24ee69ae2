/* vl_run — a training run on a Qwen2-VL base (docs/images.md).
 *
 *   vl_run_grids     after the base's config is read, before the dataset:
 *                    each distinct image blob of the document decoded and
 *                    its processor grid (so the dataset lays out its tokens)
 *   vl_run_features  after the base is loaded: each image's features from
 *                    the frozen tower, computed once per blob and base and
 *                    kept in <store>/vl-cache/ (the original's vl-cache,
 *                    holding features rather than pixels: the tower is the
 *                    cost), in one array the batches point into
 *   vl_run_fill      a micro-batch with its splice (dataset_fill_vl)
 *
 * A feature file is <store>/vl-cache/<sha[:2]>/<sha>.<key[:16]>.f32, raw
 * f32 [tokens][d_model]; key = sha256 of the tower's shape, the processor's
 * settings and the bytes of the tower's first and last weights, so another
 * base or processor never reads it. A file of the wrong size is recomputed. */
#ifndef DLM_RUN_VL_RUN_H
#define DLM_RUN_VL_RUN_H

#include "run/run.h"

/* The grids of doc's images on base c (none unless c is Qwen2-VL): each
 * read from its blob in store, or (store NULL, doctor) from its file; the
 * sections' media_blob_sha must be set (media_ingest_images, store NULL
 * checks only). *images (owned by the caller) backs vl. */
int vl_grids(const dlm_doc *doc, const model_config *c, const char *store, ds_image **images, ds_vl *vl, dlm_err *e);
int vl_run_grids(run *R, dlm_err *e);
int vl_run_features(run *R, dlm_err *e);
int vl_run_fill(run *R, const int *items, int n, token_batch *b, int64_t *n_loss);
/* Bytes vl_run_features keeps (the features) and holds while it runs (the
 * tower in f32, one image's pixels and the tower's activations). */
uint64_t vl_run_feature_bytes(const ds_vl *vl, const model_config *c);
uint64_t vl_run_tower_bytes(const model_config *c, const ds_vl *vl);
void vl_run_free(run *R);

#endif
