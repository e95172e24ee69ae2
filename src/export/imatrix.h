/* imatrix — an importance matrix for calibrated quantization, computed
 * natively as llama.cpp's tools/imatrix computes it, and written in its
 * GGUF format (docs/export.md "Importance matrix").
 *
 * For every weight a forward pass multiplies (blk.* only: llama-imatrix
 * leaves output.weight out unless --process-output), the sum over the
 * calibration tokens of x² per input column (x: the activations that
 * multiply the weight) and the number of rows that contributed. Mixtral's
 * experts keep one sum and one count per expert (the rows routed to it),
 * under the stacked name blk.N.ffn_{gate,up,down}_exps.weight.
 *
 * The calibration tokens run in chunks of chunk_size (llama-imatrix's
 * --ctx-size, 512 by default; the original dlm's chunk count 256), each
 * from position 0 with an empty cache, its first token replaced by BOS
 * when the tokenizer adds one; a text shorter than one chunk runs as a
 * single shorter chunk (llama-imatrix refuses it; dlm calibrates on what
 * the document has).
 *
 * File (imatrix.gguf): general.type "imatrix", imatrix.datasets [str],
 * imatrix.chunk_count u32, imatrix.chunk_size u32; per weight, in name
 * order, "<name>.in_sum2" F32 {ncols, nmat} and "<name>.counts" F32
 * {1, nmat}. The quantizer's per-column importance is in_sum2 / counts
 * (tools/quantize: a count of 0 gives 1 for that matrix), as floats, the
 * way llama-quantize computes it from the file. */
#ifndef DLM_EXPORT_IMATRIX_H
#define DLM_EXPORT_IMATRIX_H

#include <stddef.h>
#include <stdint.h>
#include "decoder/lora.h"
#include "util/err.h"
#include "weights/model.h"

#define IMATRIX_CHUNK_SIZE 512      /* the original's DEFAULT_CHUNK_SIZE, llama-imatrix's default ctx */
#define IMATRIX_CHUNKS 256          /* the original's DEFAULT_CHUNKS / DEFAULT_IMATRIX_CHUNKS */

typedef struct imatrix imatrix;

typedef struct imatrix_opts {
    int chunk_size;                 /* tokens per chunk (0: IMATRIX_CHUNK_SIZE) */
    int max_chunks;                 /* at most this many chunks (0: IMATRIX_CHUNKS) */
    int32_t bos;                    /* replaces each chunk's first token; -1: none */
    const char *dataset;            /* imatrix.datasets entry (e.g. "replay:<sha256>") */
} imatrix_opts;

/* Run m (with adapter l applied when non-NULL: a merged export's weights)
 * over tokens[0..n) and accumulate. Fails when n is 0. */
int imatrix_collect(const model *m, const lora *l, const int32_t *tokens, size_t n, const imatrix_opts *o,
                    imatrix **out, dlm_err *e);
/* Write the GGUF imatrix file atomically. */
int imatrix_write(const imatrix *im, const char *path, dlm_err *e);
/* Read one back (bounds-checked: any GGUF, then the pairs; mismatched or
 * non-F32 pairs, shapes or non-finite values are refused). */
int imatrix_read(const char *path, imatrix **out, dlm_err *e);
int imatrix_parse(const void *buf, size_t len, const char *label, imatrix **out, dlm_err *e);
void imatrix_free(imatrix *im);

int imatrix_count(const imatrix *im);                 /* weights */
const char *imatrix_name(const imatrix *im, int i);   /* in name order */
int imatrix_chunks(const imatrix *im);
int imatrix_chunk_size(const imatrix *im);
const char *imatrix_dataset(const imatrix *im);      /* imatrix.datasets[0], "" if none */
/* The per-column importance of weight `name` with ncols columns and nmat
 * matrices (experts; 1 for a dense weight): [nmat·ncols] floats, or NULL
 * when the matrix has no entry or its shape differs (llama-quantize then
 * quantizes without; dlm's export refuses a shape mismatch before). */
const float *imatrix_weights(const imatrix *im, const char *name, int64_t ncols, int64_t nmat);
/* 0 and the shape of name's entry, or -1 when there is none. */
int imatrix_shape(const imatrix *im, const char *name, int64_t *ncols, int64_t *nmat);
/* Raw sums and counts of entry i (as written: float), for tests. */
int imatrix_entry(const imatrix *im, int i, int64_t *ncols, int64_t *nmat, const float **in_sum2,
                  const float **counts);

#endif
