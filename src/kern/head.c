/* head — the LM head fused with softmax cross-entropy and its input
 * gradient, without an [N, V] logits buffer and reading W once.
 *
 *   logits = x[N,C]·W[V,C]ᵀ,  nll = lse − logits[target],
 *   dx = grad_scale·(softmax − onehot)·W
 *
 * The vocabulary is cut into HEAD_PARTS fixed parts (a function of V only)
 * of 256-row tiles. One unit = one part over one block of rows; for each
 * tile it computes the logits tile (x packed once, shared), runs an online
 * softmax step (running max m, running sum l per row; flash-attention
 * style) and adds P·W_tile into the part's accumulator, rescaled when the
 * running max moves. So the tile of W is read from memory once and used
 * twice while it is in cache. At the end each row combines its parts in
 * order:
 *   M = max m_p,  L = Σ l_p·e^(m_p−M),  lse = M + log L,
 *   dx = Σ_p (grad_scale·e^(m_p−M)/L)·acc_p − grad_scale·W[target].
 * Units and the combine never depend on the thread count: same bytes for
 * any number of threads. The sums differ in rounding from kern_matmul +
 * kern_xent + kern_matmul_dx (the reference twin), within ~1e-6 relative.
 * Under kern_set_bf16 x and W are rounded to bf16 where they are packed
 * (the logits GEMM and the W of dx). On the `fma` back end the logits'
 * gradient stays f32: it never exists as one matrix here (P·W is summed
 * per part and rescaled), so rounding its pieces would not be rounding it;
 * the bf16 instructions take bf16 operands only, so there P's tile is
 * rounded where it is packed (as autocast rounds the logits' gradient). */
#include "kern/kern_impl.h"

#include <math.h>
#include <string.h>

#define HT 256              /* vocabulary rows per tile */
#define HEAD_PARTS 8
#define HEAD_ROWS 512       /* rows per row block */

static int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

size_t kern_head_xent_scratch(int64_t N, int C)
{
    int64_t rb = imin(N > 0 ? N : 0, HEAD_ROWS);
    return (size_t)HEAD_PARTS * (size_t)rb * ((size_t)C + 2) + (size_t)rb + 16;
}

typedef struct head_job {
    const kern_isa *isa;
    const float *x;
    const wmat *W;
    const int32_t *tg;
    float *dx, *nll;
    float gs;
    int64_t r0, nr, rows_pad;   /* the row block */
    int C, V, parts, ntiles, want_dx;
    int bf16;                   /* kern_set_bf16: x and W rounded where packed (not P: see kern_head_xent) */
    float *ap;                  /* packed x rows: K block k0 at ap + k0·rows_pad */
    float *acc, *m, *l, *xt;    /* [parts][nr][C], [parts][nr] ×2, [nr] */
} head_job;

static void pack_x(void *ctx, int64_t b, int64_t e)
{
    const head_job *j = ctx;
    gemm_prob p = {.A = j->x, .lda = j->C, .ta = 0, .bf16 = j->bf16};
    for (int64_t kb = b; kb < e; kb++) {
        int64_t k0 = kb * GEMM_KC, kc = imin(GEMM_KC, j->C - k0);
        gemm_pack_a(j->isa, &p, j->ap + k0 * j->rows_pad, j->r0, j->nr, k0, kc);
    }
}

/* One part: tiles [t0, t1) of the vocabulary over the row block. */
static void part_unit(void *ctx, int64_t b, int64_t e)
{
    const head_job *j = ctx;
    const kern_isa *isa = j->isa;
    const int C = j->C, nr = (int)j->nr;
    float *bp = kern_scratch();                         /* B panel: HT × KC (or KC × GEMM_NC) */
    float *tmp = bp + (size_t)HT * GEMM_KC;             /* dequantized rows: 32 × KC */
    float *S = tmp + (size_t)32 * GEMM_KC;              /* logits tile [rows_pad][HT] */
    float *a2 = S + (size_t)j->rows_pad * HT;           /* P packed as A [rows_pad × HT] */
    float *al = a2 + (size_t)j->rows_pad * HT;          /* [nr] */
    gemm_prob pw = {.bkind = GB_ROWS_K, .bt = j->W->type, .B = j->W->data, .ldb_bytes = j->W->row_bytes,
                    .bf16 = j->bf16};
    gemm_prob pd = {.bkind = GB_ROWS_N, .bt = j->W->type, .B = j->W->data, .ldb_bytes = j->W->row_bytes,
                    .bf16 = j->bf16};
    /* P is rounded too where the back end's panels hold bf16 (it is one
     * more GEMM input there; the f32 panels of `fma` keep it exact) */
    gemm_prob ps = {.A = S, .lda = HT, .ta = 0, .bf16 = j->bf16 && isa->panel != KERN_PANEL_F32};
    for (int64_t part = b; part < e; part++) {
        int64_t t0 = part * j->ntiles / j->parts, t1 = (part + 1) * j->ntiles / j->parts;
        float *acc = j->acc + (size_t)part * nr * C;
        float *m = j->m + (size_t)part * nr, *l = j->l + (size_t)part * nr;
        for (int r = 0; r < nr; r++) { m[r] = -INFINITY; l[r] = 0.f; }
        for (int64_t t = t0; t < t1; t++) {
            int64_t v0 = t * HT;
            int vt = (int)imin(HT, j->V - v0);
            /* logits tile S = x·W[v0, v0+vt)ᵀ, K blocks over C in order */
            for (int64_t k0 = 0; k0 < C; k0 += GEMM_KC) {
                int64_t kc = imin(GEMM_KC, C - k0);
                gemm_pack_b(isa, &pw, bp, tmp, v0, vt, k0, kc);
                gemm_epi ep = {1.f, 0.f, NULL, k0 == 0, 0};
                isa->gemm_block(nr, vt, kc, j->ap + k0 * j->rows_pad, bp, S, HT, &ep);
            }
            for (int r = 0; r < nr; r++) {
                int32_t tg = j->tg[j->r0 + r];
                if (tg >= v0 && tg < v0 + vt) j->xt[r] = S[(size_t)r * HT + (tg - v0)];
            }
            isa->softmax_tile(S, HT, nr, vt, m, l, al);
            if (!j->want_dx) continue;
            if (t > t0)
                for (int r = 0; r < nr; r++) {
                    if (al[r] == 1.f) continue;
                    float *row = acc + (size_t)r * C, a = al[r];
                    for (int c = 0; c < C; c++) row[c] *= a;
                }
            /* acc (+)= P·W[v0, v0+vt): one K block of vt */
            gemm_pack_a(isa, &ps, a2, 0, nr, 0, vt);
            for (int64_t c0 = 0; c0 < C; c0 += GEMM_NC) {
                int64_t nc = imin(GEMM_NC, C - c0);
                gemm_pack_b(isa, &pd, bp, tmp, c0, nc, v0, vt);
                gemm_epi ep = {1.f, t > t0 ? 1.f : 0.f, NULL, 1, 0};
                isa->gemm_block(nr, nc, vt, a2, bp, acc + c0, C, &ep);
            }
        }
    }
}

/* Per row: combine the parts in order (see the top of the file). */
static void combine_rows(void *ctx, int64_t b, int64_t e)
{
    const head_job *j = ctx;
    const int C = j->C, nr = (int)j->nr, P = j->parts;
    float *wt = kern_scratch();
    for (int64_t r = b; r < e; r++) {
        int64_t n = j->r0 + r;
        int32_t tg = j->tg[n];
        float *d = j->dx ? j->dx + n * C : NULL;
        if (tg < 0 || tg >= j->V) {
            j->nll[n] = 0.f;
            if (d) memset(d, 0, (size_t)C * sizeof(float));
            continue;
        }
        float M = -INFINITY;
        for (int p = 0; p < P; p++) M = j->m[(size_t)p * nr + r] > M ? j->m[(size_t)p * nr + r] : M;
        double L = 0;
        float ep[HEAD_PARTS];
        for (int p = 0; p < P; p++) {
            float mp = j->m[(size_t)p * nr + r];
            ep[p] = mp == -INFINITY ? 0.f : expf(mp - M);
            L += (double)j->l[(size_t)p * nr + r] * ep[p];
        }
        j->nll[n] = (float)((double)M + log(L) - (double)j->xt[r]);
        if (!d) continue;
        float inv = (float)(1.0 / L);
        kern_dequant_row(j->W->type, (const char *)j->W->data + (size_t)tg * j->W->row_bytes, wt, C);
        if (j->bf16) kern_round_bf16(wt, C);   /* the same W as the packed tiles */
        for (int c = 0; c < C; c++) d[c] = -j->gs * wt[c];
        for (int p = 0; p < P; p++) {
            float w = j->gs * ep[p] * inv;
            const float *a = j->acc + ((size_t)p * nr + r) * C;
            if (w != 0.f)
                for (int c = 0; c < C; c++) d[c] += w * a[c];
        }
    }
}

double kern_head_xent(float *dx, float *nll, const float *x, const wmat *W, const int32_t *targets, int64_t N,
                      float grad_scale, float *scratch)
{
    const int64_t V = W->rows, C = W->cols;
    if (N <= 0 || V <= 0 || C <= 0) return 0;
    kern_ensure_init();
    const int bf16 = kern_bf16_active();
    const kern_isa *isa = bf16 ? kern_isa_bf16() : kern_isa_get();
    head_job j = {.isa = isa, .x = x, .W = W, .tg = targets, .dx = dx, .nll = nll, .gs = grad_scale,
                  .C = (int)C, .V = (int)V, .want_dx = dx != NULL, .bf16 = bf16};
    j.ntiles = (int)((V + HT - 1) / HT);
    j.parts = j.ntiles < HEAD_PARTS ? j.ntiles : HEAD_PARTS;
    /* rows per block: HEAD_ROWS, fewer if the packed x or a unit's tiles
     * would not fit (then more blocks: W is read once per block) */
    const int64_t mr = isa->mr;
    int64_t rb = HEAD_ROWS;
    size_t fixed = (size_t)HT * GEMM_KC + (size_t)32 * GEMM_KC;
    while (rb > mr && ((size_t)(rb + mr) * C > KERN_SHARED_BYTES / 4 ||
                       fixed + (size_t)(rb + mr) * 2 * HT + (size_t)rb > KERN_SCRATCH_BYTES / 4))
        rb /= 2;
    int64_t nrb = (N + rb - 1) / rb, per = (N + nrb - 1) / nrb;
    double total = 0;
    for (int64_t r0 = 0; r0 < N; r0 += per) {
        j.r0 = r0;
        j.nr = imin(per, N - r0);
        j.rows_pad = (j.nr + mr - 1) / mr * mr;
        j.ap = kern_shared((size_t)j.rows_pad * C * sizeof(float));
        if (!j.ap) return NAN;      /* nested inside a parallel job: not supported */
        j.acc = scratch;
        j.m = j.acc + (size_t)j.parts * j.nr * C;
        j.l = j.m + (size_t)j.parts * j.nr;
        j.xt = j.l + (size_t)j.parts * j.nr;
        kern_parallel_dyn((C + GEMM_KC - 1) / GEMM_KC, pack_x, &j);
        kern_parallel_dyn(j.parts, part_unit, &j);
        kern_parallel_for(j.nr, combine_rows, &j);
        for (int64_t r = 0; r < j.nr; r++) {
            int32_t t = targets[r0 + r];
            if (t >= 0 && t < V) total += nll[r0 + r];
        }
    }
    return total;
}
