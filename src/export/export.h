/* export — `dlm export`: a document's base and current adapter as files
 * llama.cpp and Ollama load (docs/reference/original-spec.md §6, docs/reference/formats.md §3–§6).
 *
 *   <store>/exports/<QUANT>/     (or --out DIR)
 *     (--adapter-mix: adapter.gguf / the merge is the mix of the listed
 *     versions or adapter folders, export/admix.h)
 *     base.<QUANT>.gguf          the base, quantized with llama.cpp's mix
 *     adapter.gguf               the adapter (llama.cpp LoRA GGUF)
 *     merged.<QUANT>.gguf        --merged: the adapter merged in (no adapter.gguf)
 *     Modelfile                  target ollama
 *     chat-template.jinja, llama-server_launch.sh    target llama-server
 *     export_manifest.json       every artifact with sha256 and size
 *
 * Order of work: open the document's base, tokenizer and current adapter;
 * preflight (pre-tokenizer name, vocab vs embedding, chat template, merge
 * safety, template drift); write the GGUF files (an unchanged base from an
 * earlier export is reused after its sha256 is checked); write the target's
 * files; run `ollama create` and a smoke prompt when ollama is installed;
 * write export_manifest.json; append to the store manifest's exports under
 * the store lock. */
#ifndef DLM_EXPORT_H
#define DLM_EXPORT_H

#include "export/calib.h"
#include "export/export_gguf.h"
#include "util/err.h"

typedef enum { EXPORT_TARGET_OLLAMA = 0, EXPORT_TARGET_GGUF, EXPORT_TARGET_LLAMA_SERVER, EXPORT_TARGET_VLLM,
               EXPORT_TARGET_MLX_SERVE, EXPORT_TARGET_HF_SNAPSHOT } export_target;

/* "ollama", "gguf", "llama-server", "vllm" (export/vllm.h), "mlx-serve"
 * (export/mlx_serve.h), "hf-snapshot" (vision/audio bases, export/mm_export.h)
 * → target; -1 if unknown. */
int export_target_parse(const char *s);
const char *export_target_name(export_target t);

typedef struct export_opts {
    const char *doc_path;
    const char *home;
    export_target target;
    const char *quant;          /* NULL: export.default_quant, else Q4_K_M */
    int merged;
    int dequantize;             /* merge a QLoRA adapter into an f16 copy of the base */
    int no_template;            /* no TEMPLATE / chat template, no drift check */
    int no_smoke;
    const char *name;           /* Ollama model name (default dlm-<id>:vNNNN) */
    const char *out_dir;        /* default <store>/exports/<QUANT> */
    const char *pre_tokenizer;  /* override tokenizer.ggml.pre */
    int offline;
    const char *adapter_mix;    /* "v0001:0.7,v0002:0.3" (versions, named adapters of training.adapters or
                                 * adapter folders); NULL: the current adapter */
    const char *adapter;        /* --adapter NAME: that named adapter's current version */
    int mix_method;             /* admix_method: ADMIX_LINEAR (exact) or ADMIX_SVD */
    int skip_ollama;            /* write the Modelfile but never run ollama */
    const char *gate_mode;      /* adapter_mix stands for training.gate ("static_mean": the gate's mean
                                 * weights; "uniform": a cold-start gate): export_manifest.json gate_mode */
    int no_imatrix;             /* K-quants without the importance matrix (export/calib.h) */
    const char *draft;          /* ollama: --draft TAG, the speculative-decoding draft named in the Modelfile */
    int no_draft;               /* ollama: --no-draft, none even where export_draft_for has a pair */
} export_opts;

/* The original's draft table (export/draft_registry.py): the Ollama tag of
 * the small sibling of a registry base, or NULL. qwen2.5-3b and
 * qwen2.5-coder-1.5b → qwen2.5:0.5b, llama-3.2-3b → llama3.2:1b,
 * smollm2-1.7b → smollm2:360m. */
const char *export_draft_for(const char *registry_key);

typedef struct export_result {
    char dir[4096];
    char model_file[64];        /* "base.Q4_K_M.gguf" / "merged.Q4_K_M.gguf" */
    int has_adapter;            /* adapter.gguf written */
    int adapter_tensors;        /* its tensors (lora_a + lora_b per adapted weight) */
    int reused_base;
    int adapter_version;
    const char *quant;
    const char *pre;            /* tokenizer.ggml.pre written */
    int add_bos, add_eos;       /* tokenizer.ggml.add_bos/eos_token written (-1: left out) */
    int drift_checked;          /* conversations the drift check compared (0 = not run) */
    export_gguf_info info;      /* the model file's tensors (base or merged) */
    calib_result imatrix;       /* the importance matrix the K-quants used (imatrix.used 0: none) */
    int n_mix;                  /* adapters mixed (0: the current adapter) */
    int mix_rank;               /* rank of the mixed adapter */
    double mix_max_err;         /* svd: the largest relative Frobenius error of a tensor */
    char ollama_name[160];
    int ollama_ran;             /* ollama create ran */
    char ollama_version[64];
    char smoke[256];            /* first line of the smoke answer */
    char next_steps[2048];      /* commands to run when ollama is not installed */
    char system_buf[8192];      /* the Modelfile SYSTEM when it had to be trimmed */
    const char *draft;          /* the draft tag the Modelfile names, or NULL */
} export_result;

int export_run(const export_opts *o, export_result *r, dlm_err *e);

#endif
