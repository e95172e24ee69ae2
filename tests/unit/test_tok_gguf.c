/* A tokenizer rebuilt from GGUF metadata gives the ids of the tokenizer.json
 * it was written from (the fixture GGUFs carry tokenizer.ggml.* keys made by
 * tests/ref/model/gguf_write.py from the folder's tokenizer.json). */
#include "check.h"

#include <stdlib.h>
#include <string.h>
#include "tokens/tok_gguf.h"
#include "util/fs.h"

#define FIX "tests/ref/model/fixtures/"

static const char *TEXTS[] = {
    "Hello world, this is a test.",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>",
    "  leading spaces\tand tabs\n\nnewlines 12345 numbers 3.14159",
    "ünïcödé — “quotes” and emoji 🎉 with CJK 漢字 and العربية",
    "don't won't I'm you're they've we'd",
    "",
};

static void compare(const char *dir, const char *gguf)
{
    dlm_err e;
    tok *a, *b;
    CHECK_MSG(tok_load_for_model(dir, &a, &e) == 0, "%s", e.msg);
    CHECK_MSG(tok_load_for_model(gguf, &b, &e) == 0, "%s", e.msg);
    if (!a || !b) return;
    CHECK_INT(tok_vocab_size(a), tok_vocab_size(b));
    CHECK_INT(tok_eos(a), tok_eos(b));
    /* BOS may differ: like llama.cpp's converter, the GGUF takes bos_token_id
     * from config.json when tokenizer_config.json has none. */
    for (size_t i = 0; i < sizeof TEXTS / sizeof TEXTS[0]; i++)
        for (int flags = 0; flags <= TOK_PARSE_SPECIAL; flags += TOK_PARSE_SPECIAL) {
            int32_t *x, *y;
            size_t nx, ny;
            CHECK_INT(tok_encode(a, TEXTS[i], strlen(TEXTS[i]), flags, &x, &nx, &e), 0);
            CHECK_INT(tok_encode(b, TEXTS[i], strlen(TEXTS[i]), flags, &y, &ny, &e), 0);
            CHECK_MSG(nx == ny && !memcmp(x, y, nx * sizeof *x), "%s: ids differ for text %zu", gguf, i);
            free(x);
            free(y);
        }
    CHECK(tok_chat_template(b) != NULL);
    tok_free(a);
    tok_free(b);
}

int main(void)
{
    compare(FIX "llama-bf16", FIX "llama-bf16.q8_0.gguf");
    compare(FIX "qwen2-f32", FIX "qwen2-f32.f16.gguf");
    dlm_err e;
    tok *t;
    CHECK_INT(tok_load_for_model(FIX, &t, &e), -1);      /* a folder without tokenizer.json */
    CHECK(strstr(e.msg, "tokenizer.json") != NULL);
    return check_done();
}
