/* mlx_serve — the `mlx-serve` export target, the original's
 * (export/targets/mlx_serve.py):
 *
 *   exports/mlx-serve/        (or --out DIR)
 *     adapter/                the adapter in mlx-lm's layout, converted from
 *                             the PEFT adapter as the original's
 *                             stage_mlx_adapter_dir does:
 *       adapter_config.json   {fine_tune_type, num_layers, lora_parameters:
 *                             {rank, scale = alpha/r, dropout, keys}} with
 *                             keys qualified (q_proj → self_attn.q_proj)
 *       adapters.safetensors  model.layers.N.<mod>.lora_a = Aᵀ [in, r],
 *                             .lora_b = Bᵀ [r, out], f32
 *     mlx_serve_launch.sh     python -m mlx_lm.server --model <hf id>
 *                             --adapter-path "$SCRIPT_DIR/adapter"
 *                             --host 127.0.0.1 --port 8000 "$@"
 *
 * The server itself runs on Apple Silicon only; the files are written on
 * any host (the original refuses to write them off a Mac). */
#ifndef DLM_MLX_SERVE_H
#define DLM_MLX_SERVE_H

#include "adapter/adapter.h"
#include "decoder/lora.h"
#include "util/err.h"

typedef struct export_mlx_opts {
    const char *model_ref;      /* --model: an HF id or the base folder */
    const char *dlm_version;
    const char *dlm_id;
    int adapter_version;
} export_mlx_opts;

/* Write the target into dir (which exists); names as export_vllm_write. */
int export_mlx_write(const lora *l, const adapter_meta *meta, const export_mlx_opts *o, const char *dir,
                     char names[][64], int cap, int *n, dlm_err *e);

#endif
