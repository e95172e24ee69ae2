/* gguf — GGUF files, both ways: a general reader (v3; v2 readable),
 * memory-mapped and validated before anything is allocated from a length
 * field, and the writer export uses (gguf_write.c). docs/reference/formats.md
 * ("GGUF") has the format and the keys dlm reads and writes.
 *
 * Layout (little-endian): "GGUF", u32 version, u64 n_tensors, u64 n_kv,
 * n_kv × {string key, u32 value type, value}, n_tensors × {string name,
 * u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset}, zero padding to
 * the alignment (general.alignment, default 32), then the tensor data.
 * A string is u64 length + bytes (no NUL).
 *
 * What is refused (docs/reference/formats.md §4.1, docs/reference/style.md rule 12): bad magic, version 1
 * or > 3, big-endian files, counts that the remaining bytes cannot hold,
 * string lengths past the end, empty or duplicate keys, duplicate tensor
 * names, names of 64+ bytes, unknown value or ggml types, nested arrays,
 * n_dims > 4, negative dims, element counts over INT64_MAX, ne[0] not a
 * multiple of the block size, a general.alignment that is not a u32 power
 * of two, offsets not aligned, tensors overlapping or ending past the file.
 *
 * Strings (keys, values, array elements, tensor names) are copied once into
 * an owned NUL-terminated arena; numeric arrays are read in place. The
 * value-type table and type sizes are shared by the writer.
 *
 * Writing (gguf_w_*): collect key/values and tensor descriptions, then
 * gguf_w_write lays the file out: header, KVs in insertion order, tensor
 * infos with sequential offsets aligned to 32 (general.alignment is
 * honoured if set), zero padding, tensor data. Tensor bytes come either
 * from a pointer or from a fill callback invoked as each tensor is written,
 * so a quantized export of a large model never holds more than one tensor
 * in memory. The file is written to a temp sibling, fsynced and renamed.
 *
 * llama.cpp stores the Q and K rows of llama-arch models per head as
 * [HS/2][2] (interleaved pairs) where HF has [2][HS/2] (rotate-half):
 * gguf_qk_hf_row maps one to the other, for the loader (which un-permutes)
 * and the writers (which permute). */
#ifndef DLM_GGUF_H
#define DLM_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include "util/err.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4
#define GGUF_MAX_NAME 64            /* tensor names are < 64 bytes (GGML_MAX_NAME) */

typedef enum gguf_vtype {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
    GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STR = 8, GGUF_ARR = 9, GGUF_U64 = 10, GGUF_I64 = 11,
    GGUF_F64 = 12,
    GGUF_VTYPE_COUNT
} gguf_vtype;

/* Bytes of one scalar of type t (0 for STR/ARR/invalid). */
size_t gguf_vtype_size(gguf_vtype t);
const char *gguf_vtype_name(gguf_vtype t);

/* ggml tensor types: block elements and bytes per block for every id in
 * ggml's enum (0 for removed or unknown ids); name "Q4_K", "?". */
size_t gguf_type_block_elems(int type);
size_t gguf_type_block_bytes(int type);
const char *gguf_type_name(int type);

typedef struct gguf_tensor {
    const char *name;
    int type;                   /* ggml type id (== dtype for the ones dlm computes with) */
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];  /* ggml order: ne[0] innermost; unused dims are 1 */
    uint64_t offset;            /* from the start of the data section */
    uint64_t nbytes;
    const void *data;           /* into the mapping; aligned as the file's alignment */
} gguf_tensor;

typedef struct gguf_file gguf_file;

int gguf_open(const char *path, gguf_file **out, dlm_err *e);
/* Parse a whole file already in memory (not copied; buf must outlive g). */
int gguf_parse_buffer(const void *buf, size_t len, const char *label, gguf_file **out, dlm_err *e);
void gguf_close(gguf_file *g);

uint32_t gguf_version(const gguf_file *g);
uint32_t gguf_alignment(const gguf_file *g);
uint64_t gguf_data_offset(const gguf_file *g);      /* file offset of the data section */
const char *gguf_path(const gguf_file *g);

/* ---- key/value metadata ----------------------------------------------------
 * Keys are addressed by id (0..count-1, file order). Typed getters check the
 * type first and fail with a clear error ("key 'x' has type i32, expected
 * u32") instead of reading the wrong bytes. */
int gguf_kv_count(const gguf_file *g);
int gguf_find_key(const gguf_file *g, const char *key);            /* id or -1 */
const char *gguf_key(const gguf_file *g, int id);
gguf_vtype gguf_kv_type(const gguf_file *g, int id);

int gguf_get_u32(const gguf_file *g, int id, uint32_t *out, dlm_err *e);
int gguf_get_i32(const gguf_file *g, int id, int32_t *out, dlm_err *e);
int gguf_get_u64(const gguf_file *g, int id, uint64_t *out, dlm_err *e);
int gguf_get_f32(const gguf_file *g, int id, float *out, dlm_err *e);
int gguf_get_bool(const gguf_file *g, int id, int *out, dlm_err *e);
/* NUL-terminated (len excludes the NUL; the string may contain NULs). */
int gguf_get_str(const gguf_file *g, int id, const char **out, size_t *len, dlm_err *e);
/* Any integer type (u8..i64, bool) as int64 (u64 above INT64_MAX fails). */
int gguf_get_int(const gguf_file *g, int id, int64_t *out, dlm_err *e);
/* Any float or integer type as double. */
int gguf_get_num(const gguf_file *g, int id, double *out, dlm_err *e);

/* Arrays: element type and count; elements by index (i < count). */
int gguf_arr_info(const gguf_file *g, int id, gguf_vtype *elem, uint64_t *count, dlm_err *e);
const char *gguf_arr_str(const gguf_file *g, int id, uint64_t i, size_t *len); /* NULL if not a string array */
int gguf_arr_int(const gguf_file *g, int id, uint64_t i, int64_t *out);     /* integer/bool elements */
int gguf_arr_num(const gguf_file *g, int id, uint64_t i, double *out);      /* any numeric element */
/* Raw little-endian elements of a numeric array (may be unaligned). */
const void *gguf_arr_data(const gguf_file *g, int id);

/* ---- tensors ------------------------------------------------------------------ */
int gguf_tensor_count(const gguf_file *g);
const gguf_tensor *gguf_tensor_at(const gguf_file *g, int i);              /* file order */
const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name);

/* ---- the llama Q/K row order ------------------------------------------------
 * HF row index of GGUF row r of a llama-arch Q/K matrix (or bias, or LoRA B)
 * with head size hs: GGUF row h·hs + 2j + k holds HF row h·hs + k·hs/2 + j.
 * Rows are whole quant blocks, so this permutes quantized matrices too. */
static inline int64_t gguf_qk_hf_row(int64_t r, int hs)
{
    int64_t h = r / hs, w = r % hs;
    return h * hs + (w % 2) * (hs / 2) + w / 2;
}

/* ---- writing -------------------------------------------------------------------- */
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
