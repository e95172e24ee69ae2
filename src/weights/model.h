/* model — a base model in memory: its config and its weights in their
 * stored types, loaded from an HF folder (config.json + safetensors) or a
 * GGUF file. Architectures: llama (and mistral), qwen2, qwen3, olmo2, smollm3
 * gemma2, mixtral and phi3 (docs/models.md).
 *
 * Conventions every consumer relies on:
 *  - Weights are in HF orientation and HF row order: W[out][in], Q/K rows in
 *    HF's rotate-half layout. The GGUF loader undoes llama.cpp's llama-arch
 *    Q/K row permutation, the GGUF writer re-applies it.
 *  - Norm weights, biases and RoPE frequencies are converted to f32 at load.
 *  - Big matrices are not expanded: a Q4_K GGUF stays Q4_K in memory, and
 *    HF safetensors are memory-mapped. */
#ifndef DLM_MODEL_H
#define DLM_MODEL_H

#include <stdint.h>
#include "kern/dtype.h"
#include "util/err.h"

typedef enum { ARCH_LLAMA = 0, ARCH_QWEN2 = 1, ARCH_QWEN3 = 2, ARCH_OLMO2 = 3, ARCH_SMOLLM3 = 4,
               ARCH_GEMMA2 = 5, ARCH_PHI3 = 6, ARCH_GEMMA = 7 } model_arch;

/* llama.cpp's general.architecture name of a ("llama", "qwen2", "qwen3", "olmo2", "smollm3", "gemma2", "phi3",
 * "gemma"). */
const char *model_arch_name(model_arch a);
/* 1 if llama.cpp's converter permutes this arch's Q/K rows (LlamaModel and
 * its subclasses: llama, mistral, smollm3). */
int model_arch_permutes_qk(model_arch a);

enum { QK_NORM_HEAD = 1, QK_NORM_FULL = 2 };
enum { VL_QWEN2 = 1, VL_PALI = 2 };
enum { MODEL_MAX_EXPERT_USED = 8, MODEL_MAX_ROPE_FACTORS = 256 };

typedef struct model_config {
    model_arch arch;
    int n_layer;        /* L */
    int d_model;        /* C: hidden_size */
    int n_ff;           /* F: intermediate_size */
    int n_head;         /* NH */
    int n_kv_head;      /* KVH (GQA: NH % KVH == 0) */
    int head_dim;       /* HS */
    int vocab;          /* V: rows of the embedding */
    int max_pos;        /* max_position_embeddings / context_length */
    float rms_eps;
    float rope_theta;
    int tied;           /* lm_head shares the embedding */
    int qkv_bias;       /* q/k/v projections have biases (qwen2: always) */
    int qk_norm;        /* RMSNorm on q and k before RoPE: QK_NORM_HEAD (qwen3) or QK_NORM_FULL (olmo2) */
    int post_norm;      /* olmo2: no norm before attention / MLP; RMSNorm of each one's output before the residual add */
    int sliding_window; /* mistral: a query sees the keys of the last sliding_window positions (itself included); 0 = all */
    int nope_every;     /* smollm3: every nope_every-th layer (1-based) has no RoPE; 0 = RoPE everywhere */
    /* gemma2 (Gemma2DecoderLayer): RMSNorm before AND after attention and
     * MLP (sandwich; post_norm is set too), GeGLU with tanh-GELU, the
     * embedding scaled by √hidden, soft-capped attention and final logits,
     * the query scale from query_pre_attn_scalar, the sliding window on
     * even layers only. Norm weights are held as llama.cpp stores them,
     * (1 + w): the HF loader adds the 1. */
    int sandwich;
    int act_gelu;        /* act = gelu_tanh(g)·u instead of silu(g)·u */
    float embd_scale;    /* embeddings × embd_scale; 0 = none */
    float attn_softcap;  /* scores = cap·tanh(scores/cap); 0 = none */
    float final_softcap; /* logits = cap·tanh(logits/cap); 0 = none */
    float attn_scale;    /* scores = q·k·attn_scale; 0 = 1/√head_dim */
    int swa_even;        /* sliding_window applies to even layers only */
    /* phi3 (Phi3ForCausalLM): q, k, v in one fused qkv_proj [Q+2K, C] (rows
     * q, then k, then v) and gate, up in one gate_up_proj [2F, C] (gate rows
     * first). The layer's wq holds the fused qkv, w_gate the fused gate_up;
     * wk, wv, w_up are empty. LoRA's LM_Q / LM_GATE are the fused modules. */
    int fused;
    /* gemma (GemmaDecoderLayer, Gemma 1; PaliGemma's language model): the
     * llama layer with GeGLU (tanh-GELU), the embedding scaled by √hidden,
     * RMSNorm weights held as (1 + w) as for gemma2; no caps, no window, no
     * post norms (act_gelu and embd_scale are set, sandwich is not). */
    int rope_dim;        /* dims of each head that rotate (partial_rotary_factor); 0 = head_dim */
    float rope_attn;     /* cos, sin × rope_attn (LongRoPE's attention factor); 0 = 1 */
    /* LongRoPE: per-frequency divisors of the rope_dim/2 frequencies, short
     * (context ≤ rope_orig_ctx) and long; n_rope_factors = 0 without it */
    int n_rope_factors;
    float rope_short[MODEL_MAX_ROPE_FACTORS], rope_long[MODEL_MAX_ROPE_FACTORS];
    int n_expert;       /* mixtral: experts per layer (sparse MoE in place of the MLP); 0 = dense MLP */
    int n_expert_used;  /* mixtral: experts each token goes through (top-k of the router) */
    /* rope_scaling type llama3 (Llama 3.x); 0 = none */
    int rope_llama3;
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_orig_ctx;
    /* token ids from config.json (-1 = unknown) */
    int bos_id, eos_id;
    /* every eos id when config.json gives a list (eos_id = the first) */
    int n_eos;
    int eos_ids[8];
    /* GGUF sources: the llama3 factors are only known through the
     * rope_freqs tensor, so rope_inv_freq (not model_rope_freqs) is the
     * truth; rope_factor then holds the largest per-frequency divisor. */
    int rope_custom;
    /* Qwen2-VL's M-RoPE (rope_scaling.mrope_section): the rotary columns of
     * the temporal, height and width streams, summing to head_dim/2; all 0
     * = 1-D RoPE. A batch's pos3 (tokens/batch.h) needs it. */
    int mrope[3];
    /* vision-language bases (docs/images.md): VL_QWEN2 for
     * Qwen2VLForConditionalGeneration (its text model is qwen2 with M-RoPE;
     * config.json's text fields at the top (hub) or under text_config
     * (transformers 5)); 0 = a text model. The special ids, and the vision
     * tower's shape from vision_config (vision/qwen2vl.h loads it).
     * VL_PALI for PaliGemmaForConditionalGeneration (image_id is its
     * image_token_index; its tower's shape is in pali_vis below). */
    int vl;
    int image_id, vision_start_id, vision_end_id;
    struct model_vision {
        int depth, embed_dim, heads, mlp_ratio, in_ch, patch, temporal, merge, out_dim;
    } vis;
    /* torch_dtype / dtype from config.json ("bfloat16"), "" if absent */
    char src_dtype[16];
    /* Qwen2-Audio (model_type qwen2_audio, Qwen2AudioForConditionalGeneration):
     * the language model is text_config's Qwen2, its tensors under
     * language_model.model.* / language_model.lm_head.* (hub checkpoints) or
     * model.language_model.* / lm_head.* (transformers 5); audio_token is
     * audio_token_index, the <|AUDIO|> id the projector's rows replace.
     * audio = 0 for every text base. */
    int audio;
    int audio_token;
    /* PaliGemma (config model_type "paligemma"): the fields above are its
     * text_config's; the vision tower's (SigLIP vision_config) and the
     * image placeholder are here. pali = 0 for every text base. */
    int pali;
    int pali_image_id;      /* image_token_index (257152 for the 3b rows) */
    int pali_tokens;        /* image tokens per image: (image_size / patch)² */
    struct { int layers, hidden, heads, mlp_hidden, image_size, patch; } pali_vis;
    int pali_proj;          /* projection_dim: the projector's output width (= d_model) */
} model_config;

typedef struct layer_weights {
    float *attn_norm;           /* [C] input_layernorm */
    wmat wq, wk, wv, wo;        /* [NH*HS, C] [KVH*HS, C] [KVH*HS, C] [C, NH*HS] */
    float *bq, *bk, *bv;        /* [NH*HS] [KVH*HS] [KVH*HS], NULL without bias */
    float *q_norm, *k_norm;     /* qk_norm: [HS] each (per head) or [NH*HS] [KVH*HS] (whole projection), else NULL */
    float *post_attn_norm, *post_ffn_norm; /* [C] each (post_norm; attn_norm and ffn_norm are NULL then) */
    float *ffn_norm;            /* [C] post_attention_layernorm */
    wmat w_gate, w_up, w_down;  /* [F, C] [F, C] [C, F] (dense MLP) */
    /* mixtral (n_expert > 0): the router and each expert's SwiGLU MLP
     * (HF block_sparse_moe.gate / experts.E.w1 w3 w2; GGUF ffn_gate_inp and
     * the 3-D ffn_gate_exps / ffn_up_exps / ffn_down_exps) */
    wmat moe_router;            /* [E, C] */
    wmat *exp_gate, *exp_up, *exp_down; /* [E] each: [F, C] [F, C] [C, F] */
} layer_weights;

typedef struct model {
    model_config cfg;
    char source[4096];          /* path it was loaded from */
    int from_gguf;
    wmat tok_embd;              /* [V, C] */
    wmat output;                /* [V, C]; same data as tok_embd when tied */
    float *out_norm;            /* [C] */
    layer_weights *layers;      /* [L] */
    double *rope_inv_freq;      /* [HS/2]: 1/theta^(2i/HS), llama3 scaling applied (double: RoPE angles are computed in double);
                                 * phi3: [rope_dim/2], LongRoPE's short factors applied */
    double *rope_inv_freq_long; /* LongRoPE: [rope_dim/2] with the long factors (a context > rope_orig_ctx); else NULL */
    struct model_storage *storage; /* mmaps and owned buffers (private) */
} model;

/* Load from an HF model folder (config.json + *.safetensors), its
 * config.json, or a .gguf file. Every tensor's dtype and shape is checked
 * against the config; errors name the tensor, the expected and the actual
 * shape. Weights stay in the stored type (F32 F16 BF16 Q8_0 Q4_0 Q5_0 Q4_K
 * Q5_K Q6_K) and point into the mapping, except llama-arch GGUF Q/K
 * weights (un-permuted into owned memory) and float tensors whose address
 * is not aligned to their element size (copied). */
int model_load(const char *path, model **out, dlm_err *e);
void model_free(model *m);

/* Every tensor of the source file(s), loaded or not, for export and
 * inspection. ne[] is in ggml order (ne[0] = innermost = columns) for both
 * sources; data is the bytes as stored (a llama GGUF's Q/K rows still
 * permuted). type is the ggml/dtype id, or -1 for a safetensors dtype that
 * has no ggml equivalent (type_name says which). */
typedef struct model_tensor {
    const char *name;           /* as in the source */
    const char *hf_name;        /* HF name, "" when there is none (rope_freqs) */
    const char *gguf_name;      /* GGUF name, "" when there is none */
    int type;
    const char *type_name;
    int n_dims;
    int64_t ne[4];
    const void *data;
    uint64_t nbytes;
} model_tensor;
int model_tensor_count(const model *m);
/* The safetensors set an HF folder was loaded from (the vision tower's
 * tensors are read from it, vision/qwen2vl.h); NULL for a GGUF. */
const struct st_file *model_safetensors(const model *m);
const model_tensor *model_tensor_at(const model *m, int i);

/* Tensor name mapping (docs/reference/formats.md §4.5): "model.layers.3.mlp.up_proj.weight"
 * <-> "blk.3.ffn_up.weight". 0 ok, -1 when the name has no counterpart. */
int model_name_to_gguf(const char *hf, char *out, size_t cap);
int model_name_to_hf(const char *gguf, char *out, size_t cap);
/* The GGUF (gguf = 1) or HF name of projection p of layer il, p in the
 * order q k v o gate up down (decoder/lora.h's LM_*): "blk.3.attn_q.weight".
 * NULL when p is out of range or buf too small. */
const char *model_proj_name(int p, int il, int gguf, char *buf, size_t cap);

/* Re-store every layer's seven projections as `target` (e.g. DT_Q4_K) in
 * owned memory, with llama.cpp's fallbacks for row widths the type cannot
 * take. Already-quantized weights are kept. Embeddings and the head stay. */
int model_quantize_projections(model *m, dtype target, dlm_err *e);
/* Re-store every F32 / F16 projection (the same seven, experts included) as
 * BF16 in owned memory, each value rounded to nearest-even (bf16 training,
 * training.precision: bf16); other types are kept. */
int model_bf16_projections(model *m, dlm_err *e);

/* 1 if layer il applies RoPE to q and k. */
static inline int model_layer_rope(const model_config *c, int il)
{
    return c->nope_every <= 0 || (il + 1) % c->nope_every != 0;
}

/* The dims of each head that RoPE rotates (phi3's partial rotary). */
static inline int model_rope_dim(const model_config *c)
{
    return c->rope_dim > 0 ? c->rope_dim : c->head_dim;
}

/* The sliding window of layer il (0 = none). */
static inline int model_layer_window(const model_config *c, int il)
{
    return c->swa_even && il % 2 ? 0 : c->sliding_window;
}

/* 1 if the RMSNorm weights are held as (1 + w) (Gemma's RMSNorm): gemma, gemma2. */
static inline int model_norm_plus1(const model_config *c)
{
    return c->arch == ARCH_GEMMA || c->arch == ARCH_GEMMA2;
}

/* gemma's (Gemma 1) settings beyond the shape: GeGLU, √hidden embedding scale, tied. */
void model_config_gemma(model_config *c);

/* gemma2's settings beyond the shape, as Gemma2Config's defaults and
 * llama.cpp set them: sandwich norms, GeGLU, √hidden embedding scale, the
 * caps 50 / 30, window 4096 on even layers, the query scale llama.cpp
 * derives (1/√head_dim; 1/√(hidden/heads) for the 46-layer 27B). */
void model_config_gemma2(model_config *c);

/* Parse an HF config.json text into cfg (llama / qwen2 / qwen3; v4 and v5 layouts). */
int model_config_parse(const char *json_text, size_t len, const char *path, model_config *cfg, dlm_err *e);
/* Fill rope_inv_freq[rope_dim/2] from cfg (theta, llama3 scaling; LongRoPE's
 * long (long_f = 1) or short factors). */
void model_rope_freqs(const model_config *cfg, double *inv_freq);
void model_rope_freqs_longrope(const model_config *cfg, int long_f, double *inv_freq);
/* The GGUF (gguf = 1) or HF name of projection p of layer il as the model
 * stores it: phi3's fused qkv / gate_up for LM_Q / LM_GATE, NULL for its
 * k, v and up (no tensor of their own). */
const char *model_proj_name_for(const model_config *c, int p, int il, int gguf, char *buf, size_t cap);

#endif
