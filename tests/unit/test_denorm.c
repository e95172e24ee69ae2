/* denorm: kern_fp_flush_enter/leave (kern/kern.h). Under the flush mode a
 * product below 2^-126 is 0 and a denormal input counts as 0, on the
 * calling thread AND on every pool worker that runs a chunk of a job it
 * started; after leave both the caller and the workers compute IEEE
 * denormals again, and the caller's MXCSR is what it was. Expected values
 * are exact powers of two (ldexpf), not dlm's output. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xmmintrin.h>

#include "check.h"
#include "kern/kern.h"
#include "kern/kern_impl.h"

enum { N = 96 };

typedef struct {
    volatile float a, b, den;
    float prod[N], pass[N];
    int tid[N];
} job;

static void chunk(void *ctx, int64_t b, int64_t e)
{
    job *j = ctx;
    for (int64_t i = b; i < e; i++) {
        j->prod[i] = j->a * j->b;      /* 2^-70 · 2^-70 = 2^-140: a denormal result */
        j->pass[i] = j->den * 2.0f;    /* a denormal input: 2^-141 · 2 */
        j->tid[i] = kern_tid();
        /* long enough for the workers to wake and take chunks */
        volatile double s = 0;
        for (int k = 0; k < 20000; k++) s += k;
        (void)s;
    }
}

static int run(job *j, float want_prod, float want_pass)
{
    memset(j->prod, 0xff, sizeof j->prod);
    memset(j->tid, 0xff, sizeof j->tid);
    kern_parallel_dyn(N, chunk, j);
    int ok = 1, others = 0;
    for (int i = 0; i < N; i++) {
        if (memcmp(&j->prod[i], &want_prod, 4) || memcmp(&j->pass[i], &want_pass, 4)) {
            ok = 0;
            fprintf(stderr, "index %d (thread %d): %a %a, expected %a %a\n", i, j->tid[i], (double)j->prod[i],
                    (double)j->pass[i], (double)want_prod, (double)want_pass);
        }
        others += j->tid[i] != 0;
    }
    fprintf(stderr, "test_denorm: %d of %d chunks ran on workers\n", others, N);
    return ok;
}

int main(void)
{
    job *j = calloc(1, sizeof *j);
    j->a = j->b = ldexpf(1.f, -70);
    j->den = ldexpf(1.f, -141);
    const float den140 = ldexpf(1.f, -140);
    CHECK(den140 > 0 && den140 < 1.17549435e-38f);   /* really a denormal */
    CHECK_INT(kern_init(4), 0);

    unsigned before = _mm_getcsr() & ~0x3fu;
    CHECK(run(j, den140, den140));                     /* IEEE: the denormals themselves */

    unsigned saved = kern_fp_flush_enter();
    CHECK_INT(saved, before);
    CHECK_INT(_mm_getcsr() & 0x8040u, 0x8040u);        /* FTZ bit 15, DAZ bit 6 */
    CHECK(run(j, 0.f, 0.f));                           /* flushed on every thread */
    /* nested enter is harmless and leaves the outer mode */
    unsigned inner = kern_fp_flush_enter();
    CHECK_INT(inner & 0x8040u, 0x8040u);
    kern_fp_flush_leave(inner);
    CHECK_INT(_mm_getcsr() & 0x8040u, 0x8040u);
    kern_fp_flush_leave(saved);

    CHECK_INT(_mm_getcsr() & ~0x3fu, before);          /* nothing leaks to the caller */
    CHECK(run(j, den140, den140));                     /* and the workers follow it back */

    /* a pool of one thread runs the job inline: same answers */
    CHECK_INT(kern_init(1), 0);
    saved = kern_fp_flush_enter();
    CHECK(run(j, 0.f, 0.f));
    kern_fp_flush_leave(saved);
    CHECK(run(j, den140, den140));
    kern_shutdown();
    free(j);
    return check_done();
}
