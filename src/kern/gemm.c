/* gemm — the blocked f32 GEMM engine behind kern_matmul, kern_matmul_dx and
 * kern_sgemm (GotoBLAS-style loops, ISA micro-kernels from isa_*.c).
 *
 *   C[M,N] (+)= A[M,K] · B[K,N], B taken from f32 or quantized rows
 *
 * Threading: the output is cut into at most T rectangles (T = threads), a
 * grid chosen by a small cost model that prefers cutting columns (so each
 * weight tile is dequantized once). Inside a rectangle:
 *
 *   for mb (MCMAX rows):                       A block  mc×KC   (L2)
 *     for k0 (fixed KC blocks over K):
 *       pack A rows [mb, mb+mc) × [k0, k0+kc)
 *       for nb (GEMM_NC columns):              B panel  KC×NC   (L2)
 *         pack / dequantize B [k0, k0+kc) × [nb, nb+nc)
 *         micro-kernels: for each NR strip (L1), for each MR strip
 *
 * Every C element is produced by the same instruction sequence whatever the
 * rectangle it falls in: the K blocks are fixed, each is summed from zero in
 * k order by one FMA per step and then added to C, and edge tiles run the
 * full micro-kernel on zero-padded panels. Hence bit-identical results for
 * any thread count. */
#include "kern/kern_impl.h"

#include <string.h>

#define MCMAX 512

typedef struct region_job {
    const gemm_prob *p;
    const kern_isa *isa;
    int pm, pn;
    int64_t rows_per, cols_per;     /* region size (multiples of MR / NG) */
} region_job;

static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Pack rows [m0, m0+mc) × [k0, k0+kc) of A into MR strips (dst[k][i]). */
static void pack_a(const kern_isa *isa, const gemm_prob *p, float *dst, int64_t m0, int64_t mc,
                   int64_t k0, int64_t kc)
{
    const int mr = isa->mr;
    for (int64_t i0 = 0; i0 < mc; i0 += mr, dst += kc * mr) {
        int rows = (int)imin(mr, mc - i0);
        if (!p->ta) {
            const float *rp[32];
            for (int i = 0; i < mr; i++)
                rp[i] = i < rows ? p->A + (m0 + i0 + i) * p->lda + k0 : NULL;
            isa->pack_t(dst, rp, mr, kc);
        } else {
            /* A stored [K, M]: row k of the strip is contiguous */
            for (int64_t k = 0; k < kc; k++) {
                const float *src = p->A + (k0 + k) * p->lda + m0 + i0;
                float *d = dst + k * mr;
                memcpy(d, src, (size_t)rows * 4);
                for (int i = rows; i < mr; i++) d[i] = 0.f;
            }
        }
    }
}

/* Pack B [k0, k0+kc) × [n0, n0+nc) into NR strips (dst[k][j]).
 * tmp holds NR×GEMM_KC floats (dequantized rows) or GEMM_NC floats. */
static void pack_b(const kern_isa *isa, const gemm_prob *p, float *dst, float *tmp, int64_t n0,
                   int64_t nc, int64_t k0, int64_t kc)
{
    const int nr = isa->nr;
    const uint8_t *base = p->B;
    if (p->bkind == GB_ROWS_K) {
        size_t be = dtype_block_elems(p->bt), bb = dtype_block_bytes(p->bt);
        for (int64_t j0 = 0; j0 < nc; j0 += nr, dst += kc * nr) {
            int cols = (int)imin(nr, nc - j0);
            const float *rp[32];
            for (int j = 0; j < nr; j++) {
                if (j >= cols) { rp[j] = NULL; continue; }
                const uint8_t *row = base + (size_t)(n0 + j0 + j) * p->ldb_bytes;
                if (p->bt == DT_F32) {
                    rp[j] = (const float *)row + k0;
                } else {
                    float *t = tmp + (int64_t)j * GEMM_KC;
                    kern_dequant_row(p->bt, row + (size_t)k0 / be * bb, t, kc);
                    rp[j] = t;
                }
            }
            isa->pack_t(dst, rp, nr, kc);
        }
    } else {
        size_t be = dtype_block_elems(p->bt), bb = dtype_block_bytes(p->bt);
        int64_t nstrips = ceil_div(nc, nr);
        for (int64_t k = 0; k < kc; k++) {
            const uint8_t *row = base + (size_t)(k0 + k) * p->ldb_bytes;
            const float *src;
            if (p->bt == DT_F32) {
                src = (const float *)row + n0;
            } else {
                kern_dequant_row(p->bt, row + (size_t)n0 / be * bb, tmp, nc);
                src = tmp;
            }
            for (int64_t s = 0; s < nstrips; s++) {
                float *d = dst + s * kc * nr + k * nr;
                int64_t cols = imin(nr, nc - s * nr);
                memcpy(d, src + s * nr, (size_t)cols * 4);
                for (int64_t j = cols; j < nr; j++) d[j] = 0.f;
            }
        }
    }
}

/* Address of C element (i, j). */
static float *cptr(const gemm_prob *p, int64_t i, int64_t j)
{
    return p->ct ? p->C + j * p->ldc + i : p->C + i * p->ldc + j;
}

/* Scratch layout per thread: [A | B panel | dequant rows]. */
#define A_FLOATS (KERN_SCRATCH_BYTES / 4 - (size_t)GEMM_NC * GEMM_KC - (size_t)32 * GEMM_KC)

/* Two loop orders, same arithmetic per C element:
 *  - A fits whole (rows × K floats in scratch): pack A once, then for each
 *    column block run all K blocks, so that C block stays in cache while it
 *    accumulates (wide outputs such as the lm_head: no C sweep per K block);
 *  - otherwise K blocks outside, A packed per (row block, K block), and the
 *    columns in chunks of NCH so the C rows swept per K block stay small. */
static void run_region(const region_job *job, int64_t m0, int64_t m1, int64_t n0, int64_t n1)
{
    const gemm_prob *p = job->p;
    const kern_isa *isa = job->isa;
    float *ap = kern_scratch();
    float *bp = ap + A_FLOATS;
    float *tmp = bp + GEMM_NC * GEMM_KC;
    const int64_t mr = isa->mr;
    int64_t rows = ceil_div(m1 - m0, mr) * mr;
    if ((size_t)(rows * p->K) <= A_FLOATS) {
        /* A strips for K block k0 start at ap + k0·rows (each strip kc·mr) */
        for (int64_t k0 = 0; k0 < p->K; k0 += GEMM_KC)
            pack_a(isa, p, ap + k0 * rows, m0, m1 - m0, k0, imin(GEMM_KC, p->K - k0));
        for (int64_t nb = n0; nb < n1; nb += GEMM_NC) {
            int64_t nc = imin(GEMM_NC, n1 - nb);
            for (int64_t k0 = 0; k0 < p->K; k0 += GEMM_KC) {
                int64_t kc = imin(GEMM_KC, p->K - k0);
                pack_b(isa, p, bp, tmp, nb, nc, k0, kc);
                gemm_epi e = {p->alpha, p->beta, p->bias ? p->bias + nb : NULL, k0 == 0, p->ct};
                isa->gemm_block(m1 - m0, nc, kc, ap + k0 * rows, bp, cptr(p, m0, nb), p->ldc, &e);
            }
        }
        return;
    }
    const int64_t NCH = 4 * GEMM_NC;
    for (int64_t nch = n0; nch < n1; nch += NCH) {
        int64_t nche = imin(n1, nch + NCH);
        for (int64_t mb = m0; mb < m1; mb += MCMAX) {
            int64_t mc = imin(MCMAX, m1 - mb);
            for (int64_t k0 = 0; k0 < p->K; k0 += GEMM_KC) {
                int64_t kc = imin(GEMM_KC, p->K - k0);
                pack_a(isa, p, ap, mb, mc, k0, kc);
                for (int64_t nb = nch; nb < nche; nb += GEMM_NC) {
                    int64_t nc = imin(GEMM_NC, nche - nb);
                    pack_b(isa, p, bp, tmp, nb, nc, k0, kc);
                    gemm_epi e = {p->alpha, p->beta, p->bias ? p->bias + nb : NULL, k0 == 0, p->ct};
                    isa->gemm_block(mc, nc, kc, ap, bp, cptr(p, mb, nb), p->ldc, &e);
                }
            }
        }
    }
}

static void region_task(void *ctx, int64_t b, int64_t e)
{
    const region_job *job = ctx;
    const gemm_prob *p = job->p;
    for (int64_t t = b; t < e; t++) {
        int64_t mi = t / job->pn, ni = t % job->pn;
        int64_t m0 = mi * job->rows_per, m1 = imin(p->M, m0 + job->rows_per);
        int64_t n0 = ni * job->cols_per, n1 = imin(p->N, n0 + job->cols_per);
        if (m0 < m1 && n0 < n1) run_region(job, m0, m1, n0, n1);
    }
}

/* C = beta·C (+ bias) when there is nothing to sum (K == 0). */
static void scale_only(const gemm_prob *p)
{
    for (int64_t i = 0; i < p->M; i++) {
        float *c = p->C + i * p->ldc;
        for (int64_t j = 0; j < p->N; j++) {
            float v = p->beta == 0.f ? 0.f : p->beta * c[j];
            c[j] = p->bias ? v + p->bias[j] : v;
        }
    }
}

/* A narrow output (N below one micro-tile, e.g. x·Aᵀ with a LoRA rank of 8)
 * would leave most of each tile empty. Computing Cᵀ = op(B)ᵀ·op(A)ᵀ instead
 * fills the tiles; every element is still Σ_k a·b in k order, one FMA per
 * step, in the same K blocks — the same bits (FMA is symmetric in a, b).
 * Only for f32 B (it becomes the packed-A operand) and no bias. */
static int swap_operands(const gemm_prob *p, int nr, gemm_prob *q)
{
    if (p->bt != DT_F32 || p->bias || p->ct || p->N >= nr || p->M < 4 * nr) return 0;
    *q = *p;
    q->M = p->N;
    q->N = p->M;
    q->A = p->B;
    q->lda = (int64_t)(p->ldb_bytes / 4);
    q->ta = p->bkind == GB_ROWS_N;          /* B stored [K,N] → A' = Bᵀ read transposed */
    q->B = p->A;
    q->ldb_bytes = (size_t)p->lda * 4;
    q->bkind = p->ta ? GB_ROWS_N : GB_ROWS_K;
    q->ct = 1;
    return 1;
}

void gemm_run(const gemm_prob *p)
{
    if (p->M <= 0 || p->N <= 0) return;
    if (p->K <= 0) { scale_only(p); return; }
    gemm_prob swapped;
    if (swap_operands(p, kern_isa_get()->nr, &swapped)) p = &swapped;
    kern_ensure_init();
    const kern_isa *isa = kern_isa_get();
    region_job job = {.p = p, .isa = isa};
    /* Column granularity: whole NR strips, and whole quant blocks where B
     * rows are split along N (GB_ROWS_N dequantizes row segments). */
    int64_t ng = isa->nr;
    if (p->bkind == GB_ROWS_N && p->bt != DT_F32) {
        int64_t be = (int64_t)dtype_block_elems(p->bt);
        while (ng % be) ng += isa->nr;
    }
    int64_t ru = ceil_div(p->M, isa->mr), cu = ceil_div(p->N, ng);
    int nt = kern_threads();
    double flops = 2.0 * (double)p->M * (double)p->N * (double)p->K;
    if (flops < 4e5) nt = 1;
    /* Cost per K element of a region (ns, rough): compute, B packing
     * (dequantize + transpose, once per MCMAX rows), A packing. */
    double cb = p->bt == DT_F32 ? 0.3 : 1.0;
    double best = 1e300;
    job.pm = job.pn = 1;
    for (int pm = 1; pm <= nt; pm++) {
        for (int pn = 1; pm * pn <= nt; pn++) {
            if (pm > ru || pn > cu) continue;
            double rows = (double)ceil_div(ru, pm) * isa->mr;
            double cols = (double)ceil_div(cu, pn) * ng;
            double cost = rows * cols / 60.0 + cols * cb * (double)ceil_div((int64_t)rows, MCMAX) + rows * 0.3;
            /* idle threads are a loss too: prefer using all of them */
            if (cost < best * 0.999) {
                best = cost;
                job.pm = pm;
                job.pn = pn;
            }
        }
    }
    job.rows_per = ceil_div(ru, job.pm) * isa->mr;
    job.cols_per = ceil_div(cu, job.pn) * ng;
    int64_t ntasks = (int64_t)job.pm * job.pn;
    if (ntasks == 1) region_task(&job, 0, 1);
    else kern_parallel_for(ntasks, region_task, &job);
}
