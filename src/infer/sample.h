/* sample — choosing the next token from logits.
 *
 * Order of operations (as llama.cpp's default chain and HF's processors):
 * repetition penalty → temperature → top-k → top-p → min-p → draw. temp 0
 * means greedy (argmax, first index wins ties). Draws come from the
 * counter-based RNG keyed by (seed, RNG_SAMPLE, position), so a seed gives
 * the same text on any machine and thread count. */
#ifndef DLM_SAMPLE_H
#define DLM_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct sample_params {
    float temp;             /* 0 = greedy */
    int top_k;              /* 0 = off */
    float top_p;            /* 1 = off */
    float min_p;            /* 0 = off */
    float repeat_penalty;   /* 1 = off (HF: logit>0 ? /p : *p) */
    int repeat_last_n;      /* window for the penalty (0 = whole history) */
    uint64_t seed;
} sample_params;

void sample_defaults(sample_params *p);

/* The one range of each sampling knob, shared by every front end (prompt,
 * repl /params, the API, synth and preference mine; README.md "Sampling"):
 *   temperature        [0, 5]     0 = greedy (OpenAI stops at 2;
 *                                  hotter is allowed, never needed)
 *   top_p              (0, 1]     1 = off
 *   top_k              >= 0       0 = off, an integer
 *   min_p              [0, 1]     0 = off
 *   repetition_penalty (0, 100]   1 = off
 * Check v for the knob `name` (one of those): 0 when in range, else -1
 * with why[] = "temperature must be in [0, 5] (0 = greedy), got 7", the
 * message every front end prints. An unknown name is -1 too. */
#define SAMPLE_TEMP_MAX 5.0
int sample_check(const char *name, double v, char *why, size_t cap);

/* Pick a token from logits[V] (modified in place). history[n_hist] are the
 * tokens so far (for the penalty). scratch must hold 2·V ints/floats:
 * sample_scratch_bytes(V). step keys the RNG draw. */
size_t sample_scratch_bytes(int V);
int32_t sample_next(const sample_params *p, float *logits, int V, const int32_t *history, int n_hist,
                    uint64_t step, void *scratch);

#endif
