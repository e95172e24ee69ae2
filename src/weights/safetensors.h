/* safetensors — read (mmap, validated) and write HF safetensors files.
 *
 * File layout: u64 LE header length N, N bytes of JSON header, then the data
 * buffer. The reader validates exactly what the reference implementation
 * validates (header cap 100,000,000, JSON object, `__metadata__` string→string,
 * known dtype, prod(shape)·bits/8 == end-begin with every multiplication
 * overflow-checked, offsets tiling the buffer from 0 with no holes or
 * overlaps, file length == 8 + N + last end, no duplicate names) and never
 * trusts a length field before checking it against the bytes present.
 *
 * A handle covers one file or a sharded set (model.safetensors.index.json);
 * lookups are by name across all shards. Data pointers point into the
 * read-only mappings and stay valid until st_close. They are NOT guaranteed
 * to be aligned to the element size (the format does not promise it). */
#ifndef DLM_SAFETENSORS_H
#define DLM_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include "util/err.h"

/* Declared in the reference's alignment order: the writer sorts tensors by
 * descending dtype (then name) exactly as the Rust writer does, so files we
 * write are laid out byte for byte as safetensors would lay them out. */
typedef enum st_dtype {
    ST_BOOL, ST_F4, ST_F6_E2M3, ST_F6_E3M2, ST_U8, ST_I8, ST_F8_E5M2, ST_F8_E4M3,
    ST_F8_E8M0, ST_F8_E4M3FNUZ, ST_F8_E5M2FNUZ, ST_I16, ST_U16, ST_F16, ST_BF16,
    ST_I32, ST_U32, ST_F32, ST_C64, ST_F64, ST_I64, ST_U64,
    ST_DTYPE_COUNT
} st_dtype;

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER 100000000u

typedef struct st_tensor {
    const char *name;
    st_dtype dtype;
    int ndim;                       /* 0 = scalar */
    int64_t shape[ST_MAX_DIMS];     /* row-major, outermost first (torch order) */
    const void *data;
    uint64_t nbytes;
    int shard;                      /* index of the file it lives in */
} st_tensor;

typedef struct st_file st_file;

/* Open a .safetensors file, a model.safetensors.index.json, or a directory
 * holding either (model.safetensors preferred, as transformers does). */
int st_open(const char *path, st_file **out, dlm_err *e);
/* Parse a whole file already in memory (not copied: buf must outlive the
 * handle). label names it in errors. Used by the fuzz target and tests. */
int st_parse_buffer(const void *buf, size_t len, const char *label, st_file **out, dlm_err *e);
void st_close(st_file *f);

int st_count(const st_file *f);
const st_tensor *st_at(const st_file *f, int i);          /* sorted by name */
const st_tensor *st_find(const st_file *f, const char *name);
/* A wrapped language model's tensor prefixes (model.h's audio: Qwen2-Audio):
 * hub checkpoints' "language_model.model." / "language_model.lm_head.", or
 * transformers 5's "model.language_model." / "lm_head."; -1 if neither.
 * Defined by the loader (weights/load_hf.c). */
int model_hf_lm_prefix(const st_file *st, const char **pre_model, const char **pre_head);
/* Value of a `__metadata__` entry of the first file, or NULL. */
const char *st_metadata(const st_file *f, const char *key);
int st_shard_count(const st_file *f);
const char *st_shard_path(const st_file *f, int i);

const char *st_dtype_name(st_dtype t);
int st_dtype_from_name(const char *s, st_dtype *out);     /* exact, 0 ok */
int st_dtype_bits(st_dtype t);                            /* 1..128 */

/* ---- writer ----------------------------------------------------------------
 * Write tensors (any whole-byte dtype; dlm uses F32/F16/BF16/I32) with
 * optional metadata (key, value, key, value, ..., NULL). Layout follows the
 * Rust writer: compact JSON header, `__metadata__` first (keys sorted),
 * tensors ordered by descending dtype then name, header padded with spaces to
 * a multiple of 8. Streams into a temp file, fsyncs, renames over path and
 * fsyncs the directory; honours $DLM_FAIL_WRITE like fs_write_atomic. */
typedef struct st_out {
    const char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const void *data;               /* prod(shape)·size bytes, little-endian */
} st_out;

int st_write(const char *path, const st_out *t, int n, const char *const *metadata, dlm_err *e);
/* The same bytes into memory (caller frees *buf). */
int st_serialize(const st_out *t, int n, const char *const *metadata, unsigned char **buf,
                 size_t *len, dlm_err *e);

#endif
