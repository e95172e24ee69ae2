/* quant_w — llama.cpp's importance-weighted quantizers (ggml-quants.c
 * quantize_row_{q4_0,q4_1,q5_0,q5_1,q4_K,q5_K,q6_K}_impl with
 * quant_weights), bit for bit: what ggml_quantize_chunk does when
 * llama-quantize is given an imatrix. quant_weights is the row's per-column
 * importance (the imatrix's in_sum2 / counts, export/imatrix.h), the same
 * for every row of a tensor.
 *
 * As in kern/quant.c, every float expression keeps ggml's operation order
 * (the build has -ffp-contract=off), integers out of range only arise from
 * NaN/Inf input. Without weights the reference quantizers of kern/quant.c
 * apply (ggml does the same: quantize_q4_K(.., NULL) is _ref). The K-quant
 * rows and the make_qx fit are quant.c's, which take the weights or NULL;
 * this file holds the weighted K block fit and Q4_0..Q5_1. */
#include "kern/kern_impl.h"

#include <math.h>
#include <string.h>

#define GROUP_MAX_EPS 1e-15f

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

/* make_qp_quants: the 8 sub-block scales (or mins) of a K block as 6-bit
 * multiples of one scale, weighted by the sub-blocks' total weight. */
static float make_qp_quants(int n, int nmax, const float *x, uint8_t *L, const float *quant_weights)
{
    float max = 0;
    for (int i = 0; i < n; ++i) max = max > x[i] ? max : x[i]; /* ggml's MAX(max, x[i]) */
    if (max < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; ++i) L[i] = (uint8_t)nearest_int(iscale * x[i]);
    float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; ++i) {
        float diff = x[i] - scale * L[i];
        float w = quant_weights[i];
        best_mse += w * diff * diff;
    }
    for (int is = -4; is <= 4; ++is) {
        if (is == 0) continue;
        float iscale_is = (0.1f * is + nmax) / max;
        float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale_is * x[i]);
            l = imin(nmax, l);
            float diff = x[i] - scale_is * l;
            float w = quant_weights[i];
            mse += w * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = imin(nmax, l);
        L[i] = (uint8_t)l;
        float w = quant_weights[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            float w = quant_weights[i];
            float slx = sumlx - w * x[i] * L[i];
            float sl2 = suml2 - w * L[i] * L[i];
            if (slx > 0 && sl2 > 0) {
                int new_l = nearest_int(x[i] * sl2 / slx);
                new_l = imin(nmax, new_l);
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* ---- 32-element types ------------------------------------------------------ */

static float row_sigma2(const float *x, int64_t n)
{
    float sum_x2 = 0;
    for (int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
    return sum_x2 / n;
}

static void pack_qh(const uint8_t *L, uint8_t *qs, uint8_t *qh4)
{
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
        const uint8_t xi0 = L[j], xi1 = L[j + 16];
        qs[j] = (uint8_t)((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
        qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
        qh |= ((xi1 & 0x10u) >> 4) << (j + 16);
    }
    memcpy(qh4, &qh, 4);
}

/* Q4_0 (18 bytes: d, qs[16]) and Q5_0 (22: d, qh, qs[16]). */
static void quant_q4_0_w(const float *x, uint8_t *y, int64_t n, const float *quant_weights, int five)
{
    float weight[32];
    int8_t L[32];
    const float sigma2 = row_sigma2(x, n);
    const size_t bb = five ? 22 : 18;
    for (int64_t ib = 0; ib < n / 32; ++ib, y += bb) {
        const float *xb = x + 32 * ib, *qw = quant_weights + 32 * ib;
        for (int j = 0; j < 32; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        float d = quant_make_qx(32, five ? 16 : 8, xb, L, weight);
        wr16(y, f32_to_fp16(d));
        if (five) pack_qh((const uint8_t *)L, y + 6, y + 2);
        else
            for (int j = 0; j < 16; ++j) y[2 + j] = (uint8_t)((uint8_t)L[j] | ((uint8_t)L[j + 16] << 4));
    }
}

/* Q4_1 (20 bytes: d, m, qs[16]) and Q5_1 (24: d, m, qh, qs[16]). */
static void quant_q4_1_w(const float *x, uint8_t *y, int64_t n, const float *quant_weights, int five)
{
    float weight[32];
    uint8_t L[32], Laux[32];
    const float sigma2 = row_sigma2(x, n);
    const size_t bb = five ? 24 : 20;
    for (int64_t ib = 0; ib < n / 32; ++ib, y += bb) {
        const float *xb = x + 32 * ib, *qw = quant_weights + 32 * ib;
        for (int j = 0; j < 32; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        float min;
        float d = quant_make_qkx(32, five ? 31 : 15, xb, weight, L, &min, Laux, -0.9f, 0.05f, 36);
        wr16(y, f32_to_fp16(d));
        wr16(y + 2, f32_to_fp16(-min));
        if (five) pack_qh(L, y + 8, y + 4);
        else
            for (int j = 0; j < 16; ++j) y[4 + j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

/* ---- K-quants ---------------------------------------------------------------- */

/* Q4_K (nmax 15) and Q5_K (nmax 31): L[256], scales[12], d, dmin of one block. */
void quant_kx_block_w(const float *x, const float *qwb, int nmax, uint8_t *L, uint8_t *scales12, uint16_t *d_out,
                      uint16_t *dmin_out)
{
    uint8_t Laux[32], Ls[8], Lm[8];
    float weights[32], sw[8], mins[8], scales[8];
    float sum_x2 = 0;
    for (int l = 0; l < QK_K; ++l) sum_x2 += x[l] * x[l];
    float sigma2 = 2 * sum_x2 / QK_K;
    for (int j = 0; j < QK_K / 32; ++j) {
        const float *qw = qwb + 32 * j;
        for (int l = 0; l < 32; ++l) weights[l] = qw[l] * sqrtf(sigma2 + x[32 * j + l] * x[32 * j + l]);
        float sumw = 0;
        for (int l = 0; l < 32; ++l) sumw += weights[l];
        sw[j] = sumw;
        scales[j] = quant_make_qkx(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36);
    }
    float d_block = make_qp_quants(QK_K / 32, 63, scales, Ls, sw);
    float m_block = make_qp_quants(QK_K / 32, 63, mins, Lm, sw);
    memset(scales12, 0, 12);
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t ls = Ls[j], lm = Lm[j];
        ls = ls < 63 ? ls : 63; /* Q5_K clamps, Q4_K's are already <= 63 (make_qp_quants' nmax) */
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            scales12[j] = ls;
            scales12[j + 4] = lm;
        } else {
            scales12[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            scales12[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales12[j - 0] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d_out = f32_to_fp16(d_block);
    *dmin_out = f32_to_fp16(m_block);
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t sc, m;
        kern_scmin_k4(scales12, j, &sc, &m);
        const float d = fp16_to_f32(*d_out) * sc;
        if (!d) continue;
        const float dm = fp16_to_f32(*dmin_out) * m;
        for (int ii = 0; ii < 32; ++ii) {
            int l = nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)imax(0, imin(nmax, l));
        }
    }
}

size_t kern_quant_row_w(dtype t, const float *src, void *dst, int64_t n, const float *qw)
{
    if (!qw) return kern_quant_row(t, src, dst, n);
    size_t bytes = dtype_row_bytes(t, n);
    if (!bytes) return 0;
    uint8_t *y = dst;
    switch (t) {
    case DT_Q4_0: quant_q4_0_w(src, y, n, qw, 0); break;
    case DT_Q5_0: quant_q4_0_w(src, y, n, qw, 1); break;
    case DT_Q4_1: quant_q4_1_w(src, y, n, qw, 0); break;
    case DT_Q5_1: quant_q4_1_w(src, y, n, qw, 1); break;
    case DT_Q4_K:
    case DT_Q5_K:
    case DT_Q6_K: quant_k_row(t, src, y, n, qw); break;
    default: return kern_quant_row(t, src, dst, n); /* F32/F16/BF16/Q8_0: ggml ignores the weights */
    }
    return bytes;
}
