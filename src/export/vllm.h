/* vllm — the `vllm` export target (docs/reference/original-spec.md §6.3):
 *
 *   exports/vllm/            (or --out DIR)
 *     adapter/               the adapter (or mix) as a PEFT folder, which vLLM
 *                            loads with --enable-lora --lora-modules
 *     model/                 --merged: an HF model folder instead (the base's
 *                            config and tokenizer files, model.safetensors with
 *                            W + s·B·A in the base's own dtype)
 *     vllm_launch.sh         `vllm serve …` with the spec's flags
 *     vllm_config.json       the same settings as data
 *
 * vLLM loads HF-format weights, so the base must be an HF folder (a
 * registry base or an HF id resolves to one in the HF cache). */
#ifndef DLM_VLLM_H
#define DLM_VLLM_H

#include "adapter/adapter.h"
#include "decoder/lora.h"
#include "weights/model.h"
#include "util/err.h"

typedef struct export_vllm_opts {
    const char *model_ref;      /* what vllm serves without --merged: an HF id or the base folder */
    const char *revision;       /* --revision, or NULL */
    const char *served_name;    /* --served-model-name */
    int max_model_len;
    int merged;
    const char *dlm_version;
    const char *dlm_id;
    int adapter_version;
} export_vllm_opts;

/* Write the target into dir (which exists). names gets the relative paths
 * of the files written (at most cap; *n set), for the export manifest. */
int export_vllm_write(const model *m, const char *model_path, const lora *l, const adapter_meta *meta,
                      const export_vllm_opts *o, const char *dir, char names[][64], int cap, int *n, dlm_err *e);

/* The smallest LoRA rank vLLM's --max-lora-rank accepts that holds r. */
int export_vllm_lora_rank(int r);

#endif
