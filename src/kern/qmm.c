/* qmm — int8 prefill: y[N,O] = x[N,K]·Wᵀ for a quantized W (Q8_0 Q4_0 Q5_0
 * Q4_1 Q5_1 Q4_K Q5_K Q6_K) in inference, the way llama.cpp processes a
 * prompt: every row of x is rounded to int8 blocks exactly as llama.cpp
 * rounds activations (Q8_0/Q8_1 for the 32-element types, Q8_K for the K
 * types; qx_round_q8_0 / qx_round_q8_K, shared with the decode dots), and
 * the products are integer (vpdpbusd: u8 weight × s8 x, four products
 * summed per int32 lane).
 *
 * Why this shape: decode (qdot.c) reads each weight once per row of x, so
 * it dots one row at a time and reduces across lanes. A prompt has many
 * rows, so here 32 weight rows are unpacked once into a panel, u8 in
 * VNNI order ([K/4][32 rows][4 bytes]: one zmm = 16 rows × 4 consecutive
 * k), and every row of x streams past it with its 4 bytes broadcast. Each
 * lane is one (weight row, x row) output; a sub-block's integer sum (32
 * elements; 16 for Q6_K) is exact in its lane, and the float scaling runs
 * per lane in block order. So the result of every output is a fixed
 * sequence of scalar operations that the plain loop kern_matmul_int8_ref
 * performs too: the AVX512-VNNI, AVX-VNNI and (emulated) AMX back ends
 * and the reference agree bit for bit, for any thread count.
 *
 * Per output, with P a sub-block's Σ u·x_q, dx the x block's scale:
 *   32-element: i = P − bias·Σx_q (bias 128 Q8_0, 8 Q4_0, 16 Q5_0, else 0)
 *               acc = fma(i, d·dx, acc); Q4_1/Q5_1 then acc = fma(m, s_x, acc)
 *   Q4_K/Q5_K:  per 256: I = Σ_j sc_j·P_j, M = Σ_j m_j·Σx_q(j)
 *               acc = fma(I, d·dx, acc); acc = fma(−M, dmin·dx, acc)
 *   Q6_K:       per 256: I = Σ_g sc_g·(P_g − 32·Σx_q(g))  (16 per g)
 *               acc = fma(I, d·dx, acc)
 * llama.cpp's vec_dot sums the same integers in another float order;
 * r0430 checks every output against it within r0304's tolerance. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern_impl.h"

#define TW QMM_TILE_ROWS

static int blk_elems(dtype t) { return t == DT_Q4_K || t == DT_Q5_K || t == DT_Q6_K ? 256 : 32; }
static int is_k45(dtype t) { return t == DT_Q4_K || t == DT_Q5_K; }
static int has_min(dtype t) { return t == DT_Q4_1 || t == DT_Q5_1; }
static int wbias(dtype t) { return t == DT_Q8_0 ? 128 : t == DT_Q5_0 ? 16 : t == DT_Q4_0 ? 8 : 0; }

int qmm_type_ok(dtype t)
{
    return t == DT_Q8_0 || t == DT_Q4_0 || t == DT_Q5_0 || t == DT_Q4_1 || t == DT_Q5_1 || t == DT_Q4_K ||
           t == DT_Q5_K || t == DT_Q6_K;
}

static size_t up64(size_t n) { return (n + 63) & ~(size_t)63; }

/* ---- rows of x -------------------------------------------------------------- */

size_t qmm_x_row_bytes(int64_t K)
{
    size_t k = (size_t)K;
    /* qs, d (≤ K/32), bs16, bs32, sx */
    return k + k / 32 * 4 + k / 16 * 4 + k / 32 * 4 + k / 32 * 4 + k / 64 * 4;
}

int qmm_x_init(qmm_x *q, void *buf, dtype wt, int64_t N, int64_t K)
{
    const int be = blk_elems(wt);
    if (N <= 0 || K <= 0 || K % be) return 0;
    size_t n = (size_t)N, k = (size_t)K;
    char *p = buf;
    q->qs = (int8_t *)p;    p += up64(n * k);
    q->d = (float *)p;      p += up64(n * (k / 32) * 4);
    q->bs16 = (int32_t *)p; p += up64(n * (k / 16) * 4);
    q->bs32 = (int32_t *)p; p += up64(n * (k / 32) * 4);
    q->sx = (float *)p;     p += up64(n * (k / 32) * 4);
    q->bs2 = (int32_t *)p;
    q->wt = wt;
    q->N = N;
    q->K = K;
    q->nb = K / be;
    return 1;
}

size_t qmm_x_bytes(int64_t N, int64_t K)
{
    size_t n = (size_t)N, k = (size_t)K;
    return up64(n * k) + up64(n * (k / 32) * 4) + up64(n * (k / 16) * 4) + 2 * up64(n * (k / 32) * 4) +
           up64(n * (k / 64) * 4);
}

/* The K types' Σx_q per 32 in int16 pairs (|Σ| ≤ 32·127), for vpdpwssd
 * against the mins' pairs (qmm_body.inc). */
static void pair_sums(qmm_x *q, int64_t n)
{
    const int64_t K = q->K;
    const int32_t *b32 = q->bs32 + n * (K / 32);
    for (int64_t i = 0; i < K / 64; i++)
        q->bs2[n * (K / 64) + i] = (int32_t)((uint32_t)(uint16_t)b32[2 * i] | (uint32_t)(uint16_t)b32[2 * i + 1] << 16);
}

void qmm_x_round_fast(qmm_x *q, int64_t n, const float *x)
{
#if defined(__x86_64__)
    const int isa = qmm_isa();
    if (isa == QMM_ISA_VNNI512 || isa == QMM_ISA_AMX) {
        const int64_t K = q->K;
        int8_t *qs = q->qs + n * K;
        if (blk_elems(q->wt) == 32) {
            for (int64_t b = 0; b < K / 32; b++) {
                int s;
                qmm_round_q8_0_512(x + 32 * b, qs + 32 * b, &q->d[n * q->nb + b], &s, &q->sx[n * (K / 32) + b]);
                q->bs32[n * (K / 32) + b] = s;
            }
            return;
        }
        int32_t *b16 = q->bs16 + n * (K / 16), *b32 = q->bs32 + n * (K / 32);
        for (int64_t b = 0; b < K / 256; b++) {
            qmm_round_q8_K_512(x + 256 * b, qs + 256 * b, &q->d[n * q->nb + b], b16 + 16 * b);
            for (int j = 0; j < 8; j++) b32[8 * b + j] = b16[16 * b + 2 * j] + b16[16 * b + 2 * j + 1];
        }
        pair_sums(q, n);
        return;
    }
#endif
    qmm_x_round(q, n, x);
}

void qmm_x_round(qmm_x *q, int64_t n, const float *x)
{
    const int64_t K = q->K;
    int8_t *qs = q->qs + n * K;
    if (blk_elems(q->wt) == 32) {
        for (int64_t b = 0; b < K / 32; b++) {
            int s;
            qx_round_q8_0(x + 32 * b, qs + 32 * b, &q->d[n * q->nb + b], &s, &q->sx[n * (K / 32) + b]);
            q->bs32[n * (K / 32) + b] = s;
        }
        return;
    }
    int32_t *b16 = q->bs16 + n * (K / 16), *b32 = q->bs32 + n * (K / 32);
    for (int64_t b = 0; b < K / 256; b++) {
        qx_round_q8_K(x + 256 * b, qs + 256 * b, &q->d[n * q->nb + b], b16 + 16 * b);
        for (int j = 0; j < 8; j++) b32[8 * b + j] = b16[16 * b + 2 * j] + b16[16 * b + 2 * j + 1];
    }
    pair_sums(q, n);
}

/* ---- weight rows ------------------------------------------------------------ */

/* GCC at -O2 leaves these byte loops scalar unless asked; clang has no
 * per-function optimize attribute (and vectorizes them at -O2 anyway). */
#if defined(__clang__)
#define QMM_VECTORIZE
#else
#define QMM_VECTORIZE __attribute__((optimize("tree-vectorize")))
#endif

static float half_at(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return fp16_to_f32(h);
}

/* One weight row as unsigned bytes in element order (Q8_0 biased by 128,
 * the others their unsigned q) and its scales, each written at
 * [index·stride]: d per block; d2 = dmin (K types) or m (Q4_1/Q5_1); sc
 * per sub-block (32 elements; 16 for Q6_K); mn per 32 (K types). */
QMM_VECTORIZE void qmm_unpack_row_ref(dtype t, const uint8_t *b, int64_t K, uint8_t *u, float *d, float *d2,
                                      int32_t *sc, int32_t *mn, int64_t stride)
{
    const int64_t nb = K / blk_elems(t);
    for (int64_t i = 0; i < nb; i++) {
        switch (t) {
        case DT_Q8_0:
            d[i * stride] = half_at(b);
            for (int j = 0; j < 32; j++) u[j] = (uint8_t)(b[2 + j] ^ 0x80);
            b += 34;
            u += 32;
            break;
        case DT_Q4_0: case DT_Q4_1: case DT_Q5_0: case DT_Q5_1: {
            const int bb = t == DT_Q4_0 ? 18 : t == DT_Q5_0 ? 22 : t == DT_Q4_1 ? 20 : 24;
            const int off = t == DT_Q4_0 ? 2 : t == DT_Q5_0 ? 6 : t == DT_Q4_1 ? 4 : 8;
            const int qo = t == DT_Q5_0 ? 2 : t == DT_Q5_1 ? 4 : 0;
            uint32_t qh = 0;
            if (qo) memcpy(&qh, b + qo, 4);
            d[i * stride] = half_at(b);
            if (has_min(t)) d2[i * stride] = half_at(b + 2);
            for (int j = 0; j < 16; j++) {
                u[j] = (uint8_t)((b[off + j] & 15) | ((qh >> j) & 1) << 4);
                u[j + 16] = (uint8_t)((b[off + j] >> 4) | ((qh >> (j + 16)) & 1) << 4);
            }
            b += bb;
            u += 32;
            break;
        }
        case DT_Q4_K: case DT_Q5_K: {
            const int q5 = t == DT_Q5_K;
            const uint8_t *qh = b + 16, *qs = b + (q5 ? 48 : 16);
            d[i * stride] = half_at(b);
            d2[i * stride] = half_at(b + 2);
            for (int j = 0; j < 8; j++) {
                uint8_t s, m;
                kern_scmin_k4(b + 4, j, &s, &m);
                sc[(8 * i + j) * stride] = s;
                mn[(8 * i + j) * stride] = m;
            }
            for (int j = 0; j < 4; j++)
                for (int l = 0; l < 32; l++) {
                    int lo = qs[32 * j + l] & 15, hi = qs[32 * j + l] >> 4;
                    if (q5) {
                        lo |= ((qh[l] >> (2 * j)) & 1) << 4;
                        hi |= ((qh[l] >> (2 * j + 1)) & 1) << 4;
                    }
                    u[64 * j + l] = (uint8_t)lo;
                    u[64 * j + 32 + l] = (uint8_t)hi;
                }
            b += q5 ? 176 : 144;
            u += 256;
            break;
        }
        case DT_Q6_K:
            for (int n = 0; n < 2; n++) {
                const uint8_t *ql = b + 64 * n, *qh = b + 128 + 32 * n;
                for (int l = 0; l < 32; l++) {
                    u[128 * n + l] = (uint8_t)((ql[l] & 15) | (qh[l] & 3) << 4);
                    u[128 * n + 32 + l] = (uint8_t)((ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4);
                    u[128 * n + 64 + l] = (uint8_t)((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4);
                    u[128 * n + 96 + l] = (uint8_t)((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4);
                }
            }
            for (int g = 0; g < 16; g++) sc[(16 * i + g) * stride] = (int8_t)b[192 + g];
            d[i * stride] = half_at(b + 208);
            b += 210;
            u += 256;
            break;
        default:
            return;
        }
    }
}

size_t qmm_panel_bytes(int64_t K)
{
    size_t k = (size_t)K;
    /* w, d, d2 (per 32 at most), sc (per 16 at most), mn (per 32), one row of u */
    return up64(TW * k) + 2 * up64(TW * (k / 32) * 4) + up64(TW * (k / 16) * 4) + up64(TW * (k / 32) * 4) +
           up64(TW * (k / 64) * 4) + up64(k);
}

QMM_VECTORIZE void qmm_panel_build(qmm_panel *p, void *buf, const wmat *W, int64_t o0)
{
    const dtype t = W->type;
    const int64_t K = W->cols, nb = K / blk_elems(t);
    size_t k = (size_t)K;
    char *c = buf;
    p->w = (uint8_t *)c;   c += up64(TW * k);
    p->d = (float *)c;     c += up64(TW * (k / 32) * 4);
    p->d2 = (float *)c;    c += up64(TW * (k / 32) * 4);
    p->sc = (int32_t *)c;  c += up64(TW * (k / 16) * 4);
    p->mn = (int32_t *)c;  c += up64(TW * (k / 32) * 4);
    p->mn2 = (int32_t *)c; c += up64(TW * (k / 64) * 4);
    uint8_t *u = (uint8_t *)c;
    const int64_t nsub = t == DT_Q6_K ? K / 16 : K / 32;
#if defined(__x86_64__)
    const int fast = cpu_level() >= CPU_AVX512;      /* qmm_unpack_row_512 needs F/BW/VL only */
#endif
    for (int r = 0; r < TW; r++) {
        if (o0 + r >= W->rows) {            /* past the last row: zeros, never stored */
            memset(u, 0, k);
            for (int64_t i = 0; i < nb; i++) p->d[i * TW + r] = p->d2[i * TW + r] = 0.f;
            for (int64_t i = 0; i < nsub; i++) p->sc[i * TW + r] = 0;
            for (int64_t i = 0; i < K / 32; i++) p->mn[i * TW + r] = 0;
        } else {
            const uint8_t *src = (const uint8_t *)W->data + (size_t)(o0 + r) * W->row_bytes;
#if defined(__x86_64__)
            if (!fast || !qmm_unpack_row_512(t, src, K, u, p->d + r, p->d2 + r, p->sc + r, p->mn + r, TW))
#endif
                qmm_unpack_row_ref(t, src, K, u, p->d + r, p->d2 + r, p->sc + r, p->mn + r, TW);
        }
        for (int64_t i = 0; i < K / 64; i++)    /* the mins in int16 pairs (6 bits each) */
            p->mn2[i * TW + r] = (int32_t)((uint32_t)p->mn[2 * i * TW + r] | (uint32_t)p->mn[(2 * i + 1) * TW + r] << 16);
        /* VNNI order: four consecutive k of row r at [k/4][r] */
        uint32_t *w4 = (uint32_t *)(void *)p->w;
        for (int64_t k4 = 0; k4 < K / 4; k4++) {
            uint32_t v;
            memcpy(&v, u + 4 * k4, 4);
            w4[k4 * TW + r] = v;
        }
    }
    p->wt = t;
    p->K = K;
    p->nb = nb;
}

/* ---- the reference: one output as a plain loop ------------------------------ */

/* Output (weight row with unpacked u/scales at stride, x row n): the
 * sequence of operations every vector lane performs. */
static float out_ref(dtype t, const uint8_t *u, const float *d, const float *d2, const int32_t *sc,
                     const int32_t *mn, int64_t st, const qmm_x *x, int64_t n)
{
    const int64_t K = x->K, nb = x->nb;
    const int8_t *q = x->qs + n * K;
    const float *dx = x->d + n * nb;
    const int32_t *b16 = x->bs16 + n * (K / 16), *b32 = x->bs32 + n * (K / 32);
    float acc = 0.f;
    for (int64_t b = 0; b < nb; b++) {
        if (t == DT_Q6_K) {
            int32_t I = 0;
            for (int g = 0; g < 16; g++) {
                int32_t P = 0;
                for (int k = 0; k < 16; k++) P += u[256 * b + 16 * g + k] * q[256 * b + 16 * g + k];
                I += sc[(16 * b + g) * st] * (P - 32 * b16[16 * b + g]);
            }
            acc = fmaf((float)I, d[b * st] * dx[b], acc);
        } else if (is_k45(t)) {
            int32_t I = 0, M = 0;
            for (int j = 0; j < 8; j++) {
                int32_t P = 0;
                for (int k = 0; k < 32; k++) P += u[256 * b + 32 * j + k] * q[256 * b + 32 * j + k];
                I += sc[(8 * b + j) * st] * P;
                M += mn[(8 * b + j) * st] * b32[8 * b + j];
            }
            acc = fmaf((float)I, d[b * st] * dx[b], acc);
            acc = fmaf((float)-M, d2[b * st] * dx[b], acc);
        } else {
            int32_t P = 0;
            for (int k = 0; k < 32; k++) P += u[32 * b + k] * q[32 * b + k];
            acc = fmaf((float)(P - wbias(t) * b32[b]), d[b * st] * dx[b], acc);
            if (has_min(t)) acc = fmaf(d2[b * st], x->sx[n * (K / 32) + b], acc);
        }
    }
    return acc;
}

static void store_out(float *yo, float v, const float *bias, int64_t o, int accumulate)
{
    float base = accumulate ? *yo : 0.f;
    if (bias) base += bias[o];
    *yo = base + v;
}

int kern_matmul_int8_ref(float *y, const float *x, const wmat *W, const float *bias, int64_t N, int accumulate)
{
    const dtype t = W->type;
    const int64_t O = W->rows, K = W->cols;
    if (!qmm_type_ok(t) || N <= 0 || O <= 0 || K % blk_elems(t)) return 0;
    for (int64_t i = 0; i < N * K; i++)
        if (!isfinite(x[i])) return 0;
    qmm_x q;
    void *xb = malloc(qmm_x_bytes(N, K) + 64);
    uint8_t *u = malloc((size_t)K);
    size_t nsc = (size_t)K / 16 + 1;
    float *d = malloc(nsc * 4), *d2 = malloc(nsc * 4);
    int32_t *sc = malloc(nsc * 4), *mn = malloc(nsc * 4);
    int ok = xb && u && d && d2 && sc && mn;
    if (ok) {
        char *al = (char *)(((uintptr_t)xb + 63) & ~(uintptr_t)63);
        qmm_x_init(&q, al, t, N, K);
        for (int64_t n = 0; n < N; n++) qmm_x_round(&q, n, x + n * K);
        for (int64_t o = 0; o < O; o++) {
            qmm_unpack_row_ref(t, (const uint8_t *)W->data + (size_t)o * W->row_bytes, K, u, d, d2, sc, mn, 1);
            for (int64_t n = 0; n < N; n++)
                store_out(y + n * O + o, out_ref(t, u, d, d2, sc, mn, 1, &q, n), bias, o, accumulate);
        }
    }
    free(xb); free(u); free(d); free(d2); free(sc); free(mn);
    return ok;
}

/* The reference over a panel (the lanes' model, for the panel tests). */
void qmm_panel_ref(const qmm_panel *p, const qmm_x *x, int64_t n0, int R, float *out)
{
    const int64_t K = p->K;
    uint8_t *u = malloc((size_t)K);
    if (!u) return;
    for (int r = 0; r < TW; r++) {
        for (int64_t k = 0; k < K; k++) u[k] = p->w[(k / 4) * 4 * TW + 4 * r + k % 4];
        for (int i = 0; i < R; i++)
            out[i * TW + r] = out_ref(p->wt, u, p->d + r, p->d2 + r, p->sc + r, p->mn + r, TW, x, n0 + i);
    }
    free(u);
}

/* ---- the vector kernels (qmm_vnni.c, qmm_amx.c) ---------------------------- */

static int g_isa_cap = QMM_ISA_AMX;

void qmm_cap_isa(int isa) { g_isa_cap = isa; }

int qmm_isa(void)
{
#if defined(__x86_64__)
    const cpu_features *f = cpu_get_features();
    const cpu_amx *a = cpu_get_amx();
    if (g_isa_cap >= QMM_ISA_AMX && a->usable && a->int8) return QMM_ISA_AMX;
    if (g_isa_cap >= QMM_ISA_VNNI512 && cpu_level() >= CPU_AVX512 && f->avx512vnni) return QMM_ISA_VNNI512;
    if (g_isa_cap >= QMM_ISA_VNNI256 && cpu_level() >= CPU_AVX2 && f->avxvnni) return QMM_ISA_VNNI256;
#endif
    return QMM_ISA_NONE;
}

const char *qmm_isa_name(int isa)
{
    return isa == QMM_ISA_AMX       ? "amx-int8"
           : isa == QMM_ISA_VNNI512 ? "avx512-vnni"
           : isa == QMM_ISA_VNNI256 ? "avx-vnni"
           : isa == QMM_ISA_MODEL   ? "amx-int8 (tile model)"
                                    : "none";
}

void qmm_panel_run(int isa, const qmm_panel *p, const qmm_x *x, int64_t n0, int R, float *out)
{
    if (isa == QMM_ISA_MODEL || isa == QMM_ISA_AMX) {     /* at most 16 rows of x per tile */
        for (int i = 0; i < R; i += 16)
            (isa == QMM_ISA_AMX ? qmm_panel_amx_native : qmm_panel_amx_model)(p, x, n0 + i, R - i < 16 ? R - i : 16,
                                                                              out + (size_t)i * TW);
        return;
    }
#if defined(__x86_64__)
    if (isa == QMM_ISA_VNNI512) { qmm_panel_512(p, x, n0, R, out); return; }
    if (isa == QMM_ISA_VNNI256) { qmm_panel_256(p, x, n0, R, out); return; }
#endif
    qmm_panel_ref(p, x, n0, R, out);
}

/* ---- the entry point -------------------------------------------------------- */

/* The calling thread's scratch: x's rounded rows below QMM_X_REGION, every
 * thread's panel above it. */
#define QMM_X_REGION (KERN_SCRATCH_BYTES - ((size_t)2 << 20))

typedef struct qmm_job {
    float *y;
    const wmat *W;
    const float *bias;
    const qmm_x *x;
    int64_t n_off;          /* rows of y before this chunk */
    int accumulate, isa;
} qmm_job;

/* A strip of n outputs of one row of y: store_out's operations per
 * element (no element depends on another, so the vector form GCC makes
 * of these loops gives the same bits as the scalar one). */
QMM_VECTORIZE static void store_strip(float *restrict yr, const float *restrict v, const float *restrict bias, int n,
                                      int accumulate)
{
    if (accumulate && bias)
        for (int r = 0; r < n; r++) yr[r] = (yr[r] + bias[r]) + v[r];
    else if (accumulate)
        for (int r = 0; r < n; r++) yr[r] = yr[r] + v[r];
    else if (bias)
        for (int r = 0; r < n; r++) yr[r] = (0.f + bias[r]) + v[r];
    else
        for (int r = 0; r < n; r++) yr[r] = 0.f + v[r];
}

static void qmm_range(void *ctx, int64_t t0, int64_t t1)
{
    const qmm_job *j = ctx;
    const int64_t O = j->W->rows;
    char *scr = kern_scratch();
    qmm_panel p;
    float out[QMM_R_MAX * TW];
    for (int64_t t = t0; t < t1; t++) {
        const int64_t o0 = t * TW;
        const int w = O - o0 < TW ? (int)(O - o0) : TW;
        qmm_panel_build(&p, scr + QMM_X_REGION, j->W, o0);
        /* the next panel's weight rows (contiguous) asked for from memory
         * while this one runs, spread over its passes: every weight is read
         * once per call, and unpacking waited on those reads */
        const char *nxt = t + 1 < t1 ? (const char *)j->W->data + (size_t)(o0 + TW) * j->W->row_bytes : NULL;
        const int64_t nr = O - o0 - TW < TW ? O - o0 - TW : TW;
        const size_t nbytes = nxt ? (size_t)nr * j->W->row_bytes : 0, passes = (size_t)(j->x->N + QMM_R_MAX - 1) / QMM_R_MAX;
        const size_t step = (nbytes / passes + 64) & ~(size_t)63;
        size_t pf = 0;
        for (int64_t n = 0; n < j->x->N; n += QMM_R_MAX) {
            int R = j->x->N - n < QMM_R_MAX ? (int)(j->x->N - n) : QMM_R_MAX;
            for (size_t e = pf + step; pf < e && pf < nbytes; pf += 64) __builtin_prefetch(nxt + pf, 0, 2);
            qmm_panel_run(j->isa, &p, j->x, n, R, out);
            for (int i = 0; i < R; i++)
                store_strip(j->y + (j->n_off + n + i) * O + o0, out + i * TW, j->bias ? j->bias + o0 : NULL, w,
                            j->accumulate);
        }
    }
}

/* Rounding x, split over rows (rows never interact: the bytes do not
 * depend on the split), with the finiteness check of each row fused in
 * where the rows are the whole of x; `bad` is set if any row is not. */
typedef struct qmm_xjob {
    qmm_x *q;
    const float *x;
    int64_t K;
    int round;              /* 0: only check the rows */
    int bad;
} qmm_xjob;

QMM_VECTORIZE static int row_finite(const float *x, int64_t K)
{
    uint32_t bad = 0;
    for (int64_t i = 0; i < K; i++) {
        uint32_t b;
        memcpy(&b, x + i, 4);
        bad |= (b & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
}

static void qmm_xrange(void *ctx, int64_t n0, int64_t n1)
{
    qmm_xjob *j = ctx;
    for (int64_t n = n0; n < n1; n++) {
        const float *xr = j->x + n * j->K;
        if (!row_finite(xr, j->K)) {
            __atomic_store_n(&j->bad, 1, __ATOMIC_RELAXED);
            return;
        }
        if (j->round) qmm_x_round_fast(j->q, n, xr);
    }
}

static int x_rows(qmm_xjob *j, int64_t N)
{
    if (N * j->K < (1 << 15)) qmm_xrange(j, 0, N);
    else kern_parallel_for(N, qmm_xrange, j);
    return !__atomic_load_n(&j->bad, __ATOMIC_RELAXED);
}

int qmm_supported(const wmat *W)
{
    if (!qmm_type_ok(W->type) || qmm_isa() == QMM_ISA_NONE) return 0;
    const int64_t K = W->cols;
    if (K <= 0 || K % blk_elems(W->type) || W->rows <= 0) return 0;
    if (W->row_bytes < dtype_row_bytes(W->type, K) || !W->data) return 0;
    return qmm_panel_bytes(K) <= KERN_SCRATCH_BYTES - QMM_X_REGION && qmm_x_bytes(1, K) <= QMM_X_REGION;
}

int qmm_matmul(float *y, const float *x, const wmat *W, const float *bias, int64_t N, int accumulate)
{
    const int64_t O = W->rows, K = W->cols;
    if (N <= 0 || !qmm_supported(W)) return 0;
    kern_ensure_init();
    /* as many rows as the caller's scratch holds; the split depends on K
     * only, and rows never interact, so the bits do not depend on it */
    int64_t chunk = N;
    while (chunk > 1 && qmm_x_bytes(chunk, K) > QMM_X_REGION) chunk = (chunk + 1) / 2;
    /* NaN/Inf: the float path propagates it, so y is left untouched; rows
     * past the first chunk are checked before any row of y is written */
    if (chunk < N) {
        qmm_xjob c = {NULL, x + chunk * K, K, 0, 0};
        if (!x_rows(&c, N - chunk)) return 0;
    }
    qmm_job j = {y, W, bias, NULL, 0, accumulate, qmm_isa()};
    for (int64_t n0 = 0; n0 < N; n0 += chunk) {
        int64_t nc = N - n0 < chunk ? N - n0 : chunk;
        qmm_x q;
        qmm_x_init(&q, kern_scratch(), W->type, nc, K);
        qmm_xjob xj = {&q, x + n0 * K, K, 1, 0};
        if (!x_rows(&xj, nc)) return 0;     /* only in the first chunk: the rest were checked */
        j.x = &q;
        j.n_off = n0;
        int64_t tiles = (O + TW - 1) / TW;
        if (tiles * nc * K < (1 << 16)) qmm_range(&j, 0, tiles);
        else kern_parallel_for(tiles, qmm_range, &j);
    }
    return 1;
}
