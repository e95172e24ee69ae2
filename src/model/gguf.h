/* gguf — a general GGUF reader (v3; v2 readable), memory-mapped and
 * validated before anything is allocated from a length field.
 *
 * Layout (little-endian): "GGUF", u32 version, u64 n_tensors, u64 n_kv,
 * n_kv × {string key, u32 value type, value}, n_tensors × {string name,
 * u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset}, zero padding to
 * the alignment (general.alignment, default 32), then the tensor data.
 * A string is u64 length + bytes (no NUL).
 *
 * What is refused (formats.md §4.1, style.md rule 12): bad magic, version 1
 * or > 3, big-endian files, counts that the remaining bytes cannot hold,
 * string lengths past the end, empty or duplicate keys, duplicate tensor
 * names, names of 64+ bytes, unknown value or ggml types, nested arrays,
 * n_dims > 4, negative dims, element counts over INT64_MAX, ne[0] not a
 * multiple of the block size, a general.alignment that is not a u32 power
 * of two, offsets not aligned, tensors overlapping or ending past the file.
 *
 * Strings (keys, values, array elements, tensor names) are copied once into
 * an owned NUL-terminated arena; numeric arrays are read in place. The
 * value-type table and type sizes are public so a writer can sit beside
 * this reader (export). */
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

#endif
