/* Unit tests for model_config_parse / model_rope_freqs: real-world config
 * shapes (SmolLM2, Qwen2.5, Llama-3.2 in transformers v4 and v5 layouts),
 * defaults, and every refusal. Expected RoPE values were computed with the
 * llama.cpp converter's formulation (1/((1-s)/factor + s)), an algebraically
 * different route from the HF one the C code follows. */
#include "check.h"

#include <string.h>
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
    int r = parse(txt, &c);
    CHECK_MSG(r == -1, "accepted: %s", txt);
    CHECK_MSG(strstr(E.msg, want) != NULL, "'%s' lacks '%s'", E.msg, want);
}

static const char SMOL[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0,"
    " \"bos_token_id\": 1, \"eos_token_id\": 2, \"head_dim\": 64, \"hidden_act\": \"silu\","
    " \"hidden_size\": 576, \"initializer_range\": 0.041666666666666664, \"intermediate_size\": 1536,"
    " \"is_llama_config\": true, \"max_position_embeddings\": 8192, \"mlp_bias\": false,"
    " \"model_type\": \"llama\", \"num_attention_heads\": 9, \"num_hidden_layers\": 30,"
    " \"num_key_value_heads\": 3, \"pad_token_id\": 2, \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05,"
    " \"rope_interleaved\": false, \"rope_scaling\": null, \"rope_theta\": 100000,"
    " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.42.3\","
    " \"use_cache\": true, \"vocab_size\": 49152}";

static const char QWEN[] =
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0, \"bos_token_id\": 151643,"
    " \"eos_token_id\": 151645, \"hidden_act\": \"silu\", \"hidden_size\": 896, \"initializer_range\": 0.02,"
    " \"intermediate_size\": 4864, \"max_position_embeddings\": 32768, \"max_window_layers\": 21,"
    " \"model_type\": \"qwen2\", \"num_attention_heads\": 14, \"num_hidden_layers\": 24,"
    " \"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0,"
    " \"sliding_window\": 32768, \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\","
    " \"transformers_version\": \"4.43.1\", \"use_cache\": true, \"use_sliding_window\": false,"
    " \"vocab_size\": 151936}";

static const char LLAMA32[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"bos_token_id\": 128000,"
    " \"eos_token_id\": [128001, 128008, 128009], \"head_dim\": 64, \"hidden_act\": \"silu\","
    " \"hidden_size\": 2048, \"intermediate_size\": 8192, \"max_position_embeddings\": 131072,"
    " \"mlp_bias\": false, \"model_type\": \"llama\", \"num_attention_heads\": 32,"
    " \"num_hidden_layers\": 16, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-05,"
    " \"rope_scaling\": {\"factor\": 32.0, \"high_freq_factor\": 4.0, \"low_freq_factor\": 1.0,"
    " \"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}, \"rope_theta\": 500000.0,"
    " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"vocab_size\": 128256}";

/* transformers v5: rope_parameters carries rope_theta; dtype instead of
 * torch_dtype; "type" alias. */
static const char LLAMA32_V5[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"bos_token_id\": 128000, \"eos_token_id\": 128009,"
    " \"hidden_size\": 2048, \"intermediate_size\": 8192, \"max_position_embeddings\": 131072,"
    " \"num_attention_heads\": 32, \"num_hidden_layers\": 16, \"num_key_value_heads\": 8,"
    " \"rms_norm_eps\": 1e-05, \"rope_parameters\": {\"factor\": 32.0, \"high_freq_factor\": 4.0,"
    " \"low_freq_factor\": 1.0, \"original_max_position_embeddings\": 8192, \"type\": \"llama3\","
    " \"rope_theta\": 500000.0}, \"tie_word_embeddings\": true, \"dtype\": \"bfloat16\","
    " \"vocab_size\": 128256}";

static void test_real_configs(void)
{
    model_config c;
    CHECK_INT(parse(SMOL, &c), 0);
    CHECK_INT(c.arch, ARCH_LLAMA);
    CHECK_INT(c.n_layer, 30);
    CHECK_INT(c.d_model, 576);
    CHECK_INT(c.n_ff, 1536);
    CHECK_INT(c.n_head, 9);
    CHECK_INT(c.n_kv_head, 3);
    CHECK_INT(c.head_dim, 64);
    CHECK_INT(c.vocab, 49152);
    CHECK_INT(c.max_pos, 8192);
    CHECK_NEAR(c.rms_eps, 1e-5, 1e-12);
    CHECK_NEAR(c.rope_theta, 100000, 0);
    CHECK_INT(c.tied, 1);
    CHECK_INT(c.qkv_bias, 0);
    CHECK_INT(c.rope_llama3, 0);
    CHECK_INT(c.bos_id, 1);
    CHECK_INT(c.eos_id, 2);
    CHECK_INT(c.n_eos, 1);
    CHECK_STR(c.src_dtype, "bfloat16");

    CHECK_INT(parse(QWEN, &c), 0);
    CHECK_INT(c.arch, ARCH_QWEN2);
    CHECK_INT(c.qkv_bias, 1);
    CHECK_INT(c.head_dim, 64);
    CHECK_INT(c.n_kv_head, 2);
    CHECK_NEAR(c.rope_theta, 1e6, 0);
    CHECK_NEAR(c.rms_eps, 1e-6, 1e-13);
    CHECK_INT(c.bos_id, 151643);
    CHECK_INT(c.eos_id, 151645);

    CHECK_INT(parse(LLAMA32, &c), 0);
    CHECK_INT(c.rope_llama3, 1);
    CHECK_NEAR(c.rope_factor, 32, 0);
    CHECK_NEAR(c.rope_low_freq_factor, 1, 0);
    CHECK_NEAR(c.rope_high_freq_factor, 4, 0);
    CHECK_INT(c.rope_orig_ctx, 8192);
    CHECK_INT(c.eos_id, 128001);
    CHECK_INT(c.n_eos, 3);
    CHECK_INT(c.eos_ids[2], 128009);

    model_config v5;
    CHECK_INT(parse(LLAMA32_V5, &v5), 0);
    CHECK_INT(v5.rope_llama3, 1);
    CHECK_NEAR(v5.rope_theta, 500000, 0);
    CHECK_INT(v5.rope_orig_ctx, 8192);
    CHECK_STR(v5.src_dtype, "bfloat16");
    CHECK_INT(v5.head_dim, 64); /* default hidden/heads */

    /* llama3 inverse frequencies (expected from the converter's formula) */
    double f[32];
    model_rope_freqs(&c, f);
    static const struct { int i; double v; } W[] = {
        {0, 1.0}, {1, 0.6636012376960885}, {10, 0.016560440080994446},
        {14, 0.0032114459947525913}, {15, 0.0012905479282092638}, {16, 0.00042955679655936815},
        {17, 9.708287802627669e-05}, {20, 8.570255489881478e-06}, {31, 9.418306725434909e-08},
    };
    for (size_t k = 0; k < sizeof W / sizeof W[0]; k++)
        CHECK_NEAR(f[W[k].i], W[k].v, W[k].v * 1e-6);
}

static void test_defaults(void)
{
    model_config c;
    /* model_type only, minimal fields: kv heads = heads, head_dim = C/NH,
     * eps 1e-6, theta 10000, untied, max_pos 2048 (llama) */
    CHECK_INT(parse("{\"model_type\":\"llama\",\"num_hidden_layers\":2,\"hidden_size\":64,"
                    "\"intermediate_size\":128,\"num_attention_heads\":4,\"vocab_size\":300}", &c), 0);
    CHECK_INT(c.n_kv_head, 4);
    CHECK_INT(c.head_dim, 16);
    CHECK_NEAR(c.rms_eps, 1e-6, 1e-13);
    CHECK_NEAR(c.rope_theta, 10000, 0);
    CHECK_INT(c.tied, 0);
    CHECK_INT(c.max_pos, 2048);
    CHECK_INT(c.bos_id, -1);
    CHECK_INT(c.eos_id, -1);
    double f[8];
    model_rope_freqs(&c, f);
    CHECK_NEAR(f[0], 1.0, 0);
    CHECK_NEAR(f[4], 0.01, 1e-9);     /* 10000^(-8/16) */
    CHECK_NEAR(f[2], 0.1, 1e-8);
    CHECK_INT(parse("{\"model_type\":\"qwen2\",\"num_hidden_layers\":2,\"hidden_size\":64,"
                    "\"intermediate_size\":128,\"num_attention_heads\":4,\"vocab_size\":300,"
                    "\"max_position_embeddings\":4096.0, \"rope_scaling\":{\"rope_type\":\"default\"}}", &c), 0);
    CHECK_INT(c.arch, ARCH_QWEN2);
    CHECK_INT(c.qkv_bias, 1);
    CHECK_INT(c.max_pos, 4096);
    CHECK_INT(c.rope_llama3, 0);
    /* Qwen3-8B's config.json (head_dim 128 with hidden 4096 / 32 heads) */
    CHECK_INT(parse("{\"architectures\":[\"Qwen3ForCausalLM\"],\"attention_bias\":false,\"attention_dropout\":0.0,"
                    "\"bos_token_id\":151643,\"eos_token_id\":151645,\"head_dim\":128,\"hidden_act\":\"silu\","
                    "\"hidden_size\":4096,\"initializer_range\":0.02,\"intermediate_size\":12288,"
                    "\"max_position_embeddings\":40960,\"max_window_layers\":36,\"model_type\":\"qwen3\","
                    "\"num_attention_heads\":32,\"num_hidden_layers\":36,\"num_key_value_heads\":8,"
                    "\"rms_norm_eps\":1e-06,\"rope_scaling\":null,\"rope_theta\":1000000,\"sliding_window\":null,"
                    "\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\",\"use_cache\":true,"
                    "\"use_sliding_window\":false,\"vocab_size\":151936}", &c), 0);
    CHECK_INT(c.arch, ARCH_QWEN3);
    CHECK_INT(c.qk_norm, 1);
    CHECK_INT(c.qkv_bias, 0);
    CHECK_INT(c.head_dim, 128);
    CHECK_INT(c.n_kv_head, 8);
    CHECK_INT(c.tied, 0);
    CHECK_INT(c.max_pos, 40960);
    CHECK_STR(model_arch_name(c.arch), "qwen3");
    /* OLMo-2-1124-7B-Instruct's config.json */
    CHECK_INT(parse("{\"architectures\":[\"Olmo2ForCausalLM\"],\"attention_bias\":false,\"attention_dropout\":0.0,"
                    "\"bos_token_id\":null,\"eos_token_id\":100257,\"hidden_act\":\"silu\",\"hidden_size\":4096,"
                    "\"initializer_range\":0.02,\"intermediate_size\":11008,\"max_position_embeddings\":4096,"
                    "\"model_type\":\"olmo2\",\"num_attention_heads\":32,\"num_hidden_layers\":32,"
                    "\"num_key_value_heads\":32,\"pad_token_id\":100277,\"rms_norm_eps\":1e-06,\"rope_scaling\":null,"
                    "\"rope_theta\":500000,\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\","
                    "\"use_cache\":true,\"vocab_size\":100352}", &c), 0);
    CHECK_INT(c.arch, ARCH_OLMO2);
    CHECK_INT(c.qk_norm, QK_NORM_FULL);
    CHECK_INT(c.post_norm, 1);
    CHECK_INT(c.qkv_bias, 0);
    CHECK_INT(c.head_dim, 128);
    CHECK_INT(c.bos_id, -1);
    CHECK_INT(c.eos_id, 100257);
    CHECK_STR(model_arch_name(c.arch), "olmo2");
    /* Olmo2Config's defaults differ from the others' */
    CHECK_INT(parse("{\"model_type\":\"olmo2\",\"num_hidden_layers\":2,\"hidden_size\":64,"
                    "\"intermediate_size\":128,\"num_attention_heads\":4,\"vocab_size\":300}", &c), 0);
    CHECK_NEAR(c.rms_eps, 1e-5, 1e-12);
    CHECK_INT(c.max_pos, 2048);
    /* mistral: the llama layer with MistralConfig's sliding window (4096
     * when absent, none when null) */
    CHECK_INT(parse("{\"architectures\":[\"MistralForCausalLM\"],\"num_hidden_layers\":2,\"hidden_size\":64,"
                    "\"intermediate_size\":128,\"num_attention_heads\":4,\"vocab_size\":300}", &c), 0);
    CHECK_INT(c.arch, ARCH_LLAMA);
    CHECK_INT(c.sliding_window, 4096);
    CHECK_INT(c.max_pos, 131072);
    CHECK_INT(parse("{\"model_type\":\"mistral\",\"num_hidden_layers\":2,\"hidden_size\":64,\"sliding_window\":null,"
                    "\"intermediate_size\":128,\"num_attention_heads\":4,\"vocab_size\":300}", &c), 0);
    CHECK_INT(c.sliding_window, 0);
    CHECK_INT(parse("{\"model_type\":\"llama\",\"num_hidden_layers\":2,\"hidden_size\":64,\"sliding_window\":8,"
                    "\"intermediate_size\":128,\"num_attention_heads\":4,\"vocab_size\":300}", &c), 0);
    CHECK_INT(c.sliding_window, 0);   /* llama has no window, whatever the file says */
    /* smollm3: no RoPE on every fourth layer, from the list or the interval */
    CHECK_INT(parse("{\"architectures\":[\"SmolLM3ForCausalLM\"],\"num_hidden_layers\":8,\"hidden_size\":64,"
                    "\"intermediate_size\":128,\"num_attention_heads\":4,\"vocab_size\":300,"
                    "\"no_rope_layers\":[1,1,1,0,1,1,1,0],\"no_rope_layer_interval\":4}", &c), 0);
    CHECK_INT(c.arch, ARCH_SMOLLM3);
    CHECK_INT(c.nope_every, 4);
    CHECK(model_layer_rope(&c, 0) && model_layer_rope(&c, 2) && !model_layer_rope(&c, 3) && !model_layer_rope(&c, 7));
    CHECK_STR(model_arch_name(c.arch), "smollm3");
    CHECK(model_arch_permutes_qk(ARCH_SMOLLM3) && model_arch_permutes_qk(ARCH_LLAMA) &&
          !model_arch_permutes_qk(ARCH_QWEN3) && !model_arch_permutes_qk(ARCH_OLMO2));
}

#define BASE "\"model_type\":\"llama\",\"num_hidden_layers\":2,\"intermediate_size\":128,\"vocab_size\":300"

static void test_refusals(void)
{
    refuse("{\"architectures\":[\"Gemma3ForCausalLM\"],\"model_type\":\"gemma3_text\"}", "'Gemma3ForCausalLM'");
    refuse("{\"model_type\":\"qwen3\",\"num_hidden_layers\":2,\"intermediate_size\":128,\"vocab_size\":300,"
           "\"hidden_size\":64,\"num_attention_heads\":4,\"attention_bias\":true}", "attention_bias=true");
    refuse("{\"model_type\":\"mistral\",\"num_hidden_layers\":2,\"intermediate_size\":128,\"vocab_size\":300,"
           "\"hidden_size\":64,\"num_attention_heads\":4,\"sliding_window\":-1}", "sliding_window = -1");
    refuse("{\"model_type\":\"smollm3\",\"num_hidden_layers\":4,\"intermediate_size\":128,\"vocab_size\":300,"
           "\"hidden_size\":64,\"num_attention_heads\":4,\"no_rope_layers\":[1,0,1,1]}", "not every 4-th layer");
    refuse("{\"model_type\":\"smollm3\",\"num_hidden_layers\":4,\"intermediate_size\":128,\"vocab_size\":300,"
           "\"hidden_size\":64,\"num_attention_heads\":4,\"no_rope_layers\":[1,1,1]}", "one 0/1 per layer");
    refuse("{\"model_type\":\"olmo2\",\"num_hidden_layers\":2,\"intermediate_size\":128,\"vocab_size\":300,"
           "\"hidden_size\":64,\"num_attention_heads\":4,\"attention_bias\":true}", "attention_bias=true");
    refuse("{\"model_type\":\"gemma3_text\"}", "'gemma3_text'");
    refuse("{}", "(none given)");
    refuse("[]", "not a JSON object");
    refuse("{\"a\":1,\n \"a\":2}", "invalid JSON");
    refuse("{" BASE ",\"num_attention_heads\":4}", "missing \"hidden_size\"");
    refuse("{" BASE ",\"hidden_size\":64,\"num_attention_heads\":4,\"num_key_value_heads\":3}", "not a multiple");
    refuse("{" BASE ",\"hidden_size\":66,\"num_attention_heads\":4}", "not a multiple");
    refuse("{" BASE ",\"hidden_size\":0,\"num_attention_heads\":4}", "out of range");
    refuse("{" BASE ",\"hidden_size\":-64,\"num_attention_heads\":4}", "out of range");
    refuse("{" BASE ",\"hidden_size\":\"64\",\"num_attention_heads\":4}", "must be an integer");
    refuse("{" BASE ",\"hidden_size\":64.5,\"num_attention_heads\":4}", "must be an integer");
    refuse("{" BASE ",\"hidden_size\":99999999999,\"num_attention_heads\":4}", "out of range");
    refuse("{" BASE ",\"hidden_size\":64,\"num_attention_heads\":4,\"head_dim\":15}", "odd");
    refuse("{" BASE ",\"hidden_size\":64,\"num_attention_heads\":4,\"rms_norm_eps\":0}", "rms_norm_eps");
    refuse("{" BASE ",\"hidden_size\":64,\"num_attention_heads\":4,\"rope_theta\":-1}", "rope_theta");
    refuse("{" BASE ",\"hidden_size\":64,\"num_attention_heads\":4,\"rope_scaling\":{\"type\":\"yarn\",\"factor\":4}}",
           "'yarn' is not supported");
    refuse("{" BASE ",\"hidden_size\":64,\"num_attention_heads\":4,\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8}}",
           "needs factor");
    refuse("{" BASE ",\"hidden_size\":64,\"num_attention_heads\":4,\"rope_scaling\":[1]}", "must be an object");
    refuse("{" BASE ",\"hidden_size\":64,\"num_attention_heads\":4,\"hidden_act\":\"gelu\"}", "gelu");
    refuse("{" BASE ",\"hidden_size\":64,\"num_attention_heads\":4,\"attention_bias\":true}", "attention_bias");
    refuse("{" BASE ",\"hidden_size\":64,\"num_attention_heads\":4,\"eos_token_id\":\"2\"}", "eos_token_id");
    refuse("{" BASE ",\"hidden_size\":64,\"num_attention_heads\":4,\"eos_token_id\":[1,-2]}", "eos_token_id");
    refuse("{" BASE ",\"hidden_size\":64,\"num_attention_heads\":4,\"tie_word_embeddings\":1}", "true or false");
    /* JSON errors carry the location */
    model_config c;
    parse("{\n  \"model_type\": \"llama\",\n  oops\n}", &c);
    CHECK_INT(E.line, 3);
    CHECK_STR(E.file, "config.json");
}

int main(void)
{
    test_real_configs();
    test_defaults();
    test_refusals();
    return check_done();
}
