/* test_arch_moe — mixtral's configuration and plan, values from
 * transformers' MixtralConfig (models/mixtral/configuration_mixtral.py) and
 * Mixtral-8x7B's published config.json; the block's numbers against PyTorch
 * are in tests/ref/r0411. */
#include "check.h"
#include <string.h>

#include "decoder/decoder.h"
#include "run/doctor.h"
#include "run/plan.h"
#include "weights/model.h"

static int parse(const char *json, model_config *c, dlm_err *e)
{
    return model_config_parse(json, strlen(json), "config.json", c, e);
}

#define BASE "\"hidden_size\":64,\"intermediate_size\":96,\"num_hidden_layers\":2,\"num_attention_heads\":4," \
             "\"num_key_value_heads\":2,\"vocab_size\":400"

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
    return check_done();
}
