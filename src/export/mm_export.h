/* mm_export — `dlm export` of a document whose base is a vision- or
 * audio-language model (docs/export.md, "Vision and audio bases"). Written
 * from the base checkpoint and the adapter folder alone; the model is not
 * loaded.
 *
 *   --target hf-snapshot   the original's HF snapshot:
 *                          <store>/exports/hf-snapshot/ (images) or
 *                          exports/hf-audio-snapshot/ (audio): adapter/ (the
 *                          PEFT adapter version folder), processor/ (the
 *                          base's processor and tokenizer files),
 *                          snapshot_manifest.json, README.md
 *   --target gguf          llama.cpp's multimodal pair in exports/<QUANT>/:
 *                          base.<QUANT>.gguf + adapter.gguf (or
 *                          merged.<QUANT>.gguf) + mmproj.<F16|F32|BF16>.gguf,
 *                          export_manifest.json (export/mm_gguf.h)
 *   --target ollama        the pair + a Modelfile (two FROM lines: Ollama
 *                          takes a GGUF whose architecture is clip as the
 *                          model's projector) — images only
 *
 * Default target (no --target): Qwen2-VL the pair + Modelfile, PaliGemma
 * and Qwen2-Audio the HF snapshot (the original's choice; --target gguf
 * writes Qwen2-Audio's pair). Every other combination is refused with the
 * reason: vllm / mlx-serve / llama-server cannot carry the tower from dlm's
 * files, PaliGemma has no llama.cpp support, Ollama has no audio input. */
#ifndef DLM_EXPORT_MM_EXPORT_H
#define DLM_EXPORT_MM_EXPORT_H

#include "export/export.h"
#include "export/mm_gguf.h"

typedef struct mm_export_result {
    mm_kind kind;
    int target;                 /* export_target */
    char dir[4096];
    int adapter_version;
    const char *quant;          /* NULL for the snapshot */
    char lang_file[64], mmproj_file[64];
    int lang_tensors, mmproj_tensors, adapter_tensors;
    int n_artifacts;
    char next_steps[1024];
} mm_export_result;

/* The multimodal kind of the document's base without loading it: a
 * registry row's modality (its architecture), or the config.json of a path
 * or cached hf: snapshot. MM_NONE for text bases (the caller goes on with
 * export_run). *model_path gets the checkpoint folder. */
int mm_export_kind(const export_opts *o, mm_kind *kind, char *model_path, size_t cap, dlm_err *e);

/* Run the export for a multimodal base. target_given: --target was on the
 * command line (else the kind's default above). */
int mm_export_run(const export_opts *o, int target_given, mm_export_result *r, dlm_err *e);

#endif
