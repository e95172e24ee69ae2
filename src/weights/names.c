/* names — HF ↔ GGUF tensor names for llama/qwen2/qwen3/olmo2 (docs/reference/formats.md §4.5;
 * qwen3's and olmo2's norms as llama.cpp's convert_hf_to_gguf names them). */
#include "weights/model_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *hf, *gguf; } NAMES[T_ROLE_COUNT] = {
    [T_EMBD] = {"model.embed_tokens.weight", "token_embd.weight"},
    [T_OUT_NORM] = {"model.norm.weight", "output_norm.weight"},
    [T_OUTPUT] = {"lm_head.weight", "output.weight"},
    [T_ROPE_FREQS] = {NULL, "rope_freqs.weight"},
    [T_ATTN_NORM] = {"model.layers.%d.input_layernorm.weight", "blk.%d.attn_norm.weight"},
    [T_Q] = {"model.layers.%d.self_attn.q_proj.weight", "blk.%d.attn_q.weight"},
    [T_K] = {"model.layers.%d.self_attn.k_proj.weight", "blk.%d.attn_k.weight"},
    [T_V] = {"model.layers.%d.self_attn.v_proj.weight", "blk.%d.attn_v.weight"},
    [T_O] = {"model.layers.%d.self_attn.o_proj.weight", "blk.%d.attn_output.weight"},
    [T_QB] = {"model.layers.%d.self_attn.q_proj.bias", "blk.%d.attn_q.bias"},
    [T_KB] = {"model.layers.%d.self_attn.k_proj.bias", "blk.%d.attn_k.bias"},
    [T_VB] = {"model.layers.%d.self_attn.v_proj.bias", "blk.%d.attn_v.bias"},
    [T_FFN_NORM] = {"model.layers.%d.post_attention_layernorm.weight", "blk.%d.ffn_norm.weight"},
    [T_GATE] = {"model.layers.%d.mlp.gate_proj.weight", "blk.%d.ffn_gate.weight"},
    [T_UP] = {"model.layers.%d.mlp.up_proj.weight", "blk.%d.ffn_up.weight"},
    [T_DOWN] = {"model.layers.%d.mlp.down_proj.weight", "blk.%d.ffn_down.weight"},
    [T_QN] = {"model.layers.%d.self_attn.q_norm.weight", "blk.%d.attn_q_norm.weight"},
    [T_KN] = {"model.layers.%d.self_attn.k_norm.weight", "blk.%d.attn_k_norm.weight"},
    /* olmo2: the same HF name as llama's ffn_norm, llama.cpp's post-norm
     * name; after T_FFN_NORM, so an HF name still maps to ffn_norm (the
     * name lists are informational; the loader asks per role) */
    [T_ATTN_POST] = {"model.layers.%d.post_attention_layernorm.weight", "blk.%d.post_attention_norm.weight"},
    [T_FFN_POST] = {"model.layers.%d.post_feedforward_layernorm.weight", "blk.%d.post_ffw_norm.weight"},
    /* gemma2: the norm before the MLP (llama.cpp's ffn_norm; its
     * post_attention_layernorm is T_ATTN_POST) */
    [T_FFN_PRE] = {"model.layers.%d.pre_feedforward_layernorm.weight", "blk.%d.ffn_norm.weight"},
    /* phi3 (llama.cpp's conversion/phi.py Phi3MiniModel, src/models/phi3.cpp):
     * the fused projections, gate_up as llama.cpp's ffn_up of 2·F rows;
     * after T_UP, so a GGUF ffn_up still maps to up_proj by name (the
     * loader asks per role) */
    [T_QKV] = {"model.layers.%d.self_attn.qkv_proj.weight", "blk.%d.attn_qkv.weight"},
    [T_GATE_UP] = {"model.layers.%d.mlp.gate_up_proj.weight", "blk.%d.ffn_up.weight"},
    [T_ROPE_LONG] = {NULL, "rope_factors_long.weight"},
    [T_ROPE_SHORT] = {NULL, "rope_factors_short.weight"},
};

const char *model_role_name(tensor_role r, int il, int gguf, char *buf, size_t cap)
{
    if ((unsigned)r >= T_ROLE_COUNT) return NULL;
    const char *f = gguf ? NAMES[r].gguf : NAMES[r].hf;
    if (!f) return NULL;
    int n = snprintf(buf, cap, f, il);
    return n < 0 || (size_t)n >= cap ? NULL : buf;
}

const char *model_proj_name(int p, int il, int gguf, char *buf, size_t cap)
{
    static const tensor_role R[7] = {T_Q, T_K, T_V, T_O, T_GATE, T_UP, T_DOWN};
    return p >= 0 && p < 7 ? model_role_name(R[p], il, gguf, buf, cap) : NULL;
}

const char *model_proj_name_for(const model_config *c, int p, int il, int gguf, char *buf, size_t cap)
{
    if (c->fused) {
        if (p == 0) return model_role_name(T_QKV, il, gguf, buf, cap);
        if (p == 4) return model_role_name(T_GATE_UP, il, gguf, buf, cap);
        if (p == 1 || p == 2 || p == 5) return NULL;
    }
    return model_proj_name(p, il, gguf, buf, cap);
}

/* Match s against a pattern with at most one "%d" (a decimal without
 * leading zeros); the layer number goes to *il. */
static int match(const char *pat, const char *s, int *il)
{
    const char *pd = strstr(pat, "%d");
    *il = 0;
    if (!pd) return !strcmp(pat, s);
    size_t pre = (size_t)(pd - pat);
    if (strncmp(pat, s, pre)) return 0;
    const char *p = s + pre;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return 0;
    long v = 0;
    while (*p >= '0' && *p <= '9') {
        v = v * 10 + (*p++ - '0');
        if (v > 100000) return 0;
    }
    *il = (int)v;
    return !strcmp(p, pd + 2);
}

static int map(const char *in, int from_gguf, char *out, size_t cap)
{
    for (int r = 0; r < T_ROLE_COUNT; r++) {
        const char *pat = from_gguf ? NAMES[r].gguf : NAMES[r].hf;
        int il;
        if (pat && match(pat, in, &il)) return model_role_name((tensor_role)r, il, !from_gguf, out, cap) ? 0 : -1;
    }
    return -1;
}

int model_name_to_gguf(const char *hf, char *out, size_t cap) { return map(hf, 0, out, cap); }
int model_name_to_hf(const char *gguf, char *out, size_t cap) { return map(gguf, 1, out, cap); }

const char *model_arch_name(model_arch a)
{
    return a == ARCH_GEMMA ? "gemma" : a == ARCH_PHI3 ? "phi3" : a == ARCH_GEMMA2 ? "gemma2" : a == ARCH_SMOLLM3 ? "smollm3" : a == ARCH_OLMO2 ? "olmo2" : a == ARCH_QWEN3 ? "qwen3" :
           a == ARCH_QWEN2 ? "qwen2" : "llama";
}

int model_arch_permutes_qk(model_arch a) { return a == ARCH_LLAMA || a == ARCH_SMOLLM3; }
