/* test_audio — media/audio.h and media/mel.h without a reference: the
 * waveform cache's .npz layout, WAV checks, resampled lengths, and Whisper
 * facts (silence is -1.5 everywhere; a tone's energy sits in its mel bin).
 * `test_audio --ref DIR` compares audio_load and whisper_log_mel with the
 * original's soundfile + soxr pipeline and transformers'
 * WhisperFeatureExtractor (tests/ref/media/audio_hf.py writes DIR;
 * tests/ref/r1501-audio-hf.sh runs both). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "media/audio.h"
#include "media/mel.h"
#include "kern/kern.h"
#include "util/fs.h"
#include "vision/qwen2audio.h"
#include "weights/safetensors.h"

/* a 16-bit mono WAV of n samples of f(i) */
static void write_wav(const char *path, int rate, int n, double hz, double amp, int cut)
{
    FILE *f = fopen(path, "wb");
    unsigned char h[44] = "RIFF\0\0\0\0WAVEfmt \x10\0\0\0\x01\0\x01\0\0\0\0\0\0\0\0\0\x02\0\x10\0data";
    uint32_t data = (uint32_t)n * 2, riff = 36 + data, br = (uint32_t)rate * 2;
    memcpy(h + 4, &riff, 4); memcpy(h + 24, &rate, 4); memcpy(h + 28, &br, 4); memcpy(h + 40, &data, 4);
    fwrite(h, 1, 44, f);
    for (int i = 0; i < n - cut; i++) {
        short s = (short)lrint(amp * 32767 * sin(2 * M_PI * hz * i / rate));
        fwrite(&s, 2, 1, f);
    }
    fclose(f);
}

static void test_wav_and_cache(void)
{
    char p[4200], c[4300];
    const char *dir = check_tmpdir("audio");
    snprintf(p, sizeof p, "%s/a.wav", dir);
    write_wav(p, 16000, 8000, 440, 0.5, 0);
    dlm_err e;
    audio_info ai;
    CHECK(audio_probe(p, &ai, &e) == 0);
    CHECK_INT(ai.rate, 16000);
    CHECK_INT(ai.frames, 8000);
    CHECK_STR(ai.format, "WAV");
    audio_wave w;
    CHECK(audio_load(p, 16000, 30.0, 0, &w, &e) == 0);
    CHECK_INT(w.n, 8000);
    CHECK_NEAR(w.x[40], lrint(0.5 * 32767 * sin(2 * M_PI * 440 * 40 / 16000.0)) / 32768.0, 1e-9);
    /* the cache's .npz: written, read back bit for bit, path as the original's */
    CHECK(audio_cache_path("/s", "ab01", 16000, 30000, 1, c, sizeof c, &e) == 0);
    CHECK_STR(c, "/s/audio-waveform-cache/ab/ab01.16000.30000.rs.wav.npz");
    snprintf(c, sizeof c, "%s/x/w.npz", dir);
    CHECK(audio_cache_put(c, w.x, w.n, &e) == 0);
    float *x = NULL;
    size_t n = 0;
    CHECK(audio_cache_get(c, &x, &n, &e) == 0);
    CHECK(n == w.n && x && !memcmp(x, w.x, n * sizeof *x));
    free(x);
    snprintf(c, sizeof c, "%s/x/missing.npz", dir);
    CHECK(audio_cache_get(c, &x, &n, &e) == 1);
    /* 10 s at 16 kHz with max 0.25 s: 4000 samples */
    audio_wave_free(&w);
    CHECK(audio_load(p, 16000, 0.25, 0, &w, &e) == 0);
    CHECK_INT(w.n, 4000);
    audio_wave_free(&w);
    /* another rate: refused, or resampled to the length libsoxr gives */
    snprintf(p, sizeof p, "%s/b.wav", dir);
    write_wav(p, 8000, 8000, 440, 0.5, 0);
    CHECK(audio_load(p, 16000, 30.0, 0, &w, &e) == -1);
    CHECK_STR(e.kind, "AudioSampleRateError");
    CHECK(audio_load(p, 16000, 30.0, 1, &w, &e) == 0);
    CHECK_INT(w.n, 16000);
    CHECK(w.resampled);
    audio_wave_free(&w);
    /* a data chunk longer than the file: truncated */
    snprintf(p, sizeof p, "%s/c.wav", dir);
    write_wav(p, 16000, 8000, 440, 0.5, 100);
    CHECK(audio_load(p, 16000, 30.0, 0, &w, &e) == -1);
    CHECK_MSG(strstr(e.msg, "truncated WAV") != NULL, "%s", e.msg);
    /* no frames at all: refused */
    snprintf(p, sizeof p, "%s/d.wav", dir);
    write_wav(p, 16000, 0, 440, 0.5, 0);
    CHECK(audio_load(p, 16000, 30.0, 0, &w, &e) == -1);
    CHECK_MSG(strstr(e.msg, "holds no audio") != NULL, "%s", e.msg);
}

static void test_mel_facts(void)
{
    whisper_fe fe;
    dlm_err e;
    CHECK(whisper_fe_init(&fe, 80, 400, 160, 16000, 30, &e) == 0);
    CHECK_INT(fe.frames, 3000);
    float *out = malloc(80 * 3000 * sizeof *out);
    /* silence: every mel is the 1e-10 floor, log10 -10, (-10 + 4) / 4 */
    CHECK(whisper_log_mel(&fe, NULL, 0, out, &e) == 0);
    int all = 1;
    for (int i = 0; i < 80 * 3000; i++) all &= out[i] == -1.5f;
    CHECK(all);
    /* a 1 kHz tone: its frames' loudest bin is the mel filter centred nearest 1 kHz */
    float *x = malloc(16000 * sizeof *x);
    for (int i = 0; i < 16000; i++) x[i] = (float)(0.5 * sin(2 * M_PI * 1000 * i / 16000.0));
    CHECK(whisper_log_mel(&fe, x, 16000, out, &e) == 0);
    int best = 0;
    for (int m = 1; m < 80; m++) if (out[m * 3000 + 50] > out[best * 3000 + 50]) best = m;
    /* 1 kHz is 15 slaney mels; the centres are i * 45.236 / 81 mels: filter
     * i (centre i + 1) = 26 is centred at 15.08 */
    CHECK_MSG(best == 26, "loudest mel bin %d", best);
    CHECK(out[best * 3000 + 50] > out[10 * 3000 + 50] + 1.0f);
    free(x);
    free(out);
    whisper_fe_free(&fe);
    CHECK(whisper_fe_init(&fe, 80, 398, 160, 16000, 30, &e) == -1);   /* 398 = 2 * 199 */
}

/* configs and weights that do not fit: the key or tensor is named */
static void test_loaders(void)
{
    const char *dir = check_tmpdir("audio-cfg");
    char p[4200];
    dlm_err e;
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    fputs("{\"audio_config\": {\"encoder_layers\": 2, \"d_model\": 32, \"encoder_attention_heads\": 4, "
          "\"encoder_ffn_dim\": 48, \"num_mel_bins\": 128}, \"text_config\": {\"hidden_size\": 40}}", f);
    fclose(f);
    qwen2audio_cfg c;
    CHECK(qwen2audio_cfg_load(p, &c, &e) == -1);
    CHECK_MSG(strstr(e.msg, "audio_config.max_source_positions is missing") != NULL, "%s", e.msg);
    snprintf(p, sizeof p, "%s/preprocessor_config.json", dir);
    f = fopen(p, "w");
    fputs("{\"feature_extractor_type\": \"WhisperFeatureExtractor\", \"feature_size\": 80, \"n_fft\": 400, "
          "\"hop_length\": 160, \"sampling_rate\": 16000, \"chunk_length\": 30, \"dither\": 1.0}", f);
    fclose(f);
    whisper_fe fe;
    CHECK(whisper_fe_load(p, &fe, &e) == -1);
    CHECK_MSG(strstr(e.msg, "dither 1") != NULL, "%s", e.msg);
    /* a weights file without the tower: the first missing tensor is named */
    st_out t = {.name = "other.weight", .dtype = ST_F32, .ndim = 1, .shape = {1}, .data = "\0\0\0\0"};
    snprintf(p, sizeof p, "%s/x.safetensors", dir);
    CHECK(st_write(p, &t, 1, NULL, &e) == 0);
    st_file *sf = NULL;
    CHECK(st_open(p, &sf, &e) == 0);
    static const qwen2audio_cfg QC = {.layers = 1, .d_model = 8, .heads = 2, .ffn = 8, .n_mels = 4, .max_pos = 4,
                                      .text_hidden = 8};
    qwen2audio_enc q;
    CHECK(sf && qwen2audio_load(sf, "audio_tower.", "multi_modal_projector.linear.", &QC, &q, &e) != 0);
    CHECK_MSG(strstr(e.msg, "'audio_tower.conv1.weight' is missing") != NULL, "%s", e.msg);
    st_close(sf);
}

/* ---- --ref DIR ------------------------------------------------------------------------ */

static void *read_raw(const char *dir, const char *name, size_t want)
{
    char p[4096], *buf = NULL;
    size_t len = 0;
    dlm_err e;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (fs_read_all(p, 1u << 30, &buf, &len, &e) || (want && len != want)) {
        fprintf(stderr, "%s: %zu bytes, expected %zu\n", p, len, want);
        free(buf);
        return NULL;
    }
    return buf;
}

static double max_abs(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static int ref_mode(const char *dir)
{
    whisper_fe fe[2];
    const int mels[2] = {80, 128};
    dlm_err e;
    for (int k = 0; k < 2; k++) {
        CHECK(whisper_fe_init(&fe[k], mels[k], 400, 160, 16000, 30, &e) == 0);
        char nm[64];
        snprintf(nm, sizeof nm, "filters%d.f64", mels[k]);
        double *f = read_raw(dir, nm, 201 * (size_t)mels[k] * 8), d = 0;
        CHECK(f != NULL);
        for (int b = 0; f && b < 201; b++)   /* transformers' is [bins][mels] */
            for (int m = 0; m < mels[k]; m++) d = fmax(d, fabs(f[b * mels[k] + m] - fe[k].filters[m * 201 + b]));
        CHECK_MSG(d <= 1e-12, "mel filters %d: max |diff| %.3g", mels[k], d);
        printf("  mel filters %-3d max|diff| %.3g\n", mels[k], d);
        free(f);
    }
    char *cases = read_raw(dir, "cases.txt", 0);
    if (!cases) return 1;
    int n = 0;
    double worst_w = 0, worst_m = 0;
    float *mel = malloc(128 * 3000 * sizeof *mel);
    for (char *line = strtok(cases, "\n"); line; line = strtok(NULL, "\n")) {
        char name[256], path[4096];
        if (sscanf(line, "%255s %4095s", name, path) != 2) continue;
        char nm[300];
        snprintf(nm, sizeof nm, "%s.wave.f32", name);
        float *want = read_raw(dir, nm, 0);
        int64_t sz = 0;
        {
            char p[4400];
            snprintf(p, sizeof p, "%s/%s", dir, nm);
            sz = fs_file_size(p);
        }
        audio_wave w;
        if (audio_load(path, 16000, 30.0, 1, &w, &e)) { CHECK_MSG(0, "%s: %s", name, e.msg); free(want); continue; }
        size_t wn = (size_t)sz / 4;
        CHECK_MSG(w.n == wn, "%s: %zu samples, the original has %zu", name, w.n, wn);
        double dw = want && w.n == wn ? max_abs(w.x, want, wn) : INFINITY;
        CHECK_MSG(dw <= 1e-6, "%s: waveform max |diff| %.3g", name, dw);
        worst_w = fmax(worst_w, dw);
        printf("  %-18s %-4s %5d Hz %d ch %6zu samples  wave %.3g", name, w.src.format, w.src.rate, w.src.channels, w.n, dw);
        for (int k = 0; k < 2; k++) {
            snprintf(nm, sizeof nm, "%s.mel%d.f32", name, mels[k]);
            float *ref = read_raw(dir, nm, (size_t)mels[k] * 3000 * 4);
            CHECK(ref != NULL);
            CHECK(whisper_log_mel(&fe[k], w.x, w.n, mel, &e) == 0);
            double dm = ref ? max_abs(mel, ref, (size_t)mels[k] * 3000) : INFINITY;
            /* and from the original's own waveform: the extractor alone */
            CHECK(whisper_log_mel(&fe[k], want, wn, mel, &e) == 0);
            double dx = ref ? max_abs(mel, ref, (size_t)mels[k] * 3000) : INFINITY;
            CHECK_MSG(dm <= 1e-4 && dx <= 1e-4, "%s: mel%d max |diff| %.3g (from its waveform %.3g)", name, mels[k], dm, dx);
            worst_m = fmax(worst_m, fmax(dm, dx));
            printf("  mel%d %.3g", mels[k], dm);
            free(ref);
        }
        printf("\n");
        audio_wave_free(&w);
        free(want);
        n++;
    }
    free(mel);
    free(cases);
    for (int k = 0; k < 2; k++) whisper_fe_free(&fe[k]);
    CHECK(n >= 16);
    printf("test_audio --ref: %d clips, waveform max |diff| %.3g, features max |diff| %.3g\n", n, worst_w, worst_m);
    return check_done();
}

/* --qwen2audio DIR: the encoder + projector within 1e-4 (tests/ref/media/qwen2audio_hf.py) */
static int qwen2audio_mode(const char *dir)
{
    static const qwen2audio_cfg WANT = {.layers = 2, .d_model = 32, .heads = 4, .ffn = 48, .n_mels = 128, .max_pos = 1500,
                                        .text_hidden = 40};
    dlm_err e;
    char p[4096];
    /* the shapes from the checkpoint's own config.json */
    qwen2audio_cfg QC;
    snprintf(p, sizeof p, "%s/config.json", dir);
    CHECK_MSG(qwen2audio_cfg_load(p, &QC, &e) == 0, "%s", e.msg);
    CHECK(!memcmp(&QC, &WANT, sizeof QC));
    whisper_fe fe;
    snprintf(p, sizeof p, "%s/preprocessor_config.json", dir);
    CHECK_MSG(whisper_fe_load(p, &fe, &e) == 0, "%s", e.msg);
    CHECK(fe.n_mels == 128 && fe.n_fft == 400 && fe.hop == 160 && fe.n_samples == 480000);
    snprintf(p, sizeof p, "%s/q2a.safetensors", dir);
    st_file *f = NULL;
    CHECK(st_open(p, &f, &e) == 0);
    if (!f) return check_done();
    qwen2audio_enc q;
    int rc = qwen2audio_load(f, "model.audio_tower.", "model.multi_modal_projector.linear.", &QC, &q, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    float *mel = read_raw(dir, "mel.f32", 2 * 128 * 3000 * sizeof(float));
    char *lens = read_raw(dir, "nmel.txt", 0);
    CHECK(mel && lens);
    int nm[2] = {0}, no[2] = {0};
    if (lens) CHECK(sscanf(lens, "%d %d\n%d %d", &nm[0], &no[0], &nm[1], &no[1]) == 4);
    CHECK_INT(no[1], 750);
    /* dlm's own features of the speech clip vs the processor's (this venv has
     * torch, so transformers took its torch STFT path: float32) */
    snprintf(p, sizeof p, "%s/speech16k.wav", dir);
    audio_wave w;
    float *own = malloc(128 * 3000 * sizeof *own);
    if (mel && own && !audio_load(p, 16000, 30.0, 0, &w, &e)) {
        CHECK(whisper_log_mel(&fe, w.x, w.n, own, &e) == 0);
        double d = max_abs(own, mel, 128 * 3000);
        CHECK_MSG(d <= 1e-4, "speech features vs transformers' torch path: max |diff| %.3g", d);
        printf("test_audio --qwen2audio: dlm's log-mel vs the processor's (torch path): max|diff| %.3g\n", d);
        audio_wave_free(&w);
    } else CHECK_MSG(0, "%s", e.msg);
    free(own);
    whisper_fe_free(&fe);
    for (int i = 0; !rc && mel && i < 2; i++) {
        CHECK_INT(qwen2audio_out_len(nm[i]), no[i]);
        char nmf[32];
        snprintf(nmf, sizeof nmf, "out%d.f32", i);
        float *want = read_raw(dir, nmf, (size_t)no[i] * 40 * sizeof(float));
        float *got = malloc((size_t)no[i] * 40 * sizeof *got);
        CHECK(want && got && qwen2audio_forward(&q, mel + (size_t)i * 128 * 3000, nm[i], got, &e) == 0);
        if (want && got) {
            CHECK(check_tensor("qwen2-audio features", got, want, (size_t)no[i] * 40, 1e-4));
            double mx = max_abs(got, want, (size_t)no[i] * 40);
            CHECK_MSG(mx <= 1e-4, "clip %d: max |diff| %.3g", i, mx);
            printf("test_audio --qwen2audio: clip %d, %d mel frames, %d audio tokens, max|diff| %.3g\n", i, nm[i], no[i], mx);
        }
        free(want);
        free(got);
    }
    if (!rc) qwen2audio_free(&q);
    free(mel);
    free(lens);
    st_close(f);
    return check_done();
}

int main(int argc, char **argv)
{
    kern_init(1);
    if (argc == 3 && !strcmp(argv[1], "--ref")) return ref_mode(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "--qwen2audio")) return qwen2audio_mode(argv[2]);
    test_wav_and_cache();
    test_mel_facts();
    test_loaders();
    return check_done();
}
