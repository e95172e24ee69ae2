/* mkbase — write a random-weight llama/qwen2 base as GGUF, quantized for
 * real by dlm's quantizers (kern_quant_row, bit-exact with llama.cpp's
 * reference), for the memory bench. Big shapes (7B: ~4.4 GB as q4_K) are
 * written one tensor at a time through the streaming GGUF writer, so the
 * helper itself needs a few hundred MB at most.
 *
 *   mkbase OUT.gguf [--arch qwen2|llama] [--layers L] [--d-model C] [--ff F]
 *          [--heads NH] [--kv-heads KVH] [--vocab V] [--max-pos P]
 *          [--type q4_K|q8_0|f16|...] [--untied] [--seed S]
 *
 * Values: uniform with the standard deviation of a trained model's init
 * (0.02), norms around 1, small biases. To keep the quantization affordable
 * (a 7B has 7.6e9 weights), each tensor quantizes a pool of 64 distinct
 * random rows and every row of the tensor is one of them, picked by a hash
 * of (tensor, row): the bytes are genuine quantized blocks, the file is as
 * large as the real one, and the model computes finite losses.
 *
 * The tokenizer is byte-level BPE with the 256 byte tokens (GPT-2 byte
 * map), no merges, "[UNUSED n]" fillers up to V-3 and the ChatML specials,
 * so any UTF-8 text encodes to one token per byte. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weights/gguf.h"
#include "kern/dtype.h"
#include "kern/kern.h"

#define POOL 64

typedef struct spec {
    const char *arch;
    int L, C, F, NH, KVH, V, max_pos, tied;
    dtype type;
    uint64_t seed;
} spec;

typedef struct tinfo {
    int kind;          /* 0 matrix, 1 norm (≈1), 2 bias (small) */
    int64_t rows, cols;
    dtype type;
    uint64_t id;
} tinfo;

typedef struct gen {
    const spec *s;
    tinfo *t;
    int n;
} gen;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

/* uniform in [-a, a] with a = 0.02·√3 (std 0.02) */
static float unif(uint64_t *st)
{
    *st = mix(*st + 0x9e3779b97f4a7c15ull);
    return (float)(((double)(*st >> 11) / 9007199254740992.0) * 2.0 - 1.0) * 0.0346410f;
}

static int fill(void *ctx, int index, void *dst, size_t nbytes, dlm_err *e)
{
    gen *g = ctx;
    const tinfo *t = &g->t[index];
    uint64_t st = g->s->seed * 1000003u + t->id;
    if (t->kind) {
        float *v = dst;
        for (int64_t i = 0; i < t->cols; i++) v[i] = (t->kind == 1 ? 1.0f : 0.0f) + unif(&st) * (t->kind == 1 ? 2.5f : 1.0f);
        return 0;
    }
    size_t rb = dtype_row_bytes(t->type, t->cols);
    if (rb * (size_t)t->rows != nbytes) return err_set(e, NULL, "size mismatch in tensor %d", index);
    float *row = malloc((size_t)t->cols * sizeof *row);
    unsigned char *pool = malloc(rb * POOL);
    if (!row || !pool) { free(row); free(pool); return err_set(e, "MemoryError", "out of memory"); }
    for (int p = 0; p < POOL; p++) {
        for (int64_t i = 0; i < t->cols; i++) row[i] = unif(&st);
        if (kern_quant_row(t->type, row, pool + (size_t)p * rb, t->cols) != rb) {
            free(row);
            free(pool);
            return err_set(e, NULL, "cannot quantize to %s", dtype_name(t->type));
        }
    }
    unsigned char *d = dst;
    for (int64_t r = 0; r < t->rows; r++) memcpy(d + (size_t)r * rb, pool + (mix(t->id * 0x100000001b3ull + (uint64_t)r) % POOL) * rb, rb);
    free(row);
    free(pool);
    return 0;
}

static int add(gguf_w *w, gen *g, const char *name, int kind, int64_t rows, int64_t cols)
{
    tinfo *t = &g->t[g->n];
    t->kind = kind;
    t->rows = rows;
    t->cols = cols;
    t->type = kind ? DT_F32 : g->s->type;
    t->id = (uint64_t)g->n + 1;
    int64_t ne[2] = {cols, rows};
    int idx = gguf_w_tensor(w, name, t->type, kind ? 1 : 2, ne, NULL, fill, g);
    if (idx != g->n) { fprintf(stderr, "mkbase: cannot add tensor %s\n", name); return -1; }
    g->n++;
    return 0;
}

/* GPT-2's byte → printable code point map, as UTF-8. */
static void byte_token(int b, char out[8])
{
    int cp;
    if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)) {
        cp = b;
    } else {
        int n = 0;
        for (int x = 0; x < b; x++)
            if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff))) n++;
        cp = 256 + n;
    }
    if (cp < 0x80) { out[0] = (char)cp; out[1] = 0; }
    else { out[0] = (char)(0xc0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3f)); out[2] = 0; }
}

int main(int argc, char **argv)
{
    spec s = {"qwen2", 2, 256, 512, 4, 2, 512, 32768, 1, DT_Q4_K, 1};
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NUM(flag, dst) if (!strcmp(a, flag) && v) { dst = atoi(v); i++; continue; }
        NUM("--layers", s.L) NUM("--d-model", s.C) NUM("--ff", s.F) NUM("--heads", s.NH) NUM("--kv-heads", s.KVH)
        NUM("--vocab", s.V) NUM("--max-pos", s.max_pos)
#undef NUM
        if (!strcmp(a, "--seed") && v) { s.seed = strtoull(v, NULL, 10); i++; continue; }
        if (!strcmp(a, "--arch") && v) { s.arch = v; i++; continue; }
        if (!strcmp(a, "--untied")) { s.tied = 0; continue; }
        if (!strcmp(a, "--type") && v) {
            if (dtype_from_name(v, &s.type)) { fprintf(stderr, "mkbase: unknown type %s\n", v); return 2; }
            i++;
            continue;
        }
        if (a[0] != '-' && !out) { out = a; continue; }
        fprintf(stderr, "mkbase: bad argument %s\n", a);
        return 2;
    }
    if (!out || s.V < 300 || s.NH % s.KVH || s.C % s.NH || (strcmp(s.arch, "qwen2") && strcmp(s.arch, "llama"))) {
        fprintf(stderr, "usage: mkbase OUT.gguf [--arch qwen2|llama] [--layers L] [--d-model C] [--ff F] [--heads NH]"
                        " [--kv-heads KVH] [--vocab V] [--type q4_K] [--untied]\n");
        return 2;
    }
    kern_init(1);
    int HS = s.C / s.NH, Q = s.NH * HS, K = s.KVH * HS, qwen = !strcmp(s.arch, "qwen2");
    gguf_w *w = gguf_w_new();
    char k[128];
#define KEY(suffix) (snprintf(k, sizeof k, "%s.%s", s.arch, suffix), k)
    gguf_w_str(w, "general.architecture", s.arch);
    gguf_w_str(w, "general.type", "model");
    gguf_w_str(w, "general.name", "dlm memory bench base");
    gguf_w_u32(w, KEY("block_count"), (uint32_t)s.L);
    gguf_w_u32(w, KEY("context_length"), (uint32_t)s.max_pos);
    gguf_w_u32(w, KEY("embedding_length"), (uint32_t)s.C);
    gguf_w_u32(w, KEY("feed_forward_length"), (uint32_t)s.F);
    gguf_w_u32(w, KEY("attention.head_count"), (uint32_t)s.NH);
    gguf_w_u32(w, KEY("attention.head_count_kv"), (uint32_t)s.KVH);
    gguf_w_f32(w, KEY("rope.freq_base"), qwen ? 1000000.0f : 10000.0f);
    gguf_w_f32(w, KEY("attention.layer_norm_rms_epsilon"), qwen ? 1e-6f : 1e-5f);
    gguf_w_u32(w, "general.file_type", s.type == DT_Q4_K ? 15 : s.type == DT_Q8_0 ? 7 : s.type == DT_F16 ? 1 : 0);
    if (!qwen) {
        gguf_w_u32(w, "llama.vocab_size", (uint32_t)s.V);
        gguf_w_u32(w, "llama.rope.dimension_count", (uint32_t)HS);
    }
    gguf_w_u32(w, "general.quantization_version", 2);
    static const char *SPECIALS[3] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    char **toks = calloc((size_t)s.V, sizeof *toks);
    int32_t *types = calloc((size_t)s.V, sizeof *types);
    if (!toks || !types) return 1;
    for (int i = 0; i < s.V; i++) {
        char b[32];
        if (i < 256) { byte_token(i, b); types[i] = 1; }
        else if (i < s.V - 3) { snprintf(b, sizeof b, "[UNUSED%d]", i); types[i] = 5; }
        else { snprintf(b, sizeof b, "%s", SPECIALS[i - (s.V - 3)]); types[i] = 3; }
        toks[i] = strdup(b);
    }
    gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_w_str(w, "tokenizer.ggml.pre", "gpt2");
    gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, NULL, (size_t)s.V);
    gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, (size_t)s.V);
    gguf_w_arr_str(w, "tokenizer.ggml.merges", NULL, NULL, 0);
    gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)(s.V - 3));
    gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)(s.V - 1));
    gguf_w_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)(s.V - 3));
    gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 0);
    gguf_w_str(w, "tokenizer.chat_template",
               "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
               "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
               "{% endif %}");
    gen g = {&s, calloc((size_t)(s.L * 12 + 8), sizeof(tinfo)), 0};
    if (!g.t) return 1;
    int bad = add(w, &g, "token_embd.weight", 0, s.V, s.C);
    for (int l = 0; l < s.L && !bad; l++) {
        char n[64];
#define T(name, kind, r, c) (snprintf(n, sizeof n, "blk.%d.%s", l, name), bad |= add(w, &g, n, kind, r, c))
        T("attn_norm.weight", 1, 1, s.C);
        T("attn_q.weight", 0, Q, s.C);
        T("attn_k.weight", 0, K, s.C);
        T("attn_v.weight", 0, K, s.C);
        if (qwen) {
            T("attn_q.bias", 2, 1, Q);
            T("attn_k.bias", 2, 1, K);
            T("attn_v.bias", 2, 1, K);
        }
        T("attn_output.weight", 0, s.C, Q);
        T("ffn_norm.weight", 1, 1, s.C);
        T("ffn_gate.weight", 0, s.F, s.C);
        T("ffn_up.weight", 0, s.F, s.C);
        T("ffn_down.weight", 0, s.C, s.F);
#undef T
    }
    bad |= add(w, &g, "output_norm.weight", 1, 1, s.C);
    if (!s.tied) bad |= add(w, &g, "output.weight", 0, s.V, s.C);
    if (bad) return 1;
    dlm_err e;
    err_clear(&e);
    if (gguf_w_write(w, out, &e)) {
        err_print(stderr, &e, 1);
        return 1;
    }
    gguf_w_free(w);
    for (int i = 0; i < s.V; i++) free(toks[i]);
    free(toks);
    free(types);
    free(g.t);
    return 0;
}
