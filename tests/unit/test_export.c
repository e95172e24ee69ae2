/* Unit tests for the GGUF export core (src/export/quant_mix.c,
 * gguf_model.c, gguf_lora.c):
 *
 *  - llama.cpp's per-tensor type rules: use_more_bits layer sets (docs/reference/formats.md
 *    §6.1 lists them for 16..32 layers), output / tied-embedding rule, %256
 *    fallbacks, attn_v / ffn_down counters, tensor order;
 *  - the llama Q/K row permutation against docs/reference/formats.md's index form;
 *  - Q4_1 / Q5_1 blocks worked by hand, and every type's round trip within
 *    llama.cpp's own bound (tests/test-quantize-fns.cpp: sqrt(Σ err²)/n <
 *    0.002 on 0.1 + 2·cos(i), 4096 values);
 *  - writing the fixture models and reading them back: the independent
 *    GGUF twin made by tests/ref/make_model.py (Python permutation and Q8_0)
 *    equals dlm's export tensor for tensor, KV types are the exact ones
 *    llama.cpp checks, dlm loads its own export to the same weights and
 *    tokenizer ids, a merged export equals W + s·B·A (DoRA: rescaled rows)
 *    computed here in double, the adapter GGUF carries permuted lora_b rows.
 *
 * Tool modes for the reference scripts (tests/ref/r05*):
 *   test_export --export MODEL QUANT OUT.gguf [ADAPTER_DIR]   base (merged with ADAPTER_DIR)
 *   test_export --adapter MODEL ADAPTER_DIR OUT.gguf
 *   test_export --quantize TYPE IN.f32 OUT.bin                export_quant_row
 *   test_export --logits MODEL ADAPTER_DIR|- ID...            next-token logits (JSON) after the ids */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "export/export_gguf.h"
#include "kern/kern.h"
#include "weights/gguf.h"
#include "decoder/session.h"
#include "tokens/tok_gguf.h"
#include "adapter/adapter.h"
#include "util/fs.h"
#include "util/hash.h"

#define FIX DLM_SOURCE_DIR "/tests/ref/model/fixtures"

/* ---- type rules -------------------------------------------------------------------- */

static void test_use_more_bits(void)
{
    /* docs/reference/formats.md §6.1: layers that get Q6_K */
    const struct { int n; const char *set; } T[] = {
        {16, "0 1 4 7 10 13 14 15"},
        {24, "0 1 2 5 8 11 14 17 20 21 22 23"},
        {28, "0 1 2 5 8 11 14 17 20 23 24 25 26 27"},
        {30, "0 1 2 5 8 11 14 17 20 23 26 27 28 29"},
        {32, "0 1 2 3 6 9 12 15 18 21 24 27 28 29 30 31"},
    };
    for (size_t k = 0; k < sizeof T / sizeof T[0]; k++) {
        char got[256] = "";
        for (int i = 0; i < T[k].n; i++)
            if (export_use_more_bits(i, T[k].n))
                snprintf(got + strlen(got), sizeof got - strlen(got), "%s%d", *got ? " " : "", i);
        CHECK_STR(got, T[k].set);
    }
}

static dtype ty(const char *mix, export_qstate *s, const char *name, int64_t ne0, int nd)
{
    return export_tensor_type(export_mix_find(mix), s, name, ne0, nd);
}

static void test_type_rules(void)
{
    CHECK(export_mix_find("q4_k_m") && export_mix_find("Q4_K_M")->ftype == 15);
    CHECK(export_mix_find("Q5_K_M")->ftype == 17 && export_mix_find("Q6_K")->ftype == 18);
    CHECK(export_mix_find("Q8_0")->ftype == 7 && export_mix_find("F16")->ftype == 1);
    CHECK(export_mix_find("BF16")->ftype == 32 && export_mix_find("F32")->ftype == 0);
    CHECK(export_mix_find("Q4_0")->ftype == 2 && !export_mix_find("Q3_K_M"));

    export_qstate s = {1, 16, 16, 0, 0, 0};
    /* not quantized: 1-D, norms, biases */
    CHECK_INT(ty("Q4_K_M", &s, "output_norm.weight", 2048, 1), DT_F32);
    CHECK_INT(ty("Q4_K_M", &s, "blk.0.attn_norm.weight", 2048, 2), DT_F32);
    CHECK_INT(ty("Q4_K_M", &s, "blk.0.attn_q.bias", 2048, 1), DT_F32);
    CHECK_INT(ty("F16", &s, "blk.0.ffn_norm.weight", 2048, 1), DT_F32);
    /* float mixes: every 2-D weight takes the type, whatever its width */
    CHECK_INT(ty("F16", &s, "token_embd.weight", 576, 2), DT_F16);
    CHECK_INT(ty("BF16", &s, "output.weight", 33, 2), DT_BF16);
    CHECK_INT(ty("F32", &s, "blk.3.attn_v.weight", 64, 2), DT_F32);
    /* output: Q6_K, Q8_0 when the row is not a multiple of 256 */
    CHECK_INT(ty("Q4_K_M", &s, "output.weight", 2048, 2), DT_Q6_K);
    CHECK_INT(ty("Q4_K_M", &s, "output.weight", 896, 2), DT_Q8_0);
    CHECK_INT(ty("Q8_0", &s, "output.weight", 2048, 2), DT_Q8_0);
    CHECK_INT(ty("Q4_0", &s, "output.weight", 2048, 2), DT_Q6_K);
    CHECK_INT(ty("Q4_0", &s, "output.weight", 96, 2), DT_Q8_0);
    /* untied: token_embd keeps the default (with the %256 fallback) */
    CHECK_INT(ty("Q4_K_M", &s, "token_embd.weight", 2048, 2), DT_Q4_K);
    CHECK_INT(ty("Q4_K_M", &s, "token_embd.weight", 576, 2), DT_Q5_0);
    CHECK_INT(ty("Q6_K", &s, "token_embd.weight", 576, 2), DT_Q8_0);
    /* tied: token_embd gets the output rule */
    export_qstate t = {0, 30, 30, 0, 0, 0};
    CHECK_INT(ty("Q4_K_M", &t, "token_embd.weight", 2048, 2), DT_Q6_K);
    CHECK_INT(ty("Q4_K_M", &t, "token_embd.weight", 576, 2), DT_Q8_0);
    CHECK_INT(ty("Q5_K_M", &t, "token_embd.weight", 960, 2), DT_Q8_0);
    /* Q5_K rows of 64 → Q5_1; 48 columns fit no block of 32 → F16 */
    CHECK_INT(ty("Q5_K_M", &t, "blk.0.attn_q.weight", 64, 2), DT_Q5_1);
    CHECK_INT(ty("Q4_K_M", &t, "blk.0.attn_q.weight", 48, 2), DT_F16);
    CHECK_INT(ty("Q6_K", &t, "blk.0.attn_output.weight", 896, 2), DT_Q8_0);
    CHECK_INT(ty("Q8_0", &t, "blk.0.ffn_up.weight", 48, 2), DT_F16);
    /* attn_v: Q6_K on use_more_bits(counter, n_attention_wv); the counter
     * counts attn_v tensors in visit order. 16 layers: 0 1 4 7 10 13 14 15 */
    export_qstate a = {1, 16, 16, 0, 0, 0};
    char got[128] = "";
    for (int i = 0; i < 16; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "blk.%d.attn_v.weight", i);
        dtype d = ty("Q4_K_M", &a, nm, 2048, 2);
        CHECK(d == DT_Q6_K || d == DT_Q4_K);
        snprintf(got + strlen(got), sizeof got - strlen(got), "%c", d == DT_Q6_K ? 'H' : '.');
        /* other tensors in between leave the counter alone */
        snprintf(nm, sizeof nm, "blk.%d.attn_k.weight", i);
        CHECK_INT(ty("Q4_K_M", &a, nm, 2048, 2), DT_Q4_K);
    }
    CHECK_STR(got, "HH..H..H..H..HHH");
    CHECK_INT(a.i_attention_wv, 16);
    /* ffn_down: the same on its own counter with n = n_layer; width 896
     * (Qwen2.5-0.5B's attn_v) falls back Q6_K → Q8_0, Q4_K → Q5_0 */
    export_qstate f = {1, 24, 24, 0, 0, 0};
    got[0] = 0;
    for (int i = 0; i < 24; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "blk.%d.ffn_down.weight", i);
        dtype d = ty("Q5_K_M", &f, nm, 4864, 2);
        snprintf(got + strlen(got), sizeof got - strlen(got), "%c", d == DT_Q6_K ? 'H' : d == DT_Q5_K ? '.' : '?');
        snprintf(nm, sizeof nm, "blk.%d.attn_v.weight", i);
        d = ty("Q4_K_M", &f, nm, 896, 2);
        CHECK(d == (export_use_more_bits(i, 24) ? DT_Q8_0 : DT_Q5_0));
    }
    CHECK_STR(got, "HHH..H..H..H..H..H..HHHH");
    CHECK_INT(f.n_fallback, 24);
    /* Q6_K / Q8_0 mixes have no per-layer bumps */
    export_qstate q = {1, 8, 8, 0, 0, 0};
    CHECK_INT(ty("Q6_K", &q, "blk.0.attn_v.weight", 2048, 2), DT_Q6_K);
    CHECK_INT(ty("Q8_0", &q, "blk.0.ffn_down.weight", 2048, 2), DT_Q8_0);
}

static int cmp_str(const void *a, const void *b) { return export_name_cmp(*(const char *const *)a, *(const char *const *)b); }

static void test_order(void)
{
    const char *v[] = {"blk.10.attn_q.weight", "token_embd.weight", "blk.2.ffn_up.weight", "output.weight",
                       "blk.2.attn_k.bias", "rope_freqs.weight", "blk.0.attn_v.weight", "output_norm.weight",
                       "blk.2.attn_k.weight"};
    qsort(v, sizeof v / sizeof v[0], sizeof v[0], cmp_str);
    const char *want[] = {"output.weight", "output_norm.weight", "rope_freqs.weight", "token_embd.weight",
                          "blk.0.attn_v.weight", "blk.2.attn_k.bias", "blk.2.attn_k.weight", "blk.2.ffn_up.weight",
                          "blk.10.attn_q.weight"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) CHECK_STR(v[i], want[i]);
}

static void test_permutation(void)
{
    /* docs/reference/formats.md §4.6 index form: out_row[h·hd + 2j + k] = in_row[h·hd + k·(hd/2) + j] */
    for (int hd = 2; hd <= 16; hd += 2)
        for (int h = 0; h < 3; h++)
            for (int j = 0; j < hd / 2; j++)
                for (int k = 0; k < 2; k++)
                    CHECK_INT(gguf_qk_hf_row(h * hd + 2 * j + k, hd), h * hd + k * (hd / 2) + j);
    /* hd 4: GGUF rows take HF rows 0 2 1 3 | 4 6 5 7 */
    const int want[8] = {0, 2, 1, 3, 4, 6, 5, 7};
    for (int r = 0; r < 8; r++) CHECK_INT(gguf_qk_hf_row(r, 4), want[r]);
}

/* ---- Q4_1 / Q5_1 and round trips ---------------------------------------------------------- */

static void test_hand_blocks(void)
{
    float x[32], y[32];
    uint8_t q[64];
    for (int j = 0; j < 32; j++) x[j] = (float)j;
    /* Q4_1: min 0, max 31, d = 31/15 = 2.0666666 → fp16 0x4022 (2 + 34/512),
     * id = 1/d; q = min(15, (int)(j·id + 0.5)) = (int)(j·15/31 + 1/2) = ⌊j/2⌋
     * (j = 2k: k + 1/2 − k/31; j = 2k+1: k + 1/2 + (15−k)/31), so
     * qs[j] = ⌊j/2⌋ | (8 + ⌊j/2⌋) << 4 */
    CHECK_INT(export_quant_row(DT_Q4_1, x, q, 32), 20);
    CHECK_INT(q[0] | q[1] << 8, 0x4022);
    CHECK_INT(q[2] | q[3] << 8, 0x0000);
    const uint8_t qs41[16] = {0x80, 0x80, 0x91, 0x91, 0xA2, 0xA2, 0xB3, 0xB3,
                              0xC4, 0xC4, 0xD5, 0xD5, 0xE6, 0xE6, 0xF7, 0xF7};
    CHECK(!memcmp(q + 4, qs41, 16));
    /* Q5_1: d = 31/31 = 1 (fp16 0x3C00), q = j; low nibbles j | (j+16)<<4
     * = 0x00 0x11 ... 0xFF; fifth bits set for elements 16..31: qh = 0xFFFF0000 */
    CHECK_INT(export_quant_row(DT_Q5_1, x, q, 32), 24);
    CHECK_INT(q[0] | q[1] << 8, 0x3C00);
    CHECK_INT(q[2] | q[3] << 8, 0);
    CHECK_INT(q[4] | q[5] << 8 | q[6] << 16 | (uint32_t)q[7] << 24, 0xFFFF0000u);
    for (int j = 0; j < 16; j++) CHECK_INT(q[8 + j], j | j << 4);
    kern_dequant_row(DT_Q5_1, q, y, 32);
    for (int j = 0; j < 32; j++) CHECK(y[j] == x[j]);
    /* a shifted block: x = −3 + j/4, min −3 → fp16 0xC200, d = 7.75/31 = 0.25 */
    for (int j = 0; j < 32; j++) x[j] = -3.0f + (float)j / 4;
    export_quant_row(DT_Q5_1, x, q, 32);
    CHECK_INT(q[0] | q[1] << 8, 0x3400);
    CHECK_INT(q[2] | q[3] << 8, 0xC200);
    kern_dequant_row(DT_Q5_1, q, y, 32);
    for (int j = 0; j < 32; j++) CHECK(y[j] == x[j]);
    /* rows with NaN, ±Inf and a denormal range quantize without undefined
     * float→int conversions (UBSan in the asan build) and keep their size */
    const float odd[4] = {NAN, INFINITY, -INFINITY, 1e-39f};
    for (int c = 0; c < 4; c++) {
        for (int j = 0; j < 32; j++) x[j] = j % 3 ? odd[c] : (c == 3 ? 2e-39f : 1.0f);
        CHECK_INT(export_quant_row(DT_Q4_1, x, q, 32), 20);
        CHECK_INT(export_quant_row(DT_Q5_1, x, q, 32), 24);
        CHECK_INT(export_quant_row(DT_Q4_0, x, q, 32), 18);
        CHECK_INT(export_quant_row(DT_Q5_0, x, q, 32), 22);
    }
    /* unsupported */
    CHECK_INT(export_quant_row(DT_Q4_1, x, q, 31), 0);
    CHECK_INT(export_quant_row((dtype)10, x, q, 256), 0);
}

/* llama.cpp tests/test-quantize-fns.cpp: total error = sqrt(Σ(x − x̃)²) / n
 * on x_i = 0.1 + 2·cos(i), n = 32·128, must stay under 0.002 for every type
 * with 4 or more bits. Measured values printed. */
static void test_round_trip(void)
{
    enum { N = 32 * 128 };
    static float x[N], y[N];
    static uint8_t q[N * 4];
    for (int i = 0; i < N; i++) x[i] = 0.1f + 2 * cosf((float)i);
    const dtype T[] = {DT_F16, DT_BF16, DT_Q8_0, DT_Q4_0, DT_Q4_1, DT_Q5_0, DT_Q5_1, DT_Q4_K, DT_Q5_K, DT_Q6_K};
    for (size_t k = 0; k < sizeof T / sizeof T[0]; k++) {
        CHECK(export_quant_row(T[k], x, q, N) == dtype_row_bytes(T[k], N));
        kern_dequant_row(T[k], q, y, N);
        double s = 0;
        for (int i = 0; i < N; i++) s += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        double err = sqrt(s) / N;
        printf("round trip %-5s total error %.6f (llama.cpp bound 0.002)\n", dtype_name(T[k]), err);
        CHECK_MSG(err < 0.002, "%s %.6f", dtype_name(T[k]), err);
    }
}

/* ---- writing and reading back ----------------------------------------------------------------- */

static model *load(const char *path)
{
    model *m = NULL;
    dlm_err e;
    if (model_load(path, &m, &e)) fprintf(stderr, "load %s: %s\n", path, e.msg);
    return m;
}

static tok *load_tok(const char *path)
{
    tok *t = NULL;
    dlm_err e;
    if (tok_load_for_model(path, &t, &e)) fprintf(stderr, "tokenizer %s: %s\n", path, e.msg);
    return t;
}

static int write_model(const model *m, const tok *t, const char *mix, const lora *l, int f16, const char *out)
{
    dlm_err e;
    const char *pre;
    if (export_pre_name(t, NULL, &pre, &e)) { fprintf(stderr, "%s\n", e.msg); return -1; }
    export_gguf_opts o = {export_mix_find(mix), l, f16, "test", pre, 1, -1, -1, NULL};
    export_special_flags(m->source, t, m->cfg.vocab, &o.add_bos, &o.add_eos);
    export_gguf_info info;
    if (export_write_model(m, t, &o, out, &info, &e)) { fprintf(stderr, "export: %s\n", e.msg); return -1; }
    return info.n_copied;
}

static const char *tmp(const char *name)
{
    static char buf[8][4096];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 4096, "%s/%s", check_tmpdir("test_export"), name);
    return p;
}

static int key_type(gguf_file *g, const char *key) { int id = gguf_find_key(g, key); return id < 0 ? -1 : (int)gguf_kv_type(g, id); }

static uint32_t key_u32(gguf_file *g, const char *key)
{
    uint32_t v = 0xFFFFFFFFu;
    gguf_get_u32(g, gguf_find_key(g, key), &v, NULL);
    return v;
}

static const char *key_str(gguf_file *g, const char *key)
{
    const char *s = NULL;
    gguf_get_str(g, gguf_find_key(g, key), &s, NULL, NULL);
    return s;
}

/* The llama fixture's Python-made twin (make_model.py: its own Q8_0, its own
 * permute_qk) equals dlm's Q8_0 export of the HF folder tensor for tensor. */
static void test_llama_vs_python_twin(void)
{
    model *m = load(FIX "/llama-bf16");
    tok *t = load_tok(FIX "/llama-bf16");
    if (!m || !t) { CHECK(0); return; }
    const char *out = tmp("llama.q8_0.gguf");
    CHECK(write_model(m, t, "Q8_0", NULL, 0, out) >= 0);
    gguf_file *a = NULL, *b = NULL;
    dlm_err e;
    CHECK_MSG(gguf_open(out, &a, &e) == 0, "%s", e.msg);
    CHECK(gguf_open(FIX "/llama-bf16.q8_0.gguf", &b, &e) == 0);
    if (a && b) {
        CHECK_INT(gguf_tensor_count(a), gguf_tensor_count(b));
        for (int i = 0; i < gguf_tensor_count(b); i++) {
            const gguf_tensor *tb = gguf_tensor_at(b, i), *ta = gguf_find_tensor(a, tb->name);
            CHECK_MSG(ta != NULL, "missing %s", tb->name);
            if (!ta) continue;
            CHECK_MSG(ta->type == tb->type && ta->n_dims == tb->n_dims && ta->ne[0] == tb->ne[0] && ta->ne[1] == tb->ne[1],
                      "%s: type/shape", tb->name);
            if (!strcmp(tb->name, "rope_freqs.weight")) {
                const float *x = ta->data, *y = tb->data;
                for (int k = 0; k < ta->ne[0]; k++) CHECK_NEAR(x[k], y[k], 1e-6 * fabs(y[k]));
            } else {
                CHECK_MSG(ta->nbytes == tb->nbytes && !memcmp(ta->data, tb->data, ta->nbytes), "%s: bytes differ", tb->name);
            }
        }
        /* tensor order: llama.cpp's weight_name_comparer */
        for (int i = 1; i < gguf_tensor_count(a); i++)
            CHECK(export_name_cmp(gguf_tensor_at(a, i - 1)->name, gguf_tensor_at(a, i)->name) < 0);
        /* KVs with the exact types llama.cpp's loader demands */
        const char *u32k[] = {"general.file_type", "general.quantization_version", "llama.block_count",
                              "llama.context_length", "llama.embedding_length", "llama.feed_forward_length",
                              "llama.attention.head_count", "llama.attention.head_count_kv", "llama.vocab_size",
                              "llama.rope.dimension_count", "tokenizer.ggml.bos_token_id",
                              "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id"};
        for (size_t k = 0; k < sizeof u32k / sizeof u32k[0]; k++) CHECK_MSG(key_type(a, u32k[k]) == GGUF_U32, "%s", u32k[k]);
        CHECK_INT(key_type(a, "llama.rope.freq_base"), GGUF_F32);
        CHECK_INT(key_type(a, "llama.attention.layer_norm_rms_epsilon"), GGUF_F32);
        CHECK_INT(key_type(a, "tokenizer.ggml.add_bos_token"), GGUF_BOOL);   /* tokenizer_config says false */
        CHECK_INT(key_type(a, "tokenizer.ggml.add_eos_token"), -1);          /* nothing says: left out */
        CHECK_INT(key_type(a, "tokenizer.chat_template"), GGUF_STR);
        CHECK_INT(key_u32(a, "general.file_type"), 7);
        CHECK_INT(key_u32(a, "general.quantization_version"), 2);
        CHECK_INT(key_u32(a, "llama.rope.dimension_count"), 8);
        CHECK_INT(key_u32(a, "tokenizer.ggml.bos_token_id"), 317);   /* config.json (tokenizer has none) */
        CHECK_INT(key_u32(a, "tokenizer.ggml.eos_token_id"), 319);   /* <|im_end|> */
        CHECK_INT(key_u32(a, "tokenizer.ggml.padding_token_id"), 317);
        CHECK_STR(key_str(a, "general.architecture"), "llama");
        CHECK_STR(key_str(a, "tokenizer.ggml.model"), "gpt2");
        CHECK_STR(key_str(a, "tokenizer.ggml.pre"), "gpt-2");
        CHECK_INT(gguf_find_key(a, "general.architecture"), 0);      /* written first */
        /* tokens / types / merges as the Python twin has them */
        int ka = gguf_find_key(a, "tokenizer.ggml.tokens"), kb = gguf_find_key(b, "tokenizer.ggml.tokens");
        uint64_t na = 0, nb = 0;
        gguf_arr_info(a, ka, NULL, &na, NULL);
        gguf_arr_info(b, kb, NULL, &nb, NULL);
        CHECK_INT(na, 320);
        CHECK_INT(na, nb);
        for (uint64_t i = 0; i < na && i < nb; i++) {
            size_t la, lb;
            const char *sa = gguf_arr_str(a, ka, i, &la), *sb = gguf_arr_str(b, kb, i, &lb);
            CHECK_MSG(la == lb && !memcmp(sa, sb, la), "token %llu", (unsigned long long)i);
            int64_t ta = -1, tb = -2;
            gguf_arr_int(a, gguf_find_key(a, "tokenizer.ggml.token_type"), i, &ta);
            gguf_arr_int(b, gguf_find_key(b, "tokenizer.ggml.token_type"), i, &tb);
            CHECK_MSG(ta == tb, "token type %llu: %lld vs %lld", (unsigned long long)i, (long long)ta, (long long)tb);
        }
        ka = gguf_find_key(a, "tokenizer.ggml.merges");
        kb = gguf_find_key(b, "tokenizer.ggml.merges");
        gguf_arr_info(a, ka, NULL, &na, NULL);
        gguf_arr_info(b, kb, NULL, &nb, NULL);
        CHECK_INT(na, nb);
        for (uint64_t i = 0; i < na && i < nb; i++) {
            size_t la, lb;
            const char *sa = gguf_arr_str(a, ka, i, &la), *sb = gguf_arr_str(b, kb, i, &lb);
            CHECK_MSG(la == lb && !memcmp(sa, sb, la), "merge %llu", (unsigned long long)i);
        }
    }
    gguf_close(a);
    gguf_close(b);
    tok_free(t);
    model_free(m);
}

static int same_wmat(const wmat *a, const wmat *b)
{
    return a->type == b->type && a->rows == b->rows && a->cols == b->cols && a->row_bytes == b->row_bytes &&
           !memcmp(a->data, b->data, (size_t)a->rows * a->row_bytes);
}

static int same_vec(const float *a, const float *b, int n) { return (!a && !b) || (a && b && !memcmp(a, b, (size_t)n * 4)); }

/* dlm loads its own lossless export back to the same weights (HF order,
 * so the permutation is undone exactly) and the same tokenizer ids. */
static void test_lossless_round_trip(const char *src, const char *mix)
{
    model *m = load(src), *r = NULL;
    tok *t = load_tok(src), *rt = NULL;
    if (!m || !t) { CHECK(0); return; }
    const char *out = tmp("rt.gguf");
    CHECK(write_model(m, t, mix, NULL, 0, out) >= 0);
    r = load(out);
    rt = load_tok(out);
    if (!r || !rt) { CHECK(0); goto done; }
    const model_config *a = &m->cfg, *b = &r->cfg;
    CHECK(a->arch == b->arch && a->n_layer == b->n_layer && a->d_model == b->d_model && a->n_ff == b->n_ff &&
          a->n_head == b->n_head && a->n_kv_head == b->n_kv_head && a->head_dim == b->head_dim &&
          a->vocab == b->vocab && a->max_pos == b->max_pos && a->tied == b->tied && a->qkv_bias == b->qkv_bias);
    CHECK_MSG(a->qk_norm == b->qk_norm && a->post_norm == b->post_norm && a->sliding_window == b->sliding_window &&
                  a->nope_every == b->nope_every,
              "%s: architecture flags (qk_norm %d/%d, post_norm %d/%d, window %d/%d, nope %d/%d)", src, a->qk_norm,
              b->qk_norm, a->post_norm, b->post_norm, a->sliding_window, b->sliding_window, a->nope_every,
              b->nope_every);
    CHECK(a->rms_eps == b->rms_eps && a->rope_theta == b->rope_theta);
    CHECK(same_wmat(&m->tok_embd, &r->tok_embd) && same_wmat(&m->output, &r->output));
    CHECK(same_vec(m->out_norm, r->out_norm, a->d_model));
    for (int i = 0; i < a->head_dim / 2; i++) CHECK_NEAR(r->rope_inv_freq[i], m->rope_inv_freq[i], 1e-6 * m->rope_inv_freq[i]);
    for (int l = 0; l < a->n_layer; l++) {
        const layer_weights *x = &m->layers[l], *y = &r->layers[l];
        CHECK_MSG(same_wmat(&x->wq, &y->wq) && same_wmat(&x->wk, &y->wk) && same_wmat(&x->wv, &y->wv) &&
                      same_wmat(&x->wo, &y->wo) && same_wmat(&x->w_gate, &y->w_gate) && same_wmat(&x->w_up, &y->w_up) &&
                      same_wmat(&x->w_down, &y->w_down),
                  "%s layer %d weights", src, l);
        int qd = a->n_head * a->head_dim, kd = a->n_kv_head * a->head_dim;
        CHECK(same_vec(x->attn_norm, y->attn_norm, a->d_model) && same_vec(x->ffn_norm, y->ffn_norm, a->d_model));
        CHECK(same_vec(x->bq, y->bq, qd) && same_vec(x->bk, y->bk, kd) && same_vec(x->bv, y->bv, kd));
        int full = a->qk_norm == QK_NORM_FULL;
        CHECK_MSG(same_vec(x->q_norm, y->q_norm, full ? qd : a->head_dim) &&
                      same_vec(x->k_norm, y->k_norm, full ? kd : a->head_dim) &&
                      same_vec(x->post_attn_norm, y->post_attn_norm, a->d_model) &&
                      same_vec(x->post_ffn_norm, y->post_ffn_norm, a->d_model),
                  "%s layer %d norms", src, l);
    }
    const char *text = "The quick brown fox jumps over the lazy dog. 12345 <|im_start|>user\nHi<|im_end|>";
    int32_t *i1, *i2;
    size_t n1, n2;
    dlm_err e;
    CHECK(tok_encode(t, text, strlen(text), TOK_PARSE_SPECIAL, &i1, &n1, &e) == 0);
    CHECK(tok_encode(rt, text, strlen(text), TOK_PARSE_SPECIAL, &i2, &n2, &e) == 0);
    CHECK(n1 == n2 && !memcmp(i1, i2, n1 * 4));
    free(i1);
    free(i2);
    CHECK_STR(tok_chat_template(rt), tok_chat_template(t));
done:
    tok_free(rt);
    model_free(r);
    tok_free(t);
    model_free(m);
}

/* A GGUF source re-exported to its own type: every matrix is reused as
 * stored (bytes equal to the source file's, permuted rows included). */
static void test_gguf_source_reuse(void)
{
    const char *src = FIX "/llama-bf16.q8_0.gguf";
    model *m = load(src);
    tok *t = load_tok(src);
    if (!m || !t) { CHECK(0); return; }
    const char *out = tmp("reuse.gguf");
    int copied = write_model(m, t, "Q8_0", NULL, 0, out);
    CHECK_INT(copied, 1 + 7 * m->cfg.n_layer); /* tied: token_embd + 7 per layer */
    gguf_file *a = NULL, *b = NULL;
    dlm_err e;
    if (gguf_open(out, &a, &e) == 0 && gguf_open(src, &b, &e) == 0)
        for (int i = 0; i < gguf_tensor_count(b); i++) {
            const gguf_tensor *tb = gguf_tensor_at(b, i), *ta = gguf_find_tensor(a, tb->name);
            CHECK_MSG(ta && ta->nbytes == tb->nbytes && !memcmp(ta->data, tb->data, tb->nbytes), "%s", tb->name);
        }
    else CHECK(0);
    gguf_close(a);
    gguf_close(b);
    tok_free(t);
    model_free(m);
}

static uint64_t lcg = 88172645463325252ull;
static float urand(void)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((lcg >> 40) & 0xFFFFFF) / (float)(1 << 24) - 0.5f;
}

static lora *make_lora(const model *m, int dora)
{
    lora_config c = {4, 8.0f, 0.f, LM_ALL, dora};
    lora *l = NULL;
    dlm_err e;
    if (lora_create(&m->cfg, &c, &l, &e)) return NULL;
    for (size_t i = 0; i < l->n; i++) l->w[i] = urand();
    if (dora)
        for (int il = 0; il < l->n_layer; il++)
            for (int mm = 0; mm < LM_COUNT; mm++) {
                const lora_mod *md = lora_mod_at(l, il, mm);
                for (int o = 0; o < md->out; o++) l->w[md->off_mag + (size_t)o] = 1.0f + urand();
            }
    return l;
}

/* A merged F32 export, loaded back by dlm (HF order), equals W + s·B·A
 * (DoRA: mag/‖W + s·B·A‖ per row) computed here in double. */
static void test_merge(const char *src, int dora)
{
    model *m = load(src), *r = NULL;
    tok *t = load_tok(src);
    lora *l = m ? make_lora(m, dora) : NULL;
    if (!m || !t || !l) { CHECK(0); goto done; }
    const char *out = tmp("merged.gguf");
    /* the embedding (and output) are copied as stored when they are F32 already */
    CHECK_INT(write_model(m, t, "F32", l, 0, out), m->tok_embd.type == DT_F32 ? 1 + !m->cfg.tied : 0);
    r = load(out);
    if (!r) { CHECK(0); goto done; }
    double worst = 0;
    for (int il = 0; il < m->cfg.n_layer; il++)
        for (int mm = 0; mm < LM_COUNT; mm++) {
            const lora_mod *md = lora_mod_at(l, il, mm);
            const wmat *W = lora_base_weight(m, il, mm), *R = lora_base_weight(r, il, mm);
            CHECK(R->type == DT_F32 && R->rows == md->out && R->cols == md->in);
            float *row = malloc((size_t)md->in * 4);
            double *v = malloc((size_t)md->in * 8);
            for (int h = 0; h < md->out; h++) {
                kern_dequant_row(W->type, (const char *)W->data + (size_t)h * W->row_bytes, row, md->in);
                double nrm = 0;
                for (int i = 0; i < md->in; i++) {
                    double d = 0;
                    for (int k = 0; k < l->cfg.rank; k++)
                        d += (double)l->w[md->off_b + (size_t)h * l->cfg.rank + k] * l->w[md->off_a + (size_t)k * md->in + i];
                    v[i] = row[i] + (double)l->scale * d;
                    nrm += v[i] * v[i];
                }
                double g = dora ? l->w[md->off_mag + (size_t)h] / sqrt(nrm) : 1.0;
                const float *got = (const float *)((const char *)R->data + (size_t)h * R->row_bytes);
                for (int i = 0; i < md->in; i++) {
                    double want = g * v[i], err = fabs(got[i] - want) / (1 + fabs(want));
                    if (err > worst) worst = err;
                }
            }
            free(row);
            free(v);
        }
    printf("merge %s%s: max relative error %.3g\n", src + strlen(FIX) + 1, dora ? " (DoRA)" : "", worst);
    CHECK_MSG(worst < 2e-6, "merged weights off by %g", worst);
    /* everything else is the base */
    float *e0 = malloc((size_t)m->tok_embd.cols * 4);
    for (int64_t i = 0; i < m->tok_embd.rows; i++) {
        kern_dequant_row(m->tok_embd.type, (const char *)m->tok_embd.data + i * m->tok_embd.row_bytes, e0, m->tok_embd.cols);
        CHECK(!memcmp(e0, (const char *)r->tok_embd.data + i * r->tok_embd.row_bytes, (size_t)m->tok_embd.cols * 4));
    }
    free(e0);
    CHECK(same_vec(m->layers[0].attn_norm, r->layers[0].attn_norm, m->cfg.d_model));
done:
    lora_free(l);
    model_free(r);
    tok_free(t);
    model_free(m);
}

/* The adapter GGUF: llama.cpp's keys, A as is, B with llama q/k rows in
 * the interleaved order (docs/reference/formats.md §5.1), written out here index by index. */
static void test_adapter(void)
{
    model *m = load(FIX "/llama-bf16");
    lora *l = m ? make_lora(m, 0) : NULL;
    if (!l) { CHECK(0); model_free(m); return; }
    const char *out = tmp("adapter.gguf");
    dlm_err e;
    CHECK_MSG(export_write_adapter(m, l, "x", out, &e) == 0, "%s", e.msg);
    gguf_file *g = NULL;
    CHECK(gguf_open(out, &g, &e) == 0);
    if (g) {
        CHECK_STR(key_str(g, "general.type"), "adapter");
        CHECK_STR(key_str(g, "adapter.type"), "lora");
        CHECK_STR(key_str(g, "general.architecture"), "llama");
        float alpha = 0;
        CHECK(gguf_get_f32(g, gguf_find_key(g, "adapter.lora.alpha"), &alpha, &e) == 0 && alpha == 8.0f);
        CHECK_INT(gguf_tensor_count(g), 2 * LM_COUNT * m->cfg.n_layer);
        int hd = m->cfg.head_dim, r = l->cfg.rank;
        for (int il = 0; il < m->cfg.n_layer; il++)
            for (int mm = 0; mm < LM_COUNT; mm++) {
                const lora_mod *md = lora_mod_at(l, il, mm);
                char base[64], nm[80];
                /* llama.cpp's tensor names, written out here (not from dlm's table) */
                static const char *GN[LM_COUNT] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                                                  "ffn_down"};
                snprintf(base, sizeof base, "blk.%d.%s.weight", il, GN[mm]);
                snprintf(nm, sizeof nm, "%s.lora_a", base);
                const gguf_tensor *ta = gguf_find_tensor(g, nm);
                CHECK(ta && ta->type == DT_F32 && ta->ne[0] == md->in && ta->ne[1] == r &&
                      !memcmp(ta->data, l->w + md->off_a, (size_t)r * md->in * 4));
                snprintf(nm, sizeof nm, "%s.lora_b", base);
                const gguf_tensor *tb = gguf_find_tensor(g, nm);
                CHECK(tb && tb->ne[0] == r && tb->ne[1] == md->out);
                if (!tb) continue;
                const float *B = l->w + md->off_b, *G = tb->data;
                int perm = mm == LM_Q || mm == LM_K;
                for (int h = 0; h < md->out / hd; h++)
                    for (int j = 0; j < hd / 2; j++)
                        for (int k = 0; k < 2; k++) {
                            int gr = h * hd + 2 * j + k, hr = perm ? h * hd + k * (hd / 2) + j : gr;
                            CHECK(!memcmp(G + (size_t)gr * r, B + (size_t)hr * r, (size_t)r * 4));
                        }
            }
    }
    gguf_close(g);
    lora_free(l);
    l = make_lora(m, 1);
    CHECK(export_write_adapter(m, l, "x", out, &e) == -1 && strstr(e.msg, "DoRA"));
    lora_free(l);
    model_free(m);
}

static void test_special_flags(void)
{
    int b, e2;
    tok *t = load_tok(FIX "/qwen2-f32");
    export_special_flags(FIX "/qwen2-f32", t, 320, &b, &e2);
    CHECK(b == 0 && e2 == -1);
    export_special_flags(FIX "/qwen2-f32.f16.gguf", t, 320, &b, &e2);
    CHECK(b == 0 && e2 == -1);
    /* no tokenizer_config.json and a plain ByteLevel post-processor: left out */
    const char *d = check_tmpdir("test_export_flags");
    char src[4200], dst[4200];
    snprintf(src, sizeof src, "%s/tokenizer.json", FIX "/qwen2-f32");
    snprintf(dst, sizeof dst, "%s/tokenizer.json", d);
    dlm_err e;
    CHECK(fs_copy_file(src, dst, &e) == 0);
    export_special_flags(d, t, 320, &b, &e2);
    CHECK(b == -1 && e2 == -1);
    export_special_flags(d, t, 49152, &b, &e2); /* SmolLM2 */
    CHECK(b == 0);
    CHECK(export_llama_add_bos(-1, "llama-bpe") == 1 && export_llama_add_bos(-1, "qwen2") == 0 &&
          export_llama_add_bos(0, "llama-bpe") == 0 && export_llama_add_bos(1, "gpt-2") == 1);
    tok_free(t);
}

static void test_pre_name(void)
{
    tok *t = load_tok(FIX "/qwen2-f32");
    const char *pre;
    dlm_err e;
    CHECK(t && export_pre_name(t, NULL, &pre, &e) == 0 && !strcmp(pre, "gpt-2"));
    CHECK(export_pre_name(t, "qwen2", &pre, &e) == 0 && !strcmp(pre, "qwen2"));
    CHECK(export_pre_name(t, "gpt2", &pre, &e) == -1);
    tok_free(t);
    /* ByteLevel with add_prefix_space matches no llama.cpp pipeline */
    const char *j = "{\"version\":\"1.0\",\"added_tokens\":[],\"normalizer\":null,"
                    "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":true},"
                    "\"post_processor\":null,\"decoder\":null,"
                    "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"continuing_subword_prefix\":null,"
                    "\"end_of_word_suffix\":null,\"fuse_unk\":false,\"byte_fallback\":false,"
                    "\"vocab\":{\"a\":0,\"b\":1,\"\\u0120\":2},\"merges\":[]}}";
    t = NULL;
    CHECK_MSG(tok_load_mem(j, strlen(j), NULL, 0, "mem", &t, &e) == 0, "%s", e.msg);
    if (t) {
        CHECK(export_pre_name(t, NULL, &pre, &e) == -1 && strstr(e.msg, "preflight: unknown pre-tokenizer hash") &&
              strstr(e.hint, "--pre-tokenizer"));
        CHECK(export_pre_name(t, "gpt-2", &pre, &e) == 0);
    }
    tok_free(t);
}

/* ---- tool modes --------------------------------------------------------------------------------- */

static int tool_export(int argc, char **argv)
{
    model *m = load(argv[2]);
    tok *t = load_tok(argv[2]);
    lora *l = NULL;
    dlm_err e;
    if (!m || !t) return 2;
    if (argc > 5 && adapter_load(argv[5], m, &l, &e)) { fprintf(stderr, "%s\n", e.msg); return 2; }
    kern_init(0);
    int rc = write_model(m, t, argv[3], l, 0, argv[4]) < 0 ? 1 : 0;
    lora_free(l);
    tok_free(t);
    model_free(m);
    return rc;
}

static int tool_adapter(char **argv)
{
    model *m = load(argv[2]);
    lora *l = NULL;
    dlm_err e;
    if (!m || adapter_load(argv[3], m, &l, &e) || export_write_adapter(m, l, "test", argv[4], &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    lora_free(l);
    model_free(m);
    return 0;
}

static int tool_quantize(char **argv)
{
    dtype t;
    if (dtype_from_name(argv[2], &t)) return 2;
    FILE *f = fopen(argv[3], "rb");
    if (!f) return 2;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *x = malloc((size_t)len + 4);
    void *q = malloc((size_t)len + 64);
    int rc = 2;
    if (x && q && fread(x, 1, (size_t)len, f) == (size_t)len) {
        size_t n = export_quant_row(t, x, q, len / 4);
        FILE *o = fopen(argv[4], "wb");
        if (n && o && fwrite(q, 1, n, o) == n) rc = 0;
        if (o) fclose(o);
    }
    fclose(f);
    free(x);
    free(q);
    return rc;
}

/* dlm's next-token logits for a prompt: the same session (KV cache, adapter
 * applied on the fly) `dlm prompt` decodes with. */
static int tool_logits(int argc, char **argv)
{
    model *m = load(argv[2]);
    lora *l = NULL;
    session *s = NULL;
    dlm_err e;
    int n = argc - 4, rc = 1;
    int32_t *ids = malloc((size_t)(n > 0 ? n : 1) * sizeof *ids);
    float *logits = m ? malloc((size_t)m->cfg.vocab * sizeof *logits) : NULL;
    if (!m || !ids || !logits || n < 1) goto done;
    for (int i = 0; i < n; i++) ids[i] = (int32_t)atoi(argv[4 + i]);
    if (strcmp(argv[3], "-") && adapter_load(argv[3], m, &l, &e)) { fprintf(stderr, "%s\n", e.msg); goto done; }
    kern_init(1);
    if (session_create(m, l, n + 1, 512, &s, &e) || session_eval(s, ids, n, logits, 0, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        goto done;
    }
    printf("[");
    for (int v = 0; v < m->cfg.vocab; v++) printf("%s%.9g", v ? "," : "", (double)logits[v]);
    printf("]\n");
    rc = 0;
done:
    session_free(s);
    lora_free(l);
    free(ids);
    free(logits);
    model_free(m);
    return rc;
}

int main(int argc, char **argv)
{
    hash_init();
    if (argc >= 5 && !strcmp(argv[1], "--export")) return tool_export(argc, argv);
    if (argc == 5 && !strcmp(argv[1], "--adapter")) return tool_adapter(argv);
    if (argc == 5 && !strcmp(argv[1], "--quantize")) return tool_quantize(argv);
    if (argc >= 5 && !strcmp(argv[1], "--logits")) return tool_logits(argc, argv);
    if (argc == 4 && !strcmp(argv[1], "--round-trip")) {   /* tests/ref/r0402: every architecture */
        kern_init(2);
        test_lossless_round_trip(argv[2], argv[3]);
        if (check_done()) return 1;
        printf("round trip %s as %s: same config and tensors\n", argv[2], argv[3]);
        return 0;
    }
    kern_init(2);
    test_use_more_bits();
    test_type_rules();
    test_order();
    test_permutation();
    test_hand_blocks();
    test_round_trip();
    test_llama_vs_python_twin();
    test_lossless_round_trip(FIX "/qwen2-f32", "F32");
    test_lossless_round_trip(FIX "/llama-bf16", "BF16");
    test_lossless_round_trip(FIX "/qwen2-f32.f16.gguf", "F16");
    test_gguf_source_reuse();
    test_merge(FIX "/qwen2-f32", 0);
    test_merge(FIX "/llama-bf16", 0);
    test_merge(FIX "/llama-bf16", 1);
    test_adapter();
    test_pre_name();
    test_special_flags();
    return check_done();
}
