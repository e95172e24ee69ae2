#include "util/rng.h"

#include <math.h>

/* Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as
 * 1, 2, 3", SC'11). Counter = (step lo, step hi, index lo, index hi),
 * key = (seed lo ^ purpose·golden, seed hi). */
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

static inline void mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo)
{
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
}

void rng_philox(uint64_t seed, uint32_t purpose, uint64_t step, uint64_t index, uint32_t out[4])
{
    uint32_t c0 = (uint32_t)step, c1 = (uint32_t)(step >> 32);
    uint32_t c2 = (uint32_t)index, c3 = (uint32_t)(index >> 32);
    uint32_t k0 = (uint32_t)seed ^ (purpose * 0x85EBCA6Bu);
    uint32_t k1 = (uint32_t)(seed >> 32) ^ (purpose * 0xC2B2AE35u);
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, lo0, hi1, lo1;
        mulhilo(PHILOX_M0, c0, &hi0, &lo0);
        mulhilo(PHILOX_M1, c2, &hi1, &lo1);
        uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

uint64_t rng_u64(uint64_t seed, uint32_t purpose, uint64_t step, uint64_t index)
{
    uint32_t o[4];
    rng_philox(seed, purpose, step, index, o);
    return ((uint64_t)o[0] << 32) | o[1];
}

float rng_uniform(uint64_t seed, uint32_t purpose, uint64_t step, uint64_t index)
{
    uint32_t o[4];
    rng_philox(seed, purpose, step, index, o);
    return (float)(o[0] >> 8) * (1.0f / 16777216.0f);
}

double rng_uniform_d(uint64_t seed, uint32_t purpose, uint64_t step, uint64_t index)
{
    return (double)(rng_u64(seed, purpose, step, index) >> 11) * (1.0 / 9007199254740992.0);
}

float rng_normal(uint64_t seed, uint32_t purpose, uint64_t step, uint64_t index)
{
    uint32_t o[4];
    rng_philox(seed, purpose, step, index, o);
    /* u1 in (0, 1] so log never sees 0. */
    double u1 = ((double)(o[0] >> 8) + 1.0) * (1.0 / 16777216.0);
    double u2 = (double)(o[1] >> 8) * (1.0 / 16777216.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
