/* fuzz_quant — quantizers and dequantizers on arbitrary bytes.
 *
 * The first byte picks a type; the rest is read (a) as float32 input to
 * kern_quant_row — NaN, Inf, subnormals and huge values included — and (b)
 * as raw blocks for kern_dequant_row. Sanitizers catch UB (float→int
 * conversions out of range, overflows); the checks below pin the contract:
 * the byte count, and finite output for finite, moderate input. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"

static const dtype TYPES[] = {DT_F16, DT_BF16, DT_Q8_0, DT_Q4_0, DT_Q5_0, DT_Q4_K, DT_Q5_K, DT_Q6_K,
                              DT_Q4_1, DT_Q5_1};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    dtype t = TYPES[data[0] % (sizeof TYPES / sizeof TYPES[0])];
    data++;
    size--;
    size_t be = dtype_block_elems(t), bb = dtype_block_bytes(t);

    /* (a) floats → quantize → dequantize */
    int64_t n = (int64_t)(size / 4 / be * be);
    if (n > 0 && n <= 65536 && t != DT_Q4_1 && t != DT_Q5_1) {
        float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
        uint8_t *q = malloc(dtype_row_bytes(t, n));
        if (!x || !y || !q) abort();
        memcpy(x, data, (size_t)n * 4);
        int moderate = 1;
        for (int64_t i = 0; i < n; i++) moderate &= isfinite(x[i]) && fabsf(x[i]) < 1e4f;
        size_t got = kern_quant_row(t, x, q, n);
        if (got != dtype_row_bytes(t, n)) abort();
        kern_dequant_row(t, q, y, n);
        if (moderate)
            for (int64_t i = 0; i < n; i++)
                if (!isfinite(y[i])) abort();
        free(x); free(y); free(q);
    }

    /* (b) raw bytes as blocks → dequantize */
    size_t nb = size / bb;
    if (nb > 0 && nb * be <= 65536) {
        float *y = malloc(nb * be * 4);
        if (!y) abort();
        kern_dequant_row(t, data, y, (int64_t)(nb * be));
        free(y);
    }
    return 0;
}
