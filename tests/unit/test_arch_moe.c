/* test_arch_moe — mixtral's configuration and plan, values from
 * transformers' MixtralConfig (models/mixtral/configuration_mixtral.py) and
 * Mixtral-8x7B's published config.json; the block's numbers against PyTorch
 * are in tests/ref/r0411 (slow); here, so that the sanitizer runs cover
 * decoder/moe.c and grad/moe.c, a tiny random mixtral written as an HF
 * folder: LoRA gradients on the attention against central finite
 * differences of the loss, and the KV-cache session against the training
 * forward's logits. */
#include "check.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder/decoder.h"
#include "decoder/lora.h"
#include "decoder/session.h"
#include "grad/backward.h"
#include "run/doctor.h"
#include "run/plan.h"
#include "util/fs.h"
#include "util/rng.h"
#include "weights/model.h"
#include "weights/safetensors.h"

static int parse(const char *json, model_config *c, dlm_err *e)
{
    return model_config_parse(json, strlen(json), "config.json", c, e);
}

#define BASE "\"hidden_size\":64,\"intermediate_size\":96,\"num_hidden_layers\":2,\"num_attention_heads\":4," \
             "\"num_key_value_heads\":2,\"vocab_size\":400"


/* A tiny mixtral HF folder: C 32, F 64 (whole Q8_0 blocks), 2 layers, 4 heads / 2 kv, 4 experts, top 2, V 40. */
enum { TC = 32, TF = 64, TL = 2, TE = 4, TV = 40 };
static const char *write_tiny(void)
{
    const char *dir = check_tmpdir("moe");
    char p[4096];
    dlm_err e;
    snprintf(p, sizeof p, "%s/config.json", dir);
    const char *cfg = "{\"architectures\":[\"MixtralForCausalLM\"],\"hidden_size\":32,\"intermediate_size\":64,"
                      "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"vocab_size\":40,"
                      "\"num_local_experts\":4,\"num_experts_per_tok\":2,\"rms_norm_eps\":1e-5,\"rope_theta\":10000,"
                      "\"max_position_embeddings\":64,\"tie_word_embeddings\":false,\"hidden_act\":\"silu\"}";
    if (fs_write_atomic(p, cfg, strlen(cfg), 0644, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    static char names[64][96];
    static float data[64][TF * TC];
    st_out t[64];
    int n = 0;
#define T2(nm, r, c, sc, norm) do { snprintf(names[n], 96, "%s", nm); \
        for (int i = 0; i < (r) * (c); i++) data[n][i] = (norm) + (sc) * rng_normal(5, 1, (uint64_t)n, (uint64_t)i); \
        t[n] = (st_out){names[n], ST_F32, (c) ? 2 : 1, {(r), (c)}, data[n]}; n++; } while (0)
    char nm[96];
    T2("model.embed_tokens.weight", TV, TC, 0.5f, 0.0f);
    T2("lm_head.weight", TV, TC, 0.3f, 0.0f);
    for (int l = 0; l < TL; l++) {
        const char *pj[4] = {"q_proj", "k_proj", "v_proj", "o_proj"};
        int rows[4] = {TC, TC / 2, TC / 2, TC}, cols[4] = {TC, TC, TC, TC};
        for (int k = 0; k < 4; k++) {
            snprintf(nm, sizeof nm, "model.layers.%d.self_attn.%s.weight", l, pj[k]);
            T2(nm, rows[k], cols[k], 0.25f, 0.0f);
        }
        snprintf(nm, sizeof nm, "model.layers.%d.input_layernorm.weight", l);
        T2(nm, TC, 1, 0.1f, 1.0f);
        snprintf(nm, sizeof nm, "model.layers.%d.post_attention_layernorm.weight", l);
        T2(nm, TC, 1, 0.1f, 1.0f);
        snprintf(nm, sizeof nm, "model.layers.%d.block_sparse_moe.gate.weight", l);
        T2(nm, TE, TC, 0.5f, 0.0f);
        for (int x = 0; x < TE; x++) {
            snprintf(nm, sizeof nm, "model.layers.%d.block_sparse_moe.experts.%d.w1.weight", l, x);
            T2(nm, TF, TC, 0.25f, 0.0f);
            snprintf(nm, sizeof nm, "model.layers.%d.block_sparse_moe.experts.%d.w3.weight", l, x);
            T2(nm, TF, TC, 0.25f, 0.0f);
            snprintf(nm, sizeof nm, "model.layers.%d.block_sparse_moe.experts.%d.w2.weight", l, x);
            T2(nm, TC, TF, 0.25f, 0.0f);
        }
    }
    T2("model.norm.weight", TC, 1, 0.1f, 1.0f);
#undef T2
    for (int i = 0; i < n; i++)
        if (t[i].shape[1] == 1) t[i].ndim = 1;
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    if (st_write(p, t, n, NULL, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    return dir;
}

static double loss_at(const model *m, const lora *l, const token_batch *b)
{
    decoder_opts o = {.B = b->B, .T = b->T};
    decoder *f;
    dlm_err e;
    if (decoder_create(m, l, &o, &f, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    int64_t n;
    double s = decoder_loss(f, b, NULL, NULL, &n);
    decoder_free(f);
    return s / (double)n;
}

static void test_tiny(void)
{
    dlm_err e;
    model *m;
    if (model_load(write_tiny(), &m, &e)) { CHECK_MSG(0, "%s", e.msg); return; }
    CHECK_INT(m->cfg.n_expert, TE);
    enum { B = 2, T = 8 };
    int32_t toks[B * T], tgt[B * T], pos[B * T], seg[B * T];
    for (int i = 0; i < B * T; i++) {
        toks[i] = (int32_t)(rng_u64(3, 9, 0, (uint64_t)i) % TV);
        tgt[i] = i % 5 == 2 ? -1 : (int32_t)(rng_u64(3, 9, 1, (uint64_t)i) % TV);
        pos[i] = i % T;
        seg[i] = 0;
    }
    token_batch b = {.B = B, .T = T, .tokens = toks, .targets = tgt, .pos = pos, .seg = seg};
    /* LoRA on q, k, v, o with B != 0, so dA and dB are both non-trivial */
    lora_config lc = {4, 8.0f, 0.0f, 0xFu, 0};
    lora *l;
    if (lora_create(&m->cfg, &lc, &l, &e) || lora_init(l, m, 4, &e)) { CHECK_MSG(0, "%s", e.msg); model_free(m); return; }
    for (size_t i = 0; i < l->n; i++)
        if (l->w[i] == 0) l->w[i] = 0.1f * rng_normal(4, 2, 0, i);
    decoder_opts o = {.B = B, .T = T};
    decoder *f;
    CHECK_INT(decoder_create(m, l, &o, &f, &e), 0);
    float *g = calloc(l->n, sizeof *g);
    int64_t nl = 0;
    for (int i = 0; i < B * T; i++) nl += tgt[i] >= 0;
    backward_step(f, &b, g, NULL, 1.0f / (float)nl, 0, 0, &nl);
    /* the training forward's logits, row 1, for the session below */
    float *lg = calloc((size_t)B * T * TV, sizeof *lg);
    decoder_loss(f, &b, NULL, lg, &nl);
    decoder_free(f);
    /* central differences in f32 on 16 parameters (h small enough that no
     * routing choice flips: a flip would show as a jump far off the slope) */
    int bad = 0;
    for (int k = 0; k < 16; k++) {
        size_t i = (size_t)(rng_u64(6, 3, 0, (uint64_t)k) % l->n);
        float save = l->w[i], h = 1e-2f * (fabsf(save) > 0.1f ? fabsf(save) : 0.1f);
        l->w[i] = save + h;
        double lp = loss_at(m, l, &b);
        l->w[i] = save - h;
        double lm = loss_at(m, l, &b);
        l->w[i] = save;
        double fd = (lp - lm) / (2.0 * (double)h);
        if (fabs(fd - g[i]) > 2e-3 + 3e-2 * fabs(fd)) {
            bad++;
            fprintf(stderr, "FD param %zu: fd %.6g backward %.6g\n", i, fd, (double)g[i]);
        }
    }
    CHECK_MSG(bad == 0, "%d finite-difference mismatches through the MoE block", bad);
    /* KV cache: row 1 fed in two chunks, then the last tokens one by one */
    session *s;
    CHECK_INT(session_create(m, l, T, 4, &s, &e), 0);
    float *out = calloc((size_t)T * TV, sizeof *out);
    CHECK_INT(session_eval(s, toks + T, 3, out, 1, &e), 0);
    for (int i = 3; i < T; i++) CHECK_INT(session_eval(s, toks + T + i, 1, out + (size_t)i * TV, 1, &e), 0);
    double mx = 0;
    for (int i = 0; i < T * TV; i++) mx = fmax(mx, fabs(out[i] - lg[(size_t)T * TV + i]));
    CHECK_MSG(mx < 1e-4, "KV-cache logits differ from the training forward by %.3g", mx);
    session_free(s);
    /* QLoRA: the experts re-stored as Q8_0 (the router kept); the loss
     * moves by Q8_0's rounding only */
    double l0 = loss_at(m, l, &b);
    CHECK_INT(model_quantize_projections(m, DT_Q8_0, &e), 0);
    CHECK_INT(m->layers[0].exp_down[TE - 1].type, DT_Q8_0);
    CHECK_INT(m->layers[0].moe_router.type, DT_F32);
    double l1 = loss_at(m, l, &b);
    CHECK_MSG(fabs(l1 - l0) < 2e-2 * fabs(l0) && l1 != l0, "Q8_0 experts: loss %.6f vs %.6f", l1, l0);
    free(out);
    free(lg);
    free(g);
    lora_free(l);
    model_free(m);
}

int main(void)
{
    model_config c;
    dlm_err e;
    /* MixtralConfig's defaults: 8 experts, top 2, rope_theta 1e6, eps 1e-5, no window */
    CHECK_MSG(parse("{\"architectures\":[\"MixtralForCausalLM\"]," BASE "}", &c, &e) == 0, "%s", e.msg);
    CHECK_INT(c.arch, ARCH_LLAMA);   /* llama.cpp converts it as llama with experts */
    CHECK_INT(c.n_expert, 8);
    CHECK_INT(c.n_expert_used, 2);
    CHECK_NEAR(c.rope_theta, 1e6, 0);
    CHECK_NEAR(c.rms_eps, 1e-5, 1e-12);
    CHECK_INT(c.sliding_window, 0);
    CHECK_INT(c.max_pos, 131072);
    CHECK_STR(model_arch_name(c.arch), "llama");
    /* model_type alone, explicit values */
    CHECK_MSG(parse("{\"model_type\":\"mixtral\"," BASE ",\"num_local_experts\":4,\"num_experts_per_tok\":1,"
                    "\"sliding_window\":16,\"rope_theta\":5000}", &c, &e) == 0, "%s", e.msg);
    CHECK_INT(c.n_expert, 4);
    CHECK_INT(c.n_expert_used, 1);
    CHECK_INT(c.sliding_window, 16);
    CHECK_NEAR(c.rope_theta, 5000, 0);
    /* a dense llama has no experts */
    CHECK_MSG(parse("{\"architectures\":[\"MistralForCausalLM\"]," BASE "}", &c, &e) == 0, "%s", e.msg);
    CHECK_INT(c.n_expert, 0);
    /* refused, not ignored */
    CHECK(parse("{\"architectures\":[\"MixtralForCausalLM\"]," BASE ",\"num_local_experts\":2,\"num_experts_per_tok\":3}",
                &c, &e) == -1 && strstr(e.msg, "num_experts_per_tok 3"));
    CHECK(parse("{\"architectures\":[\"MixtralForCausalLM\"]," BASE ",\"router_jitter_noise\":0.1}", &c, &e) == -1 &&
          strstr(e.msg, "router_jitter_noise") && strstr(e.hint, "attention"));

    /* the registry row plans as Mixtral-8x7B: 46.7e9 parameters, every expert's weights */
    CHECK_INT(doctor_known_shape("mixtral-8x7b-instruct", &c), 0);
    CHECK_INT(c.n_expert, 8);
    uint64_t p = doctor_shape_params(&c);
    /* 32·(4096·4096·2 + 2·1024·4096 + 8·3·14336·4096 + 8·4096 + 2·4096) + 2·32000·4096 + 4096 */
    uint64_t want = 32ull * (4096ull * 4096 * 2 + 2ull * 1024 * 4096 + 8ull * 3 * 14336 * 4096 + 8 * 4096 + 2 * 4096) +
                    2ull * 32000 * 4096 + 4096;
    CHECK_INT((long long)p, (long long)want);
    plan_base b;
    plan_base_shape(&c, DT_BF16, 0, &b);
    CHECK_MSG(b.tensor_bytes > 2 * 46000000000ull && b.tensor_bytes < 2 * 47500000000ull, "BF16 bytes %llu",
              (unsigned long long)b.tensor_bytes);
    /* activations: only the k active experts' rows (N·k·F for g and u), not all E */
    model_config dense = c;
    dense.n_expert = dense.n_expert_used = 0;
    decoder_opts o = {.B = 1, .T = 64};
    lora_config lc = {8, 16.0f, 0.0f, 0xFu, 0};
    size_t moe = decoder_plan_bytes(&c, &lc, &o), dns = decoder_plan_bytes(&dense, &lc, &o);
    size_t gu = (size_t)64 * 14336 * sizeof(float); /* one [N, F] buffer */
    CHECK_MSG(moe > dns + 2 * 32 * gu && moe < dns + 8 * 32 * gu, "moe %zu dense %zu", moe, dns);
    test_tiny();
    return check_done();
}
