/* The embedded base's tokenizer trainer (tools/tiny/bpe.c, vocab.c):
 * merges on hand-worked corpora, tie breaking, the ByteLevel alphabet, the
 * trainer's own segmentation against src/tok's encoder, and the same ids
 * through tokenizer.json, the tok_spec arrays and a GGUF's tokenizer keys. */
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "check.h"
#include "gguf_out.h"
#include "tokens/tok_gguf.h"
#include "util/fs.h"
#include "vocab.h"

static bpe_trainer *train(const char *text, int vocab, int64_t min_count)
{
    bpe_trainer *t;
    dlm_err e;
    CHECK_INT(bpe_new(&t, &e), 0);
    CHECK_INT(bpe_add_text(t, text, strlen(text), &e), 0);
    CHECK_INT(bpe_train(t, vocab, min_count, &e), 0);
    return t;
}

static void check_merges(bpe_trainer *t, const char *const *want, int n)
{
    CHECK_INT(bpe_n_merges(t), n);
    for (int i = 0; i < n && i < bpe_n_merges(t); i++) {
        size_t len;
        const char *s = bpe_token(t, 256 + i, &len);
        char buf[64];
        snprintf(buf, sizeof buf, "%.*s", (int)len, s);
        CHECK_STR(buf, want[i]);
    }
}

/* "ab ab ab abc" → pre-tokens ab×1, " ab"×2, " abc"×1:
 * (a,b)=4 → ab; (' ',ab)=3 → " ab"; (" ab",c)=1 → " abc". */
static void test_hand_worked(void)
{
    bpe_trainer *t = train("ab ab ab abc", 300, 1);
    static const char *const want[] = {"ab", " ab", " abc"};
    check_merges(t, want, 3);
    CHECK_INT(bpe_n_words(t), 3);
    int l, r;
    bpe_merge(t, 1, &l, &r);
    CHECK_INT(l, ' ');
    CHECK_INT(r, 256);
    int32_t ids[8];
    CHECK_INT(bpe_word_ids(t, " abc", 4, ids, 8), 1);
    CHECK_INT(ids[0], 258);
    CHECK_INT(bpe_word_ids(t, "ab", 2, ids, 8), 1);
    CHECK_INT(ids[0], 256);
    bpe_free(t);
    /* min_count 2 stops before the pair seen once */
    t = train("ab ab ab abc", 300, 2);
    check_merges(t, want, 2);
    bpe_free(t);
    /* the vocabulary size stops it too */
    t = train("ab ab ab abc", 257, 1);
    check_merges(t, want, 1);
    CHECK_INT(bpe_vocab_size(t), 257);
    bpe_free(t);
}

/* Every pair once: ties go to the smallest (left bytes, right bytes). */
static void test_ties(void)
{
    bpe_trainer *t = train("xy zw", 300, 1);
    static const char *const want[] = {" z", " zw", "xy"};
    check_merges(t, want, 3);
    bpe_free(t);
    /* overlapping pairs: aaaa has (a,a) three times, merged left to right */
    t = train("aaaa", 300, 1);
    static const char *const want2[] = {"aa", "aaaa"};
    check_merges(t, want2, 2);
    bpe_free(t);
    /* contractions and digits are pre-tokens of their own (GPT-2 regex) */
    t = train("it's it's 1234 1234", 300, 2);
    int32_t ids[8];
    CHECK_INT(bpe_word_ids(t, "'s", 2, ids, 8), 1);
    CHECK_INT(bpe_word_ids(t, " 1234", 5, ids, 8), 1);
    CHECK_INT(bpe_word_ids(t, "it", 2, ids, 8), 1);
    CHECK_INT(bpe_word_ids(t, "it's", 4, ids, 8), -1);
    bpe_free(t);
}

static void test_byte_level(void)
{
    strbuf sb = STRBUF_INIT;
    bpe_byte_level(" \n\t\x7f\x80\xa0\xad!~\xa1\xff", 11, &sb);
    /* U+0120 U+010A U+0109 U+0121 U+0122 U+0142 U+0143, then ! ~ ¡ ÿ unchanged */
    CHECK_STR(sb_str(&sb), "\xc4\xa0\xc4\x8a\xc4\x89\xc4\xa1\xc4\xa2\xc5\x82\xc5\x83!~\xc2\xa1\xc3\xbf");
    sb_reset(&sb);
    bpe_byte_level("\x00", 1, &sb);
    CHECK_STR(sb_str(&sb), "\xc4\x80");
    sb_free(&sb);
}

static const char *const TEXT =
    "The water cycle moves water between the oceans, the air and the land. The sun heats the\n"
    "water, which evaporates; the vapour rises, cools and condenses into clouds. When the drops\n"
    "grow heavy they fall as rain, snow or hail. It's a loop: water that fell in 1999 may fall\n"
    "again in 2024. Rivers carry it back to the sea, and the cycle starts over.   Caf\xc3\xa9 na\xc3\xafve \xe2\x80\x94 done.\n";

/* Every distinct pre-token: src/tok's encoder (verified against HF) must
 * cut it exactly as the trainer's merges did. */
static void test_encoder_agrees(void)
{
    bpe_trainer *t = train(TEXT, 256 + 120, 1);
    CHECK_INT(bpe_vocab_size(t), 256 + 120);
    tiny_vocab v;
    dlm_err e;
    CHECK_INT(tiny_vocab_from_bpe(t, 1024, &v, &e), 0);
    CHECK_INT(v.n_tokens, 256 + 120 + 3);
    CHECK_INT(v.im_end, 256 + 120 + 2);
    tok_spec s;
    tiny_vocab_spec(&v, &s);
    tok *k;
    CHECK_MSG(tok_build(&s, &k, &e) == 0, "%s", e.msg);
    /* split TEXT into GPT-2 pre-tokens with a second trainer (no merges) */
    const char *words[] = {"The", " water", " cycle", " the", ",", ";", ":", "'s", " 1999", " 2024", ".",
                           " evaporates", "   ", " Caf\xc3\xa9", " na\xc3\xafve", " \xe2\x80\x94", "\n", " It"};
    int checked = 0;
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
        int32_t want[64], *got = NULL;
        size_t n = 0;
        int nw = bpe_word_ids(t, words[i], strlen(words[i]), want, 64);
        if (nw < 0) continue;
        CHECK_INT(tok_encode(k, words[i], strlen(words[i]), 0, &got, &n, &e), 0);
        CHECK_INT(n, nw);
        for (int j = 0; j < nw && j < (int)n; j++) CHECK_INT(got[j], want[j]);
        free(got);
        checked++;
    }
    CHECK(checked >= 14);
    /* decode gives the text back */
    int32_t *ids;
    size_t n;
    CHECK_INT(tok_encode(k, TEXT, strlen(TEXT), 0, &ids, &n, &e), 0);
    CHECK(n < strlen(TEXT) / 2);
    strbuf sb = STRBUF_INIT;
    CHECK_INT(tok_decode(k, ids, n, 0, &sb), 0);
    CHECK_STR(sb_str(&sb), TEXT);
    sb_free(&sb);

    /* the same ids through tokenizer.json + tokenizer_config.json ... */
    const char *dir = check_tmpdir("bpe");
    CHECK_MSG(tiny_vocab_write_hf(&v, dir, &e) == 0, "%s", e.msg);
    char p[4096];
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    tok *kj;
    CHECK_MSG(tok_load(p, NULL, &kj, &e) == 0, "%s", e.msg);
    /* ... and through a GGUF's tokenizer keys */
    snprintf(p, sizeof p, "%s/tok.gguf", dir);
    gguf_w *w = gguf_w_new();
    gguf_w_str(w, "general.architecture", "llama");
    CHECK_INT(tiny_gguf_tokenizer(w, &v), 0);
    CHECK_MSG(gguf_w_write(w, p, &e) == 0, "%s", e.msg);
    gguf_w_free(w);
    tok *kg;
    CHECK_MSG(tok_load_gguf(p, &kg, &e) == 0, "%s", e.msg);
    const char *chat = "<|im_start|>user\nWhat is rain?<|im_end|>\n<|im_start|>assistant\nWater that falls.<|im_end|>\n";
    const char *texts[] = {TEXT, chat};
    for (int ti = 0; ti < 2; ti++) {
        int32_t *a, *b, *c;
        size_t na, nb, nc;
        CHECK_INT(tok_encode(k, texts[ti], strlen(texts[ti]), TOK_PARSE_SPECIAL, &a, &na, &e), 0);
        CHECK_INT(tok_encode(kj, texts[ti], strlen(texts[ti]), TOK_PARSE_SPECIAL, &b, &nb, &e), 0);
        CHECK_INT(tok_encode(kg, texts[ti], strlen(texts[ti]), TOK_PARSE_SPECIAL, &c, &nc, &e), 0);
        CHECK_INT(nb, na);
        CHECK_INT(nc, na);
        CHECK(nb == na && !memcmp(a, b, na * 4));
        CHECK(nc == na && !memcmp(a, c, na * 4));
        if (ti == 1) {
            CHECK_INT(a[0], v.im_start);
            CHECK_INT(a[na - 2], v.im_end);
        }
        free(a); free(b); free(c);
    }
    tok *ks[3] = {k, kj, kg};
    for (int i = 0; i < 3; i++) {
        CHECK_INT(tok_eos(ks[i]), v.im_end);
        CHECK_INT(tok_pad(ks[i]), v.eot);
        CHECK_INT(tok_add_bos(ks[i]), 0);
        CHECK_INT((int)tok_vocab_size(ks[i]), v.n_tokens);
        CHECK_INT(tok_is_special(ks[i], v.im_start), 1);
        CHECK(tok_chat_template(ks[i]) && strstr(tok_chat_template(ks[i]), "<|im_start|>"));
        /* dlm's name for the pipeline, derived from its structure ("gpt2"),
         * or the name a GGUF stored: the tiny writer spells it "gpt-2", the
         * only spelling llama.cpp loads (tests/ref/r0602) */
        const char *pre;
        CHECK_INT(tok_pre_name(ks[i], &pre, &e), 0);
        CHECK_STR(pre, i == 2 ? "gpt-2" : "gpt2");
    }
    free(ids);
    tok_free(k); tok_free(kj); tok_free(kg);
    tiny_vocab_free(&v);
    bpe_free(t);
}

static void test_errors(void)
{
    bpe_trainer *t;
    dlm_err e;
    CHECK_INT(bpe_new(&t, &e), 0);
    CHECK_INT(bpe_train(t, 100, 1, &e), -1);   /* below 256 */
    bpe_free(t);
    CHECK_INT(bpe_new(&t, &e), 0);
    CHECK_INT(bpe_train(t, 300, 1, &e), 0);    /* no text: bytes only */
    CHECK_INT(bpe_vocab_size(t), 256);
    CHECK_INT(bpe_train(t, 300, 1, &e), -1);   /* once */
    CHECK_INT(bpe_add_text(t, "x", 1, &e), -1);
    bpe_free(t);
    /* invalid UTF-8 is refused, not matched */
    CHECK_INT(bpe_new(&t, &e), 0);
    CHECK_INT(bpe_add_text(t, "ok \xff\xfe", 5, &e), -1);
    CHECK_INT(bpe_add_text(t, "caf\xc3", 4, &e), -1);
    bpe_free(t);
}

int main(void)
{
    test_hand_worked();
    test_ties();
    test_byte_level();
    test_encoder_agrees();
    test_errors();
    return check_done();
}
