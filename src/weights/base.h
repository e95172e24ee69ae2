/* base — from a `--base` value (or a document's base_model) to a local path
 * that model_load can read.
 *
 * Parsing and the registry live in store/registry.h; this adds what needs
 * the model layer: which architectures dlm runs (llama, qwen2), the HF cache
 * and downloads (hub.h), and where the embedded base `tiny` is. */
#ifndef DLM_BASE_H
#define DLM_BASE_H

#include <stddef.h>
#include "weights/hub.h"
#include "weights/registry.h"
#include "util/err.h"

/* 1 if dlm runs this HF architecture class (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM,
 * Qwen3ForCausalLM, Olmo2ForCausalLM, SmolLM3ForCausalLM): the one list `dlm init`, base resolution and doctor ask. */
int base_arch_supported(const char *hf_architecture);

/* -1 with the reason (what the decoder lacks for its architecture) when ref
 * is a registry base dlm cannot run yet; 0 for every other base (a path or
 * hf: id is checked when its config is read). */
int base_check_runnable(const base_ref *ref, dlm_err *e);
/* The vision-language kind of a base spec without loading it: VL_QWEN2 for
 * the qwen2-vl registry row or a model folder whose config.json is
 * Qwen2-VL's, VL_PALI for paligemma-3b-mix-224 or a PaliGemma folder, -1 for another vision-language registry row (its towers are
 * not built), 0 for a text base. An hf: base is judged by its config.json
 * (read from the hub cache, or downloaded alone); 0 when it cannot be had. */
int base_vl_kind(const char *spec);
/* 1 for an audio-language base (the qwen2-audio registry row, or a folder /
 * hf: base whose config.json is Qwen2-Audio's), else 0. */
int base_is_audio(const char *spec);

/* Parse spec, refuse bases dlm cannot run, then produce a path for
 * model_load: the folder / file itself, models/tiny.gguf, or the HF cache
 * snapshot (downloaded if missing and o allows). */
int base_resolve(const char *spec, const hub_opts *o, base_ref *ref, char *path, size_t cap, dlm_err *e);

/* Path of the embedded base: base_set_tiny_path's (the command layer's
 * $DLM_TINY), else <binary dir>/../models/tiny.gguf, else <source
 * dir>/models/tiny.gguf. */
int base_tiny_path(char *out, size_t cap, dlm_err *e);
void base_set_tiny_path(const char *path);

#endif
