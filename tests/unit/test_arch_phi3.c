/* Phi-3 / Phi-4-mini pieces below the decoder (the whole model is checked
 * against PyTorch and llama.cpp in tests/ref/r0412 and r0413): configs in
 * the shape of microsoft/Phi-3.5-mini-instruct's and Phi-4-mini's
 * config.json (LongRoPE, partial rotary) and Phi3Config's refusals; LongRoPE's
 * inverse frequencies and attention factor against transformers'
 * formulas written here in double; the partial-rotary kernel against a
 * plain rotation of the first D dims; the fused modules' LoRA names,
 * dims and target resolution; the quant mixes' attn_qkv rule as
 * llama.cpp's llama-quant.cpp (ATTENTION_QKV); on a tiny random
 * Phi-4-mini-shaped model (fused, partial rotary, LongRoPE's long factors,
 * tied, GQA): LoRA and DoRA gradients on the fused modules against central
 * differences, the same bytes for 1 and 3 threads, KV-cache decoding equal
 * to the full forward (this test runs under ASan; the PyTorch comparison is
 * tests/ref/r0412). */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decoder/decoder.h"
#include "decoder/lora.h"
#include "decoder/session.h"
#include "export/quant_mix.h"
#include "grad/backward.h"
#include "util/fs.h"
#include "weights/safetensors.h"
#include "kern/kern.h"
#include "weights/model.h"

static dlm_err E;

static int parse(const char *txt, model_config *c)
{
    err_clear(&E);
    return model_config_parse(txt, strlen(txt), "config.json", c, &E);
}

static void refuse(const char *txt, const char *want)
{
    model_config c;
    CHECK_INT(parse(txt, &c), -1);
    CHECK_MSG(strstr(E.msg, want) != NULL, "'%s' lacks '%s'", E.msg, want);
}

/* a Phi-3.5-mini-instruct config.json's fields (its 48 factors shortened
 * to the 4 a head of 8 dims has) */
#define PHI35 "{\"architectures\":[\"Phi3ForCausalLM\"],\"model_type\":\"phi3\",\"hidden_size\":32," \
    "\"intermediate_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":4," \
    "\"vocab_size\":300,\"original_max_position_embeddings\":4096," \
    "\"rms_norm_eps\":1e-05,\"rope_theta\":10000.0,\"tie_word_embeddings\":false," \
    "\"hidden_act\":\"silu\",\"bos_token_id\":1,\"eos_token_id\":32000"
#define LONGROPE ",\"max_position_embeddings\":131072,\"sliding_window\":262144," \
    "\"rope_scaling\":{\"type\":\"longrope\",\"short_factor\":[1.0,1.1,1.25,1.5]," \
    "\"long_factor\":[1.0,2.0,8.0,30.0]}"

static void test_config(void)
{
    model_config c;
    CHECK_INT(parse(PHI35 LONGROPE "}", &c), 0);
    CHECK_INT(c.arch, ARCH_PHI3);
    CHECK(c.fused && c.rope_dim == 0 && model_rope_dim(&c) == 8 && c.n_rope_factors == 4);
    CHECK_INT(c.rope_orig_ctx, 4096);
    CHECK_INT(c.sliding_window, 0);   /* 262144 >= the context: no window */
    CHECK(!c.tied && fabsf(c.rms_eps - 1e-5f) < 1e-12f);
    /* transformers' _compute_longrope_parameters: sqrt(1 + ln(131072/4096) / ln(4096)) */
    double af = sqrt(1.0 + log(32.0) / log(4096.0));
    CHECK_MSG(fabs(c.rope_attn - af) < 1e-6, "attention factor %.7f want %.7f", (double)c.rope_attn, af);
    double inv[4], invl[4];
    model_rope_freqs(&c, inv);
    model_rope_freqs_longrope(&c, 1, invl);
    const double sf[4] = {1.0, 1.1, 1.25, 1.5}, lf[4] = {1.0, 2.0, 8.0, 30.0};
    for (int i = 0; i < 4; i++) {
        double base = pow(10000.0, 2.0 * i / 8.0);
        CHECK_MSG(fabs(inv[i] - 1.0 / ((double)(float)sf[i] * base)) < 1e-12, "short %d", i);
        CHECK_MSG(fabs(invl[i] - 1.0 / ((double)(float)lf[i] * base)) < 1e-12, "long %d", i);
    }
    /* Phi-4-mini: 3/4 of each head rotates, GQA, tied, the factors count the rotary dims */
    CHECK_INT(parse("{\"architectures\":[\"Phi3ForCausalLM\"],\"hidden_size\":64,\"intermediate_size\":64,"
                    "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"vocab_size\":300,"
                    "\"partial_rotary_factor\":0.75,\"tie_word_embeddings\":true,\"max_position_embeddings\":4096,"
                    "\"rope_scaling\":{\"type\":\"longrope\",\"short_factor\":[1,1,1,1,1,1],"
                    "\"long_factor\":[2,2,2,2,2,2]}}", &c), 0);
    CHECK(c.rope_dim == 12 && c.head_dim == 16 && c.tied && c.n_kv_head == 2 && c.n_rope_factors == 6);
    CHECK_MSG(c.rope_attn == 0.0f, "max_pos = the default original context: no factor (%g)", (double)c.rope_attn);
    /* no rope_scaling: plain RoPE over the rotary dims */
    CHECK_INT(parse(PHI35 ",\"sliding_window\":null}", &c), 0);
    CHECK(c.n_rope_factors == 0 && c.rope_attn == 0.0f && c.max_pos == 4096 && c.sliding_window == 0);
    /* Phi-3-mini-4k: a window shorter than the context */
    CHECK_INT(parse(PHI35 ",\"sliding_window\":2047}", &c), 0);
    CHECK_INT(c.sliding_window, 2047);

    refuse(PHI35 ",\"rope_scaling\":{\"type\":\"longrope\",\"short_factor\":[1,1,1],\"long_factor\":[1,1,1,1]}}",
           "short_factor must list 4 numbers");
    refuse(PHI35 ",\"rope_scaling\":{\"type\":\"longrope\",\"short_factor\":[1,1,1,1],\"long_factor\":[1,1,0,1]}}",
           "long_factor[2] is not a positive number");
    refuse(PHI35 ",\"partial_rotary_factor\":0.1}", "partial_rotary_factor");
    /* far out of range: refused before any conversion to int (UBSan found
     * the conversion of 8.9e120 in fuzz_config) */
    refuse(PHI35 ",\"partial_rotary_factor\":8.88889e+120}", "partial_rotary_factor");
    refuse(PHI35 ",\"partial_rotary_factor\":-3e40}", "partial_rotary_factor");
    refuse(PHI35 ",\"rope_scaling\":{\"type\":\"yarn\",\"factor\":2}}", "type 'yarn' is not supported");
    refuse(PHI35 ",\"sliding_window\":-2}", "sliding_window = -2");
    /* longrope belongs to phi3 here */
    refuse("{\"model_type\":\"llama\",\"num_hidden_layers\":2,\"intermediate_size\":64,\"vocab_size\":300,"
           "\"hidden_size\":32,\"num_attention_heads\":4,\"rope_scaling\":{\"type\":\"longrope\"}}",
           "type 'longrope' is not supported");
}

/* kern_rope_fwd_tp against the rotation written out: pairs (i, i + D/2) of
 * the first D dims turn by pos·inv[i], the rest of the head passes; the
 * backward turns back. */
static void test_partial_rope(void)
{
    enum { N = 5, H = 3, HS = 16, D = 12 };
    double inv[HS / 2];   /* D/2 for the partial table, all HS/2 for the plain one below */
    for (int i = 0; i < HS / 2; i++) inv[i] = 1.0 / pow(100.0, 2.0 * i / D);
    int32_t pos[N] = {0, 1, 7, 30, 2};
    float cs[N * HS / 2], sn[N * HS / 2], x[N * H * HS], y[N * H * HS];
    kern_rope_table(cs, sn, pos, N, D, inv);
    for (int i = 0; i < N * H * HS; i++) x[i] = sinf(0.37f * (float)i) + 0.1f;
    memcpy(y, x, sizeof x);
    kern_rope_fwd_tp(y, cs, sn, N, H, HS, D);
    double worst = 0;
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++) {
            const float *a = x + (n * H + h) * HS;
            const float *b = y + (n * H + h) * HS;
            for (int i = 0; i < HS; i++) {
                double want;
                if (i < D / 2) want = a[i] * cos(pos[n] * inv[i]) - a[i + D / 2] * sin(pos[n] * inv[i]);
                else if (i < D) want = a[i] * cos(pos[n] * inv[i - D / 2]) + a[i - D / 2] * sin(pos[n] * inv[i - D / 2]);
                else want = a[i];
                if (fabs(b[i] - want) > worst) worst = fabs(b[i] - want);
                if (i >= D) CHECK_MSG(b[i] == a[i], "dim %d past the rotary dims changed", i);
            }
        }
    CHECK_MSG(worst < 1e-5, "partial rope max err %.3g", worst);
    kern_rope_bwd_tp(y, cs, sn, N, H, HS, D);
    worst = 0;
    for (int i = 0; i < N * H * HS; i++) if (fabs(y[i] - x[i]) > worst) worst = fabs(y[i] - x[i]);
    CHECK_MSG(worst < 1e-5, "the backward does not undo the forward (%.3g)", worst);
    /* D = HS is the plain kernel, bit for bit */
    float z1[N * H * HS], z2[N * H * HS];
    kern_rope_table(cs, sn, pos, N, HS, inv);
    memcpy(z1, x, sizeof x);
    memcpy(z2, x, sizeof x);
    kern_rope_fwd_t(z1, cs, sn, N, H, HS);
    kern_rope_fwd_tp(z2, cs, sn, N, H, HS, HS);
    CHECK(!memcmp(z1, z2, sizeof z1));
}

static void test_lora_targets(void)
{
    model_config phi, llama;
    CHECK_INT(parse(PHI35 LONGROPE "}", &phi), 0);
    CHECK_INT(parse("{\"model_type\":\"llama\",\"num_hidden_layers\":2,\"intermediate_size\":64,\"vocab_size\":300,"
                    "\"hidden_size\":32,\"num_attention_heads\":4,\"num_key_value_heads\":2}", &llama), 0);
    int in, out;
    lora_module_dims(&phi, LM_Q, &in, &out);
    CHECK(in == 32 && out == 32 + 2 * 32);   /* qkv_proj: NH·HS + 2·KVH·HS rows */
    lora_module_dims(&phi, LM_GATE, &in, &out);
    CHECK(in == 32 && out == 2 * 64);        /* gate_up_proj: 2·F rows */
    CHECK_STR(lora_module_name_for(1, LM_Q), "qkv_proj");
    CHECK_STR(lora_module_name_for(1, LM_GATE), "gate_up_proj");
    CHECK_STR(lora_module_name_for(0, LM_GATE), "gate_proj");

    unsigned t = LM_NAME_QKV | (1u << LM_O) | LM_NAME_GATE_UP;
    CHECK_INT(lora_targets_resolve(&phi, &t, &E), 0);
    CHECK_INT((int)t, (1 << LM_Q) | (1 << LM_O) | (1 << LM_GATE));
    CHECK_INT(lora_targets_resolve(&phi, &t, &E), 0);   /* idempotent */
    CHECK_INT((int)t, (1 << LM_Q) | (1 << LM_O) | (1 << LM_GATE));
    t = LM_ATTN | LM_NAME_AUTO;   /* auto: the original's phi rows, all four */
    CHECK_INT(lora_targets_resolve(&phi, &t, &E), 0);
    CHECK_INT((int)t, (1 << LM_Q) | (1 << LM_O) | (1 << LM_GATE) | (1 << LM_DOWN));
    t = LM_ATTN | LM_NAME_AUTO;
    CHECK_INT(lora_targets_resolve(&llama, &t, &E), 0);
    CHECK_INT((int)t, (int)LM_ATTN);
    t = (1u << LM_Q) | LM_NAME_SPLIT;   /* q_proj on phi3 */
    CHECK_INT(lora_targets_resolve(&phi, &t, &E), -1);
    CHECK(strstr(E.msg, "qkv_proj") != NULL && strstr(E.hint, "training.target_modules") != NULL);
    t = LM_NAME_GATE_UP;   /* gate_up_proj on llama */
    CHECK_INT(lora_targets_resolve(&llama, &t, &E), -1);
    CHECK(strstr(E.msg, "gate_up_proj") != NULL);

    /* the PEFT tensor names of a phi3 adapter */
    lora_config lc = {.rank = 2, .alpha = 4, .targets = LM_NAME_QKV | LM_NAME_GATE_UP | (1u << LM_DOWN)};
    lora *l;
    CHECK_INT(lora_create(&phi, &lc, &l, &E), 0);
    char name[256];
    lora_tensor_name(l, 1, LM_Q, "lora_B", name, sizeof name);
    CHECK_STR(name, "base_model.model.model.layers.1.self_attn.qkv_proj.lora_B.weight");
    lora_tensor_name(l, 0, LM_GATE, "lora_A", name, sizeof name);
    CHECK_STR(name, "base_model.model.model.layers.0.mlp.gate_up_proj.lora_A.weight");
    CHECK(lora_mod_at(l, 0, LM_Q)->out == 96 && lora_mod_at(l, 0, LM_GATE)->out == 128 && !lora_mod_at(l, 0, LM_K));
    lora_free(l);
    char gg[64];
    CHECK_STR(model_proj_name_for(&phi, LM_Q, 3, 1, gg, sizeof gg), "blk.3.attn_qkv.weight");
    CHECK_STR(model_proj_name_for(&phi, LM_GATE, 3, 1, gg, sizeof gg), "blk.3.ffn_up.weight");
    CHECK_STR(model_proj_name_for(&phi, LM_GATE, 3, 0, gg, sizeof gg), "model.layers.3.mlp.gate_up_proj.weight");
    CHECK(model_proj_name_for(&phi, LM_UP, 3, 1, gg, sizeof gg) == NULL);
}

static void test_quant_rule(void)
{
    export_qstate qs = {.has_output = 1, .n_layer = 2};
    CHECK_INT(export_tensor_type(export_mix_find("Q4_K_M"), &qs, "blk.0.attn_qkv.weight", 256, 2), DT_Q5_K);
    CHECK_INT(export_tensor_type(export_mix_find("Q5_K_M"), &qs, "blk.0.attn_qkv.weight", 256, 2), DT_Q6_K);
    CHECK_INT(export_tensor_type(export_mix_find("Q8_0"), &qs, "blk.0.attn_qkv.weight", 256, 2), DT_Q8_0);
    CHECK_INT(export_tensor_type(export_mix_find("Q4_K_M"), &qs, "rope_factors_long.weight", 48, 1), DT_F32);
}

/* a tiny phi3 in an HF folder: C 32, 4 heads of 8 (2 kv), 3/4 rotary, LongRoPE original 4 < T 6 */
static model *tiny_phi3(void)
{
    enum { L = 2, C = 32, NH = 4, KVH = 2, HS = 8, F = 16, V = 50 };
    const char *dir = check_tmpdir("test_arch_phi3");
    char p[4096];
    snprintf(p, sizeof p, "%s/config.json", dir);
    const char *cfg = "{\"architectures\":[\"Phi3ForCausalLM\"],\"hidden_size\":32,\"intermediate_size\":16,"
                      "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"vocab_size\":50,"
                      "\"partial_rotary_factor\":0.75,\"tie_word_embeddings\":true,\"max_position_embeddings\":64,"
                      "\"original_max_position_embeddings\":4,\"rope_scaling\":{\"type\":\"longrope\","
                      "\"short_factor\":[1.0,1.2,1.5],\"long_factor\":[1.5,4.0,9.0]}}";
    CHECK_INT(fs_write_atomic(p, cfg, strlen(cfg), 0644, &E), 0);
    static float w[16][2048];
    st_out t[16];
    char names[16][64];
    int n = 0;
    uint32_t seed = 12345;
#define ADD(nm, r, c, norm) do { \
        snprintf(names[n], 64, "%s", nm); \
        for (int i_ = 0; i_ < (r) * (c); i_++) { \
            seed = seed * 1664525u + 1013904223u; \
            float u_ = (float)(seed >> 8) / 16777216.0f - 0.5f; \
            w[n][i_] = norm ? 1.0f + 0.2f * u_ : 0.6f * u_; \
        } \
        t[n] = (st_out){.name = names[n], .dtype = ST_F32, .ndim = (c) > 1 ? 2 : 1, .shape = {r, c}, .data = w[n]}; \
        if ((c) == 1) t[n].shape[1] = 0; \
        n++; \
    } while (0)
    ADD("model.embed_tokens.weight", V, C, 0);
    ADD("model.norm.weight", C, 1, 1);
    char nm[64];
    for (int l = 0; l < L; l++) {
        snprintf(nm, sizeof nm, "model.layers.%d.input_layernorm.weight", l); ADD(nm, C, 1, 1);
        snprintf(nm, sizeof nm, "model.layers.%d.self_attn.qkv_proj.weight", l); ADD(nm, NH * HS + 2 * KVH * HS, C, 0);
        snprintf(nm, sizeof nm, "model.layers.%d.self_attn.o_proj.weight", l); ADD(nm, C, NH * HS, 0);
        snprintf(nm, sizeof nm, "model.layers.%d.post_attention_layernorm.weight", l); ADD(nm, C, 1, 1);
        snprintf(nm, sizeof nm, "model.layers.%d.mlp.gate_up_proj.weight", l); ADD(nm, 2 * F, C, 0);
        snprintf(nm, sizeof nm, "model.layers.%d.mlp.down_proj.weight", l); ADD(nm, C, F, 0);
    }
#undef ADD
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    const char *meta[] = {"format", "pt", NULL};
    CHECK_INT(st_write(p, t, n, meta, &E), 0);
    model *m = NULL;
    CHECK_MSG(model_load(dir, &m, &E) == 0, "%s", E.msg);
    return m;
}

static double loss_of(const model *m, const lora *l, const token_batch *b)
{
    decoder_opts o = {.B = b->B, .T = b->T};
    decoder *d;
    if (decoder_create(m, l, &o, &d, &E)) return NAN;
    int64_t nl;
    double s = decoder_loss(d, b, NULL, NULL, &nl);
    decoder_free(d);
    return s / (double)nl;
}

static void test_decoder(void)
{
    model *m = tiny_phi3();
    if (!m) return;
    CHECK(m->cfg.fused && m->cfg.rope_dim == 6 && m->rope_inv_freq_long);
    enum { B = 2, T = 6 };
    int32_t tok[B * T], tgt[B * T], pos[B * T];
    for (int i = 0; i < B * T; i++) {
        tok[i] = (i * 7 + 3) % 50;
        tgt[i] = i % 5 == 4 ? -1 : (i * 11 + 1) % 50;
        pos[i] = i % T;
    }
    token_batch b = {.B = B, .T = T, .tokens = tok, .targets = tgt, .pos = pos, .seg = NULL};
    int64_t nl = 0;
    for (int i = 0; i < B * T; i++) nl += tgt[i] >= 0;
    for (int dora = 0; dora < 2; dora++) {
        lora_config lc = {.rank = 2, .alpha = 4, .dora = dora,
                          .targets = LM_NAME_QKV | LM_NAME_GATE_UP | (1u << LM_O) | (1u << LM_DOWN)};
        lora *l;
        CHECK_INT(lora_create(&m->cfg, &lc, &l, &E), 0);
        CHECK_INT(lora_init(l, m, 5, &E), 0);
        for (int layer = 0; layer < 2; layer++)   /* B ≠ 0: every path carries a gradient */
            for (int mm = 0; mm < LM_COUNT; mm++) {
                const lora_mod *md = lora_mod_at(l, layer, mm);
                for (size_t i = 0; md && i < (size_t)md->out * 2; i++)
                    l->w[md->off_b + i] = 0.05f * (float)((int)((i * 37 + (size_t)mm) % 11) - 5);
            }
        float *g[2];
        for (int th = 0; th < 2; th++) {
            kern_init(th ? 3 : 1);
            g[th] = calloc(l->n, sizeof(float));
            decoder_opts o = {.B = B, .T = T};
            decoder *d;
            CHECK_INT(decoder_create(m, l, &o, &d, &E), 0);
            int64_t cnt;
            backward_step(d, &b, g[th], NULL, 1.0f / (float)nl, 0, 0, &cnt);
            decoder_free(d);
        }
        kern_init(1);
        CHECK_MSG(!memcmp(g[0], g[1], l->n * sizeof(float)), "dora %d: 1 and 3 threads give different gradients", dora);
        /* central differences on a spread of parameters (DoRA: its magnitudes,
         * the only true derivatives as PEFT detaches the norm) */
        int bad = 0, probes = 0;
        for (int layer = 0; layer < 2; layer++)
            for (int mm = 0; mm < LM_COUNT; mm++) {
                const lora_mod *md = lora_mod_at(l, layer, mm);
                if (!md) continue;
                size_t idx[3] = {md->off_a + 1, md->off_b + (size_t)md->out * 2 - 3, md->off_b + 2};
                if (dora) idx[0] = md->off_mag, idx[1] = md->off_mag + (size_t)md->out - 1, idx[2] = md->off_mag + 3;
                for (int k = 0; k < 3; k++) {
                    size_t i = idx[k];
                    float save = l->w[i], h = 1e-2f * (fabsf(save) > 0.1f ? fabsf(save) : 0.1f);
                    l->w[i] = save + h;
                    double lp = loss_of(m, l, &b);
                    l->w[i] = save - h;
                    double lm = loss_of(m, l, &b);
                    l->w[i] = save;
                    double fd = (lp - lm) / (2.0 * (double)h);
                    probes++;
                    if (fabs(fd - g[0][i]) > 2e-3 + 3e-2 * fabs(fd)) {
                        bad++;
                        fprintf(stderr, "FD dora %d layer %d module %d: fd %.6g backward %.6g\n", dora, layer, mm, fd,
                                (double)g[0][i]);
                    }
                }
            }
        CHECK_MSG(bad == 0 && probes == 24, "dora %d: %d of %d finite-difference mismatches", dora, bad, probes);
        /* KV cache: 4 rows, then one at a time, = the full forward of row 1 */
        decoder_opts o = {.B = 1, .T = T};
        decoder *d;
        CHECK_INT(decoder_create(m, l, &o, &d, &E), 0);
        float full[T * 50], inc[T * 50];
        token_batch b1 = {.B = 1, .T = T, .tokens = tok + T, .targets = tgt + T, .pos = pos + T, .seg = NULL};
        int64_t cnt;
        decoder_loss(d, &b1, NULL, full, &cnt);
        decoder_free(d);
        session *s;
        CHECK_INT(session_create(m, l, T, 4, &s, &E), 0);
        CHECK_INT(session_eval(s, tok + T, 4, inc, 1, &E), 0);
        for (int i = 4; i < T; i++) CHECK_INT(session_eval(s, tok + T + i, 1, inc + i * 50, 1, &E), 0);
        session_free(s);
        double mx = 0;
        for (int i = 0; i < T * 50; i++) mx = fmax(mx, fabs(full[i] - inc[i]));
        CHECK_MSG(mx < 1e-4, "dora %d: KV-cache logits differ from the full forward by %.3g", dora, mx);
        free(g[0]);
        free(g[1]);
        lora_free(l);
    }
    model_free(m);
}

int main(void)
{
    kern_init(1);
    test_config();
    test_quant_rule();
    test_partial_rope();
    test_lora_targets();
    test_decoder();
    return check_done();
}
