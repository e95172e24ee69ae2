/* audio — an audio file to the mono float32 waveform an audio-language
 * base's feature extractor takes, as the original's
 * dlm/data/audio_preprocessor.py does it:
 *
 *   soundfile.read(path, dtype="float32")       libsndfile's sf_readf_float
 *   data.mean(axis=1) when multichannel          float32 mean of the channels
 *   native rate != target: refuse, or with
 *     auto_resample soxr.resample(x, sr, dst,    libsoxr, HQ, float32
 *                                 "HQ")
 *   data[:round(max_seconds * target)]           truncation after resampling
 *
 * Formats are what Debian's libsndfile reads (WAV, FLAC, OGG/Vorbis, MP3
 * since 1.1), detected from the bytes, not the name. A file is never loaded
 * whole: only the frames the truncation keeps are read (plus one second of
 * the resampler's look-ahead), so a two-hour recording costs what 30 s
 * does. A RIFF/WAVE file whose data chunk runs past the end of the file is
 * refused as truncated (libsndfile would quietly read what is there). */
#ifndef DLM_MEDIA_AUDIO_H
#define DLM_MEDIA_AUDIO_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* Qwen2-Audio's AudioPreprocessorPlan in the original's registry */
#define AUDIO_RATE 16000
#define AUDIO_MAX_SECONDS 30.0
/* The shortest clip that gives one <|AUDIO|> token: 3 mel frames of the
 * Whisper hop (160), i.e. more than 320 samples (vision/audio_feat.h). */
#define AUDIO_MIN_SAMPLES 321

typedef struct audio_info {
    int rate;            /* native sample rate */
    int channels;
    int64_t frames;      /* as the container says */
    char format[32];     /* "WAV", "FLAC", "OGG", "MP3", ... */
} audio_info;

typedef struct audio_wave {
    float *x;            /* mono, at the target rate */
    size_t n;
    audio_info src;      /* the file's own */
    int resampled;
} audio_wave;

/* Read the header only (format, rate, channels, frames); the WAV check. */
int audio_probe(const char *path, audio_info *info, dlm_err *e);

/* The waveform: mono, target_rate, at most round(max_seconds * target_rate)
 * samples. A native rate other than target_rate is an AudioSampleRateError
 * (naming both rates, with a hint) unless auto_resample. */
int audio_load(const char *path, int target_rate, double max_seconds, int auto_resample, audio_wave *w, dlm_err *e);
void audio_wave_free(audio_wave *w);

/* libsoxr at the original's quality (HQ), float32, one channel: the whole
 * of x in, flushed; *out malloc'd. */
int audio_resample(const float *x, size_t n, int src_rate, int dst_rate, float **out, size_t *nout, dlm_err *e);

/* ---- the waveform cache (the original's WaveformCache) ----------------------
 *
 *   <store>/audio-waveform-cache/<sha[:2]>/<sha>.<rate>.<max_ms>[.rs].wav.npz
 *
 * an uncompressed .npz holding one float32 array "waveform" (what
 * numpy.savez writes, so either program reads the other's). */
int audio_cache_path(const char *store, const char *blob_sha, int rate, int max_ms, int auto_resample, char *out,
                     size_t cap, dlm_err *e);
int audio_cache_put(const char *path, const float *x, size_t n, dlm_err *e);
/* 0 hit (w->x, w->n filled), 1 miss (no file, or not a waveform npz), -1 error */
int audio_cache_get(const char *path, float **x, size_t *n, dlm_err *e);

#endif
