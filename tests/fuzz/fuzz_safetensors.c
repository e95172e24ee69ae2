/* libFuzzer target: the safetensors header parser and validator on an
 * in-memory file. Every accepted tensor's bytes are touched, so a bounds
 * mistake shows up under ASan. */
#include <stddef.h>
#include <stdint.h>
#include "weights/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_file *f;
    dlm_err e;
    if (st_parse_buffer(data, size, "fuzz.safetensors", &f, &e)) return 0;
    volatile unsigned sum = 0;
    for (int i = 0; i < st_count(f); i++) {
        const st_tensor *t = st_at(f, i);
        if (t->nbytes) sum += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
        sum += st_find(f, t->name) == t;
    }
    (void)st_metadata(f, "format");
    st_close(f);
    (void)sum;
    return 0;
}
