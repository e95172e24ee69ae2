/* gemm — the blocked f32 GEMM engine behind kern_matmul, kern_matmul_dx and
 * kern_sgemm (GotoBLAS-style panels, ISA micro-kernels from isa_*.c).
 *
 *   C[M,N] (+)= A[M,K] · B[K,N], B taken from f32 or quantized rows
 *
 * Rows are processed in row blocks (all of M when it is small enough). For
 * each row block two parallel jobs run:
 *
 *   1. pack A [rows × K] once into the pool's shared buffer (K blocks of
 *      KC, MR-row strips), units of (K block, strip group);
 *   2. column units of NW columns, taken dynamically by the threads:
 *        for k0 (fixed KC blocks over K):
 *          pack / dequantize B [k0, k0+kc) × [n0, n0+nw)   (per thread, L2)
 *          micro-kernels: for each NR strip (L1), for each MR strip
 *      so each weight tile is dequantized once per row block and the C tile
 *      of a unit stays in cache while its K blocks accumulate.
 *
 * Every C element is produced by the same instruction sequence whatever the
 * unit it falls in: the K blocks are fixed, each is summed from zero in k
 * order by one FMA per step and then added to C, and edge tiles run the
 * full micro-kernel on zero-padded panels. Hence bit-identical results for
 * any thread count, and a thread that is descheduled delays only the unit
 * it holds. */
#include "kern/kern_impl.h"

#include <string.h>

static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The rounded f32 strips (R wide, kc deep, each at its f32 offset) into
 * the panel the bf16 back end's micro-kernel reads (KERN_PANEL_*). */
static void to_bf16_panel(const kern_isa *isa, float *dst, int R, int64_t strips, int64_t kc, int is_a)
{
    if (isa->panel == KERN_PANEL_PAIRS) {
        for (int64_t s = 0; s < strips; s++) bf16_pack_pairs(dst + s * kc * R, R, kc);
    } else if (isa->panel == KERN_PANEL_AMX) {
        float tmp[AMX_MR * GEMM_KC];
        for (int64_t s = 0; s < strips; s++) {
            float *st = dst + s * kc * R;
            if (is_a && R <= AMX_MR && kc <= GEMM_KC) {
                memcpy(tmp, st, (size_t)(kc * R) * 4);
                bf16_pack_amx_a((uint16_t *)st, tmp, R, kc);
            } else {
                bf16_pack_amx_b((uint16_t *)st, st, R, kc);
            }
        }
    }
}

/* Pack rows [m0, m0+mc) × [k0, k0+kc) of A into MR strips (dst[k][i]). */
void gemm_pack_a(const kern_isa *isa, const gemm_prob *p, float *dst, int64_t m0, int64_t mc, int64_t k0,
                 int64_t kc)
{
    const int mr = isa->mr;
    /* bf16 numerics: the activations are rounded here, once per packed
     * element, so every micro-kernel reads bf16 values (zero padding stays 0) */
    if (p->bf16) {
        if (bf16_pack_a_direct(isa, p, dst, m0, mc, k0, kc)) return;
        gemm_prob q = *p;
        q.bf16 = 0;
        gemm_pack_a(isa, &q, dst, m0, mc, k0, kc);
        kern_round_bf16(dst, (mc + mr - 1) / mr * mr * kc);
        to_bf16_panel(isa, dst, mr, (mc + mr - 1) / mr, kc, 1);
        return;
    }
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
void gemm_pack_b(const kern_isa *isa, const gemm_prob *p, float *dst, float *tmp, int64_t n0, int64_t nc,
                 int64_t k0, int64_t kc)
{
    const int nr = isa->nr;
    const uint8_t *base = p->B;
    /* bf16 numerics: the weight panel rounded after dequantizing (a BF16
     * weight is exact already; an F32/F16 one gets the value a one-time
     * conversion to bf16 would give, since the rounding is per element) */
    if (p->bf16) {
        if (bf16_pack_b_direct(isa, p, dst, tmp, n0, nc, k0, kc)) return;
        gemm_prob q = *p;
        q.bf16 = 0;
        gemm_pack_b(isa, &q, dst, tmp, n0, nc, k0, kc);
        kern_round_bf16(dst, (nc + nr - 1) / nr * nr * kc);
        to_bf16_panel(isa, dst, nr, (nc + nr - 1) / nr, kc, 0);
        return;
    }
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
        for (int64_t k = 0; k < kc; k++) {
            const uint8_t *row = base + (size_t)(k0 + k) * p->ldb_bytes;
            const float *src;
            if (p->bt == DT_F32) {
                src = (const float *)row + n0;
            } else {
                kern_dequant_row(p->bt, row + (size_t)n0 / be * bb, tmp, nc);
                src = tmp;
            }
            isa->pack_n(dst + k * nr, src, nc, kc * nr);
        }
    }
}

/* Address of C element (i, j). */
static float *cptr(const gemm_prob *p, int64_t i, int64_t j)
{
    return p->ct ? p->C + j * p->ldc + i : p->C + i * p->ldc + j;
}

/* Per-thread scratch: [B panel NC×KC | dequantized rows 32×KC]. */
#define TMP_OFF ((size_t)GEMM_NC * GEMM_KC)

/* Rows per row block: at most ROWS_MAX (the C tile of a unit stays in L2)
 * and the packed A must fit the shared buffer. */
#define ROWS_MAX 768

typedef struct gjob {
    const gemm_prob *p;
    const kern_isa *isa;
    float *ap;              /* packed A of the block: K block k0 at ap + (k0 − k_lo)·rows */
    float *a2p;             /* packed A2 of the block (low-rank term), rows × K2 */
    int64_t m0, m1, rows;   /* the row block, rows = (m1 − m0) rounded up to MR */
    int64_t k_lo, k_hi;     /* the K blocks packed at once (all of K when they fit) */
    int64_t nw, ncu;        /* column unit width, count */
    int64_t nkb, sg, nsg;   /* K blocks in [k_lo, k_hi); A strips per pack unit, pack units per K block */
} gjob;

static void pack_a_units(void *ctx, int64_t b, int64_t e)
{
    const gjob *j = ctx;
    const int64_t mr = j->isa->mr;
    if (b == 0 && j->a2p) {     /* the low-rank term's A2 goes with unit 0 */
        gemm_prob q = {.A = j->p->A2, .lda = j->p->lda2, .ta = 0, .bf16 = j->p->bf16};
        gemm_pack_a(j->isa, &q, j->a2p, j->m0, j->m1 - j->m0, 0, j->p->K2);
    }
    for (int64_t u = b; u < e; u++) {
        int64_t kb = u / j->nsg, g = u % j->nsg;
        int64_t k0 = j->k_lo + kb * GEMM_KC, kc = imin(GEMM_KC, j->p->K - k0);
        int64_t r0 = g * j->sg * mr, r1 = imin(j->m1 - j->m0, r0 + j->sg * mr);
        if (r0 >= r1) continue;
        gemm_pack_a(j->isa, j->p, j->ap + (k0 - j->k_lo) * j->rows + r0 * kc, j->m0 + r0, r1 - r0, k0, kc);
    }
}

static void col_units(void *ctx, int64_t b, int64_t e)
{
    const gjob *j = ctx;
    const gemm_prob *p = j->p;
    float *bp = kern_scratch();
    float *tmp = bp + TMP_OFF;
    for (int64_t u = b; u < e; u++) {
        int64_t n0 = u * j->nw, nc = imin(j->nw, p->N - n0);
        for (int64_t k0 = j->k_lo; k0 < j->k_hi; k0 += GEMM_KC) {
            int64_t kc = imin(GEMM_KC, p->K - k0);
            gemm_pack_b(j->isa, p, bp, tmp, n0, nc, k0, kc);
            gemm_epi ep = {p->alpha, p->beta, p->bias ? p->bias + n0 : NULL, k0 == 0, p->ct};
            j->isa->gemm_block(j->m1 - j->m0, nc, kc, j->ap + (k0 - j->k_lo) * j->rows, bp,
                               cptr(p, j->m0, n0), p->ldc, &ep);
        }
        if (j->a2p && j->k_hi == p->K) {
            gemm_prob q = {.bkind = p->b2kind, .bt = DT_F32, .B = p->B2, .ldb_bytes = (size_t)p->ldb2 * 4,
                           .bf16 = p->bf16};
            gemm_pack_b(j->isa, &q, bp, tmp, n0, nc, 0, p->K2);
            gemm_epi ep = {p->alpha2, 1.f, NULL, 0, p->ct};
            j->isa->gemm_block(j->m1 - j->m0, nc, p->K2, j->a2p, bp, cptr(p, j->m0, n0), p->ldc, &ep);
        }
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
    if (p->bt != DT_F32 || p->bias || p->ct || p->A2 || p->N >= nr || p->M < 4 * nr) return 0;
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

/* Column unit width (a multiple of ng, at most maxs·ng) for nt threads.
 * The units are taken dynamically, so a thread that ends up with one unit
 * more than another sets the job's length: 896 columns in 7 units of 128
 * left one of two threads idle for an eighth of Qwen2.5-0.5B's N = 896
 * products (down, and the input gradients of gate and up, the longest K).
 * Picked: the least critical path (units per thread, rounded up, times the
 * unit's strips), then the widest unit that still leaves 3 units per
 * thread (a descheduled thread's share can be taken over). Units are
 * independent tiles of the same arithmetic: no bit depends on the width. */
static int64_t unit_width(int64_t N, int64_t ng, int64_t maxs, int nt)
{
    const int64_t strips = ceil_div(N, ng), want = imin(3 * (int64_t)nt, strips);
    int64_t best = 1, best_cp = -1, best_ok = 0;
    for (int64_t per = 1; per <= maxs && per <= strips; per++) {
        int64_t units = ceil_div(strips, per), cp = ceil_div(units, nt) * per, ok = units >= want;
        if (best_cp < 0 || cp < best_cp || (cp == best_cp && (ok || !best_ok))) {
            best = per;
            best_cp = cp;
            best_ok = ok;
        }
    }
    return best * ng;
}

void gemm_run(const gemm_prob *p)
{
    if (p->M <= 0 || p->N <= 0) return;
    if (p->K <= 0) { scale_only(p); return; }
    gemm_prob swapped;
    if (swap_operands(p, kern_isa_get()->nr, &swapped)) p = &swapped;
    kern_ensure_init();
    const kern_isa *isa = p->bf16 ? kern_isa_bf16() : kern_isa_get();
    const int64_t mr = isa->mr;
    int nt = kern_threads();
    if (2.0 * (double)p->M * (double)p->N * (double)p->K < 4e5) nt = 1;
    /* Column unit: whole NR strips, whole quant blocks where B rows are
     * split along N (GB_ROWS_N dequantizes row segments), at most NC; with
     * several threads about 4 units per thread when N allows. */
    int64_t ng = isa->nr;
    if (p->bkind == GB_ROWS_N && p->bt != DT_F32) {
        int64_t be = (int64_t)dtype_block_elems(p->bt);
        while (ng % be) ng += isa->nr;
    }
    int64_t nw = GEMM_NC / ng * ng;
    if (nw < ng) nw = ng;
    if (nt > 1) nw = unit_width(p->N, ng, nw / ng, nt);
    gjob j = {.p = p, .isa = isa, .nw = nw, .ncu = ceil_div(p->N, nw)};
    /* packed A: the shared buffer, or (nested inside a parallel job, or no
     * memory) this thread's scratch after the B panel */
    const int64_t k2 = p->A2 ? p->K2 : 0;
    const size_t rmax = (size_t)(ceil_div(imin(p->M, ROWS_MAX), mr) * mr);
    size_t want = rmax * (size_t)(p->K + k2);
    if (want > KERN_SHARED_BYTES / 4) want = KERN_SHARED_BYTES / 4;
    size_t cap = want;
    float *abuf = kern_shared(want * 4);
    if (!abuf) {
        abuf = (float *)kern_scratch() + TMP_OFF + (size_t)32 * GEMM_KC;
        cap = KERN_SCRATCH_BYTES / 4 - TMP_OFF - (size_t)32 * GEMM_KC;
        nt = 1;
    }
    /* A2's strips sit at the end of the buffer */
    float *a2buf = k2 ? abuf + cap - rmax * (size_t)k2 : NULL;
    cap -= rmax * (size_t)k2;
    /* Row blocks: balanced, at most ROWS_MAX rows. K goes in spans of
     * whole KC blocks as long as rows × span fit the buffer (all of K
     * normally); a long K is cut into spans rather than the rows, so each
     * weight tile is still packed once (same sums: the K blocks still run
     * in order, each from zero). */
    int64_t nrb = ceil_div(p->M, ROWS_MAX / mr * mr);
    int64_t per = ceil_div(ceil_div(p->M, nrb), mr) * mr;
    int64_t kspan = (int64_t)(cap / (size_t)per) / GEMM_KC * GEMM_KC;
    if (kspan < GEMM_KC) kspan = GEMM_KC;   /* per <= ROWS_MAX: per·KC always fits */
    if (kspan > p->K) kspan = p->K;
    j.ap = abuf;
    j.a2p = a2buf;
    for (int64_t m0 = 0; m0 < p->M; m0 += per) {
        j.m0 = m0;
        j.m1 = imin(p->M, m0 + per);
        j.rows = ceil_div(j.m1 - j.m0, mr) * mr;
        int64_t strips = j.rows / mr;
        j.sg = nt > 1 ? ceil_div(strips, 2 * nt) : strips;
        j.nsg = ceil_div(strips, j.sg);
        for (j.k_lo = 0; j.k_lo < p->K; j.k_lo += kspan) {
            j.k_hi = imin(p->K, j.k_lo + kspan);
            j.nkb = ceil_div(j.k_hi - j.k_lo, GEMM_KC);
            if (nt == 1) {
                pack_a_units(&j, 0, j.nkb * j.nsg);
                col_units(&j, 0, j.ncu);
            } else {
                kern_parallel_dyn(j.nkb * j.nsg, pack_a_units, &j);
                kern_parallel_dyn(j.ncu, col_units, &j);
            }
        }
    }
}
