/* test_tok_spm — SentencePiece-style vocabularies on hand-made tokenizers
 * whose answers follow from the algorithms' definitions (worked out in the
 * comments): HF's char-level BPE with byte_fallback and unk, the
 * Prepend/Replace normalizers and the Replace/ByteFallback/Fuse/Strip
 * decoder; llama.cpp's score-ordered SPM merging of a `llama` GGUF
 * vocabulary. The real vocabularies are checked against HF tokenizers and
 * llama.cpp's own vectors in tests/ref/r0101 and r0103. */
#include "check.h"
#include <stdlib.h>
#include <string.h>
#include "tokens/tok.h"
#include "util/str.h"

#define U "\xE2\x96\x81" /* ▁ */

static void expect(tok *t, const char *text, int flags, const int *want)
{
    dlm_err e;
    int32_t *ids;
    size_t n;
    int rc = tok_encode(t, text, strlen(text), flags, &ids, &n, &e);
    CHECK_MSG(rc == 0, "encode \"%s\": %s", text, e.msg);
    if (rc) return;
    size_t nw = 0;
    while (want[nw] >= 0) nw++;
    int same = n == nw;
    for (size_t i = 0; same && i < n; i++) same = ids[i] == want[i];
    strbuf got = STRBUF_INIT;
    for (size_t i = 0; i < n; i++) sb_printf(&got, " %d", ids[i]);
    CHECK_MSG(same, "encode \"%s\" gave [%s ]", text, sb_str(&got));
    sb_free(&got);
    free(ids);
}

static void expect_decode(tok *t, const int32_t *ids, size_t n, int skip, const char *want)
{
    strbuf out = STRBUF_INIT;
    CHECK_INT(tok_decode(t, ids, n, skip, &out), 0);
    CHECK_STR(sb_str(&out), want);
    sb_free(&out);
}

static void test_json_bpe(void)
{
    const char *json =
        "{\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"fuse_unk\":true,\"byte_fallback\":true,"
        "\"vocab\":{\"<unk>\":0,\"" U "\":1,\"h\":2,\"i\":3,\"hi\":4,\"" U "hi\":5,\"<0xC3>\":6,\"<0xA9>\":7},"
        "\"merges\":[\"h i\",\"" U " hi\"]},"
        "\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"special\":true}],"
        "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"" U "\"},"
        "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"" U "\"}]},"
        "\"pre_tokenizer\":null,"
        "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"" U
        "\"},\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},"
        "{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]}}";
    dlm_err e;
    tok *t;
    CHECK_MSG(tok_load_mem(json, strlen(json), NULL, 0, "spm.json", &t, &e) == 0, "%s", e.msg);
    if (!t) return;
    /* "hi é" -> "▁hi▁é": chars ▁ h i ▁ é, é not in the vocabulary -> its
     * bytes C3 A9; merges "h i" (rank 0) then "▁ hi" (rank 1). */
    expect(t, "hi \xC3\xA9", 0, (const int[]){5, 1, 6, 7, -1});
    /* "x" is unknown with no <0x78>: unk; "xx" fuses into one unk. */
    expect(t, "x", 0, (const int[]){1, 0, -1});
    expect(t, "xx", 0, (const int[]){1, 0, -1});
    /* Prepend acts on every piece between added tokens. */
    expect(t, "hi<unk>hi", TOK_PARSE_SPECIAL, (const int[]){5, 0, 5, -1});
    expect(t, "", 0, (const int[]){-1});
    /* Decode: ▁ -> space, the byte run C3 A9 -> é, fused, one leading space
     * stripped; a lone invalid byte is U+FFFD. */
    expect_decode(t, (const int32_t[]){5, 1, 6, 7}, 4, 0, "hi \xC3\xA9");
    expect_decode(t, (const int32_t[]){6, 2}, 2, 0, "\xEF\xBF\xBDh");
    expect_decode(t, (const int32_t[]){0, 5}, 2, 0, "<unk> hi");
    expect_decode(t, (const int32_t[]){0, 5}, 2, 1, "hi");
    size_t bl;
    const char *b = tok_token_bytes(t, 5, &bl);
    CHECK(b && bl == 3 && !memcmp(b, " hi", 3));
    b = tok_token_bytes(t, 6, &bl);
    CHECK(b && bl == 1 && (unsigned char)b[0] == 0xC3);
    const char *name;
    CHECK_INT(tok_pre_name(t, &name, &e), -1); /* no byte-level pre-tokenizer name (exported as `llama`) */
    CHECK(strstr(e.msg, "SentencePiece") != NULL);
    tok_free(t);
}

static void test_metaspace(void)
{
    /* Metaspace prepend_scheme "first": only the piece that starts the input
     * gets the ▁; a piece after an added token does not. */
    const char *json =
        "{\"model\":{\"type\":\"BPE\",\"byte_fallback\":false,"
        "\"vocab\":{\"<s>\":0,\"" U "\":1,\"a\":2,\"" U "a\":3},\"merges\":[\"" U " a\"]},"
        "\"added_tokens\":[{\"id\":0,\"content\":\"<s>\",\"special\":true}],"
        "\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"" U "\",\"prepend_scheme\":\"first\",\"split\":false},"
        "\"decoder\":{\"type\":\"Metaspace\",\"replacement\":\"" U "\",\"prepend_scheme\":\"first\",\"split\":false}}";
    dlm_err e;
    tok *t;
    CHECK_MSG(tok_load_mem(json, strlen(json), NULL, 0, "ms.json", &t, &e) == 0, "%s", e.msg);
    if (!t) return;
    expect(t, "a a", 0, (const int[]){3, 3, -1});
    expect(t, "<s>a", TOK_PARSE_SPECIAL, (const int[]){0, 2, -1});
    expect(t, " a", 0, (const int[]){3, -1}); /* already starts with ▁: nothing prepended */
    expect_decode(t, (const int32_t[]){3, 3}, 2, 0, "a a");
    tok_free(t);
}

static void test_llama_spm(void)
{
    /* A `llama` GGUF vocabulary: merged by score, highest first. */
    const char *toks[] = {"<unk>", "<s>", "</s>", "<0x0A>", "<0xC3>", "<0xA9>", U, "a", "b", "ab", U "a", U "ab", "bb"};
    const int32_t types[] = {2, 3, 3, 6, 6, 6, 1, 1, 1, 1, 1, 1, 1};
    const float scores[] = {0, 0, 0, 0, 0, 0, -5, -6, -7, -1, -2, -3, -0.5f};
    tok_spec sp = {0};
    sp.model = "llama";
    sp.scores = scores;
    sp.add_space_prefix = 1;
    sp.n_tokens = sizeof toks / sizeof toks[0];
    sp.tokens = toks;
    sp.token_types = types;
    sp.bos_id = 1;
    sp.eos_id = 2;
    sp.pad_id = -1;
    sp.unk_id = 0;
    sp.add_bos = 1;
    dlm_err e;
    tok *t;
    CHECK_MSG(tok_build(&sp, &t, &e) == 0, "%s", e.msg);
    if (!t) return;
    /* "▁ab": pairs ▁a (-2) and ab (-1); ab wins, then ▁+ab = ▁ab (-3). */
    expect(t, "ab", 0, (const int[]){11, -1});
    /* "▁abb": bb (-0.5) first, then ▁a (-2); "abb"/"▁abb" are no tokens. */
    expect(t, "abb", 0, (const int[]){10, 12, -1});
    /* é and \n are no tokens: their bytes. */
    expect(t, "\xC3\xA9\n", 0, (const int[]){6, 4, 5, 3, -1});
    expect(t, "ab", TOK_ADD_SPECIAL, (const int[]){1, 11, -1});
    expect(t, "<s>ab", TOK_PARSE_SPECIAL, (const int[]){1, 11, -1});
    expect_decode(t, (const int32_t[]){1, 11}, 2, 0, "<s> ab");
    expect_decode(t, (const int32_t[]){1, 11}, 2, 1, "ab");
    expect_decode(t, (const int32_t[]){1, 2}, 2, 1, ""); /* nothing left after skipping (found by fuzz_tok_spm) */
    expect_decode(t, (const int32_t[]){6, 4, 5, 3}, 4, 0, "\xC3\xA9\n");
    /* No scores: refused. */
    sp.scores = NULL;
    tok *r;
    CHECK_INT(tok_build(&sp, &r, &e), -1);
    tok_free(t);
}

int main(void)
{
    test_json_bpe();
    test_metaspace();
    test_llama_spm();
    return check_done();
}
