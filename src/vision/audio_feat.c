/* audio_feat — clips to the language model's audio rows (vision/audio_feat.h). */
#include "vision/audio_feat.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "media/audio.h"
#include "media/blob.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/json.h"
#include "weights/safetensors.h"

static int hash_file(sha256_ctx *h, const char *path, dlm_err *e)
{
    char *txt;
    size_t len;
    if (fs_read_all(path, 1u << 22, &txt, &len, e)) return -1;
    uint64_t l = len;
    sha256_update(h, &l, sizeof l);
    sha256_update(h, txt, len);
    free(txt);
    return 0;
}

static void hash_tensors(sha256_ctx *h, const st_file *f, const char *prefix)
{
    size_t pl = strlen(prefix);
    for (int i = 0; i < st_count(f); i++) {
        const st_tensor *t = st_at(f, i);
        if (strncmp(t->name, prefix, pl)) continue;
        sha256_update(h, t->name, strlen(t->name) + 1);
        int32_t meta[6] = {(int32_t)t->dtype, (int32_t)t->ndim};
        for (int k = 0; k < t->ndim && k < 4; k++) meta[2 + k] = (int32_t)t->shape[k];
        sha256_update(h, meta, sizeof meta);
        sha256_update(h, t->data, (size_t)t->nbytes);
    }
}

int audio_feat_open(audio_feat *a, const char *base_dir, dlm_err *e)
{
    memset(a, 0, sizeof *a);
    char cfgp[PATH_MAX], prep[PATH_MAX];
    snprintf(cfgp, sizeof cfgp, "%s/config.json", base_dir);
    snprintf(prep, sizeof prep, "%s/preprocessor_config.json", base_dir);
    if (!fs_is_file(prep)) {
        err_set(e, "ModelLoadError", "%s: the audio base has no preprocessor_config.json", base_dir);
        return err_hint(e, "an audio-language base's folder holds the feature extractor's preprocessor_config.json");
    }
    qwen2audio_cfg c;
    if (qwen2audio_cfg_load(cfgp, &c, e)) return -1;
    json_t *j = json_load_path(cfgp, 1u << 22, e);
    if (!j) return -1;
    long long tok = 151646;
    if (jget_int(j, "audio_token_index", &tok) && jget_int(j, "audio_token_id", &tok)) tok = 151646;
    json_decref(j);
    a->audio_token = (int)tok;
    a->width = c.text_hidden;
    if (whisper_fe_load(prep, &a->fe, e)) return -1;
    if (a->fe.n_mels != c.n_mels) {
        err_set(e, "ConfigError", "%s: feature_size %d differs from the encoder's num_mel_bins %d", prep, a->fe.n_mels,
                c.n_mels);
        goto fail;
    }
    if (a->fe.frames != 2 * c.max_pos) {
        err_set(e, "ConfigError", "%s: %d mel frames per chunk, the encoder takes %d (2·max_source_positions)", prep,
                a->fe.frames, 2 * c.max_pos);
        goto fail;
    }
    st_file *f;
    if (st_open(base_dir, &f, e)) goto fail;
    if (st_find(f, "audio_tower.conv1.weight")) {
        a->tower = "audio_tower.";
        a->proj = "multi_modal_projector.linear.";
    } else {
        a->tower = "model.audio_tower.";
        a->proj = "model.multi_modal_projector.linear.";
    }
    int rc = qwen2audio_load(f, a->tower, a->proj, &c, &a->enc, e);
    if (!rc) {
        sha256_ctx h;
        sha256_init(&h);
        sha256_update(&h, "dlm-audio-feat-1", 16);
        rc = hash_file(&h, cfgp, e) || hash_file(&h, prep, e) ? -1 : 0;
        hash_tensors(&h, f, a->tower);
        hash_tensors(&h, f, a->proj);
        unsigned char d[32];
        sha256_final(&h, d);
        for (int i = 0; i < 32; i++) snprintf(a->fp + 2 * i, 3, "%02x", d[i]);
    }
    st_close(f);
    if (rc) goto fail;
    return 0;
fail:
    audio_feat_close(a);
    return -1;
}

void audio_feat_close(audio_feat *a)
{
    whisper_fe_free(&a->fe);
    qwen2audio_free(&a->enc);
    memset(a, 0, sizeof *a);
}

int audio_feat_frames(const audio_feat *a, size_t n)
{
    size_t f = (n + (size_t)a->fe.hop - 1) / (size_t)a->fe.hop;
    return f > (size_t)a->fe.frames ? a->fe.frames : (int)f;
}

int audio_feat_tokens(const audio_feat *a, size_t n)
{
    int f = audio_feat_frames(a, n);
    return f < 1 ? 0 : qwen2audio_out_len(f);
}

int audio_feat_embed(const audio_feat *a, const float *x, size_t n, float **out, int *n_tok, dlm_err *e)
{
    *out = NULL;
    *n_tok = 0;
    int nm = audio_feat_frames(a, n);
    if (nm < 1) return err_set(e, "AudioError", "the clip has no samples");
    int T = audio_feat_tokens(a, n);
    if (T < 1)
        return err_set(e, "AudioError", "the clip is %zu samples long: %d mel frames give no audio token (3 or more, "
                       "%d samples, are needed)", n, nm, 2 * a->fe.hop + 1);
    float *mel = malloc((size_t)a->fe.n_mels * a->fe.frames * sizeof *mel);
    float *o = malloc((size_t)T * a->width * sizeof *o);
    if (!mel || !o) { free(mel); free(o); return err_set(e, "MemoryError", "out of memory"); }
    if (whisper_log_mel(&a->fe, x, n, mel, e) || qwen2audio_forward(&a->enc, mel, nm, o, e)) {
        free(mel);
        free(o);
        return -1;
    }
    free(mel);
    *out = o;
    *n_tok = T;
    return 0;
}

int audio_feat_cache_path(const audio_feat *a, const char *store, const char *sha, int rate, int max_ms,
                          int auto_resample, char *out, size_t cap, dlm_err *e)
{
    if ((size_t)snprintf(out, cap, "%s/audio-cache/%.2s/%s.%.12s.%d.%d%s.emb", store, sha, sha, a->fp, rate, max_ms,
                         auto_resample ? ".rs" : "") >= cap)
        return err_set(e, "CacheError", "store path too long: %s", store);
    return 0;
}

static void w32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static uint32_t r32(const unsigned char *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* 0 hit, 1 miss (absent, or not an entry of this shape) */
static int emb_get(const char *path, int width, float **out, int *n_tok)
{
    char *buf;
    size_t len;
    dlm_err ie;
    if (!fs_is_file(path) || fs_read_all(path, 1u << 30, &buf, &len, &ie)) return 1;
    const unsigned char *p = (const unsigned char *)buf;
    int rc = 1;
    if (len >= 16 && !memcmp(p, "DLMAEMB1", 8) && r32(p + 12) == (uint32_t)width && r32(p + 8) > 0 &&
        len == 16 + (size_t)r32(p + 8) * (size_t)width * 4) {
        size_t nv = (size_t)r32(p + 8) * (size_t)width;
        float *v = malloc(nv * sizeof *v);
        if (v) {
            for (size_t i = 0; i < nv; i++) {
                uint32_t u = r32(p + 16 + 4 * i);
                memcpy(&v[i], &u, 4);
            }
            *out = v;
            *n_tok = (int)r32(p + 8);
            rc = 0;
        }
    }
    free(buf);
    return rc;
}

static int emb_put(const char *path, const float *x, int n_tok, int width, dlm_err *e)
{
    size_t nv = (size_t)n_tok * width, len = 16 + nv * 4;
    unsigned char *b = malloc(len);
    if (!b) return err_set(e, "MemoryError", "out of memory");
    memcpy(b, "DLMAEMB1", 8);
    w32(b + 8, (uint32_t)n_tok);
    w32(b + 12, (uint32_t)width);
    for (size_t i = 0; i < nv; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        w32(b + 16 + 4 * i, u);
    }
    char dir[PATH_MAX];
    fs_dirname(dir, sizeof dir, path);
    int rc = fs_mkdir_p(dir, e) || fs_write_atomic(path, b, len, 0644, e) ? -1 : 0;
    free(b);
    return rc;
}

int audio_feat_blob(const audio_feat *a, const char *store, const char *sha, double max_seconds, int auto_resample,
                    float **out, int *n_tok, int *hit, dlm_err *e)
{
    *hit = 0;
    int rate = a->fe.rate, max_ms = (int)lround(max_seconds * 1000);
    char fp[PATH_MAX + 256];
    if (audio_feat_cache_path(a, store, sha, rate, max_ms, auto_resample, fp, sizeof fp, e)) return -1;
    if (emb_get(fp, a->width, out, n_tok) == 0) {
        *hit = 1;
        return 0;
    }
    char wp[PATH_MAX + 256];
    if (audio_cache_path(store, sha, rate, max_ms, auto_resample, wp, sizeof wp, e)) return -1;
    float *x = NULL;
    size_t n = 0;
    int g = audio_cache_get(wp, &x, &n, e);
    if (g < 0) return -1;
    if (g == 1) {
        /* not cached (a store from before the cache, or one cleaned):
         * decode the blob as ingestion did */
        char bp[PATH_MAX + 256];
        int f = blob_find(store, sha, bp, sizeof bp, e);
        if (f < 0) return -1;
        if (f == 1) {
            err_set(e, "AudioError", "audio blob %.12s is not in the store (%s/blobs)", sha, store);
            return err_hint(e, "train again: ingestion stores every clip the document names");
        }
        audio_wave w;
        if (audio_load(bp, rate, max_seconds, auto_resample, &w, e)) return -1;
        int prc = audio_cache_put(wp, w.x, w.n, e);
        x = w.x;
        n = w.n;
        w.x = NULL;
        audio_wave_free(&w);
        if (prc) { free(x); return -1; }
    }
    int rc = audio_feat_embed(a, x, n, out, n_tok, e);
    free(x);
    if (rc) return -1;
    if (emb_put(fp, *out, *n_tok, a->width, e)) {
        free(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}
