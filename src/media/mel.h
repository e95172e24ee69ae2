/* mel — Whisper's log-mel features, as transformers' WhisperFeatureExtractor
 * computes them on its numpy path (_np_extract_fbank_features), which is
 * what the original's Qwen2-Audio processor runs:
 *
 *   x (float32, <= n_samples) zero-padded to n_samples (30 s at 16 kHz)
 *   reflect-padded by n_fft/2 each side, in double
 *   frames of n_fft every hop, times the periodic Hann window
 *   rfft (double), each bin rounded to complex64, |.|^2 in double
 *   mel = max(1e-10, filters^T . power), slaney mel scale and norm, 0..8 kHz
 *   log10 -> float32; the last frame dropped
 *   y = max(y, max(y) - 8); y = (y + 4) / 4
 *
 * out is [n_mels][frames] float32, frames = n_samples / hop (3000). */
#ifndef DLM_MEDIA_MEL_H
#define DLM_MEDIA_MEL_H

#include <stddef.h>

#include "util/err.h"

typedef struct whisper_fe {
    int n_mels;           /* feature_size: 80 (Whisper), 128 (Qwen2-Audio, Whisper large-v3) */
    int n_fft, hop, rate; /* 400, 160, 16000 */
    int n_samples;        /* chunk_length * rate: 480000 */
    int frames;           /* n_samples / hop: 3000 */
    double *window;       /* [n_fft] */
    double *filters;      /* [n_mels][n_fft/2+1], transformers' mel_filters transposed */
    int *lo, *hi;         /* each filter's nonzero bins [lo, hi) */
    double *tw;           /* [n_fft] exp(-2 pi i k / n_fft) as (re, im) pairs */
    int factors[32];      /* n_fft's prime factors, 0-terminated */
} whisper_fe;

/* The extractor of a preprocessor_config.json with these values. n_fft must
 * factor into primes <= 7. */
int whisper_fe_init(whisper_fe *fe, int n_mels, int n_fft, int hop, int rate, int chunk_seconds, dlm_err *e);
void whisper_fe_free(whisper_fe *fe);
/* From a preprocessor_config.json (WhisperFeatureExtractor's
 * feature_size, n_fft, hop_length, sampling_rate, chunk_length); its class
 * must be WhisperFeatureExtractor with padding_value 0, dither 0 and no
 * do_normalize. */
int whisper_fe_load(const char *preprocessor_json, whisper_fe *fe, dlm_err *e);

/* x: n mono samples at fe->rate (more than n_samples: the rest is cut, as
 * the extractor's truncation). out: n_mels * frames floats. */
int whisper_log_mel(const whisper_fe *fe, const float *x, size_t n, float *out, dlm_err *e);

/* The filters alone, [n_mels][n_fft/2+1] (for the reference test). */
const double *whisper_fe_filters(const whisper_fe *fe);

#endif
