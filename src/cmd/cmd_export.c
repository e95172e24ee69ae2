/* dlm export — GGUF files for llama.cpp / Ollama from a document's base and
 * current adapter (src/export/export.h). */
#include <stdio.h>
#include <string.h>

#include "cmd/commands.h"
#include "export/admix.h"
#include "export/export.h"
#include "export/sway_yaml.h"
#include "infer/target.h"
#include "export/mm_export.h"
#include "kern/kern.h"
#include "run/named_mix.h"
#include "util/fs.h"

typedef struct export_args {
    int merged, dequantize, no_template, no_smoke, threads, offline, accept, skip_ollama, no_imatrix, no_draft, sway;
    const char *target, *quant, *name, *out, *pre, *mix, *mix_method, *adapter, *draft;
} export_args;

static const opt OPTS[] = {
    {"target", 0, OPT_STR, offsetof(export_args, target), "T", "ollama (default), gguf (files only), llama-server, vllm, mlx-serve; hf-snapshot for vision/audio bases"},
    {"quant", 0, OPT_STR, offsetof(export_args, quant), "Q", "Q4_K_M Q5_K_M Q6_K Q8_0 Q4_0 F16 BF16 F32 (default: export.default_quant, Q4_K_M)"},
    {"merged", 0, OPT_FLAG, offsetof(export_args, merged), NULL, "merge the adapter into the base (one GGUF, no adapter.gguf)"},
    {"no-imatrix", 0, OPT_FLAG, offsetof(export_args, no_imatrix), NULL, "K-quants without the importance matrix (default: calibrated on the replay corpus)"},
    {"dequantize", 0, OPT_FLAG, offsetof(export_args, dequantize), NULL, "with --merged: allow an adapter trained on a quantized base"},
    {"name", 0, OPT_STR, offsetof(export_args, name), "NAME", "Ollama model name (default dlm-<id>:v<NNNN>)"},
    {"out", 0, OPT_STR, offsetof(export_args, out), "DIR", "write here instead of <store>/exports/<QUANT>"},
    {"no-template", 0, OPT_FLAG, offsetof(export_args, no_template), NULL, "no TEMPLATE / chat template (and no drift check)"},
    {"no-smoke", 0, OPT_FLAG, offsetof(export_args, no_smoke), NULL, "skip the one-line smoke prompt after ollama create"},
    {"draft", 0, OPT_STR, offsetof(export_args, draft), "TAG", "ollama: name this speculative-decoding draft in the Modelfile (default: the base's pair)"},
    {"no-draft", 0, OPT_FLAG, offsetof(export_args, no_draft), NULL, "ollama: no draft, even where the base has a pair"},
    {"skip-ollama", 0, OPT_FLAG, offsetof(export_args, skip_ollama), NULL, "write the Modelfile but do not run ollama create"},
    {"adapter", 0, OPT_STR, offsetof(export_args, adapter), "NAME", "export this adapter of training.adapters (its current version)"},
    {"adapter-mix", 0, OPT_STR, offsetof(export_args, mix), "SRC:W,...", "export a weighted mix of adapters (names, versions vNNNN or folders)"},
    {"adapter-mix-method", 0, OPT_STR, offsetof(export_args, mix_method), "M", "linear (exact, rank Σr; default) or svd (rank max r)"},
    {"pre-tokenizer", 0, OPT_STR, offsetof(export_args, pre), "NAME", "tokenizer.ggml.pre when dlm cannot name it (gpt-2 llama-bpe qwen2 smollm)"},
    {"threads", 0, OPT_THREADS, offsetof(export_args, threads), "N", "threads for quantizing (default: all cores)"},
    {"offline", 0, OPT_FLAG, offsetof(export_args, offline), NULL, "never download the base"},
    {"i-accept-license", 0, OPT_FLAG, offsetof(export_args, accept), NULL, "accept a gated base's license for this run"},
    {"emit-sway-json", 0, OPT_FLAG, offsetof(export_args, sway), NULL, "also write sway.yaml (the original's dlm-sway suite of the document) into the export folder"},
    {0},
};

const cmd_spec spec_export = {
    "export", "PATH [--target ollama|gguf|llama-server|vllm|mlx-serve|hf-snapshot] [--quant Q] [--merged] [--adapter NAME | --adapter-mix SRC:W,...] [--out DIR]",
    "export the base and adapter as GGUF for llama.cpp and Ollama (or HF/PEFT for vLLM)",
    "Writes <store>/exports/<QUANT>/: base.<QUANT>.gguf quantized with llama.cpp's mix\n"
    "rules, adapter.gguf (a llama.cpp LoRA), export_manifest.json, and for the ollama\n"
    "target a Modelfile (then `ollama create` when ollama is installed), for\n"
    "llama-server chat-template.jinja and llama-server_launch.sh. --target vllm and\n"
    "mlx-serve write exports/vllm or exports/mlx-serve instead (an adapter folder and a\n"
    "launcher; mlx-lm's server runs on Apple Silicon). An unchanged base\n"
    "GGUF from an earlier export is reused. A vision- or audio-language base\n"
    "(Qwen2-VL, PaliGemma, Qwen2-Audio) exports the HF snapshot (--target hf-snapshot,\n"
    "exports/hf-snapshot/) or llama.cpp's multimodal pair (--target gguf or ollama:\n"
    "the language GGUF + adapter + mmproj). See docs/export.md.",
    OPTS,
};

/* A gated document exported without --adapter/--adapter-mix: the gate
 * cannot run inside llama.cpp or Ollama, so, as the original
 * (export/gate_fallback.py), the export is the mix of the gate's mean
 * weights over the document's own prompts ("static_mean"; a cold-start
 * gate: 1/N). *mix gets "name:w,..." (exact doubles); 0 with mix[0] == 0
 * when the document has no trained gate. */
static int gate_static_mix(const char *doc, const char *home, int offline, char *mix, size_t cap, const char **mode,
                           dlm_err *e)
{
    mix[0] = 0;
    dlm_doc *d = doc_load(doc, e);
    if (!d) return -1;
    int gated = doc_fm(d)->training.adapters && doc_fm(d)->training.gate.enabled;
    doc_free(d);
    if (!gated) return 0;
    infer_target t;
    target_opts to = {.doc_path = doc, .home = home, .use_adapter = 0, .offline = offline};
    if (target_open(&to, &t, e)) return -1;
    int gate_missing, rc = 0;
    if (named_mix_choose(&t, NULL, NULL, 0, &gate_missing) == NMIX_GATE_MEAN) {
        named_mix m;
        if (named_mix_weights(&t, NMIX_GATE_MEAN, NULL, NULL, &m, e)) rc = -1;
        else {
            size_t k = 0;
            for (int i = 0; i < m.n && k < cap; i++)
                k += (size_t)snprintf(mix + k, cap - k, "%s%s:%.17g", i ? "," : "", m.names[i], m.w[i]);
            *mode = m.gate_trained ? "static_mean" : "uniform";
        }
    }
    target_close(&t);
    return rc;
}

/* `dlm export` of a vision- or audio-language base: the HF snapshot or
 * llama.cpp's multimodal pair (export/mm_export.h). */
static int export_mm(dlm_ctx *ctx, const export_opts *o, int target_given)
{
    dlm_err e;
    err_clear(&e);
    mm_export_result r;
    if (mm_export_run(o, target_given, &r, &e)) return cmd_fail(ctx, &e);
    if (ctx->quiet) return EXIT_OK;
    if (r.target == EXPORT_TARGET_HF_SNAPSHOT) {
        printf("exported the %s HF snapshot (adapter v%04d, %d files) to %s\n", mm_kind_name(r.kind), r.adapter_version,
               r.n_artifacts, r.dir);
        printf("  adapter/ (PEFT), processor/, snapshot_manifest.json, README.md\n");
        return EXIT_OK;
    }
    printf("exported %s (adapter v%04d, %s, %s) to %s\n", r.quant, r.adapter_version, o->merged ? "merged" : "base + adapter",
           mm_kind_name(r.kind), r.dir);
    printf("  %s (%d tensors)", r.lang_file, r.lang_tensors);
    if (r.adapter_tensors) printf(", adapter.gguf (%d tensors)", r.adapter_tensors);
    printf(", %s (%d tensors: the %s)\n", r.mmproj_file, r.mmproj_tensors,
           mm_kind_is_audio(r.kind) ? "audio encoder + projector" : "vision tower + projector");
    printf("  run: cd %s && llama-mtmd-cli -m %s%s --mmproj %s %s FILE -p PROMPT\n", r.dir, r.lang_file,
           r.adapter_tensors ? " --lora adapter.gguf" : "", r.mmproj_file, mm_kind_is_audio(r.kind) ? "--audio" : "--image");
    if (r.next_steps[0]) printf("  ollama (not run by dlm for these bases): %s\n", r.next_steps);
    return EXIT_OK;
}

int cmd_export(int argc, char **argv, dlm_ctx *ctx)
{
    export_args a = {0};
    char *pos[64];
    int npos;
    int r = opts_parse(&spec_export, argc, argv, ctx, &a, pos, &npos);
    if (r) return r == 1 ? EXIT_OK : EXIT_USAGE;
    if (npos != 1) return cmd_usage_error(&spec_export, npos ? "too many arguments" : "export needs a PATH");
    int target_given = a.target != NULL;
    if (!a.target) a.target = "ollama";
    int target = export_target_parse(a.target);
    if (target < 0)
        return cmd_usage_error(&spec_export, "unknown export target '%s'; available targets: ollama, gguf, llama-server, vllm, "
                               "mlx-serve, hf-snapshot (vision and audio bases)", a.target);
    if (a.quant && !export_mix_find(a.quant))
        return cmd_usage_error(&spec_export, "unknown --quant '%s' (Q4_K_M Q5_K_M Q6_K Q8_0 Q4_0 F16 BF16 F32)", a.quant);
    if (a.dequantize && !a.merged) return cmd_usage_error(&spec_export, "--dequantize only applies with --merged");
    if (a.adapter && a.mix) return cmd_usage_error(&spec_export, "--adapter and --adapter-mix are mutually exclusive");
    int method = ADMIX_LINEAR;
    if (a.mix_method) {
        if (!a.mix) return cmd_usage_error(&spec_export, "--adapter-mix-method only applies with --adapter-mix");
        if ((method = admix_method_parse(a.mix_method)) < 0)
            return cmd_usage_error(&spec_export, "unknown --adapter-mix-method '%s' (linear or svd)", a.mix_method);
    }
    if (a.skip_ollama && target != EXPORT_TARGET_OLLAMA)
        return cmd_usage_error(&spec_export, "--skip-ollama applies to --target ollama");
    if (a.name && target != EXPORT_TARGET_OLLAMA) return cmd_usage_error(&spec_export, "--name applies to --target ollama");
    if ((a.draft || a.no_draft) && target != EXPORT_TARGET_OLLAMA)
        return cmd_usage_error(&spec_export, "--draft/--no-draft apply to --target ollama (the Modelfile)");
    if (a.draft && a.no_draft) return cmd_usage_error(&spec_export, "--draft and --no-draft are mutually exclusive");
    if (a.draft && (!*a.draft || strpbrk(a.draft, " \t\r\n`\"")))
        return cmd_usage_error(&spec_export, "--draft expects an Ollama tag such as qwen2.5:0.5b, got '%s'", a.draft);
    if (a.merged && target == EXPORT_TARGET_MLX_SERVE)
        return cmd_usage_error(&spec_export, "--merged does not apply to --target mlx-serve (mlx-lm loads the base and the adapter)");
    dlm_err e;
    err_clear(&e);
    if (cmd_setup(ctx, &e)) return cmd_fail(ctx, &e);
    if (cmd_check_license(ctx, pos[0], NULL, a.accept, 0, &e)) return cmd_fail(ctx, &e);
    kern_init(a.threads);
    export_opts o = {.doc_path = pos[0], .home = ctx->home, .target = (export_target)target, .quant = a.quant,
                     .merged = a.merged, .dequantize = a.dequantize, .no_template = a.no_template,
                     .no_smoke = a.no_smoke, .name = a.name, .out_dir = a.out, .pre_tokenizer = a.pre,
                     .offline = a.offline, .adapter_mix = a.mix, .adapter = a.adapter, .mix_method = method,
                     .skip_ollama = a.skip_ollama, .no_imatrix = a.no_imatrix, .draft = a.draft, .no_draft = a.no_draft};
    /* a vision- or audio-language base: its own targets (export/mm_export.h) */
    mm_kind mk;
    if (mm_export_kind(&o, &mk, NULL, 0, &e)) return cmd_fail(ctx, &e);
    if (mk != MM_NONE) return export_mm(ctx, &o, target_given);
    if (target == EXPORT_TARGET_HF_SNAPSHOT)
        return cmd_usage_error(&spec_export, "--target hf-snapshot is for vision- and audio-language bases (a text base: --target vllm)");
    char gmix[1024] = "";
    const char *gmode = NULL;
    if (!a.adapter && !a.mix) {
        if (gate_static_mix(pos[0], ctx->home, a.offline, gmix, sizeof gmix, &gmode, &e)) return cmd_fail(ctx, &e);
        if (gmix[0]) {
            a.mix = gmix;
            if (!ctx->quiet)
                fprintf(stderr, "export: substituting the learned gate's %s weights for --adapter-mix (gate_mode=%s): %s\n",
                        gmode[0] == 's' ? "mean" : "uniform", gmode, gmix);
        }
    }
    o.adapter_mix = a.mix;
    o.gate_mode = gmode;
    export_result res;
    if (export_run(&o, &res, &e)) return cmd_fail(ctx, &e);
    /* after the export, as the original: a sway.yaml failure never undoes it */
    char sway[4200] = "";
    if (a.sway && sway_yaml_write(pos[0], ctx->home, res.dir, sway, sizeof sway, &e)) {
        err_prefix(&e, "sway.yaml (the export itself is written)");
        return cmd_fail(ctx, &e);
    }
    if (!ctx->quiet) {
        if (res.n_mix)
            printf("exported %s (a %s mix of %d adapters, rank %d, %s%s) to %s\n", res.quant,
                   admix_method_name((admix_method)method), res.n_mix, res.mix_rank,
                   a.merged ? "merged" : "base + adapter", res.reused_base ? ", base reused" : "", res.dir);
        else
            printf("exported %s (adapter v%04d, %s%s) to %s\n", res.quant, res.adapter_version,
                   a.merged ? "merged" : "base + adapter", res.reused_base ? ", base reused" : "", res.dir);
        if (gmode)
            printf("  training.gate: the mix is the gate's %s weights (gate_mode %s in export_manifest.json): %s\n",
                   gmode[0] == 's' ? "mean" : "uniform", gmode, gmix);
        if (res.n_mix && method == ADMIX_SVD)
            printf("  svd: largest relative Frobenius error of a tensor %.3g (export_manifest.json lists each)\n",
                   res.mix_max_err);
        if (target == EXPORT_TARGET_VLLM)
            printf("  %s, vllm_launch.sh, vllm_config.json\n  run: %s/vllm_launch.sh\n", a.merged ? "model/ (HF format)" : "adapter/ (PEFT)", res.dir);
        else if (target == EXPORT_TARGET_MLX_SERVE)
            printf("  adapter/ (mlx-lm), mlx_serve_launch.sh\n  run (Apple Silicon, mlx-lm installed): %s/mlx_serve_launch.sh\n", res.dir);
        else {
            /* each file with its own tensor count */
            printf("  %s (%d tensors:", res.model_file, res.info.n_tensors);
            for (int t = 0; t < DT_COUNT; t++)
                if (res.info.n_by_type[t]) printf(" %d %s", res.info.n_by_type[t], dtype_name((dtype)t));
            printf(")");
            if (res.has_adapter) printf(", adapter.gguf (%d tensors: F32 LoRA A and B)", res.adapter_tensors);
            printf("\n");
        }
        if (res.imatrix.used)
            printf("  imatrix: %s, %d chunks of %d tokens (sha256 %.12s)%s\n", res.imatrix.cached ? "reused" : "computed",
                   res.imatrix.chunks, res.imatrix.chunk_size, res.imatrix.sha256, res.reused_base ? ", base reused" : "");
        else if (strcmp(res.imatrix.reason ? res.imatrix.reason : "", "not a K-quant"))
            printf("  imatrix: none (%s)\n", res.imatrix.reason ? res.imatrix.reason : "?");
        if (res.drift_checked) printf("  template drift check: %d conversations give the same tokens\n", res.drift_checked);
        if (res.ollama_ran) {
            printf("  ollama: created %s%s%s\n", res.ollama_name, res.smoke[0] ? "; smoke: " : "", res.smoke);
        } else if (res.next_steps[0]) {
            printf("  %s; to load it run:\n    %s\n", a.skip_ollama ? "ollama skipped (--skip-ollama)" : "ollama is not installed", res.next_steps);
        }
        if (target == EXPORT_TARGET_LLAMA_SERVER) printf("  run: %s/llama-server_launch.sh\n", res.dir);
        if (res.draft) printf("  draft: %s (Modelfile comments; OLLAMA_DRAFT_MODEL=%s at run time)\n", res.draft, res.draft);
        if (sway[0]) printf("sway.yaml: %s\n  next: sway run %s\n", sway, sway);
    }
    return EXIT_OK;
}
