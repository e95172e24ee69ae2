/* gguf_writer — writes GGUF v3 files that llama.cpp loads (formats.md §4).
 *
 * Collect key/values and tensor descriptions, then gguf_w_write lays the
 * file out: header, KVs in insertion order, tensor infos with sequential
 * offsets aligned to 32 (general.alignment is honoured if set), zero
 * padding, tensor data. Tensor bytes come either from a pointer or from a
 * fill callback invoked as each tensor is written, so a quantized export
 * of a large model never holds more than one tensor in memory. The file is
 * written to a temp sibling, fsynced and renamed (crash-safe). */
#ifndef DLM_GGUF_WRITER_H
#define DLM_GGUF_WRITER_H

#include <stddef.h>
#include <stdint.h>
#include "util/err.h"

typedef struct gguf_w gguf_w;

/* Produce the nbytes of tensor `index` into dst. 0 ok, -1 with e set. */
typedef int (*gguf_fill_fn)(void *ctx, int index, void *dst, size_t nbytes, dlm_err *e);

gguf_w *gguf_w_new(void);
void gguf_w_free(gguf_w *w);

/* Scalars (the GGUF value types llama.cpp checks strictly: use the exact one). */
int gguf_w_str(gguf_w *w, const char *key, const char *val);
int gguf_w_u32(gguf_w *w, const char *key, uint32_t v);
int gguf_w_i32(gguf_w *w, const char *key, int32_t v);
int gguf_w_u64(gguf_w *w, const char *key, uint64_t v);
int gguf_w_f32(gguf_w *w, const char *key, float v);
int gguf_w_bool(gguf_w *w, const char *key, int v);
/* Arrays. lens may be NULL (strlen). */
int gguf_w_arr_str(gguf_w *w, const char *key, const char *const *v, const size_t *lens, size_t n);
int gguf_w_arr_i32(gguf_w *w, const char *key, const int32_t *v, size_t n);
int gguf_w_arr_f32(gguf_w *w, const char *key, const float *v, size_t n);

/* A tensor: type is a ggml type id (dtype), ne in ggml order (ne[0] =
 * innermost, i.e. columns). data (nbytes, kept by reference until write) or
 * fill. Returns the tensor's index, or -1 (duplicate name, bad shape). */
int gguf_w_tensor(gguf_w *w, const char *name, int type, int n_dims, const int64_t *ne, const void *data,
                  gguf_fill_fn fill, void *fill_ctx);

/* Number of KVs / tensors added so far; the first error (if any) stays in
 * the writer and is reported by gguf_w_write. */
int gguf_w_n_tensors(const gguf_w *w);

int gguf_w_write(gguf_w *w, const char *path, dlm_err *e);

#endif
