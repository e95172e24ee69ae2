/* libFuzzer target: config.json parsing (every architecture, v4 and v5
 * layouts) and, for accepted configs, the RoPE frequency tables (phi3's
 * LongRoPE: short and long). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include "weights/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    model_config c;
    dlm_err e;
    if (model_config_parse((const char *)data, size, "fuzz.json", &c, &e)) return 0;
    double *f = malloc((size_t)(c.head_dim / 2 + 1) * sizeof *f);
    if (f) {
        model_rope_freqs(&c, f);
        model_rope_freqs_longrope(&c, 1, f);
    }
    free(f);
    return 0;
}
