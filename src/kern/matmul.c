/* matmul — the public matmul entry points over the GEMM engine (gemm.c),
 * and the small-N path (a handful of rows, i.e. token-by-token inference)
 * that dequantizes each weight row once and takes dot products with it. */
#include "kern/kern_impl.h"

/* Below this many rows of x, kern_matmul takes dot products instead of the
 * GEMM (which would compute a whole 12-row micro-tile per row). The switch
 * depends on N only, never on the thread count. */
#define GEMV_MAX_N 4
/* kern_matvec_n's most rows (dots[] on the stack of gemv_range). */
#define GEMV_BATCH_MAX KERN_MATVEC_MAX_N

/* training.precision: bf16 (kern.h); set by the trainer around its steps */
static int g_bf16;
void kern_set_bf16(int on) { g_bf16 = on != 0; }
int kern_bf16_active(void) { return g_bf16; }

typedef struct gemv_job {
    float *y;
    const float *x;
    const wmat *W;
    const float *bias;
    int64_t N;
    int accumulate;
    const kern_isa *isa;
    const kern_q8x *xq;     /* kern_matvec's int8 x, one per row of x (N of them), or NULL */
} gemv_job;

/* y[n, o] for o in [o0, o1): one weight row at a time. */
static void gemv_range(void *ctx, int64_t o0, int64_t o1)
{
    const gemv_job *j = ctx;
    const int64_t O = j->W->rows, I = j->W->cols;
    float *row = kern_scratch();
    float dots[GEMV_BATCH_MAX];
    for (int64_t o = o0; o < o1; o++) {
        const uint8_t *src = (const uint8_t *)j->W->data + (size_t)o * j->W->row_bytes;
        const float *w = (const float *)src;
        if (j->xq) {                        /* kern_matvec: integer dots, row by row of x */
            for (int64_t n = 0; n < j->N; n++)
                j->y[n * O + o] = (j->bias ? j->bias[o] : 0.f) + qx_dot(&j->xq[n], src);
            continue;
        }
        /* decoding (one row of x, or a few sequences' rows): dequantize in
         * registers, each weight converted once for up to three rows; the
         * same bits as dequant + dot_rows */
        const dtype t = j->W->type;
        int fused = t != DT_F32 &&
                    (j->N == 1 ? j->isa->dot_fused && j->isa->dot_fused(t, src, j->x, I, &dots[0])
                               : j->isa->dot_fused_n && j->isa->dot_fused_n(t, src, j->x, I, (int)j->N, I, dots));
        if (!fused) {
            if (t != DT_F32) {
                kern_dequant_row(t, src, row, I);
                w = row;
            }
            j->isa->dot_rows(dots, 1, j->x, I, (int)j->N, w, I);
        }
        for (int64_t n = 0; n < j->N; n++) {
            float *yo = j->y + n * O + o;
            float base = j->accumulate ? *yo : 0.f;
            if (j->bias) base += j->bias[o];
            *yo = base + dots[n];
        }
    }
}

/* A weight the kernels can read: a known type, whole blocks per row, rows
 * long enough. Anything else leaves the output untouched (callers validate
 * shapes when they load a model; this only keeps a bug from reading past a
 * buffer). */
static int wmat_ok(const wmat *W)
{
    size_t be = dtype_block_elems(W->type);
    if (!be || W->rows < 0 || W->cols < 0 || (uint64_t)W->cols % be) return 0;
    return W->row_bytes >= dtype_row_bytes(W->type, W->cols) && (W->data || !W->rows || !W->cols);
}

void kern_matmul(float *y, const float *x, const wmat *W, const float *bias, int64_t N, int accumulate)
{
    const int64_t O = W->rows, I = W->cols;
    if (N <= 0 || O <= 0 || !wmat_ok(W)) return;
    kern_ensure_init();
    if (N < GEMV_MAX_N && !g_bf16 && (size_t)I * 4 <= KERN_SCRATCH_BYTES) {
        gemv_job j = {y, x, W, bias, N, accumulate, kern_isa_get(), NULL};
        if (O * I < (1 << 15)) gemv_range(&j, 0, O);
        else kern_parallel_for(O, gemv_range, &j);
        return;
    }
    gemm_prob p = {
        .M = N, .N = O, .K = I, .A = x, .lda = I, .ta = 0,
        .bkind = GB_ROWS_K, .bt = W->type, .B = W->data, .ldb_bytes = W->row_bytes,
        .alpha = 1.f, .beta = accumulate ? 1.f : 0.f, .bias = bias, .C = y, .ldc = O, .bf16 = g_bf16,
    };
    gemm_run(&p);
}

static int g_int8_decode = 1;
void kern_set_int8_decode(int on) { g_int8_decode = on != 0; }

void kern_matvec(float *y, const float *x, const wmat *W, const float *bias)
{
    const int64_t O = W->rows, I = W->cols;
    if (g_int8_decode && O > 0 && wmat_ok(W) && qx_supported(W->type) && qx_bytes(I) <= KERN_SCRATCH_BYTES) {
        kern_ensure_init();
        /* the calling thread's scratch holds the rounded x: the integer
         * path of gemv_range uses no scratch of its own */
        kern_q8x q;
        if (qx_quantize(&q, kern_scratch(), W->type, x, I)) {
            gemv_job j = {y, x, W, bias, 1, 0, kern_isa_get(), &q};
            if (O * I < (1 << 15)) gemv_range(&j, 0, O);
            else kern_parallel_for(O, gemv_range, &j);
            return;
        }
    }
    kern_matmul(y, x, W, bias, 1, 0);
}

/* A prompt's rows (inference): the int8 prefill (qmm.c) where W and the
 * CPU have it and int8 decode is on, else kern_matmul. */
void kern_matmul_infer(float *y, const float *x, const wmat *W, const float *bias, int64_t N, int accumulate)
{
    if (N <= 0 || W->rows <= 0 || !wmat_ok(W)) return;
    if (g_int8_decode && qmm_matmul(y, x, W, bias, N, accumulate)) return;
    kern_matmul(y, x, W, bias, N, accumulate);
}

/* N rows of x that are N sequences' decode steps: the weight row is read
 * (and dequantized) once for all of them, and each row of y gets exactly
 * the bits kern_matvec gives that row alone — dot_rows computes each row
 * of x with its own accumulators in a fixed order, and the fused
 * dequant-dot is bit-identical to dequant + dot_rows (kern_impl.h). The
 * kv pool's batched decode thus equals one session's decode per sequence
 * while reading the weights once per step instead of once per sequence. */
void kern_matvec_n(float *y, const float *x, const wmat *W, const float *bias, int64_t N)
{
    const int64_t O = W->rows, I = W->cols;
    if (N == 1) {
        kern_matvec(y, x, W, bias);
        return;
    }
    if (N <= 0 || O <= 0 || !wmat_ok(W)) return;
    kern_ensure_init();
    if (N > GEMV_BATCH_MAX || (size_t)I * 4 > KERN_SCRATCH_BYTES) {
        kern_matmul(y, x, W, bias, N, 0);
        return;
    }
    const kern_isa *isa = kern_isa_get();
    if (g_int8_decode && qx_supported(W->type) && (size_t)N * qx_bytes(I) <= KERN_SCRATCH_BYTES) {
        /* as kern_matvec: every row rounded to int8 in the caller's
         * scratch (qx_bytes is a multiple of 64: each copy stays aligned);
         * a row that cannot be (NaN, Inf) sends all of them the float way */
        kern_q8x q[GEMV_BATCH_MAX];
        char *buf = kern_scratch();
        int ok = 1;
        for (int64_t n = 0; n < N && ok; n++)
            ok = qx_quantize(&q[n], buf + (size_t)n * qx_bytes(I), W->type, x + n * I, I);
        if (ok) {
            gemv_job j = {y, x, W, bias, N, 0, isa, q};
            if (O * I < (1 << 15)) gemv_range(&j, 0, O);
            else kern_parallel_for(O, gemv_range, &j);
            return;
        }
    }
    gemv_job j = {y, x, W, bias, N, 0, isa, NULL};
    if (O * I < (1 << 15)) gemv_range(&j, 0, O);
    else kern_parallel_for(O, gemv_range, &j);
}

void kern_matmul_dx_to(float *dx, const float *dy, const wmat *W, int64_t N, int accumulate)
{
    const int64_t O = W->rows, I = W->cols;
    if (N <= 0 || I <= 0 || !wmat_ok(W)) return;
    gemm_prob p = {
        .M = N, .N = I, .K = O, .A = dy, .lda = O, .ta = 0,
        .bkind = GB_ROWS_N, .bt = W->type, .B = W->data, .ldb_bytes = W->row_bytes,
        .alpha = 1.f, .beta = accumulate ? 1.f : 0.f, .bias = NULL, .C = dx, .ldc = I, .bf16 = g_bf16,
    };
    gemm_run(&p);
}

void kern_matmul_dx(float *dx, const float *dy, const wmat *W, int64_t N) { kern_matmul_dx_to(dx, dy, W, N, 1); }

void kern_sgemm(int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                const float *A, int64_t lda, const float *B, int64_t ldb,
                float beta, float *C, int64_t ldc)
{
    /* the narrow dots read the operands unrounded: bf16 takes the panels */
    if (!g_bf16 && narrow_sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)) return;
    gemm_prob p = {
        .M = M, .N = N, .K = K, .A = A, .lda = lda, .ta = ta,
        .bkind = tb ? GB_ROWS_K : GB_ROWS_N, .bt = DT_F32, .B = B, .ldb_bytes = (size_t)ldb * 4,
        .alpha = alpha, .beta = beta, .bias = NULL, .C = C, .ldc = ldc, .bf16 = g_bf16,
    };
    gemm_run(&p);
}

void kern_matmul_lora(float *y, const float *x, const wmat *W, const float *bias, int64_t N, int accumulate,
                      const float *U, const float *B, int r, float s)
{
    const int64_t O = W->rows, I = W->cols;
    if (N <= 0 || O <= 0 || !wmat_ok(W)) return;
    if (N < GEMV_MAX_N || r <= 0 || r > GEMM_KC) {     /* the dot path has no K blocks to extend */
        kern_matmul(y, x, W, bias, N, accumulate);
        if (r > 0) kern_sgemm(0, 1, N, O, r, s, U, r, B, r, 1.f, y, O);
        return;
    }
    gemm_prob p = {
        .M = N, .N = O, .K = I, .A = x, .lda = I, .ta = 0,
        .bkind = GB_ROWS_K, .bt = W->type, .B = W->data, .ldb_bytes = W->row_bytes,
        .alpha = 1.f, .beta = accumulate ? 1.f : 0.f, .bias = bias, .C = y, .ldc = O,
        .A2 = U, .lda2 = r, .K2 = r, .B2 = B, .ldb2 = r, .b2kind = GB_ROWS_K, .alpha2 = s, .bf16 = g_bf16,
    };
    gemm_run(&p);
}

void kern_matmul_dx_lora(float *dx, const float *dy, const wmat *W, int64_t N, int accumulate,
                         const float *dU, const float *A, int r)
{
    const int64_t O = W->rows, I = W->cols;
    if (N <= 0 || I <= 0 || !wmat_ok(W)) return;
    if (r <= 0 || r > GEMM_KC) {
        kern_matmul_dx_to(dx, dy, W, N, accumulate);
        if (r > 0) kern_sgemm(0, 0, N, I, r, 1.f, dU, r, A, I, 1.f, dx, I);
        return;
    }
    gemm_prob p = {
        .M = N, .N = I, .K = O, .A = dy, .lda = O, .ta = 0,
        .bkind = GB_ROWS_N, .bt = W->type, .B = W->data, .ldb_bytes = W->row_bytes,
        .alpha = 1.f, .beta = accumulate ? 1.f : 0.f, .bias = NULL, .C = dx, .ldc = I,
        .A2 = dU, .lda2 = r, .K2 = r, .B2 = A, .ldb2 = I, .b2kind = GB_ROWS_N, .alpha2 = 1.f, .bf16 = g_bf16,
    };
    gemm_run(&p);
}
