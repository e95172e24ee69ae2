/* qwen2audio — Qwen2-Audio's audio encoder, frozen, forward only, and its
 * projector (here with the other frozen media encoders; vision/ops.h's
 * matmuls, LayerNorm and attention serve both).
 *
 * transformers' Qwen2AudioEncoder + Qwen2AudioMultiModalProjector as
 * Qwen2AudioModel.forward runs them: Whisper log-mel [n_mels][2·max_pos]
 * (media/mel.h) → Conv1d(n_mels→d, k3, p1) → GELU → Conv1d(d→d, k3, s2, p1)
 * → GELU → + embed_positions (the sinusoid table the checkpoint stores) →
 * `layers` pre-norm Whisper encoder layers (LayerNorm eps 1e-5; q and v
 * with bias, k without; scores scaled by head_dim^-0.5; keys past the
 * clip's frames masked; fc1 → GELU (erf) → fc2) → AvgPool1d(2, 2) →
 * LayerNorm → Linear(d → text hidden). Only the clip's own tokens are
 * computed and returned: n_out = ((n_mel - 1) / 2 + 1 - 2) / 2 + 1 of them
 * for n_mel valid mel frames (750 for 30 s). Rows past the clip's frames do
 * not reach the kept rows (their keys are masked), so the layers run on the
 * clip's (n_mel - 1) / 2 + 1 rows only. */
#ifndef DLM_VISION_QWEN2AUDIO_H
#define DLM_VISION_QWEN2AUDIO_H

#include <stdint.h>

#include "util/err.h"
#include "weights/safetensors.h"

typedef struct qwen2audio_cfg {
    int layers, d_model, heads, ffn;   /* encoder_layers, d_model, encoder_attention_heads, encoder_ffn_dim */
    int n_mels, max_pos;               /* num_mel_bins (128), max_source_positions (1500) */
    int text_hidden;                   /* the language model's hidden_size */
} qwen2audio_cfg;

typedef struct qwen2audio_layer {
    float *n1_w, *n1_b, *q_w, *q_b, *k_w, *v_w, *v_b, *o_w, *o_b;
    float *n2_w, *n2_b, *fc1_w, *fc1_b, *fc2_w, *fc2_b;
} qwen2audio_layer;

typedef struct qwen2audio_enc {
    qwen2audio_cfg c;
    float *c1_w, *c1_b, *c2_w, *c2_b, *pos;   /* [d][n_mels·3], [d], [d][d·3], [d], [max_pos][d] */
    qwen2audio_layer *l;
    float *ln_w, *ln_b, *proj_w, *proj_b;
} qwen2audio_enc;

/* From a checkpoint's config.json (Qwen2AudioConfig): audio_config's
 * encoder_layers, d_model, encoder_attention_heads, encoder_ffn_dim,
 * num_mel_bins, max_source_positions and text_config's hidden_size. A
 * missing key is an error naming it (no defaults are guessed). */
int qwen2audio_cfg_load(const char *config_json, qwen2audio_cfg *c, dlm_err *e);

/* Qwen2-Audio-7B's encoder (Qwen2AudioEncoderConfig's defaults, text width
 * 4096): the plan of a registry row not downloaded. */
void qwen2audio_cfg_7b(qwen2audio_cfg *c);

/* What qwen2audio_load keeps (f32 copies) and what one
 * qwen2audio_forward of a full 30 s clip allocates, mel input and output
 * included. */
void qwen2audio_plan_bytes(const qwen2audio_cfg *c, uint64_t *weights, uint64_t *scratch);

/* The number of audio tokens for n_mel valid mel frames. */
int qwen2audio_out_len(int n_mel);

/* tower: e.g. "model.audio_tower." (hub checkpoints: "audio_tower.");
 * proj: e.g. "model.multi_modal_projector.linear." */
int qwen2audio_load(const st_file *f, const char *tower, const char *proj, const qwen2audio_cfg *c, qwen2audio_enc *q,
                    dlm_err *e);
void qwen2audio_free(qwen2audio_enc *q);

/* mel: [n_mels][2·max_pos]; n_mel: the clip's valid frames (1..2·max_pos);
 * out: qwen2audio_out_len(n_mel) rows of text_hidden floats. */
int qwen2audio_forward(const qwen2audio_enc *q, const float *mel, int n_mel, float *out, dlm_err *e);

#endif
