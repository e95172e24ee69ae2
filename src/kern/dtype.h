/* dtype — storage types of tensors, numbered as ggml numbers them so a GGUF
 * tensor's type id is our dtype with no table in between.
 *
 * Frozen base weights stay in their stored type; kernels dequantize tile by
 * tile. Activations, LoRA weights, gradients and optimizer state are f32. */
#ifndef DLM_DTYPE_H
#define DLM_DTYPE_H

#include <stddef.h>
#include <stdint.h>

typedef enum dtype {
    DT_F32 = 0,
    DT_F16 = 1,
    DT_Q4_0 = 2,
    DT_Q4_1 = 3,
    DT_Q5_0 = 6,
    DT_Q5_1 = 7,
    DT_Q8_0 = 8,
    DT_Q4_K = 12,
    DT_Q5_K = 13,
    DT_Q6_K = 14,
    DT_BF16 = 30,
    DT_COUNT = 43,      /* ggml's GGML_TYPE_COUNT: ids >= this are invalid */
} dtype;

#define QK_K 256

/* Elements per block (1 for plain float types) and bytes per block.
 * Both return 0 for a type dlm does not support. */
size_t dtype_block_elems(dtype t);
size_t dtype_block_bytes(dtype t);
/* Bytes of a row of n elements (n must be a multiple of block_elems);
 * 0 if unsupported or not a multiple. */
size_t dtype_row_bytes(dtype t, int64_t n);
const char *dtype_name(dtype t);           /* "F32", "Q4_K", ...; "?" */
int dtype_from_name(const char *s, dtype *out); /* case-insensitive; 0 ok */
int dtype_is_quant(dtype t);               /* block-quantized (not F32/F16/BF16) */

/* A 2-D weight matrix in its stored type, in HF orientation: `rows` output
 * features × `cols` input features, row-major, each row `row_bytes` long.
 * y = x · Wᵀ. `data` points into an mmap or an owned buffer (see model). */
typedef struct wmat {
    dtype type;
    int64_t rows;       /* out features (O) */
    int64_t cols;       /* in features (I) */
    size_t row_bytes;
    const void *data;
} wmat;

#endif
