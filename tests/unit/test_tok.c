/* Unit tests for src/tok: a small hand-made byte-level BPE tokenizer whose
 * ids are worked out by hand below, malformed files, the ByteLevel table,
 * lossy decoding, and the tok_spec (GGUF metadata) round trip.
 *
 * Extra modes, used by tests/ref/r0101-slow-tokenizer-hf.sh on real tokenizers:
 *   test_tok --spec-roundtrip TOKENIZER.json CORPUS
 *       rebuild the tokenizer from its own accessors (what a GGUF holds) and
 *       check identical ids and decodes for every corpus line
 *   test_tok --vocab-test TOKENIZER.json FILE.inp FILE.out
 *       llama.cpp's vocab test vectors (add_special=false, parse_special=false) */
#include "check.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokens/tok.h"
#include "tokens/tok_impl.h"
#include "util/fs.h"
#include "util/str.h"

/* ---- a hand-made tokenizer ----------------------------------------------------------
 * ids 0..255: the ByteLevel char of byte b has id b. Then merges, in rank order:
 *   256 "Ġ t"  -> "Ġt"      259 "i n"  -> "in"      262 "1 2" -> "12"
 *   257 "h e"  -> "he"      260 "Ġ Ġ"  -> "ĠĠ"      263 "Ġ c" -> "Ġc"
 *   258 "Ġt he"-> "Ġthe"    261 "c a"  -> "ca"      264 "ca t"-> "cat"
 * Added: 265 "<|im_start|>" (special), 266 "<tool>" (not special). */
/* GPT-2 bytes_to_unicode, written out independently of tok_core.c. */
static unsigned byte_char(int b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return (unsigned)b;
    if (b <= 0x20) return 0x100 + (unsigned)b;
    if (b == 0x7F) return 0x121;
    if (b <= 0xA0) return 0x122 + (unsigned)(b - 0x80);
    return 0x143;
}

static void test_bytelevel_table(void)
{
    int bad = 0;
    for (int b = 0; b < 256; b++) {
        bad += tok_byte_to_char((unsigned)b) != byte_char(b);
        bad += tok_char_to_byte(byte_char(b)) != b;
    }
    CHECK_INT(bad, 0);
    CHECK_INT(tok_byte_to_char(' '), 0x120);  /* 'Ġ' */
    CHECK_INT(tok_byte_to_char('\n'), 0x10A); /* 'Ċ' */
    CHECK_INT(tok_char_to_byte(0x20), -1);    /* a plain space is not a ByteLevel char */
    CHECK_INT(tok_char_to_byte(0x144), -1);
    CHECK_INT(tok_char_to_byte(0xAD), -1);
}

/* The NFC quick check against utf8proc's full NFC, over every code point:
 * a quick-stable char is its own NFC, and no quick-stable char is the
 * last char of a canonical decomposition of two or more chars (the second
 * element of a composition), so two quick-stable chars never compose. */
static void test_nfc_quick_check(void)
{
    size_t stable = 0, wrong_self = 0, wrong_second = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        utf8proc_int32_t buf[32];
        int last = 0;
        utf8proc_ssize_t k = utf8proc_decompose_char((utf8proc_int32_t)cp, buf, 32, UTF8PROC_DECOMPOSE, &last);
        if (k >= 2 && tok_nfc_quick_stable((uint32_t)buf[k - 1])) {
            if (wrong_second++ < 3) fprintf(stderr, "U+%04X decomposes and ends with quick-stable U+%04X\n", cp, (unsigned)buf[k - 1]);
        }
        if (!tok_nfc_quick_stable(cp)) continue;
        stable++;
        utf8proc_uint8_t in[8], *outp = NULL;
        utf8proc_ssize_t l = utf8proc_encode_char((utf8proc_int32_t)cp, in);
        utf8proc_ssize_t r = utf8proc_map(in, l, &outp, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        if (r != l || memcmp(outp, in, (size_t)l)) {
            if (wrong_self++ < 3) fprintf(stderr, "quick-stable U+%04X changes under NFC\n", cp);
        }
        free(outp);
    }
    CHECK_INT(wrong_self, 0);
    CHECK_INT(wrong_second, 0);
    /* Hangul: an LV syllable + T jamo composes; the jamo is not quick-stable. */
    CHECK(!tok_nfc_quick_stable(0x11A8));
    CHECK(tok_nfc_quick_stable(0xAC00));
    CHECK(stable > 200000);
}

static char *make_json(const char *pre, const char *norm, int ignore_merges, const char *post)
{
    strbuf sb = STRBUF_INIT;
    sb_puts(&sb, "{\"version\":\"1.0\",\"added_tokens\":["
                 "{\"id\":265,\"content\":\"<|im_start|>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true},"
                 "{\"id\":266,\"content\":\"<tool>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":false}],");
    sb_printf(&sb, "\"normalizer\":%s,\"pre_tokenizer\":%s,\"post_processor\":%s,", norm, pre, post);
    sb_printf(&sb, "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"ignore_merges\":%s,\"vocab\":{",
              ignore_merges ? "true" : "false");
    for (int b = 0; b < 256; b++) {
        unsigned c = byte_char(b);
        char u[8];
        if (c < 0x80) {
            if (c == '"' || c == '\\') snprintf(u, sizeof u, "\\%c", (char)c);
            else snprintf(u, sizeof u, "%c", (char)c);
        } else snprintf(u, sizeof u, "%c%c", (char)(0xC0 | (c >> 6)), (char)(0x80 | (c & 0x3F)));
        sb_printf(&sb, "\"%s\":%d,", u, b);
    }
    sb_puts(&sb, "\"Ġt\":256,\"he\":257,\"Ġthe\":258,\"in\":259,\"ĠĠ\":260,\"ca\":261,\"12\":262,\"Ġc\":263,\"cat\":264},"
                 "\"merges\":[\"Ġ t\",[\"h\",\"e\"],\"Ġt he\",\"i n\",\"Ġ Ġ\",\"c a\",\"1 2\",\"Ġ c\",\"ca t\"]}}");
    return sb_detach(&sb, NULL);
}

static const char *PRE_QWEN =
    "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
    "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
    "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]}";
static const char *PRE_GPT2 = "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}";
static const char *POST_BOS =
    "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<|im_start|>\",\"type_id\":0}},"
    "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{\"<|im_start|>\":{\"id\":\"<|im_start|>\",\"ids\":[265]}}}";

static tok *load_json(const char *json, const char *cfg)
{
    dlm_err e;
    tok *t = NULL;
    if (tok_load_mem(json, strlen(json), cfg, cfg ? strlen(cfg) : 0, "test.json", &t, &e)) {
        fprintf(stderr, "load failed: %s\n", e.msg);
        return NULL;
    }
    return t;
}

/* Encode and compare with the expected ids (terminated by -1). */
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

static void test_handmade(void)
{
    char *json = make_json(PRE_QWEN, "{\"type\":\"NFC\"}", 0, "{\"type\":\"ByteLevel\"}");
    tok *t = load_json(json, "{\"eos_token\":\"<|im_start|>\",\"pad_token\":{\"content\":\"<tool>\"},\"chat_template\":\"X\"}");
    free(json);
    CHECK(t != NULL);
    if (!t) return;
    const int P = TOK_PARSE_SPECIAL;
    /* " the": Ġ t h e -> (Ġ,t) rank 0 and (h,e) rank 1 -> Ġt he -> Ġthe. */
    expect(t, " the", P, (const int[]){258, -1});
    /* "the": t h e -> t he (no "t he" merge). */
    expect(t, "the", P, (const int[]){'t', 257, -1});
    /* Three spaces then x: regex gives "  " (\s+(?!\S)) and " x"; "ĠĠ" merges. */
    expect(t, "   x", P, (const int[]){260, 32, 'x', -1});
    /* Tie between equal-rank pairs: leftmost first -> ĠĠ + Ġ. */
    expect(t, "   ", P, (const int[]){260, 32, -1});
    /* Qwen splits digits one by one, so "12" never merges. */
    expect(t, "12", P, (const int[]){'1', '2', -1});
    /* "cat": c a t -> ca t -> cat; " cat": (Ġ,c) rank 7 vs (c,a) rank 5 -> Ġ ca t -> Ġ cat. */
    expect(t, "cat", P, (const int[]){264, -1});
    expect(t, " cat", P, (const int[]){32, 264, -1});
    /* Added tokens: special only with TOK_PARSE_SPECIAL, non-special always. */
    expect(t, "<|im_start|>the<tool>", P, (const int[]){265, 't', 257, 266, -1});
    expect(t, "<|im_start|>", 0, (const int[]){'<', '|', 'i', 'm', '_', 's', 't', 'a', 'r', 't', '|', '>', -1});
    expect(t, "<tool>", 0, (const int[]){266, -1});
    /* NFC: e + U+0301 composes to é (C3 A9) -> two byte symbols. */
    expect(t, "e\xCC\x81", P, (const int[]){0xC3, 0xA9, -1});
    /* U+180E is not whitespace for HF (Oniguruma): " \u180e" stays one piece
     * with the space, then "1". */
    expect(t, " \xE1\xA0\x8E" "1", P, (const int[]){32, 0xE1, 0xA0, 0x8E, '1', -1});
    expect(t, "", P, (const int[]){-1});
    CHECK_INT(tok_eos(t), 265);
    CHECK_INT(tok_pad(t), 266);
    CHECK_INT(tok_bos(t), -1);
    CHECK_INT(tok_add_bos(t), 0);
    CHECK_STR(tok_chat_template(t), "X");
    CHECK_INT(tok_find(t, "Ġthe"), 258);
    CHECK_INT(tok_find(t, "<tool>"), 266);
    CHECK_INT(tok_find(t, "nope"), -1);
    CHECK(tok_is_special(t, 265));
    CHECK(!tok_is_special(t, 266));
    CHECK(!tok_is_special(t, 258));
    CHECK_INT(tok_vocab_size(t), 267);
    CHECK_INT(tok_token_type(t, 258), TOK_TYPE_NORMAL);
    CHECK_INT(tok_token_type(t, 265), TOK_TYPE_CONTROL);
    CHECK_INT(tok_token_type(t, 266), TOK_TYPE_USER_DEFINED);
    CHECK_INT(tok_n_merges(t), 9);
    strbuf m = STRBUF_INIT;
    CHECK_INT(tok_merge_str(t, 2, &m), 0);
    CHECK_STR(sb_str(&m), "Ġt he");
    CHECK_INT(tok_merge_str(t, 1, &m), 0);
    CHECK_STR(sb_str(&m), "h e");
    CHECK_INT(tok_merge_str(t, 9, &m), -1);
    sb_free(&m);
    const char *name;
    dlm_err e;
    CHECK_INT(tok_pre_name(t, &name, &e), 0);
    CHECK_STR(name, "qwen2");

    /* Decoding: bytes of each token, then lossy UTF-8; specials skipped on request. */
    strbuf d = STRBUF_INIT;
    int32_t ids[] = {265, 258, 32, 264, 0xC3, 0xA9};
    CHECK_INT(tok_decode(t, ids, 6, 0, &d), 0);
    CHECK_STR(sb_str(&d), "<|im_start|> the caté");
    sb_reset(&d);
    CHECK_INT(tok_decode(t, ids, 6, 1, &d), 0);
    CHECK_STR(sb_str(&d), " the caté");
    sb_reset(&d);
    int32_t bad[] = {'a', 0xE4, 'b', 0xF0, 0x9F, 0xC0};  /* truncated 3- and 4-byte chars, a C0 */
    CHECK_INT(tok_decode(t, bad, 6, 0, &d), 0);
    CHECK_STR(sb_str(&d), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD");
    int32_t oob[] = {999};
    CHECK_INT(tok_decode(t, oob, 1, 0, &d), -1);
    sb_free(&d);
    size_t bl;
    const char *tb = tok_token_bytes(t, 258, &bl);
    CHECK(tb && bl == 4 && !memcmp(tb, " the", 4));
    CHECK(tok_token_bytes(t, -1, &bl) == NULL);

    /* Invalid UTF-8 input is an error, not a crash. */
    int32_t *o;
    size_t on;
    CHECK_INT(tok_encode(t, "a\xFF", 2, P, &o, &on, &e), -1);
    tok_free(t);
}

static void test_post_and_ignore_merges(void)
{
    /* ignore_merges: a pre-token that is a vocab entry is taken whole. With
     * GPT-2's regex, " the" is one pre-token and in the vocab either way;
     * "inthe" is not in the vocab and merges normally. */
    char *json = make_json(PRE_GPT2, "null", 1, POST_BOS);
    tok *t = load_json(json, NULL);
    free(json);
    CHECK(t != NULL);
    if (!t) return;
    expect(t, " the", 0, (const int[]){258, -1});
    expect(t, "inthe", 0, (const int[]){259, 't', 257, -1});
    expect(t, "12", 0, (const int[]){262, -1});  /* GPT-2 keeps digit runs together */
    expect(t, " the", TOK_ADD_SPECIAL, (const int[]){265, 258, -1});
    CHECK_INT(tok_add_bos(t), 1);
    CHECK_INT(tok_bos(t), 265);
    const char *name;
    dlm_err e;
    CHECK_INT(tok_pre_name(t, &name, &e), -1);   /* GPT-2 regex but ignore_merges: no llama.cpp name */
    tok_free(t);
}

/* A vocabulary without some byte chars and no unk token: HF drops those
 * bytes silently (BPE merge_word skips chars it cannot find). */
static void test_missing_bytes(void)
{
    const char *json = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]},"
                       "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false}}";
    tok *t = load_json(json, NULL);
    CHECK(t != NULL);
    if (!t) return;
    expect(t, "ab c", 0, (const int[]){2, -1});
    expect(t, " c", 0, (const int[]){-1});
    expect(t, " c", 0, (const int[]){-1}); /* second time from the cache */
    tok_free(t);
}

static void test_bad_files(void)
{
    const char *bad[] = {
        "",
        "[]",
        "{\"model\":{}}",
        "{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-1},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":99999999999},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]},\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a  b\"]},\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[[\"a\"]]},\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[],\"byte_fallback\":true},\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Metaspace\",\"prepend_scheme\":\"sometimes\"}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"decoder\":{\"type\":\"ByteLevel\"}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" \"},\"content\":\"x\"}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\"}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"ByteLevel\"},\"added_tokens\":[{\"id\":-5,\"content\":\"x\"}]}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"ByteLevel\"},\"normalizer\":{\"type\":\"Lowercase\"}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"ByteLevel\"},\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"x\"}}]}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"ByteLevel\"},\"decoder\":{\"type\":\"WordPiece\"}}",
        "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"ByteLevel\"},{\"type\":\"Digits\"}]}}",
    };
    /* JSON-level faults (tok_json): each must be refused with a location. */
    const char *badjson[] = {
        "{\"a\": 1} x", "{\"a\" 1}", "{\"a\": [1, 2}", "[\"\\ud800\"]", "[\"\\udc00x\"]", "[\"\\q\"]",
        "[\"a\tb\"]", "[\"\xff\"]", "[\"\xed\xa0\x80\"]", "[tru]", "[01x]", "[-]", "[1.]", "[1e]", "\"abc",
        "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
    };
    for (size_t i = 0; i < sizeof badjson / sizeof badjson[0]; i++) {
        dlm_err e;
        err_clear(&e);
        tok *t;
        int rc = tok_load_mem(badjson[i], strlen(badjson[i]), NULL, 0, "bad.json", &t, &e);
        CHECK_MSG(rc == -1 && !strcmp(e.kind, "JSONError") && e.line == 1 && e.col > 0, "bad JSON %zu: %s", i, e.msg);
    }
    /* A vocab string given twice (JSON allows repeated keys). */
    const char *dup = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"a\":1},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}";
    dlm_err de;
    tok *dt;
    CHECK_INT(tok_load_mem(dup, strlen(dup), NULL, 0, "dup.json", &dt, &de), -1);
    CHECK_MSG(strstr(de.msg, "appears twice") != NULL, "%s", de.msg);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        dlm_err e;
        err_clear(&e);
        tok *t = (tok *)1;
        int rc = tok_load_mem(bad[i], strlen(bad[i]), NULL, 0, "bad.json", &t, &e);
        CHECK_MSG(rc == -1 && t == NULL, "bad file %zu was accepted", i);
        CHECK_MSG(e.msg[0] != 0, "bad file %zu has no message", i);
    }
    dlm_err e;
    tok *t;
    CHECK_INT(tok_load("/nonexistent/tokenizer.json", NULL, &t, &e), -1);
}

/* ---- tok_spec round trip (what a GGUF file carries) ------------------------------------ */

typedef struct spec_store {
    tok_spec spec;
    char **tokens;
    size_t *lens;
    int32_t *types;
    char **merges;
} spec_store;

static int spec_from(const tok *t, spec_store *s)
{
    memset(s, 0, sizeof *s);
    size_t n = tok_vocab_size(t), nm = tok_n_merges(t);
    s->tokens = calloc(n, sizeof *s->tokens);
    s->lens = calloc(n, sizeof *s->lens);
    s->types = calloc(n, sizeof *s->types);
    s->merges = calloc(nm ? nm : 1, sizeof *s->merges);
    if (!s->tokens || !s->lens || !s->types || !s->merges) return -1;
    for (size_t i = 0; i < n; i++) {
        const char *str = tok_token_str(t, (int32_t)i, &s->lens[i]);
        s->tokens[i] = str_ndup(str, s->lens[i]);
        s->types[i] = tok_token_type(t, (int32_t)i);
    }
    strbuf m = STRBUF_INIT;
    for (size_t i = 0; i < nm; i++) {
        if (tok_merge_str(t, i, &m)) return -1;
        s->merges[i] = sb_detach(&m, NULL);
    }
    dlm_err e;
    if (tok_pre_name(t, &s->spec.pre, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return -1;
    }
    s->spec.n_tokens = n;
    s->spec.tokens = (const char *const *)s->tokens;
    s->spec.token_lens = s->lens;
    s->spec.token_types = s->types;
    s->spec.n_merges = nm;
    s->spec.merges = (const char *const *)s->merges;
    s->spec.bos_id = tok_bos(t);
    s->spec.eos_id = tok_eos(t);
    s->spec.pad_id = tok_pad(t);
    s->spec.unk_id = tok_unk(t);
    s->spec.add_bos = tok_add_bos(t);
    s->spec.add_eos = tok_add_eos(t);
    s->spec.chat_template = tok_chat_template(t);
    return 0;
}

static void spec_free(spec_store *s)
{
    for (size_t i = 0; i < s->spec.n_tokens; i++) free(s->tokens[i]);
    for (size_t i = 0; i < s->spec.n_merges; i++) free(s->merges[i]);
    free(s->tokens);
    free(s->lens);
    free(s->types);
    free(s->merges);
}

/* Encode every line of corpus with a and b; count lines that differ. */
static size_t compare_on(tok *a, tok *b, const char *corpus, size_t len, int flags, const char *label)
{
    size_t bad = 0, line = 0;
    tok_ids x = {0, 0, 0}, y = {0, 0, 0};
    strbuf da = STRBUF_INIT, db = STRBUF_INIT;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(corpus + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - corpus) : len;
        dlm_err e;
        x.n = y.n = 0;
        line++;
        int ra = tok_encode_append(a, corpus + i, end - i, flags, &x, &e);
        int rb = tok_encode_append(b, corpus + i, end - i, flags, &y, &e);
        int same = ra == rb && x.n == y.n && (!x.n || !memcmp(x.v, y.v, x.n * sizeof *x.v));
        sb_reset(&da);
        sb_reset(&db);
        if (same && !ra) {
            tok_decode(a, x.v, x.n, 0, &da);
            tok_decode(b, y.v, y.n, 0, &db);
            same = da.len == db.len && !memcmp(sb_str(&da), sb_str(&db), da.len);
        }
        if (!same && bad++ < 3)
            fprintf(stderr, "%s: line %zu differs (%zu vs %zu ids): %.*s\n", label, line, x.n, y.n,
                    (int)(end - i > 120 ? 120 : end - i), corpus + i);
        i = end + 1;
    }
    tok_ids_free(&x);
    tok_ids_free(&y);
    sb_free(&da);
    sb_free(&db);
    return bad;
}

static void spec_roundtrip(tok *t, const char *corpus, size_t len, const char *label)
{
    spec_store s;
    CHECK_MSG(spec_from(t, &s) == 0, "%s: spec from accessors", label);
    dlm_err e;
    tok *r = NULL;
    int rc = s.spec.pre ? tok_build(&s.spec, &r, &e) : -1;
    CHECK_MSG(rc == 0, "%s: tok_build: %s", label, rc ? e.msg : "");
    if (!rc) {
        CHECK_INT(tok_vocab_size(r), tok_vocab_size(t));
        CHECK_INT(tok_n_merges(r), tok_n_merges(t));
        CHECK_INT(tok_bos(r), tok_bos(t));
        CHECK_INT(tok_eos(r), tok_eos(t));
        const char *pn;
        CHECK_INT(tok_pre_name(r, &pn, &e), 0);
        CHECK_STR(pn, s.spec.pre);
        CHECK_INT(compare_on(t, r, corpus, len, TOK_PARSE_SPECIAL, label), 0);
        CHECK_INT(compare_on(t, r, corpus, len, TOK_PARSE_SPECIAL | TOK_ADD_SPECIAL, label), 0);
        fprintf(stderr, "%s: rebuilt from tok_spec (pre %s, %zu tokens, %zu merges): same ids\n", label, s.spec.pre,
                tok_vocab_size(r), tok_n_merges(r));
    }
    tok_free(r);
    spec_free(&s);
}

static char *read_corpus(size_t *len)
{
    char *c = NULL;
    dlm_err e;
    if (fs_read_all("tests/ref/tok/corpus.txt", 16u << 20, &c, len, &e)) {
        fprintf(stderr, "corpus: %s\n", e.msg);
        return NULL;
    }
    return c;
}

static void test_spec_handmade(void)
{
    size_t len;
    char *corpus = read_corpus(&len);
    CHECK(corpus != NULL);
    if (!corpus) return;
    char *json = make_json(PRE_QWEN, "{\"type\":\"NFC\"}", 0, "{\"type\":\"ByteLevel\"}");
    tok *t = load_json(json, "{\"bos_token\":\"<|im_start|>\"}");
    free(json);
    CHECK(t != NULL);
    if (t) spec_roundtrip(t, corpus, len, "handmade qwen2");
    tok_free(t);
    json = make_json("{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\",\"individual_digits\":true},"
                     "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}]}",
                     "null", 0, "{\"type\":\"ByteLevel\"}");
    t = load_json(json, NULL);
    free(json);
    CHECK(t != NULL);
    if (t) spec_roundtrip(t, corpus, len, "handmade smollm");
    tok_free(t);

    /* A spec with unusable content is refused. */
    const char *toks[] = {"a", "b"};
    const char *merges[] = {"a b"};
    tok_spec sp = {2, toks, NULL, NULL, 1, merges, "gpt2", -1, -1, -1, -1, 0, 0, NULL, NULL, NULL, 0};
    dlm_err e;
    tok *r;
    CHECK_INT(tok_build(&sp, &r, &e), -1);   /* "ab" is not a token */
    sp.n_merges = 0;
    sp.pre = "mystery";
    CHECK_INT(tok_build(&sp, &r, &e), -1);
    free(corpus);
}

/* ---- modes for the reference test ------------------------------------------------------- */

static int mode_spec(const char *path, const char *corpus_path)
{
    dlm_err e;
    tok *t;
    if (tok_load(path, NULL, &t, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    char *c;
    size_t len;
    if (fs_read_all(corpus_path, 64u << 20, &c, &len, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    spec_roundtrip(t, c, len, path);
    free(c);
    tok_free(t);
    return check_done();
}

static int mode_vocab(const char *path, const char *inp, const char *outp)
{
    dlm_err e;
    tok *t;
    char *in, *out;
    size_t ni, no;
    if (tok_load(path, NULL, &t, &e) || fs_read_all(inp, 16u << 20, &in, &ni, &e) ||
        fs_read_all(outp, 16u << 20, &out, &no, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t sl = strlen(sep), i = 0, o = 0, cases = 0, bad = 0;
    tok_ids ids = {0, 0, 0};
    strbuf got = STRBUF_INIT;
    while (i < ni) {
        const char *end = memmem(in + i, ni - i, sep, sl);
        size_t tl = end ? (size_t)(end - (in + i)) : ni - i;
        const char *ol = memchr(out + o, '\n', no - o);
        size_t oe = ol ? (size_t)(ol - out) : no;
        ids.n = 0;
        sb_reset(&got);
        if (tok_encode_append(t, in + i, tl, 0, &ids, &e)) sb_printf(&got, "error: %s", e.msg);
        for (size_t k = 0; k < ids.n; k++) sb_printf(&got, " %d", ids.v[k]);
        cases++;
        if (got.len != oe - o || memcmp(sb_str(&got), out + o, got.len)) {
            if (bad++ < 5)
                fprintf(stderr, "case %zu %.*s\n  want:%.*s\n  got: %s\n", cases, (int)(tl > 80 ? 80 : tl), in + i,
                        (int)(oe - o), out + o, sb_str(&got));
        }
        o = oe < no ? oe + 1 : no;
        if (!end) break;
        i += tl + sl;
    }
    fprintf(stderr, "%s: %zu cases, %zu differ\n", inp, cases, bad);
    CHECK_INT(bad, 0);
    CHECK(cases > 0);
    sb_free(&got);
    tok_ids_free(&ids);
    free(in);
    free(out);
    tok_free(t);
    return check_done();
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--spec-roundtrip")) return mode_spec(argv[2], argv[3]);
    if (argc == 5 && !strcmp(argv[1], "--vocab-test")) return mode_vocab(argv[2], argv[3], argv[4]);
    test_bytelevel_table();
    test_nfc_quick_check();
    test_handmade();
    test_post_and_ignore_merges();
    test_missing_bytes();
    test_bad_files();
    test_spec_handmade();
    return check_done();
}
