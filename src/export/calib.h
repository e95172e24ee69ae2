/* calib — the importance matrix `dlm export` quantizes K-quants with
 * (export/imatrix.h), calibrated on the document's replay corpus (the text
 * the adapter was trained on), as the original's src/dlm/export/imatrix.py:
 *
 *   text   every replay entry's content, stripped, joined by blank lines,
 *          at most 256 × 512 × 4 characters; tokenized with BOS first when
 *          llama.cpp adds one; up to 256 chunks of 512 tokens
 *   cache  <store>/exports/imatrix/imatrix.gguf + imatrix.meta.json, keyed
 *          by the base (base_key), the weights it ran (weights_key: the
 *          merged adapter's bytes, or "base"), the sha256 of
 *          replay/corpus.zst, chunks and chunk size; the file's sha256 is
 *          checked on a hit. A new training run appends to the corpus, so
 *          its sha changes and the next export computes a new matrix.
 *
 * No corpus (or an empty one): no matrix, the reason says why (the export
 * quantizes without, as the original falls back to static quantization). */
#ifndef DLM_EXPORT_CALIB_H
#define DLM_EXPORT_CALIB_H

#include <stdint.h>
#include "decoder/lora.h"
#include "export/imatrix.h"
#include "tokens/tok.h"
#include "util/err.h"
#include "weights/model.h"

typedef struct calib_opts {
    const char *store;
    const model *m;
    const lora *merge;          /* the merged export's adapter (run on the fly), or NULL */
    tok *t;
    int32_t bos;                /* -1: llama.cpp adds no BOS for this vocabulary */
    const char *base_key;       /* identifies the base weights (export's base fingerprint) */
    const char *weights_key;    /* "base", or the merged adapter's sha256 */
} calib_opts;

typedef struct calib_result {
    int used, cached;
    const char *reason;         /* !used: why */
    char sha256[65];            /* of imatrix.gguf */
    char corpus_sha256[65];
    int chunks, chunk_size;
    int64_t tokens;             /* chunks × chunk_size */
} calib_result;

int calib_imatrix(const calib_opts *o, imatrix **out, calib_result *r, dlm_err *e);

#endif
