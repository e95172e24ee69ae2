/* The GGUF writer's output read back by the independent reader (src/weights/gguf.c). */
#include "check.h"

#include <string.h>
#include "weights/gguf.h"
#include "kern/dtype.h"
#include "weights/gguf.h"

static int fill(void *ctx, int index, void *dst, size_t n, dlm_err *e)
{
    (void)ctx; (void)e;
    for (size_t i = 0; i < n; i++) ((unsigned char *)dst)[i] = (unsigned char)(i * 7 + (size_t)index);
    return 0;
}

int main(void)
{
    const char *dir = check_tmpdir("test_gguf_writer");
    char path[4096];
    snprintf(path, sizeof path, "%s/x.gguf", dir);
    gguf_w *w = gguf_w_new();
    CHECK_INT(gguf_w_str(w, "general.architecture", "llama"), 0);
    CHECK_INT(gguf_w_u32(w, "llama.block_count", 2), 0);
    CHECK_INT(gguf_w_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f), 0);
    CHECK_INT(gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 1), 0);
    const char *toks[] = {"a", "Ġb", "<|im_end|>"};
    CHECK_INT(gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 3), 0);
    int32_t types[] = {1, 1, 3};
    CHECK_INT(gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, 3), 0);
    CHECK_INT(gguf_w_u32(w, "llama.block_count", 3), -1); /* duplicate key */
    float v[64];
    for (int i = 0; i < 64; i++) v[i] = (float)i;
    int64_t ne1[1] = {64}, ne2[2] = {32, 3};
    CHECK_INT(gguf_w_tensor(w, "a.weight", DT_F32, 1, ne1, v, NULL, NULL), -1); /* refused after an error */
    dlm_err e;
    /* the first error is sticky */
    CHECK_INT(gguf_w_write(w, path, &e), -1);
    CHECK(strstr(e.msg, "duplicate GGUF key") != NULL);
    gguf_w_free(w);

    w = gguf_w_new();
    gguf_w_str(w, "general.architecture", "llama");
    gguf_w_u32(w, "llama.block_count", 2);
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 3);
    gguf_w_tensor(w, "a.weight", DT_F32, 1, ne1, v, NULL, NULL);
    gguf_w_tensor(w, "b.weight", DT_Q8_0, 2, ne2, NULL, fill, NULL);
    CHECK_INT(gguf_w_write(w, path, &e), 0);
    gguf_w_free(w);
    gguf_file *g;
    CHECK_MSG(gguf_open(path, &g, &e) == 0, "%s", e.msg);
    if (!g) return check_done();
    uint32_t u;
    CHECK_INT(gguf_get_u32(g, gguf_find_key(g, "llama.block_count"), &u, &e), 0);
    CHECK_INT(u, 2);
    size_t l;
    CHECK_STR(gguf_arr_str(g, gguf_find_key(g, "tokenizer.ggml.tokens"), 1, &l), "Ġb");
    const gguf_tensor *t = gguf_find_tensor(g, "b.weight");
    CHECK(t && t->type == DT_Q8_0 && t->ne[0] == 32 && t->ne[1] == 3 && t->nbytes == 3 * 34);
    CHECK(t && t->offset % 32 == 0 && t->offset == 256); /* after a.weight, padded to 32 */
    gguf_close(g);
    return check_done();
}
