/* export_gguf — a loaded base (any source model_load reads) written as a
 * llama.cpp GGUF, optionally with a LoRA/DoRA adapter merged in, and the
 * adapter alone as a llama.cpp LoRA GGUF (docs/reference/formats.md §4, §5.1, §6).
 *
 * Weights: dlm holds them in HF row order (model.h); for the llama arch
 * the Q/K rows (and biases, and the adapter's lora_b rows of q and k) are
 * permuted into llama.cpp's interleaved-pair order on the way out
 * (§4.6). A row whose source type is the target type is copied byte for
 * byte; any other row is dequantized to f32 (merged there), then quantized
 * with llama.cpp's reference algorithm for its target type. */
#ifndef DLM_EXPORT_GGUF_H
#define DLM_EXPORT_GGUF_H

#include <stdint.h>
#include "export/imatrix.h"
#include "export/quant_mix.h"
#include "weights/model.h"
#include "tokens/tok.h"
#include "decoder/lora.h"
#include "util/err.h"

typedef struct export_gguf_opts {
    const export_mix *mix;
    const lora *merge;          /* NULL: the base as it is */
    int merge_f16;              /* --dequantize: merged rows pass through f16 first */
    const char *name;           /* general.name */
    const char *pre;            /* tokenizer.ggml.pre, llama.cpp's name */
    int chat_template;          /* write tokenizer.chat_template when the tokenizer has one */
    int add_bos, add_eos;       /* tokenizer.ggml.add_bos/eos_token: 0/1, -1 = leave out */
    const struct imatrix *imatrix; /* importance for the quantizers (export/imatrix.h), NULL: none */
} export_gguf_opts;

typedef struct export_gguf_info {
    int n_tensors;
    int n_by_type[DT_COUNT];    /* tensors written per ggml type */
    int n_fallback;             /* %256 fallbacks taken */
    int n_copied;               /* tensors whose bytes were reused as stored */
    int n_imatrix;              /* quantized tensors that used the importance matrix */
} export_gguf_info;

/* Write the model (merged with o->merge when set) to path (atomic). */
int export_write_model(const model *m, const tok *t, const export_gguf_opts *o, const char *path,
                       export_gguf_info *info, dlm_err *e);

/* The tokenizer.* keys for a vocabulary of `vocab` embedding rows (ids
 * the tokenizer lacks become "[PAD<id>]" UNUSED); cfg_bos / cfg_eos are
 * config.json's ids, used where the tokenizer names none (-1: none);
 * template_alt the chat template when the tokenizer has none (NULL: none;
 * the checkpoint's chat_template.jinja / .json, as gguf-py's SpecialVocab
 * reads them). Uses o->pre, add_bos, add_eos and chat_template. Shared
 * with the multimodal export (export/mm_gguf.h). */
struct gguf_w;
int export_write_tokenizer(struct gguf_w *w, const tok *t, int vocab, int cfg_bos, int cfg_eos, const char *template_alt,
                           const export_gguf_opts *o, dlm_err *e);

/* Write the adapter as a llama.cpp LoRA GGUF: general.type adapter,
 * adapter.type lora, adapter.lora.alpha (f32), <base>.lora_a [in, r] and
 * <base>.lora_b [r, out] in F32. DoRA adapters are refused (llama.cpp has
 * no magnitude vectors): they export merged only. */
int export_write_adapter(const model *m, const lora *l, const char *name, const char *path, dlm_err *e);

/* llama.cpp's tokenizer.ggml.pre for t: override when given (checked
 * against the names dlm's tokenizer can rebuild), else tok_pre_name mapped
 * to llama.cpp's spelling (gpt2 → gpt-2). Fails with
 * "preflight: unknown pre-tokenizer hash" when neither names it. */
int export_pre_name(const tok *t, const char *override, const char **out, dlm_err *e);

/* tokenizer.ggml.add_bos_token / add_eos_token as convert_hf_to_gguf
 * writes them: the value when the source states one (tokenizer_config.json's
 * add_bos_token, a post-processor that adds the token, the source GGUF's
 * key; SmolLM2's 49152 vocab forces add_bos false), else -1: the key is left
 * out and llama.cpp applies its default (add_bos for llama-bpe only). */
void export_special_flags(const char *model_path, const tok *t, int vocab, int *add_bos, int *add_eos);
/* What llama.cpp will do with such a file: the flag, or its default. */
int export_llama_add_bos(int add_bos, const char *pre);


#endif
