/* libFuzzer target: an imatrix.gguf read back (export/imatrix.c: the GGUF
 * reader, then the in_sum2/counts pairs, shapes, counts and values), then
 * every accessor over what it accepted. */
#include <stddef.h>
#include <stdint.h>
#include "export/imatrix.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    imatrix *im;
    dlm_err e;
    if (imatrix_parse(data, size, "fuzz.imatrix.gguf", &im, &e)) return 0;
    volatile double acc = imatrix_chunks(im) + imatrix_chunk_size(im);
    for (int i = 0; i < imatrix_count(im); i++) {
        int64_t nc, nm;
        const float *s, *c;
        if (imatrix_entry(im, i, &nc, &nm, &s, &c)) continue;
        const float *qw = imatrix_weights(im, imatrix_name(im, i), nc, nm);
        acc += s[nc * nm - 1] + c[nm - 1] + (qw ? qw[nc * nm - 1] : 0);
        int64_t a, b;
        acc += imatrix_shape(im, imatrix_name(im, i), &a, &b) == 0 ? (double)(a + b) : 0;
    }
    acc += imatrix_weights(im, "blk.0.attn_q.weight", 1, 1) != NULL;
    imatrix_free(im);
    (void)acc;
    return 0;
}
