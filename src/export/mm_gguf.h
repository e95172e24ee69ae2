/* mm_gguf — a multimodal base's checkpoint (an HF folder: config.json +
 * safetensors) and a PEFT adapter written as llama.cpp's multimodal pair,
 * the files `convert_hf_to_gguf.py` and `convert_hf_to_gguf.py --mmproj`
 * write (docs/export.md, "Vision and audio bases"):
 *
 *   the language model   general.architecture qwen2vl (Qwen2-VL, with
 *                        rope.dimension_sections) or qwen2 (Qwen2-Audio);
 *                        the tokenizer keys of the text export
 *   the adapter          llama.cpp's LoRA GGUF of the language model's pairs
 *   mmproj               general.architecture clip, general.type mmproj:
 *                        Qwen2-VL's ViT + merger (projector qwen2vl_merger;
 *                        qkv split into q/k/v, the Conv3d patch kernel split
 *                        into its two temporal halves) or Qwen2-Audio's
 *                        Whisper encoder + projector (qwen2a)
 *
 * Everything is read from the checkpoint and the adapter folder alone
 * (no model_load): tensors by their transformers names, in either layout
 * (the hub's `model.layers.` / `visual.` / `language_model.model.`, or
 * transformers 5's `model.language_model.` / `model.visual.`). PaliGemma
 * has no llama.cpp counterpart (no converter class, no clip projector in
 * the llama.cpp the tests use): mm_open refuses it for GGUF. */
#ifndef DLM_EXPORT_MM_GGUF_H
#define DLM_EXPORT_MM_GGUF_H

#include <stdint.h>
#include "export/quant_mix.h"
#include "tokens/tok.h"
#include "util/err.h"
#include "util/json.h"

typedef enum { MM_NONE = 0, MM_QWEN2VL, MM_PALIGEMMA, MM_QWEN2AUDIO } mm_kind;

/* The kind of the HF class name (config.json architectures[0]); MM_NONE
 * for any other. */
mm_kind mm_kind_of_arch(const char *hf_architecture);
/* The kind named by dir/config.json (architectures, else model_type
 * qwen2_vl / paligemma / qwen2_audio); MM_NONE when it is a text model or
 * has no readable config. */
mm_kind mm_kind_of_dir(const char *dir);
const char *mm_kind_name(mm_kind k);   /* "Qwen2-VL", "PaliGemma", "Qwen2-Audio" */
int mm_kind_is_audio(mm_kind k);

struct st_file;
typedef struct mm_base {
    mm_kind kind;
    char dir[4096];
    json_t *cfg;                /* config.json */
    const json_t *text;         /* text_config, or the root (the hub's flat Qwen2-VL config) */
    const json_t *vision;       /* vision_config / audio_config */
    struct st_file *st;
    int n_layer, d_model, vocab, tied;
} mm_base;

/* Open dir as a multimodal checkpoint for GGUF export. ExportError for a
 * kind llama.cpp cannot run (PaliGemma), with the hint to export the HF
 * snapshot. */
int mm_open(const char *dir, mm_base *b, dlm_err *e);
void mm_close(mm_base *b);

/* A PEFT LoRA adapter of the language model (adapter_config.json +
 * adapter_model.safetensors): its pairs by layer and projection (q k v o
 * gate up down). Pairs outside the language model (a vision or audio
 * tower), DoRA, rsLoRA and modules_to_save are refused: no llama.cpp
 * adapter carries them. */
typedef struct mm_pair {
    int layer, proj;            /* proj: 0..6 = q k v o gate up down */
    int64_t in, out;
    float *a, *b;               /* [r][in], [out][r] */
} mm_pair;
typedef struct mm_lora {
    int rank, n;
    float alpha, scale;         /* scale = alpha / rank */
    mm_pair *p;
} mm_lora;
int mm_lora_load(const char *adapter_dir, const mm_base *b, mm_lora *l, dlm_err *e);
void mm_lora_free(mm_lora *l);

typedef struct mm_lang_opts {
    const export_mix *mix;
    const mm_lora *merge;       /* NULL: the base as it is */
    const char *name;           /* general.name */
    const char *pre;            /* tokenizer.ggml.pre */
    int add_bos, add_eos;       /* -1: left out */
    int chat_template;
} mm_lang_opts;

/* general.architecture of the language GGUF: "qwen2vl" or "qwen2". */
const char *mm_lang_arch(const mm_base *b);
/* The language model, types by o->mix (llama.cpp's rules, no imatrix). */
int mm_write_lang(const mm_base *b, const tok *t, const mm_lang_opts *o, const char *path, int *n_tensors, dlm_err *e);
/* The adapter as llama.cpp's LoRA GGUF (F32 pairs, adapter.lora.alpha). */
int mm_write_adapter(const mm_base *b, const mm_lora *l, const char *name, const char *path, dlm_err *e);
/* The encoder + projector: F32 for the F32 mix, else F16 matrices (F32
 * norms, biases and positions), as the converter's --outtype f16 writes
 * them. */
int mm_write_mmproj(const mm_base *b, const export_mix *mix, const char *name, const char *path, int *n_tensors,
                    dlm_err *e);

#endif
