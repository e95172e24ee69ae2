/* shapes — the config.json numbers of the registry bases dlm can train,
 * so that `dlm doctor` can plan for a base that is not downloaded yet.
 * Copied by hand from each model's published config.json (hidden_size,
 * intermediate_size, layers, heads, kv heads, vocab, tie_word_embeddings,
 * max_position_embeddings); tests/unit/test_plan.c checks that each shape's
 * parameter count matches the registry's (rounded) figure. A downloaded base is
 * always planned from its own files instead. */
#include "run/doctor.h"

#include <string.h>

#include "vision/qwen2vl.h"

typedef struct shape_row {
    const char *key;
    model_arch arch;
    int L, C, F, NH, KVH, HS, V, tied, ctx;
} shape_row;

static const shape_row SHAPES[] = {
    {"smollm2-135m", ARCH_LLAMA, 30, 576, 1536, 9, 3, 64, 49152, 1, 8192},
    {"smollm2-360m", ARCH_LLAMA, 32, 960, 2560, 15, 5, 64, 49152, 1, 8192},
    {"smollm2-1.7b", ARCH_LLAMA, 24, 2048, 8192, 32, 32, 64, 49152, 1, 8192},
    {"qwen2.5-0.5b", ARCH_QWEN2, 24, 896, 4864, 14, 2, 64, 151936, 1, 32768},
    {"qwen2.5-1.5b", ARCH_QWEN2, 28, 1536, 8960, 12, 2, 128, 151936, 1, 32768},
    {"qwen2.5-coder-1.5b", ARCH_QWEN2, 28, 1536, 8960, 12, 2, 128, 151936, 1, 32768},
    {"qwen2.5-3b", ARCH_QWEN2, 36, 2048, 11008, 16, 2, 128, 151936, 1, 32768},
    {"qwen2.5-coder-7b", ARCH_QWEN2, 28, 3584, 18944, 28, 4, 128, 152064, 0, 32768},
    {"qwen2.5-coder-14b", ARCH_QWEN2, 48, 5120, 13824, 40, 8, 128, 152064, 0, 32768},
    /* Qwen2-Audio-7B-Instruct's language model: text_config over Qwen2Config's defaults */
    {"qwen2-audio-7b-instruct", ARCH_QWEN2, 32, 4096, 11008, 32, 32, 128, 156032, 0, 8192},
    {"qwen3-1.7b", ARCH_QWEN3, 28, 2048, 6144, 16, 8, 128, 151936, 1, 40960},
    {"qwen3-1.7b-thinking", ARCH_QWEN3, 28, 2048, 6144, 16, 8, 128, 151936, 1, 40960},
    {"qwen3-4b", ARCH_QWEN3, 36, 2560, 9728, 32, 8, 128, 151936, 1, 40960},
    {"qwen3-8b", ARCH_QWEN3, 36, 4096, 12288, 32, 8, 128, 151936, 0, 40960},
    {"smollm3-3b", ARCH_SMOLLM3, 36, 2048, 11008, 16, 4, 128, 128256, 1, 65536},
    {"olmo-2-7b-instruct", ARCH_OLMO2, 32, 4096, 11008, 32, 32, 128, 100352, 0, 4096},
    {"gemma-2-2b-it", ARCH_GEMMA2, 26, 2304, 9216, 8, 4, 256, 256000, 1, 8192},
    {"gemma-2-9b-it", ARCH_GEMMA2, 42, 3584, 14336, 16, 8, 256, 256000, 1, 8192},
    {"llama-3.2-1b", ARCH_LLAMA, 16, 2048, 8192, 32, 8, 64, 128256, 1, 131072},
    {"llama-3.2-3b", ARCH_LLAMA, 28, 3072, 8192, 24, 8, 128, 128256, 1, 131072},
    {"llama-3.3-8b-instruct", ARCH_LLAMA, 32, 4096, 14336, 32, 8, 128, 128256, 0, 131072},
    {"mixtral-8x7b-instruct", ARCH_LLAMA, 32, 4096, 14336, 32, 8, 128, 32000, 0, 32768},
    {"phi-3.5-mini", ARCH_PHI3, 32, 3072, 8192, 32, 32, 96, 32064, 0, 131072},
    {"phi-4-mini-reasoning", ARCH_PHI3, 32, 3072, 8192, 24, 8, 128, 200064, 1, 131072},
    {"qwen2-vl-2b-instruct", ARCH_QWEN2, 28, 1536, 8960, 12, 2, 128, 151936, 1, 32768},
    /* PaliGemma: its text_config (a Gemma); the tower below */
    {"paligemma-3b-mix-224", ARCH_GEMMA, 18, 2048, 16384, 8, 1, 256, 257216, 1, 8192},
};

/* Sparse-MoE rows (mixtral: llama's layer with experts): experts and the
 * top-k each token uses, from the same config.json (num_local_experts,
 * num_experts_per_tok). */
static const struct { const char *key; int E, k; } MOE_SHAPES[] = {
    {"mixtral-8x7b-instruct", 8, 2},
};

int doctor_known_shape(const char *key, model_config *c)
{
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
        const shape_row *s = &SHAPES[i];
        if (strcmp(s->key, key)) continue;
        memset(c, 0, sizeof *c);
        c->arch = s->arch;
        c->n_layer = s->L;
        c->d_model = s->C;
        c->n_ff = s->F;
        c->n_head = s->NH;
        c->n_kv_head = s->KVH;
        c->head_dim = s->HS;
        c->vocab = s->V;
        c->tied = s->tied;
        c->max_pos = s->ctx;
        c->qkv_bias = s->arch == ARCH_QWEN2;
        c->qk_norm = s->arch == ARCH_QWEN3 ? QK_NORM_HEAD : s->arch == ARCH_OLMO2 ? QK_NORM_FULL : 0;
        c->post_norm = s->arch == ARCH_OLMO2;
        c->nope_every = s->arch == ARCH_SMOLLM3 ? 4 : 0;
        c->rms_eps = s->arch == ARCH_LLAMA ? 1e-5f : 1e-6f;
        c->rope_theta = s->arch == ARCH_LLAMA || s->arch == ARCH_OLMO2 ? 500000.0f : 1000000.0f;
        if (s->arch == ARCH_GEMMA2) {
            model_config_gemma2(c);
            c->rope_theta = 10000.0f;
        }
        if (s->arch == ARCH_GEMMA) {
            model_config_gemma(c);
            c->rope_theta = 10000.0f;
        }
        if (!strcmp(key, "paligemma-3b-mix-224")) {   /* its config.json's vision_config (SigLIP So400m/14) */
            c->pali = 1;
            c->vl = VL_PALI;
            c->image_id = 257152;
            c->pali_image_id = 257152;
            c->pali_vis.layers = 27;
            c->pali_vis.hidden = 1152;
            c->pali_vis.heads = 16;
            c->pali_vis.mlp_hidden = 4304;
            c->pali_vis.image_size = 224;
            c->pali_vis.patch = 14;
            c->pali_tokens = 256;
            c->pali_proj = 2048;
        }
        if (s->arch == ARCH_PHI3) {   /* Phi3Config: fused projections; Phi-4-mini rotates 0.75 of each head */
            c->fused = 1;
            c->rms_eps = 1e-5f;
            c->rope_theta = 10000.0f;
            c->rope_dim = s->HS == 128 ? 96 : 0;
        }
        c->bos_id = c->eos_id = -1;
        if (!strcmp(key, "qwen2-vl-2b-instruct")) {
            /* Qwen/Qwen2-VL-2B-Instruct's config.json: M-RoPE, the special
             * ids and the tower (vision_config) */
            c->vl = VL_QWEN2;
            c->mrope[0] = 16;
            c->mrope[1] = c->mrope[2] = 24;
            c->image_id = 151655;
            c->vision_start_id = 151652;
            c->vision_end_id = 151653;
            c->vis = (struct model_vision){32, 1280, 16, 4, 3, 14, 2, 2, 1536};
        }
        for (size_t j = 0; j < sizeof MOE_SHAPES / sizeof MOE_SHAPES[0]; j++)
            if (!strcmp(MOE_SHAPES[j].key, key)) {
                c->n_expert = MOE_SHAPES[j].E;
                c->n_expert_used = MOE_SHAPES[j].k;
                c->rope_theta = 1000000.0f;   /* MixtralConfig */
            }
        return 0;
    }
    return -1;
}

uint64_t doctor_shape_params(const model_config *c)
{
    uint64_t C = (uint64_t)c->d_model, F = (uint64_t)c->n_ff, V = (uint64_t)c->vocab;
    uint64_t Q = (uint64_t)c->n_head * c->head_dim, K = (uint64_t)c->n_kv_head * c->head_dim;
    uint64_t E = c->n_expert ? (uint64_t)c->n_expert : 1, router = c->n_expert ? (uint64_t)c->n_expert * C : 0;
    uint64_t layer = Q * C + 2 * K * C + C * Q + E * 3 * F * C + router + 2 * C + (c->qkv_bias ? Q + 2 * K : 0) +
                     (c->qk_norm == QK_NORM_FULL ? Q + K : c->qk_norm ? 2 * (uint64_t)c->head_dim : 0) +
                     (c->sandwich ? 2 * C : 0);
    return layer * (uint64_t)c->n_layer + V * C * (c->tied ? 1 : 2) + C + doctor_pali_tower_params(c) +
           (c->vl == VL_QWEN2 ? qwen2vl_tower_params(c) : 0);
}

uint64_t doctor_pali_tower_bytes(const model_config *c)
{
    if (!c->pali) return 0;
    uint64_t D = (uint64_t)c->pali_vis.hidden, F = (uint64_t)c->pali_vis.mlp_hidden, N = (uint64_t)c->pali_tokens;
    uint64_t K = 3 * (uint64_t)c->pali_vis.patch * (uint64_t)c->pali_vis.patch, S = (uint64_t)c->pali_vis.image_size;
    uint64_t acts = 5 * N * D + N * (F > K ? F : K) + N * N + N * (uint64_t)c->pali_proj + 3 * S * S;
    return (doctor_pali_tower_params(c) + acts) * sizeof(float);
}

uint64_t doctor_pali_tower_params(const model_config *c)
{
    if (!c->pali) return 0;
    uint64_t D = (uint64_t)c->pali_vis.hidden, F = (uint64_t)c->pali_vis.mlp_hidden, P = (uint64_t)c->pali_vis.patch;
    uint64_t np = (uint64_t)c->pali_tokens;
    uint64_t layer = 4 * (D * D + D) + 2 * D * F + F + D + 4 * D;   /* q k v out, fc1 fc2, two LayerNorms */
    return 3 * P * P * D + D + np * D + (uint64_t)c->pali_vis.layers * layer + 2 * D + D * (uint64_t)c->pali_proj +
           (uint64_t)c->pali_proj;
}
