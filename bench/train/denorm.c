/* bench/train/denorm.c — does attention pay for denormals on this CPU?
 *
 * Causal attention forward + backward on one SmolLM2-135M layer (seq 512,
 * 9 query heads, 3 kv heads, head size 64, 1 thread) with q, k, v as the
 * projections of RMS-normed activations by weights of std 0.02 (entries
 * ~N(0, 576·0.02²)) and of std 0.3 (scores in the hundreds: the softmax
 * underflows, issue 16), each with IEEE arithmetic and with
 * kern_fp_flush_enter (FTZ|DAZ, what dlm train runs under). Prints the
 * process CPU time per fwd+bwd (best of ROUNDS) and how many outputs of the
 * IEEE run were denormal.
 *
 *   gcc -O2 -I src -I build/gen bench/train/denorm.c build/libdlmcore.a $LIBS -lm -lpthread -o denorm
 *   ./denorm [ROUNDS]
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kern/kern.h"

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static double unif(void)
{
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return ((rs >> 11) + 0.5) / 9007199254740992.0;
}
static float gauss(void) { return (float)(sqrt(-2 * log(unif())) * cos(6.283185307179586 * unif())); }
static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static long denormals(const float *x, size_t n)
{
    long c = 0;
    for (size_t i = 0; i < n; i++) c += x[i] != 0 && fabsf(x[i]) < 1.17549435e-38f;
    return c;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 3, reps = 4;
    enum { T = 512, NH = 9, KVH = 3, HS = 64, D = 576 };
    attn_shape s = {.B = 1, .Tq = T, .Tk = T, .NH = NH, .KVH = KVH, .HS = HS, .kv_bstride = (int64_t)T * KVH * HS};
    size_t nq = (size_t)T * NH * HS, nk = (size_t)T * KVH * HS;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *o = malloc(nq * 4), *lse = malloc((size_t)NH * T * 4);
    float *dout = malloc(nq * 4), *dq = malloc(nq * 4), *dk = malloc(nk * 4), *dv = malloc(nk * 4);
    float *scr = malloc(kern_attn_bwd_scratch(&s) * sizeof(float));   /* a count of floats */
    if (!q || !k || !v || !o || !lse || !dout || !dq || !dk || !dv || !scr) return 1;
    kern_init(1);
    const double stds[2] = {0.02, 0.3};
    printf("attention fwd+bwd, seq %d, %d/%d heads, head size %d, 1 thread, process CPU time, best of %d\n", T, NH, KVH,
           HS, rounds);
    for (int si = 0; si < 2; si++) {
        float sd = (float)(sqrt((double)D) * stds[si]);
        for (size_t i = 0; i < nq; i++) q[i] = sd * gauss();
        for (size_t i = 0; i < nk; i++) k[i] = sd * gauss(), v[i] = sd * gauss();
        for (size_t i = 0; i < nq; i++) dout[i] = 1e-3f * gauss();
        double best[2] = {1e30, 1e30};
        long den = 0, dparts[4] = {0};
        for (int r = 0; r < rounds; r++)
            for (int fl = 0; fl < 2; fl++) {
                unsigned m = fl ? kern_fp_flush_enter() : 0;
                double t0 = cpu_s();
                for (int i = 0; i < reps; i++) {
                    kern_attn_fwd(o, lse, q, k, v, &s, NULL);
                    kern_attn_bwd(dq, dk, dv, dout, o, lse, q, k, v, &s, scr);
                }
                double t = (cpu_s() - t0) / reps;
                if (fl) kern_fp_flush_leave(m);
                else {
                    dparts[0] = denormals(o, nq), dparts[1] = denormals(dq, nq);
                    dparts[2] = denormals(dk, nk), dparts[3] = denormals(dv, nk);
                    den = dparts[0] + dparts[1] + dparts[2] + dparts[3];
                }
                if (t < best[fl]) best[fl] = t;
            }
        printf("weights std %.2f (q,k,v std %.1f): IEEE %.2f ms, FTZ|DAZ %.2f ms (%.2fx); %ld denormal outputs of %zu"
               " (out %ld, dq %ld, dk %ld, dv %ld)\n", stds[si], sd, 1e3 * best[0], 1e3 * best[1], best[0] / best[1], den,
               2 * nq + 2 * nk, dparts[0], dparts[1], dparts[2], dparts[3]);
    }
    return 0;
}
