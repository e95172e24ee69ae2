/* bench_audio FILE RUNS — best-of-RUNS milliseconds, one thread, of dlm's
 * audio steps on FILE: decode (+ mono, + soxr HQ to 16 kHz when needed,
 * the 30 s cut: audio_load) and the Whisper log-mel features (128 bins). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "media/audio.h"
#include "media/mel.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    if (argc != 3) { fprintf(stderr, "usage: bench_audio FILE RUNS\n"); return 2; }
    int runs = atoi(argv[2]);
    dlm_err e;
    whisper_fe fe;
    if (whisper_fe_init(&fe, 128, 400, 160, 16000, 30, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    float *mel = malloc(128 * 3000 * sizeof *mel);
    double bd = 1e9, bm = 1e9;
    size_t n = 0;
    for (int r = 0; r < runs; r++) {
        audio_wave w;
        double t0 = now();
        if (audio_load(argv[1], 16000, 30.0, 1, &w, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
        double t1 = now();
        whisper_log_mel(&fe, w.x, w.n, mel, &e);
        double t2 = now();
        n = w.n;
        audio_wave_free(&w);
        if (t1 - t0 < bd) bd = t1 - t0;
        if (t2 - t1 < bm) bm = t2 - t1;
    }
    printf("%zu samples: decode+resample %.2f ms, log-mel-128 %.2f ms\n", n, bd, bm);
    free(mel);
    whisper_fe_free(&fe);
    return 0;
}
