/* dlm export — GGUF files for llama.cpp / Ollama from a document's base and
 * current adapter (src/export/export.h). */
#include <stdio.h>
#include <string.h>

#include "cmd/commands.h"
#include "export/admix.h"
#include "export/export.h"
#include "kern/kern.h"

static int o_merged, o_dequantize, o_no_template, o_no_smoke, o_threads, o_offline, o_accept, o_skip_ollama;
static const char *o_target = "ollama", *o_quant, *o_name, *o_out, *o_pre, *o_mix, *o_mix_method, *o_adapter;

static const opt OPTS[] = {
    {"target", 0, OPT_STR, &o_target, "T", "ollama (default), gguf (files only), llama-server or vllm"},
    {"quant", 0, OPT_STR, &o_quant, "Q", "Q4_K_M Q5_K_M Q6_K Q8_0 Q4_0 F16 BF16 F32 (default: export.default_quant, Q4_K_M)"},
    {"merged", 0, OPT_FLAG, &o_merged, NULL, "merge the adapter into the base (one GGUF, no adapter.gguf)"},
    {"dequantize", 0, OPT_FLAG, &o_dequantize, NULL, "with --merged: allow an adapter trained on a quantized base"},
    {"name", 0, OPT_STR, &o_name, "NAME", "Ollama model name (default dlm-<id>:v<NNNN>)"},
    {"out", 0, OPT_STR, &o_out, "DIR", "write here instead of <store>/exports/<QUANT>"},
    {"no-template", 0, OPT_FLAG, &o_no_template, NULL, "no TEMPLATE / chat template (and no drift check)"},
    {"no-smoke", 0, OPT_FLAG, &o_no_smoke, NULL, "skip the one-line smoke prompt after ollama create"},
    {"skip-ollama", 0, OPT_FLAG, &o_skip_ollama, NULL, "write the Modelfile but do not run ollama create"},
    {"adapter", 0, OPT_STR, &o_adapter, "NAME", "export this adapter of training.adapters (its current version)"},
    {"adapter-mix", 0, OPT_STR, &o_mix, "SRC:W,...", "export a weighted mix of adapters (names, versions vNNNN or folders)"},
    {"adapter-mix-method", 0, OPT_STR, &o_mix_method, "M", "linear (exact, rank Σr; default) or svd (rank max r)"},
    {"pre-tokenizer", 0, OPT_STR, &o_pre, "NAME", "tokenizer.ggml.pre when dlm cannot name it (gpt-2 llama-bpe qwen2 smollm)"},
    {"threads", 0, OPT_INT, &o_threads, "N", "threads for quantizing (default: all cores)"},
    {"offline", 0, OPT_FLAG, &o_offline, NULL, "never download the base"},
    {"i-accept-license", 0, OPT_FLAG, &o_accept, NULL, "accept a gated base's license for this run"},
    {0},
};

const cmd_spec spec_export = {
    "export", "PATH [--target ollama|gguf|llama-server|vllm] [--quant Q] [--merged] [--adapter NAME | --adapter-mix SRC:W,...] [--out DIR]",
    "export the base and adapter as GGUF for llama.cpp and Ollama (or HF/PEFT for vLLM)",
    "Writes <store>/exports/<QUANT>/: base.<QUANT>.gguf quantized with llama.cpp's mix\n"
    "rules, adapter.gguf (a llama.cpp LoRA), export_manifest.json, and for the ollama\n"
    "target a Modelfile (then `ollama create` when ollama is installed), for\n"
    "llama-server chat-template.jinja and llama-server_launch.sh. An unchanged base\n"
    "GGUF from an earlier export is reused. See docs/export.md.",
    OPTS,
};

int cmd_export(int argc, char **argv, dlm_ctx *ctx)
{
    char *pos[64];
    int npos;
    int r = opts_parse(&spec_export, argc, argv, ctx, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos != 1) return cmd_usage_error(&spec_export, npos ? "too many arguments" : "export needs a PATH");
    int target = export_target_parse(o_target);
    if (target < 0)
        return cmd_usage_error(&spec_export, "unknown export target '%s'; available targets: ollama, gguf, llama-server, vllm",
                               o_target);
    if (o_quant && !export_mix_find(o_quant))
        return cmd_usage_error(&spec_export, "unknown --quant '%s' (Q4_K_M Q5_K_M Q6_K Q8_0 Q4_0 F16 BF16 F32)", o_quant);
    if (o_dequantize && !o_merged) return cmd_usage_error(&spec_export, "--dequantize only applies with --merged");
    if (o_adapter && o_mix) return cmd_usage_error(&spec_export, "--adapter and --adapter-mix are mutually exclusive");
    int method = ADMIX_LINEAR;
    if (o_mix_method) {
        if (!o_mix) return cmd_usage_error(&spec_export, "--adapter-mix-method only applies with --adapter-mix");
        if ((method = admix_method_parse(o_mix_method)) < 0)
            return cmd_usage_error(&spec_export, "unknown --adapter-mix-method '%s' (linear or svd)", o_mix_method);
    }
    if (o_skip_ollama && target != EXPORT_TARGET_OLLAMA)
        return cmd_usage_error(&spec_export, "--skip-ollama applies to --target ollama");
    if (o_name && target != EXPORT_TARGET_OLLAMA) return cmd_usage_error(&spec_export, "--name applies to --target ollama");
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    if (cmd_check_license(ctx, pos[0], NULL, o_accept, 0, &e)) return cmd_fail(ctx, &e);
    kern_init(o_threads);
    export_opts o = {.doc_path = pos[0], .home = ctx->home, .target = (export_target)target, .quant = o_quant,
                     .merged = o_merged, .dequantize = o_dequantize, .no_template = o_no_template,
                     .no_smoke = o_no_smoke, .name = o_name, .out_dir = o_out, .pre_tokenizer = o_pre,
                     .offline = o_offline, .adapter_mix = o_mix, .adapter = o_adapter, .mix_method = method,
                     .skip_ollama = o_skip_ollama};
    export_result res;
    if (export_run(&o, &res, &e)) return cmd_fail(ctx, &e);
    if (!ctx->quiet) {
        if (res.n_mix)
            printf("exported %s (a %s mix of %d adapters, rank %d, %s%s) to %s\n", res.quant,
                   admix_method_name((admix_method)method), res.n_mix, res.mix_rank,
                   o_merged ? "merged" : "base + adapter", res.reused_base ? ", base reused" : "", res.dir);
        else
            printf("exported %s (adapter v%04d, %s%s) to %s\n", res.quant, res.adapter_version,
                   o_merged ? "merged" : "base + adapter", res.reused_base ? ", base reused" : "", res.dir);
        if (res.n_mix && method == ADMIX_SVD)
            printf("  svd: largest relative Frobenius error of a tensor %.3g (export_manifest.json lists each)\n",
                   res.mix_max_err);
        if (target == EXPORT_TARGET_VLLM)
            printf("  %s, vllm_launch.sh, vllm_config.json\n  run: %s/vllm_launch.sh\n", o_merged ? "model/ (HF format)" : "adapter/ (PEFT)", res.dir);
        else {
            printf("  %s", res.model_file);
            if (res.has_adapter) printf(", adapter.gguf");
            printf(" (%d tensors:", res.info.n_tensors);
            for (int t = 0; t < DT_COUNT; t++)
                if (res.info.n_by_type[t]) printf(" %d %s", res.info.n_by_type[t], dtype_name((dtype)t));
            printf(")\n");
        }
        if (res.drift_checked) printf("  template drift check: %d conversations give the same tokens\n", res.drift_checked);
        if (res.ollama_ran) {
            printf("  ollama: created %s%s%s\n", res.ollama_name, res.smoke[0] ? "; smoke: " : "", res.smoke);
        } else if (res.next_steps[0]) {
            printf("  %s; to load it run:\n    %s\n", o_skip_ollama ? "ollama skipped (--skip-ollama)" : "ollama is not installed", res.next_steps);
        }
        if (target == EXPORT_TARGET_LLAMA_SERVER) printf("  run: %s/llama-server_launch.sh\n", res.dir);
    }
    return EXIT_OK;
}
