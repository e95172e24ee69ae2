/* mel — Whisper log-mel features (media/mel.h). */
#include "media/mel.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/json.h"

/* transformers' audio_utils hertz_to_mel / mel_to_hertz, mel_scale "slaney" */
static double hz_to_mel(double f)
{
    return f >= 1000.0 ? 15.0 + log(f / 1000.0) * (27.0 / log(6.4)) : 3.0 * f / 200.0;
}

static double mel_to_hz(double m)
{
    return m >= 15.0 ? 1000.0 * exp(log(6.4) / 27.0 * (m - 15.0)) : 200.0 * m / 3.0;
}

void whisper_fe_free(whisper_fe *fe)
{
    free(fe->window);
    free(fe->filters);
    free(fe->lo);
    free(fe->hi);
    free(fe->tw);
    memset(fe, 0, sizeof *fe);
}

const double *whisper_fe_filters(const whisper_fe *fe) { return fe->filters; }

int whisper_fe_init(whisper_fe *fe, int n_mels, int n_fft, int hop, int rate, int chunk_seconds, dlm_err *e)
{
    memset(fe, 0, sizeof *fe);
    if (n_mels < 1 || n_mels > 512 || n_fft < 2 || n_fft > 65536 || hop < 1 || rate < 1 || chunk_seconds < 1)
        return err_set(e, "ValueError", "whisper features: unusable config (n_mels %d, n_fft %d, hop %d, rate %d)", n_mels,
                       n_fft, hop, rate);
    int m = n_fft, k = 0;
    for (int p = 2; m > 1 && k < 31; p++)
        while (m % p == 0 && k < 31) { fe->factors[k++] = p; m /= p; }
    if (m != 1 || fe->factors[k - 1] > 7)
        return err_set(e, "ValueError", "whisper features: n_fft %d has a prime factor over 7", n_fft);
    fe->n_mels = n_mels;
    fe->n_fft = n_fft;
    fe->hop = hop;
    fe->rate = rate;
    fe->n_samples = chunk_seconds * rate;
    fe->frames = fe->n_samples / hop;
    int nb = n_fft / 2 + 1;
    fe->window = malloc((size_t)n_fft * sizeof *fe->window);
    fe->tw = malloc(2 * (size_t)n_fft * sizeof *fe->tw);
    fe->filters = calloc((size_t)n_mels * nb, sizeof *fe->filters);
    fe->lo = malloc((size_t)n_mels * sizeof *fe->lo);
    fe->hi = malloc((size_t)n_mels * sizeof *fe->hi);
    double *ff = malloc((size_t)(n_mels + 2) * sizeof *ff);
    if (!fe->window || !fe->tw || !fe->filters || !fe->lo || !fe->hi || !ff) {
        free(ff);
        whisper_fe_free(fe);
        return err_set(e, "MemoryError", "out of memory");
    }
    /* window_function(n_fft, "hann"): np.hanning(n_fft + 1)[:-1] */
    for (int i = 0; i < n_fft; i++) fe->window[i] = 0.5 - 0.5 * cos(2.0 * M_PI * i / n_fft);
    for (int i = 0; i < n_fft; i++) {
        fe->tw[2 * i] = cos(2.0 * M_PI * i / n_fft);
        fe->tw[2 * i + 1] = -sin(2.0 * M_PI * i / n_fft);
    }
    /* mel_filter_bank(n_fft/2+1, n_mels, 0, 8000, rate, norm="slaney",
     * mel_scale="slaney"): np.linspace in mel, back to Hz, triangles over
     * linspace(0, rate // 2, nb) */
    double mmax = hz_to_mel(8000.0), step = mmax / (n_mels + 1);
    for (int i = 0; i < n_mels + 2; i++) ff[i] = mel_to_hz(i == n_mels + 1 ? mmax : i * step);
    double fstep = (double)(rate / 2) / (nb - 1);
    for (int i = 0; i < n_mels; i++) {
        double enorm = 2.0 / (ff[i + 2] - ff[i]);
        fe->lo[i] = nb;
        fe->hi[i] = 0;
        for (int b = 0; b < nb; b++) {
            double f = b == nb - 1 ? (double)(rate / 2) : b * fstep;
            double down = -(ff[i] - f) / (ff[i + 1] - ff[i]);
            double up = (ff[i + 2] - f) / (ff[i + 2] - ff[i + 1]);
            double v = fmax(0.0, fmin(down, up));
            fe->filters[(size_t)i * nb + b] = v * enorm;
            if (v > 0) {
                if (b < fe->lo[i]) fe->lo[i] = b;
                fe->hi[i] = b + 1;
            }
        }
        if (fe->hi[i] < fe->lo[i]) fe->lo[i] = fe->hi[i] = 0;
    }
    free(ff);
    return 0;
}

int whisper_fe_load(const char *preprocessor_json, whisper_fe *fe, dlm_err *e)
{
    memset(fe, 0, sizeof *fe);
    json_t *j = json_load_path(preprocessor_json, 1u << 22, e);
    if (!j) return -1;
    const char *cls = jget_str(j, "feature_extractor_type");
    long long v[5];
    static const char *const keys[5] = {"feature_size", "n_fft", "hop_length", "sampling_rate", "chunk_length"};
    int rc = 0, norm = 0;
    double pad = 0, dither = 0;
    if (!cls || strcmp(cls, "WhisperFeatureExtractor"))
        rc = err_set(e, "ConfigError", "%s: feature_extractor_type is %s%s%s, not WhisperFeatureExtractor", preprocessor_json,
                     cls ? "'" : "", cls ? cls : "missing", cls ? "'" : "");
    for (int i = 0; i < 5 && !rc; i++)
        if (jget_int(j, keys[i], &v[i]) || v[i] < 1 || v[i] > 1 << 24)
            rc = err_set(e, "ConfigError", "%s: %s is missing or not a positive integer", preprocessor_json, keys[i]);
    if (!rc && ((json_object_get(j, "padding_value") && (jget_num(j, "padding_value", &pad) || pad != 0)) ||
                (json_object_get(j, "do_normalize") && (jget_bool(j, "do_normalize", &norm) || norm)) ||
                (json_object_get(j, "dither") && (jget_num(j, "dither", &dither) || dither != 0))))
        rc = err_set(e, "ConfigError", "%s: padding_value %g / do_normalize %d / dither %g: only 0 / false / 0 are built",
                     preprocessor_json, pad, norm, dither);
    json_decref(j);
    if (rc) return -1;
    return whisper_fe_init(fe, (int)v[0], (int)v[1], (int)v[2], (int)v[3], (int)v[4], e);
}

/* Mixed-radix decimation-in-time DFT of in[0], in[s], ... (n points, complex
 * (re, im) pairs) into out[0..n): the sub-transforms of every p-th point,
 * then p-point butterflies with twiddles from the n_fft table (N = n_fft,
 * n divides N). */
static void fft_rec(const double *in, size_t s, double *out, int n, const int *fac, const double *tw, int N)
{
    if (n == 1) { out[0] = in[0]; out[1] = in[1]; return; }
    int p = fac[0], m = n / p;
    for (int q = 0; q < p; q++) fft_rec(in + 2 * (size_t)q * s, s * (size_t)p, out + 2 * (size_t)q * m, m, fac + 1, tw, N);
    int ts = N / n, tp = N / p;
    double t[2 * 7];
    for (int k = 0; k < m; k++) {
        for (int q = 0; q < p; q++) {
            const double *y = out + 2 * ((size_t)q * m + k), *w = tw + 2 * (size_t)((q * k * ts) % N);
            t[2 * q] = y[0] * w[0] - y[1] * w[1];
            t[2 * q + 1] = y[0] * w[1] + y[1] * w[0];
        }
        for (int r = 0; r < p; r++) {
            double re = 0, im = 0;
            for (int q = 0; q < p; q++) {
                const double *w = tw + 2 * (size_t)(((q * r) % p) * tp);
                re += t[2 * q] * w[0] - t[2 * q + 1] * w[1];
                im += t[2 * q] * w[1] + t[2 * q + 1] * w[0];
            }
            out[2 * ((size_t)r * m + k)] = re;
            out[2 * ((size_t)r * m + k) + 1] = im;
        }
    }
}

/* The spectrum X[0..N/2] of N real values (N even) from one complex FFT of
 * N/2 points, z[j] = x[2j] + i x[2j+1], Z = FFT(z):
 *   X[k] = (Z[k] + conj Z[M-k]) / 2 - i W^k (Z[k] - conj Z[M-k]) / 2,
 * W = exp(-2 pi i / N), M = N/2, Z[M] = Z[0]. z and Z: 2M doubles each;
 * spec: 2(M+1). */
static void rfft(const double *z, double *Z, double *spec, int N, const int *fac, const double *tw)
{
    int M = N / 2;
    fft_rec(z, 1, Z, M, fac, tw, N);
    for (int k = 0; k <= M; k++) {
        int a = k % M, b = (M - k) % M;
        double zr = Z[2 * a], zi = Z[2 * a + 1], cr = Z[2 * b], ci = -Z[2 * b + 1];
        double er = 0.5 * (zr + cr), ei = 0.5 * (zi + ci);   /* the even samples' spectrum */
        double dr = 0.5 * (zr - cr), di = 0.5 * (zi - ci);   /* i times the odd samples' */
        double wr = tw[2 * k], wi = tw[2 * k + 1];
        /* odd = -i d: (di, -dr); X = even + W^k odd */
        double orr = di, oi = -dr;
        spec[2 * k] = er + wr * orr - wi * oi;
        spec[2 * k + 1] = ei + wr * oi + wi * orr;
    }
}

int whisper_log_mel(const whisper_fe *fe, const float *x, size_t n, float *out, dlm_err *e)
{
    int N = fe->n_fft, half = N / 2, nb = N / 2 + 1, F = fe->frames, M = fe->n_mels;
    size_t L = (size_t)fe->n_samples;
    if (n > L) n = L;
    /* the padded signal, reflect-padded by half on each side */
    size_t P = L + 2 * (size_t)half;
    double *w = malloc(P * sizeof *w);
    double *buf = malloc(2 * (size_t)N * sizeof *buf), *spec = malloc((4 * (size_t)N + 2) * sizeof *spec);
    double *pw = malloc((size_t)nb * sizeof *pw);
    if (!w || !buf || !spec || !pw) {
        free(w); free(buf); free(spec); free(pw);
        return err_set(e, "MemoryError", "out of memory");
    }
    for (size_t i = 0; i < L; i++) w[half + i] = i < n ? (double)x[i] : 0.0;
    for (int i = 1; i <= half; i++) {   /* np.pad mode="reflect": the edge is not repeated */
        w[half - i] = w[half + i];
        w[half + L - 1 + i] = w[half + L - 1 - i];
    }
    float vmax = -FLT_MAX;
    for (int f = 0; f < F; f++) {
        const double *src = w + (size_t)f * fe->hop;
        /* the 30 s padding's frames are zeros, whose spectrum is exactly
         * zero: most of a short clip's frames cost nothing (unless the
         * clip reaches into the last half frame, which the right reflect
         * padding mirrors) */
        size_t first = (size_t)f * fe->hop;
        int zero = first >= (size_t)half + n && n + (size_t)half + 1 <= L;
        if (zero) {
            memset(pw, 0, (size_t)nb * sizeof *pw);
        } else {
            if (N % 2 == 0 && fe->factors[0] == 2) {   /* real input: one FFT of N/2 points */
                for (int j = 0; j < N; j++) buf[j] = src[j] * fe->window[j];
                rfft(buf, spec + 2 * (size_t)N, spec, N, fe->factors + 1, fe->tw);
            } else {
                for (int j = 0; j < N; j++) { buf[2 * j] = src[j] * fe->window[j]; buf[2 * j + 1] = 0; }
                fft_rec(buf, 1, spec, N, fe->factors, fe->tw, N);
            }
            for (int b = 0; b < nb; b++) {   /* the spectrogram is complex64; |.|^2 in double */
                double re = (float)spec[2 * b], im = (float)spec[2 * b + 1];
                pw[b] = re * re + im * im;
            }
        }
        for (int m = 0; m < M; m++) {
            const double *fl = fe->filters + (size_t)m * nb;
            double s = 0;
            for (int b = fe->lo[m]; b < fe->hi[m]; b++) s += fl[b] * pw[b];
            float v = (float)log10(fmax(1e-10, s));
            out[(size_t)m * F + f] = v;
            if (v > vmax) vmax = v;
        }
    }
    float floor_ = vmax - 8.0f;
    for (size_t i = 0; i < (size_t)M * F; i++) {
        float v = out[i] > floor_ ? out[i] : floor_;
        out[i] = (v + 4.0f) / 4.0f;
    }
    free(w); free(buf); free(spec); free(pw);
    return 0;
}
