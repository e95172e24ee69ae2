/* bench_infer — dlm's KV-cache inference on one GGUF file, timed the way
 * bench/infer/llama_bench.mjs times llama.cpp: prompt processing of NP
 * random token ids in one call, and generation of NG tokens one at a time
 * (greedy) after a 16-token prompt; best of RUNS for each. Prints
 *   RESULT {"impl":"dlm","pp_tok_s":...,"tg_tok_s":...,"peak_rss_mb":...}
 * usage: bench_infer MODEL.gguf THREADS NP NG RUNS
 * DLM_DECODE=f32 turns the int8 decode and prefill off (kern_set_int8_decode),
 * as it does for the dlm command: the float path's numbers for a before/after. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "kern/kern.h"
#include "weights/model.h"
#include "decoder/session.h"
#include "util/timeutil.h"

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

int main(int argc, char **argv)
{
    if (argc != 6) { fprintf(stderr, "usage: bench_infer MODEL.gguf THREADS NP NG RUNS\n"); return 2; }
    int threads = atoi(argv[2]), NP = atoi(argv[3]), NG = atoi(argv[4]), runs = atoi(argv[5]);
    kern_init(threads);
    const char *dec = getenv("DLM_DECODE");
    if (dec && !strcmp(dec, "f32")) kern_set_int8_decode(0);
    dlm_err e;
    memset(&e, 0, sizeof e);
    model *m;
    if (model_load(argv[1], &m, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    session *s;
    if (session_create(m, NULL, NP + NG + 64, NP, &s, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    int V = session_vocab(s);
    float *logits = malloc((size_t)V * sizeof(float));
    int32_t *tok = malloc((size_t)(NP + 16) * sizeof(int32_t));
    uint32_t x = 12345;
    for (int i = 0; i < NP + 16; i++) { x = x * 1103515245u + 12345u; tok[i] = (int32_t)(300 + x % 40000u) % V; }
    /* warm-up: page in the weights */
    if (session_eval(s, tok, 32, logits, 0, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    double pp = 0, tg = 0;
    for (int r = 0; r < runs; r++) {
        session_reset(s);
        double t0 = time_mono();
        if (session_eval(s, tok, NP, logits, 0, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
        double dt = time_mono() - t0;
        if (NP / dt > pp) pp = NP / dt;
    }
    for (int r = 0; r < runs; r++) {
        session_reset(s);
        if (session_eval(s, tok + NP, 16, logits, 0, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
        int32_t id = argmax(logits, V);
        double t0 = time_mono();
        for (int i = 0; i < NG; i++) {
            if (session_eval(s, &id, 1, logits, 0, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
            id = argmax(logits, V);
        }
        double dt = time_mono() - t0;
        if (NG / dt > tg) tg = NG / dt;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("RESULT {\"impl\":\"dlm\",\"threads\":%d,\"np\":%d,\"ng\":%d,\"pp_tok_s\":%.2f,\"tg_tok_s\":%.2f,"
           "\"peak_rss_mb\":%.1f}\n", threads, NP, NG, pp, tg, (double)ru.ru_maxrss / 1024.0);
    session_free(s);
    model_free(m);
    free(logits);
    free(tok);
    return 0;
}
