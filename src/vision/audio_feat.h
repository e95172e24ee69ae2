/* audio_feat — from an audio clip to the rows an audio-language base's
 * language model takes in place of its <|AUDIO|> placeholders (Qwen2-Audio):
 *
 *   blob → waveform (media/audio.h; the store's waveform cache)
 *        → Whisper log-mel (media/mel.h, the base's preprocessor_config.json)
 *        → audio tower + projector (vision/qwen2audio.h, the base's weights)
 *        → n_tok rows of the language model's width
 *
 * with a feature cache per blob and base:
 *
 *   <store>/audio-cache/<sha[:2]>/<sha>.<fp12>.<rate>.<max_ms>[.rs].emb
 *
 * fp12: the first 12 hex of the sha256 of the base's config.json,
 * preprocessor_config.json and every tower and projector tensor (name,
 * type, shape, bytes), so another base, another processor or other
 * weights never read an entry; the file: "DLMAEMB1", u32 n_tok, u32
 * width (little-endian), then n_tok·width float32 — the projected rows,
 * which the original does not cache (its audio-cache holds the log-mel
 * input_features; dlm's encoder is frozen, so its output is as fixed as
 * its input). Written atomically, never rewritten; an entry of another
 * shape is a miss. */
#ifndef DLM_VISION_AUDIO_FEAT_H
#define DLM_VISION_AUDIO_FEAT_H

#include <stddef.h>

#include "media/mel.h"
#include "util/err.h"
#include "vision/qwen2audio.h"

typedef struct audio_feat {
    whisper_fe fe;
    qwen2audio_enc enc;
    int audio_token;     /* audio_token_index */
    int width;           /* the language model's hidden_size */
    char fp[65];         /* the base's feature fingerprint (sha256 hex) */
    const char *tower, *proj;   /* the tensor prefixes found */
} audio_feat;

/* The base folder's config.json (Qwen2AudioConfig), preprocessor_config.json
 * (WhisperFeatureExtractor) and safetensors (either layout). */
int audio_feat_open(audio_feat *a, const char *base_dir, dlm_err *e);
void audio_feat_close(audio_feat *a);

/* The valid mel frames of n samples, as the processor's
 * feature_attention_mask counts them: ceil(n / hop), at most the 30 s. */
int audio_feat_frames(const audio_feat *a, size_t n);
/* The number of <|AUDIO|> placeholders for n samples, as transformers'
 * Qwen2AudioProcessor computes it (750 for 30 s at 16 kHz). */
int audio_feat_tokens(const audio_feat *a, size_t n);

/* x: n mono samples at 16 kHz → *out (malloc'd) *n_tok rows of width. */
int audio_feat_embed(const audio_feat *a, const float *x, size_t n, float **out, int *n_tok, dlm_err *e);

/* A stored clip (blob sha) through the waveform cache and the feature
 * cache (both filled on a miss); *hit = 1 when the features came from the
 * cache. */
int audio_feat_blob(const audio_feat *a, const char *store, const char *sha, double max_seconds, int auto_resample,
                    float **out, int *n_tok, int *hit, dlm_err *e);

/* The feature cache's path for a clip. */
int audio_feat_cache_path(const audio_feat *a, const char *store, const char *sha, int rate, int max_ms,
                          int auto_resample, char *out, size_t cap, dlm_err *e);

#endif
