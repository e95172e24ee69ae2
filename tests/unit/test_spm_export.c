/* test_spm_export — what the GGUF export writes for a SentencePiece-style
 * tokenizer.json (llama.cpp's `llama` vocabulary, export/gguf_model.c), on a
 * hand-made vocabulary whose answers follow from the definitions (worked out
 * in the comments): scores from HF's merge ranks, <0xNN> typed BYTE,
 * add_space_prefix from the Prepend normalizer; and a `llama` vocabulary
 * built from those arrays (merged by score as llama.cpp's llm_tokenizer_spm
 * does, checked against llama.cpp's own vectors in tests/ref/r0103) splits
 * text as HF's rank-ordered BPE does. llama.cpp itself reads an export in
 * tests/ref/r0410. */
#include "check.h"
#include <stdlib.h>
#include <string.h>
#include "tokens/tok.h"

#define U "\xE2\x96\x81" /* ▁ */

static const char JSON[] =
    "{\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"fuse_unk\":true,\"byte_fallback\":true,"
    "\"vocab\":{\"<unk>\":0,\"" U "\":1,\"h\":2,\"i\":3,\"t\":4,\"hi\":5,\"" U "hi\":6,\"" U "t\":7,"
    "\"<0xC3>\":8,\"<0xA9>\":9,\"hit\":10},"
    "\"merges\":[\"h i\",\"" U " hi\",\"" U " t\"]},"
    "\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"special\":true}],"
    "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"" U "\"},"
    "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"" U "\"}]},"
    "\"pre_tokenizer\":null,"
    "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"" U
    "\"},\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},"
    "{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]}}";

static void ids_of(tok *t, const char *text, int32_t **ids, size_t *n)
{
    dlm_err e;
    *ids = NULL;
    *n = 0;
    CHECK_MSG(tok_encode(t, text, strlen(text), 0, ids, n, &e) == 0, "encode \"%s\": %s", text, e.msg);
}

int main(void)
{
    dlm_err e;
    tok *t;
    CHECK_MSG(tok_load_mem(JSON, sizeof JSON - 1, NULL, 0, "spm.json", &t, &e) == 0, "%s", e.msg);
    if (!t) return check_done();
    CHECK(tok_is_spm(t));
    CHECK_INT(tok_add_space_prefix(t), 1); /* the Prepend("▁") normalizer */

    /* scores: -rank of the merge that makes the token ("hi" 0, "▁hi" 1,
     * "▁t" 2); one char, byte pieces and the added <unk> 0; "hit", which no
     * merge makes, below every merge: -(3 merges) - 1; past the vocabulary 0 */
    enum { V = 12 };
    float sc[V];
    CHECK_INT(tok_spm_scores(t, sc, V), 0);
    const float want[V] = {0, 0, 0, 0, 0, -0.0f, -1, -2, 0, 0, -4, 0};
    for (int i = 0; i < V; i++) CHECK_MSG(sc[i] == want[i], "score of %d: %g, expected %g", i, sc[i], want[i]);
    /* types as llama.cpp's converter gives them (gguf-py vocab.py LlamaHfVocab) */
    CHECK_INT(tok_token_type(t, 0), TOK_TYPE_CONTROL);
    CHECK_INT(tok_token_type(t, 6), TOK_TYPE_NORMAL);
    CHECK_INT(tok_token_type(t, 8), TOK_TYPE_BYTE);
    CHECK_INT(tok_token_type(t, 9), TOK_TYPE_BYTE);

    /* the `llama` vocabulary the export writes, read back as a GGUF reader does */
    size_t nt = tok_vocab_size(t);
    const char **toks = calloc(nt, sizeof *toks);
    int32_t *types = calloc(nt, sizeof *types);
    for (size_t i = 0; toks && types && i < nt; i++) {
        toks[i] = strdup(tok_token_str(t, (int32_t)i, NULL));
        types[i] = tok_token_type(t, (int32_t)i);
    }
    tok_spec sp = {.n_tokens = nt, .tokens = toks, .token_types = types, .model = "llama", .scores = sc,
                   .add_space_prefix = tok_add_space_prefix(t), .bos_id = -1, .eos_id = -1, .pad_id = -1,
                   .unk_id = 0};
    tok *g = NULL;
    CHECK_MSG(tok_build(&sp, &g, &e) == 0, "%s", e.msg);
    /* "hi hit é" -> ▁ h i ▁ h i t ▁ é. HF: "h i" (rank 0), then "▁ hi" (1)
     * twice; "hit" is no merge; é has no piece -> bytes C3 A9:
     * ▁hi ▁hi t ▁ <0xC3> <0xA9>. By score: "hi" (0) first, then "▁hi" (-1)
     * before "hit" (-4), the same pieces. Were "hit" scored 0, "hi t" would
     * merge first and leave ▁ hit. */
    const char *texts[] = {"hi hit \xC3\xA9", "hit", " t hi", "thi"};
    const int32_t first[] = {6, 6, 4, 1, 8, 9};
    for (size_t k = 0; g && k < sizeof texts / sizeof texts[0]; k++) {
        int32_t *a, *b;
        size_t na, nb;
        ids_of(t, texts[k], &a, &na);
        ids_of(g, texts[k], &b, &nb);
        int same = na == nb;
        for (size_t i = 0; same && i < na; i++) same = a[i] == b[i];
        CHECK_MSG(same, "\"%s\": the `llama` vocabulary splits it otherwise (%zu vs %zu ids)", texts[k], nb, na);
        if (k == 0) {
            CHECK_INT(na, 6);
            for (size_t i = 0; i < na && i < 6; i++) CHECK_INT(a[i], first[i]);
        }
        free(a);
        free(b);
    }
    for (size_t i = 0; toks && i < nt; i++) free((void *)toks[i]);
    free(toks);
    free(types);
    tok_free(g);
    tok_free(t);
    return check_done();
}
