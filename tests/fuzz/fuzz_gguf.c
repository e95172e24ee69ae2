/* libFuzzer target: the GGUF reader on an in-memory file, then every
 * accessor over what it accepted (typed getters, arrays, tensors). */
#include <stddef.h>
#include <stdint.h>
#include "weights/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gguf_file *g;
    dlm_err e;
    if (gguf_parse_buffer(data, size, "fuzz.gguf", &g, &e)) return 0;
    volatile double acc = 0;
    for (int i = 0; i < gguf_kv_count(g); i++) {
        const char *k = gguf_key(g, i), *s;
        size_t n;
        acc += gguf_find_key(g, k) == i;
        uint32_t u;
        int32_t i32;
        float f;
        int b;
        int64_t iv;
        double d;
        if (!gguf_get_u32(g, i, &u, &e)) acc += u;
        if (!gguf_get_i32(g, i, &i32, &e)) acc += i32;
        if (!gguf_get_f32(g, i, &f, &e)) acc += f;
        if (!gguf_get_bool(g, i, &b, &e)) acc += b;
        if (!gguf_get_str(g, i, &s, &n, &e) && n) acc += s[n - 1];
        if (!gguf_get_int(g, i, &iv, &e)) acc += (double)iv;
        if (!gguf_get_num(g, i, &d, &e)) acc += d;
        gguf_vtype et;
        uint64_t cnt;
        if (!gguf_arr_info(g, i, &et, &cnt, &e)) {
            for (uint64_t j = 0; j < cnt && j < 64; j++) {
                if (gguf_arr_str(g, i, j, &n) && n) acc += 1;
                if (!gguf_arr_int(g, i, j, &iv)) acc += (double)iv;
                if (!gguf_arr_num(g, i, j, &d)) acc += d;
            }
            if (cnt) acc += gguf_arr_int(g, i, cnt, &iv) == 0;  /* out of range: refused */
        }
    }
    for (int i = 0; i < gguf_tensor_count(g); i++) {
        const gguf_tensor *t = gguf_tensor_at(g, i);
        if (t->nbytes) acc += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
        acc += gguf_find_tensor(g, t->name) == t;
    }
    gguf_close(g);
    (void)acc;
    return 0;
}
