/* Fuzz target: tok_load_mem on arbitrary bytes, then, when it loads, encode
 * and decode a text and walk the accessors. Input: tokenizer.json bytes,
 * optionally followed by a NUL byte and the text to encode (its first byte
 * picks the encode flags). Nothing may crash, leak or hit UB. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tokens/tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *json = (const char *)data;
    const uint8_t *nul = memchr(data, 0, size);
    size_t jn = nul ? (size_t)(nul - data) : size;
    const char *text = nul ? (const char *)nul + 1 : "Hello world! It's 2024 <|im_start|> 你好 \xF0\x9F\x91\x8D";
    size_t tn = nul ? size - jn - 1 : strlen(text);
    dlm_err e;
    tok *t;
    if (tok_load_mem(json, jn, NULL, 0, "fuzz.json", &t, &e)) return 0;
    int flags = tn ? (text[0] & 3) : TOK_PARSE_SPECIAL;
    int32_t *ids;
    size_t n;
    if (!tok_encode(t, text, tn, flags, &ids, &n, &e)) {
        strbuf sb = STRBUF_INIT;
        tok_decode(t, ids, n, n & 1, &sb);
        sb_free(&sb);
        for (size_t i = 0; i < n; i++) {
            size_t l;
            tok_token_bytes(t, ids[i], &l);
        }
        free(ids);
    }
    const char *pre;
    tok_pre_name(t, &pre, &e);
    strbuf m = STRBUF_INIT;
    size_t nm = tok_n_merges(t);
    for (size_t i = 0; i < nm && i < 8; i++) tok_merge_str(t, i, &m);
    sb_free(&m);
    size_t nv = tok_vocab_size(t);
    for (size_t i = 0; i < nv && i < 64; i++) {
        size_t l;
        tok_token_str(t, (int32_t)i, &l);
        tok_token_type(t, (int32_t)i);
        tok_is_special(t, (int32_t)i);
    }
    tok_find(t, "<|im_start|>");
    tok_free(t);
    return 0;
}
