/* narrow — kern_sgemm's shapes with at most 16 output columns (a LoRA
 * adapter's rank r): dot products read straight from the operands
 * (isa_narrow.inc) instead of packing the large operand for 12×32 tiles
 * that r fills a third of. Threaded over the rows; each output element is
 * one thread's fixed sequence of operations, so results do not depend on
 * the thread count.
 *
 *   ta=0 tb=1 N<=16:  C = A·Bᵀ     dots of A rows with B rows      (x·Aᵀ)
 *   ta=0 tb=0 N<=16:  C = A·B      the same after transposing B     (dy·B)
 * Other shapes go to the GEMM engine. The transposed reductions of an
 * adapter's gradients (dyᵀ·U, dUᵀ·x: K = tokens) stay there too: outer
 * products straight from dy / x walk those row-major matrices a column
 * block at a time and measured twice as slow as packed panels. */
#include "kern/kern_impl.h"

#define NARROW_MAX 16

typedef struct narrow_job {
    const kern_isa *isa;
    float *C;
    int64_t ldc;
    const float *X;             /* the long side's rows */
    int64_t ldx;
    const float *W[8];          /* the short side's rows (NULL: zero) */
    int nw;
    int64_t K;
    float alpha, beta;
} narrow_job;

static void dot_rows(void *ctx, int64_t b, int64_t e)
{
    const narrow_job *j = ctx;
    j->isa->narrow_dot(j->C, j->ldc, j->X, j->ldx, j->W, j->nw, b, e, j->K, j->alpha, j->beta);
}

static void run(narrow_job *j, kern_range_fn fn, int64_t n, double flops)
{
    if (flops < 2e5 || n < 2) fn(j, 0, n);
    else kern_parallel_for(n, fn, j);
}

int narrow_sgemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    kern_ensure_init();
    const kern_isa *isa = kern_isa_get();
    const double flops = 2.0 * (double)M * (double)N * (double)K;
    narrow_job j = {.isa = isa, .alpha = alpha, .beta = beta, .K = K};
    if (!ta && N <= NARROW_MAX) {
        const float *Bt = B;
        int64_t ldbt = ldb;
        if (!tb) {      /* B [K, N]: its columns as rows, in the shared buffer */
            float *t = kern_shared((size_t)N * (size_t)K * sizeof(float));
            if (!t) return 0;
            for (int64_t k = 0; k < K; k++)
                for (int64_t n = 0; n < N; n++) t[n * K + k] = B[k * ldb + n];
            Bt = t;
            ldbt = K;
        }
        j.X = A;
        j.ldx = lda;
        j.ldc = ldc;
        for (int64_t n0 = 0; n0 < N; n0 += 8) {
            j.nw = N - n0 < 8 ? (int)(N - n0) : 8;
            for (int i = 0; i < 8; i++) j.W[i] = i < j.nw ? Bt + (n0 + i) * ldbt : NULL;
            j.C = C + n0;
            run(&j, dot_rows, M, flops);
        }
        return 1;
    }
    return 0;
}
