/* make_gguf — a random-weight model of a real shape as a GGUF file that
 * both dlm and llama.cpp load, for the inference benchmark.
 *
 *   make_gguf SHAPE TYPE OUT.gguf
 *     SHAPE  smollm2-135m | qwen2.5-0.5b | tiny
 *     TYPE   f32 | f16 | q8_0 | q4_k_m
 *
 * Weights are N(0, 0.02)-ish (norms 1 ± 0.1, biases small), quantized with
 * kern_quant_row (bit-exact with llama.cpp's reference quantizers). q4_k_m
 * follows llama-quant.cpp's per-tensor rule without an imatrix
 * (docs/reference/formats.md §6.1): output / tied token_embd Q6_K,
 * attn_v and ffn_down Q6_K on use_more_bits layers, the rest Q4_K, and the
 * fallbacks Q4_K→Q5_0, Q6_K→Q8_0 for rows that are not whole 256-blocks.
 * The tokenizer is a stub GPT-2 vocabulary (the 256 byte tokens, filler
 * tokens, ChatML specials): the benchmark feeds token ids, not text. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weights/gguf.h"
#include "kern/kern.h"

typedef struct shape {
    const char *name, *arch;
    int L, C, F, NH, KVH, V, bias;
    float theta, eps;
} shape;

static const shape SHAPES[] = {
    {"smollm2-135m", "llama", 30, 576, 1536, 9, 3, 49152, 0, 100000.0f, 1e-5f},
    {"qwen2.5-0.5b", "qwen2", 24, 896, 4864, 14, 2, 151936, 1, 1000000.0f, 1e-6f},
    {"tiny", "llama", 2, 256, 512, 4, 2, 1024, 0, 10000.0f, 1e-5f},
};

typedef struct tensor_src {
    char name[64];
    int type;
    int64_t rows, cols;   /* cols = ne[0] */
    int kind;             /* 0 weight, 1 norm, 2 bias */
    uint64_t seed;
} tensor_src;

static float rnd(uint64_t *s)
{
    /* xorshift64*, sum of 4 uniforms ≈ normal (fast, good enough for timing) */
    float acc = 0;
    for (int i = 0; i < 4; i++) {
        *s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
        acc += (float)((*s * 0x2545F4914F6CDD1Dull) >> 40) * (1.0f / 16777216.0f);
    }
    return (acc - 2.0f) * 1.7320508f;
}

static int fill(void *ctx, int index, void *dst, size_t nbytes, dlm_err *e)
{
    const tensor_src *t = (const tensor_src *)ctx + index;
    uint64_t s = t->seed * 0x9E3779B97F4A7C15ull + 1;
    float *row = malloc((size_t)t->cols * sizeof(float));
    if (!row) { snprintf(e->msg, sizeof e->msg, "out of memory"); return -1; }
    size_t rb = dtype_row_bytes((dtype)t->type, t->cols);
    for (int64_t r = 0; r < t->rows; r++) {
        for (int64_t c = 0; c < t->cols; c++) {
            float x = rnd(&s);
            row[c] = t->kind == 1 ? 1.0f + 0.1f * x : t->kind == 2 ? 0.05f * x : 0.02f * x;
        }
        kern_quant_row((dtype)t->type, row, (char *)dst + (size_t)r * rb, t->cols);
    }
    (void)nbytes;
    free(row);
    return 0;
}

static int use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* llama-quant.cpp's choice for ftype Q4_K_M (no imatrix). */
static int q4km_type(const char *name, int layer, int n_layer, int64_t ne0, int tied)
{
    int t = DT_Q4_K;
    if (!strcmp(name, "output.weight") || (tied && !strcmp(name, "token_embd.weight"))) t = DT_Q6_K;
    else if (strstr(name, "attn_v.weight") || strstr(name, "ffn_down.weight"))
        t = use_more_bits(layer, n_layer) ? DT_Q6_K : DT_Q4_K;
    if (ne0 % 256) t = t == DT_Q6_K ? DT_Q8_0 : DT_Q5_0;
    return t;
}

/* GPT-2 byte → printable code point (docs/reference/formats.md §2.1). */
static int byte_cp(int b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) return b;
    int n = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF))) n++;
    return 256 + n;
}

static void utf8(int cp, char *o)
{
    if (cp < 0x80) { o[0] = (char)cp; o[1] = 0; }
    else { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 63)); o[2] = 0; }
}

int main(int argc, char **argv)
{
    if (argc != 4) { fprintf(stderr, "usage: make_gguf SHAPE f32|f16|q8_0|q4_k_m OUT.gguf\n"); return 2; }
    const shape *sh = NULL;
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++)
        if (!strcmp(argv[1], SHAPES[i].name)) sh = &SHAPES[i];
    if (!sh) { fprintf(stderr, "unknown shape %s\n", argv[1]); return 2; }
    const char *ty = argv[2];
    int base_t, ftype, q4km = 0;
    if (!strcmp(ty, "f32")) { base_t = DT_F32; ftype = 0; }
    else if (!strcmp(ty, "f16")) { base_t = DT_F16; ftype = 1; }
    else if (!strcmp(ty, "q8_0")) { base_t = DT_Q8_0; ftype = 7; }
    else if (!strcmp(ty, "q4_k_m")) { base_t = DT_Q4_K; ftype = 15; q4km = 1; }
    else { fprintf(stderr, "unknown type %s\n", ty); return 2; }
    kern_init(0);

    const int HS = sh->C / sh->NH, L = sh->L, C = sh->C, F = sh->F, V = sh->V;
    const int Q = sh->NH * HS, K = sh->KVH * HS;
    gguf_w *w = gguf_w_new();
    char key[128];
    const char *a = sh->arch;
    gguf_w_str(w, "general.architecture", a);
    gguf_w_str(w, "general.type", "model");
    gguf_w_str(w, "general.name", sh->name);
#define KEY(s) (snprintf(key, sizeof key, "%s." s, a), key)
    gguf_w_u32(w, KEY("block_count"), (uint32_t)L);
    gguf_w_u32(w, KEY("context_length"), 8192);
    gguf_w_u32(w, KEY("embedding_length"), (uint32_t)C);
    gguf_w_u32(w, KEY("feed_forward_length"), (uint32_t)F);
    gguf_w_u32(w, KEY("attention.head_count"), (uint32_t)sh->NH);
    gguf_w_u32(w, KEY("attention.head_count_kv"), (uint32_t)sh->KVH);
    gguf_w_f32(w, KEY("rope.freq_base"), sh->theta);
    gguf_w_f32(w, KEY("attention.layer_norm_rms_epsilon"), sh->eps);
    if (!strcmp(a, "llama")) {
        gguf_w_u32(w, KEY("vocab_size"), (uint32_t)V);
        gguf_w_u32(w, KEY("rope.dimension_count"), (uint32_t)HS);
    }
#undef KEY
    gguf_w_u32(w, "general.file_type", (uint32_t)ftype);
    gguf_w_u32(w, "general.quantization_version", 2);

    /* stub vocabulary: 256 byte tokens, one merge, fillers, 3 specials */
    char **toks = calloc((size_t)V, sizeof *toks);
    int32_t *types = calloc((size_t)V, sizeof *types);
    if (!toks || !types) return 1;
    for (int i = 0; i < V; i++) {
        char buf[32];
        if (i < 256) utf8(byte_cp(i), buf);
        else if (i == 256) snprintf(buf, sizeof buf, "ab");
        else if (i == V - 3) snprintf(buf, sizeof buf, "<|endoftext|>");
        else if (i == V - 2) snprintf(buf, sizeof buf, "<|im_start|>");
        else if (i == V - 1) snprintf(buf, sizeof buf, "<|im_end|>");
        else snprintf(buf, sizeof buf, "[UNUSED%d]", i);
        toks[i] = strdup(buf);
        types[i] = i >= V - 3 ? 3 : (i > 256 ? 5 : 1);
    }
    const char *merges[] = {"a b"};
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", "gpt-2");   /* a pre-tokenizer both dlm and llama.cpp know */
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, NULL, (size_t)V);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, (size_t)V);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, NULL, 1);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)(V - 3));
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)(V - 1));
    gguf_w_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)(V - 3));
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 0);

    /* tensors in llama-quant's order: non-block first, then by layer, by name */
    int cap = 16 + 16 * L, n = 0;
    tensor_src *ts = calloc((size_t)cap, sizeof *ts);
    if (!ts) return 1;
#define ADD(nm, layer, r, c, kind_) do { \
        tensor_src *t = &ts[n]; snprintf(t->name, sizeof t->name, "%s", nm); \
        t->rows = (r); t->cols = (c); t->kind = (kind_); t->seed = (uint64_t)n + 1; \
        t->type = (kind_) ? DT_F32 : q4km ? q4km_type(t->name, layer, L, c, 1) : base_t; \
        if (!(kind_) && !q4km && (c) % (int64_t)dtype_block_elems((dtype)t->type)) t->type = DT_F16; \
        n++; } while (0)
    ADD("output_norm.weight", -1, 1, C, 1);
    ADD("token_embd.weight", -1, V, C, 0);
    for (int l = 0; l < L; l++) {
        char nm[64];
        /* sorted by name within the layer, as llama-quant orders them */
#define LT(s, r, c, k) do { snprintf(nm, sizeof nm, "blk.%d." s, l); ADD(nm, l, r, c, k); } while (0)
        LT("attn_k.weight", K, C, 0);
        if (sh->bias) LT("attn_k.bias", 1, K, 2);
        LT("attn_norm.weight", 1, C, 1);
        LT("attn_output.weight", C, Q, 0);
        LT("attn_q.weight", Q, C, 0);
        if (sh->bias) LT("attn_q.bias", 1, Q, 2);
        LT("attn_v.weight", K, C, 0);
        if (sh->bias) LT("attn_v.bias", 1, K, 2);
        LT("ffn_down.weight", C, F, 0);
        LT("ffn_gate.weight", F, C, 0);
        LT("ffn_norm.weight", 1, C, 1);
        LT("ffn_up.weight", F, C, 0);
#undef LT
    }
#undef ADD
    for (int i = 0; i < n; i++) {
        int64_t ne[2] = {ts[i].cols, ts[i].rows};
        int nd = ts[i].rows == 1 ? 1 : 2;
        if (gguf_w_tensor(w, ts[i].name, ts[i].type, nd, ne, NULL, fill, ts) < 0) {
            fprintf(stderr, "bad tensor %s\n", ts[i].name);
            return 1;
        }
    }
    dlm_err e;
    memset(&e, 0, sizeof e);
    if (gguf_w_write(w, argv[3], &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    gguf_w_free(w);
    for (int i = 0; i < V; i++) free(toks[i]);
    free(toks);
    free(types);
    free(ts);
    return 0;
}
