/* Fuzz target: a SentencePiece `llama` vocabulary (what a GGUF's
 * tokenizer.ggml.* keys describe) built from arbitrary bytes, then encode
 * and decode. Input: tokens separated by '\n' (each token's first byte is
 * its type, its second a score), a NUL byte, then the text to encode (its
 * first byte picks the encode flags). Nothing may crash, leak or hit UB. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokens/tok.h"

#define MAX_TOKENS 512

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t vn = nul ? (size_t)(nul - data) : size;
    const char *text = nul ? (const char *)nul + 1 : "Hello world \xC3\xA9\n<s>x";
    size_t tn = nul ? size - vn - 1 : strlen(text);
    const char *toks[MAX_TOKENS];
    size_t lens[MAX_TOKENS];
    int32_t types[MAX_TOKENS];
    float scores[MAX_TOKENS];
    size_t n = 0, i = 0;
    while (i < vn && n < MAX_TOKENS) {
        const uint8_t *end = memchr(data + i, '\n', vn - i);
        size_t e = end ? (size_t)(end - data) : vn;
        if (e - i >= 3) {
            types[n] = 1 + data[i] % 6;
            scores[n] = (float)(int8_t)data[i + 1];
            toks[n] = (const char *)data + i + 2;
            lens[n] = e - i - 2;
            n++;
        }
        i = e + 1;
    }
    if (!n) return 0;
    tok_spec sp = {0};
    sp.model = "llama";
    sp.scores = scores;
    sp.add_space_prefix = tn & 1;
    sp.n_tokens = n;
    sp.tokens = toks;
    sp.token_lens = lens;
    sp.token_types = types;
    sp.bos_id = 0;
    sp.eos_id = (int32_t)(n - 1);
    sp.pad_id = sp.unk_id = -1;
    sp.add_bos = 1;
    dlm_err e;
    tok *t;
    if (tok_build(&sp, &t, &e)) return 0;
    int32_t *ids;
    size_t ni;
    if (!tok_encode(t, text, tn, tn ? (text[0] & 3) : 0, &ids, &ni, &e)) {
        strbuf sb = STRBUF_INIT;
        tok_decode(t, ids, ni, ni & 1, &sb);
        sb_free(&sb);
        free(ids);
    }
    tok_free(t);
    return 0;
}
