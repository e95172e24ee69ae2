/* audio — decoding, mono mix, resampling, truncation (media/audio.h). */
#include "media/audio.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sndfile.h>
#include <soxr.h>

/* frames read per sf_readf_float call: the interleaved buffer stays small
 * whatever the channel count */
#define AUDIO_CHUNK 16384

static uint32_t rd32(const unsigned char *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* A RIFF/WAVE file's data chunk must fit in the file: libsndfile logs a
 * "data length too long" and reads what is there, soundfile with it, which
 * would train on a cut recording without a word. Other containers are
 * checked by the frame count (audio_load). */
static int wav_check(const char *path, dlm_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) return err_sys(e, "cannot open %s", path);
    unsigned char h[12];
    int rc = 0;
    if (fread(h, 1, 12, f) != 12 || memcmp(h, "RIFF", 4) || memcmp(h + 8, "WAVE", 4)) goto out;   /* not WAV: sndfile decides */
    if (fseeko(f, 0, SEEK_END)) goto out;
    off_t size = ftello(f), at = 12;
    for (;;) {
        unsigned char c[8];
        if (at + 8 > size || fseeko(f, at, SEEK_SET) || fread(c, 1, 8, f) != 8) break;
        uint32_t n = rd32(c + 4);
        if (!memcmp(c, "data", 4)) {
            /* 0 and 0xFFFFFFFF: a writer that never went back to fill the
             * size in (a stream); libsndfile then reads to the end */
            if (n != 0 && n != 0xFFFFFFFFu && at + 8 + (off_t)n > size) {
                rc = err_set(e, "AudioError", "truncated WAV: its data chunk says %u bytes, the file holds %lld",
                             n, (long long)(size - at - 8));
                err_hint(e, "the file was cut short (an interrupted copy or recording); export it again");
            }
            break;
        }
        at += 8 + (off_t)n + (n & 1);
    }
out:
    fclose(f);
    return rc;
}

static SNDFILE *open_sf(const char *path, SF_INFO *si, audio_info *info, dlm_err *e)
{
    memset(si, 0, sizeof *si);
    SNDFILE *sf = sf_open(path, SFM_READ, si);
    if (!sf) {
        err_set(e, "AudioError", "not an audio file libsndfile reads: %s", sf_strerror(NULL));
        err_hint(e, "WAV, FLAC, OGG/Vorbis and MP3 are read (the format comes from the bytes, not the name)");
        return NULL;
    }
    if (si->samplerate <= 0 || si->channels <= 0) {
        sf_close(sf);
        err_set(e, "AudioError", "the file says %d Hz and %d channel(s)", si->samplerate, si->channels);
        return NULL;
    }
    memset(info, 0, sizeof *info);
    info->rate = si->samplerate;
    info->channels = si->channels;
    info->frames = si->frames;
    SF_FORMAT_INFO fi = {.format = si->format & SF_FORMAT_TYPEMASK};
    if (!sf_command(NULL, SFC_GET_FORMAT_INFO, &fi, sizeof fi) && fi.extension)
        snprintf(info->format, sizeof info->format, "%s", fi.extension);
    /* libsndfile's extensions, named as people say them */
    if (!strcmp(info->format, "m1a")) snprintf(info->format, sizeof info->format, "mp3");
    if (!strcmp(info->format, "oga")) snprintf(info->format, sizeof info->format, "ogg");
    for (char *c = info->format; *c; c++) if (*c >= 'a' && *c <= 'z') *c -= 32;
    return sf;
}

int audio_probe(const char *path, audio_info *info, dlm_err *e)
{
    if (wav_check(path, e)) return -1;
    SF_INFO si;
    SNDFILE *sf = open_sf(path, &si, info, e);
    if (!sf) return -1;
    sf_close(sf);
    return 0;
}

/* Read up to want frames, mixed to mono as numpy's float32 mean over the
 * channel axis: the channels summed in order, then divided by their count.
 * Fewer frames than both want and the container's count: truncated. */
static int read_mono(SNDFILE *sf, const SF_INFO *si, int64_t want, float **out, size_t *n, dlm_err *e)
{
    int ch = si->channels;
    int64_t total = si->frames >= 0 && si->frames < want ? si->frames : want;
    float *x = malloc(((size_t)total + 1) * sizeof *x);
    float *buf = ch > 1 ? malloc((size_t)AUDIO_CHUNK * (size_t)ch * sizeof *buf) : NULL;
    if (!x || (ch > 1 && !buf)) { free(x); free(buf); return err_set(e, "MemoryError", "out of memory"); }
    int64_t got = 0;
    while (got < total) {
        sf_count_t k = total - got < AUDIO_CHUNK ? total - got : AUDIO_CHUNK;
        sf_count_t r = sf_readf_float(sf, ch > 1 ? buf : x + got, k);
        if (r <= 0) break;
        if (ch > 1) {
            for (sf_count_t i = 0; i < r; i++) {
                const float *f = buf + (size_t)i * (size_t)ch;
                float s = f[0];
                for (int c = 1; c < ch; c++) s += f[c];
                x[got + i] = s / (float)ch;
            }
        }
        got += r;
    }
    free(buf);
    if (got < total) {
        free(x);
        err_set(e, "AudioError", "truncated or corrupt: %lld of the %lld frames the header promises could be decoded%s%s%s",
                (long long)got, (long long)si->frames, sf_error(sf) ? " (" : "", sf_error(sf) ? sf_strerror(sf) : "",
                sf_error(sf) ? ")" : "");
        return err_hint(e, "the file was cut short or damaged; export it again");
    }
    *out = x;
    *n = (size_t)got;
    return 0;
}

int audio_resample(const float *x, size_t n, int src_rate, int dst_rate, float **out, size_t *nout, dlm_err *e)
{
    /* python-soxr's resample(x, in, out, "HQ"): one channel of float32,
     * SOXR_HQ with no extra flags, one thread, all of x, then the flush */
    size_t cap = (size_t)ceil((double)n * dst_rate / src_rate) + 64;
    float *y = malloc(cap * sizeof *y);
    if (!y) return err_set(e, "MemoryError", "out of memory");
    soxr_error_t se;
    soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
    soxr_runtime_spec_t rt = soxr_runtime_spec(1);
    soxr_t s = soxr_create(src_rate, dst_rate, 1, &se, &io, &q, &rt);
    if (!s) { free(y); return err_set(e, "AudioError", "libsoxr: %s", se); }
    size_t idone = 0, odone = 0, done = 0;
    se = soxr_process(s, x, n, &idone, y, cap, &odone);
    done = odone;
    while (!se && done < cap) {   /* flush: the filter's tail */
        se = soxr_process(s, NULL, 0, NULL, y + done, cap - done, &odone);
        if (!odone) break;
        done += odone;
    }
    soxr_delete(s);
    if (se) { free(y); return err_set(e, "AudioError", "libsoxr: %s", se); }
    *out = y;
    *nout = done;
    return 0;
}

int audio_load(const char *path, int target_rate, double max_seconds, int auto_resample, audio_wave *w, dlm_err *e)
{
    memset(w, 0, sizeof *w);
    if (wav_check(path, e)) return -1;
    SF_INFO si;
    SNDFILE *sf = open_sf(path, &si, &w->src, e);
    if (!sf) return -1;
    int64_t keep = (int64_t)llround(max_seconds * target_rate);
    if (w->src.rate != target_rate && !auto_resample) {
        sf_close(sf);
        err_set(e, "AudioSampleRateError", "native sample_rate=%d Hz does not match the base's %d Hz", w->src.rate,
                target_rate);
        return err_hint(e, "set training.audio.auto_resample: true to resample it, or re-encode it at %d Hz "
                           "(sox IN -r %d OUT)", target_rate, target_rate);
    }
    /* frames of the source the kept samples need; resampling reads one
     * second more, so the filter sees what it would in the whole file */
    int64_t want = keep;
    if (w->src.rate != target_rate)
        want = (int64_t)ceil((double)keep * w->src.rate / target_rate) + w->src.rate;
    float *x = NULL;
    size_t n = 0;
    int rc = read_mono(sf, &si, want, &x, &n, e);
    sf_close(sf);
    if (rc) return -1;
    if (!n) {   /* nothing to hear, nothing to train on */
        free(x);
        err_set(e, "AudioError", "the file holds no audio (0 frames)");
        return err_hint(e, "record or export the clip again, or remove the section");
    }
    if (w->src.rate != target_rate) {
        float *y;
        size_t ny;
        rc = audio_resample(x, n, w->src.rate, target_rate, &y, &ny, e);
        free(x);
        if (rc) return -1;
        x = y;
        n = ny;
        w->resampled = 1;
    }
    if ((int64_t)n > keep) n = (size_t)keep;
    w->x = x;
    w->n = n;
    return 0;
}

void audio_wave_free(audio_wave *w)
{
    free(w->x);
    memset(w, 0, sizeof *w);
}
