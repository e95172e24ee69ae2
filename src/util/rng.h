/* rng — counter-based random numbers (Philox-4x32-10).
 *
 * Every random number dlm draws is a pure function of (seed, purpose, step,
 * index): no generator state to save, so a resumed run draws exactly what an
 * uninterrupted one would, whatever the thread count or the order in which
 * elements are visited. */
#ifndef DLM_RNG_H
#define DLM_RNG_H

#include <stdint.h>

/* Purposes: one key space per use, so two uses never share a stream. */
enum {
    RNG_LORA_INIT = 1,    /* step = tensor index, index = element */
    RNG_DROPOUT = 2,      /* step = optimizer step*K + micro, index = element */
    RNG_SHUFFLE = 3,      /* data order per epoch */
    RNG_SAMPLE = 4,       /* token sampling at inference */
    RNG_REPLAY = 5,       /* replay sampling */
    RNG_WEIGHT_INIT = 6,  /* full-model init (embedded base) */
    RNG_GATE = 7,         /* adapter gate: step 0 init (index = element), step 1+e batch order of pass e */
    RNG_CONVERSATION = 8, /* multi-turn rows: step = Q/A pair, index = row*8 + earlier turn */
};

/* Four 32-bit words for (seed, purpose, step, index). */
void rng_philox(uint64_t seed, uint32_t purpose, uint64_t step, uint64_t index, uint32_t out[4]);
/* Uniform in [0, 1) with 24 bits (float) / 53 bits (double). */
float rng_uniform(uint64_t seed, uint32_t purpose, uint64_t step, uint64_t index);
double rng_uniform_d(uint64_t seed, uint32_t purpose, uint64_t step, uint64_t index);
/* Standard normal (Box–Muller on one Philox block). */
float rng_normal(uint64_t seed, uint32_t purpose, uint64_t step, uint64_t index);
uint64_t rng_u64(uint64_t seed, uint32_t purpose, uint64_t step, uint64_t index);

#endif
