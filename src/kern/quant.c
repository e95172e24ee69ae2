/* quant — llama.cpp's reference quantizers (quantize_row_*_ref, no imatrix),
 * bit for bit, as docs/reference/formats.md §6.3 spells them out.
 *
 * Bit-exactness rests on doing every float operation in the same order and
 * precision as ggml-quants.c: each expression below is written the way the
 * reference evaluates it (left to right, float, no FMA — the build sets
 * -ffp-contract=off). Where the reference converts an out-of-range float to
 * an integer (undefined in C, only reachable with NaN/Inf input) we clamp
 * first; in-range results are unchanged.
 *
 * Block layouts (docs/reference/formats.md §4.3) are read and written byte by byte, so
 * unaligned rows are fine. */
#include "kern/kern_impl.h"

#include <math.h>
#include <string.h>

#define GROUP_MAX_EPS 1e-15f

int kern_trunc_i8(float v)
{
    if (!(v > -128.f)) return v != v ? 0 : -128;
    if (v >= 127.f) return 127;
    return (int)(int8_t)v;
}

/* ---- Q8_0 / Q4_0 / Q5_0 --------------------------------------------------- */

/* x[n] → blocks of 34 bytes: fp16 d, int8 qs[32]. */
static void quant_q8_0(const float *x, uint8_t *y, int64_t n)
{
    for (int64_t i = 0; i < n / 32; i++, x += 32, y += 34) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]); /* ggml's MAX */
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        wr16(y, f32_to_fp16(d));
        for (int j = 0; j < 32; j++) {
            float r = roundf(x[j] * id);
            if (!(r >= -128.f)) r = r != r ? 0.f : -128.f;
            if (r > 127.f) r = 127.f;
            y[2 + j] = (uint8_t)(int8_t)r;
        }
    }
}

/* Signed value with the largest magnitude (first one wins ties). */
static float signed_max(const float *x, int n)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

/* blocks of 18 bytes: fp16 d, qs[16] (low nibble j, high nibble j+16). */
static void quant_q4_0(const float *x, uint8_t *y, int64_t n)
{
    for (int64_t i = 0; i < n / 32; i++, x += 32, y += 18) {
        const float max = signed_max(x, 32);
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        wr16(y, f32_to_fp16(d));
        for (int j = 0; j < 16; j++) {
            const float x0 = x[j] * id, x1 = x[16 + j] * id;
            int xi0 = kern_trunc_i8(x0 + 8.5f), xi1 = kern_trunc_i8(x1 + 8.5f);
            xi0 = xi0 < 15 ? xi0 : 15;
            xi1 = xi1 < 15 ? xi1 : 15;
            /* ggml stores MIN(15, (int8_t)v) in a uint8_t, then shifts it:
             * convert first, so a NaN/-Inf row (-128) shifts no negative. */
            const uint8_t u0 = (uint8_t)xi0, u1 = (uint8_t)xi1;
            y[2 + j] = (uint8_t)(u0 | (unsigned)u1 << 4);
        }
    }
}

/* blocks of 22 bytes: fp16 d, qh u32 (bit j = 5th bit of element j), qs[16]. */
static void quant_q5_0(const float *x, uint8_t *y, int64_t n)
{
    for (int64_t i = 0; i < n / 32; i++, x += 32, y += 22) {
        const float max = signed_max(x, 32);
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        wr16(y, f32_to_fp16(d));
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            const float x0 = x[j] * id, x1 = x[16 + j] * id;
            int xi0 = kern_trunc_i8(x0 + 16.5f), xi1 = kern_trunc_i8(x1 + 16.5f);
            xi0 = xi0 < 31 ? xi0 : 31;
            xi1 = xi1 < 31 ? xi1 : 31;
            uint8_t u0 = (uint8_t)xi0, u1 = (uint8_t)xi1;
            y[6 + j] = (uint8_t)((u0 & 0x0F) | ((u1 & 0x0F) << 4));
            qh |= ((u0 & 0x10u) >> 4) << (j + 0);
            qh |= ((u1 & 0x10u) >> 4) << (j + 16);
        }
        memcpy(y + 2, &qh, 4);
    }
}

/* ---- K-quants --------------------------------------------------------------- */

/* ggml's make_qkx2_quants: asymmetric (scale, min) fit of n values to
 * 0..nmax with weights w, trying nstep+1 scales around the first guess.
 * It is also make_qkx3_quants with weights given and use_mad false (the
 * imatrix quantizers of kern/quant_w.c), the same computation. */
float quant_make_qkx(int n, int nmax, const float *x, const float *weights,
                              uint8_t *L, float *the_min, uint8_t *Laux,
                              float rmin, float rdelta, int nstep)
{
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)(l < 0 ? 0 : l > nmax ? nmax : l);
        float diff = scale * L[i] + min - x[i];
        diff = diff * diff;
        float w = weights[i];
        best_error += w * diff;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = l < 0 ? 0 : l > nmax ? nmax : l;
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = diff * diff;
                float w = weights[i];
                cur_error += w * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}


/* Shared body of Q4_K (nmax 15) and Q5_K (nmax 31): fills L[256], the
 * 12 scale bytes and d/dmin of one block. */
static void quant_kx_block(const float *x, int nmax, float rmin, int nstep, uint8_t *L,
                           uint8_t *scales12, uint16_t *d_out, uint16_t *dmin_out)
{
    uint8_t Laux[32];
    float weights[32], mins[8], scales[8];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = quant_make_qkx(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                     rmin, 0.1f, nstep);
        float scale = scales[j];
        if (scale > max_scale) max_scale = scale;
        float min = mins[j];
        if (min > max_min) max_min = min;
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < 8; ++j) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
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
    *d_out = f32_to_fp16(max_scale / 63.f);
    *dmin_out = f32_to_fp16(max_min / 63.f);
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        kern_scmin_k4(scales12, j, &sc, &m);
        const float d = fp16_to_f32(*d_out) * sc;
        if (!d) continue;       /* keeps quant_make_qkx's L for this sub-block */
        const float dm = fp16_to_f32(*dmin_out) * m;
        for (int ii = 0; ii < 32; ++ii) {
            int l = nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)(l < 0 ? 0 : l > nmax ? nmax : l);
        }
    }
}

/* blocks of 144 bytes: d, dmin, scales[12], qs[128]; qw the row's
 * importance (kern/quant_w.c's block fit) or NULL. */
static void quant_q4_K(const float *x, uint8_t *y, int64_t n, const float *qw)
{
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K, y += 144) {
        uint16_t d, dmin;
        if (qw) quant_kx_block_w(x, qw + QK_K * i, 15, L, y + 4, &d, &dmin);
        else quant_kx_block(x, 15, -1.f, 20, L, y + 4, &d, &dmin);
        wr16(y, d);
        wr16(y + 2, dmin);
        uint8_t *q = y + 16;
        for (int j = 0; j < QK_K; j += 64, q += 32)
            for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

/* blocks of 176 bytes: d, dmin, scales[12], qh[32], qs[128]; qw as Q4_K. */
static void quant_q5_K(const float *x, uint8_t *y, int64_t n, const float *qw)
{
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K, y += 176) {
        uint16_t d, dmin;
        if (qw) quant_kx_block_w(x, qw + QK_K * i, 31, L, y + 4, &d, &dmin);
        else quant_kx_block(x, 31, -0.5f, 15, L, y + 4, &d, &dmin);
        wr16(y, d);
        wr16(y + 2, dmin);
        uint8_t *qh = y + 16, *ql = y + 48;
        memset(qh, 0, 32);
        uint8_t m1 = 1, m2 = 2;
        for (int n0 = 0; n0 < QK_K; n0 += 64) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[n0 + j];
                if (l1 > 15) { l1 -= 16; qh[j] |= m1; }
                int l2 = L[n0 + j + 32];
                if (l2 > 15) { l2 -= 16; qh[j] |= m2; }
                ql[j] = (uint8_t)(l1 | (l2 << 4));
            }
            m1 = (uint8_t)(m1 << 2);
            m2 = (uint8_t)(m2 << 2);
            ql += 32;
        }
    }
}

/* ggml's make_qx_quants with rmse_type 1: symmetric fit of n values to
 * -nmax..nmax-1, L = l + nmax, each value weighted by qw[i] (the imatrix
 * row, kern/quant_w.c) or, with qw NULL, by x². */
float quant_make_qx(int n, int nmax, const float *x, int8_t *L, const float *qw)
{
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
        L[i] = (int8_t)(l + nmax);
        float w = qw ? qw[i] : x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l;
            float w = qw ? qw[i] : x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                int l = nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + (l < -nmax ? -nmax : l > nmax - 1 ? nmax - 1 : l));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* blocks of 210 bytes: ql[128], qh[64], int8 scales[16], fp16 d; qw the
 * row's importance or NULL (ggml's quantize_row_q6_K_impl and _ref). */
static void quant_q6_K(const float *x, uint8_t *y, int64_t n, const float *qw)
{
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K, y += 210) {
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            const float scale = quant_make_qx(16, 32, x + 16 * ib, L + 16 * ib, qw ? qw + QK_K * i + 16 * ib : NULL);
            scales[ib] = scale;
            const float abs_scale = fabsf(scale);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scale;
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(y, 0, 210);
            continue;
        }
        int8_t *sc = (int8_t *)(y + 192);
        float iscale = -128.f / max_scale;
        uint16_t d = f32_to_fp16(1 / iscale);
        wr16(y + 208, d);
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            int v = nearest_int(iscale * scales[ib]);
            sc[ib] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < QK_K / 16; ++j) {
            float dd = fp16_to_f32(d) * sc[j];
            if (!dd) continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int(x[16 * j + ii] / dd);
                l = l < -32 ? -32 : l > 31 ? 31 : l;
                L[16 * j + ii] = (int8_t)(l + 32);
            }
        }
        uint8_t *ql = y, *qh = y + 128;
        for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; ++l) {
                const uint8_t q1 = L[j + l + 0] & 0xF, q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
                ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
                ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
                qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                  ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
        }
    }
}

size_t quant_k_row(dtype t, const float *src, void *dst, int64_t n, const float *qw)
{
    uint8_t *y = dst;
    switch (t) {
    case DT_Q4_K: quant_q4_K(src, y, n, qw); break;
    case DT_Q5_K: quant_q5_K(src, y, n, qw); break;
    case DT_Q6_K: quant_q6_K(src, y, n, qw); break;
    default: return 0;
    }
    return dtype_row_bytes(t, n);
}

size_t kern_quant_row(dtype t, const float *src, void *dst, int64_t n)
{
    size_t bytes = dtype_row_bytes(t, n);
    if (!bytes && n != 0) return 0;
    uint8_t *y = dst;
    switch (t) {
    case DT_F32: memcpy(dst, src, (size_t)n * 4); break;
    case DT_F16:
        for (int64_t i = 0; i < n; i++) { uint16_t h = f32_to_fp16(src[i]); memcpy(y + 2 * i, &h, 2); }
        break;
    case DT_BF16:
        for (int64_t i = 0; i < n; i++) { uint16_t h = f32_to_bf16(src[i]); memcpy(y + 2 * i, &h, 2); }
        break;
    case DT_Q8_0: quant_q8_0(src, y, n); break;
    case DT_Q4_0: quant_q4_0(src, y, n); break;
    case DT_Q5_0: quant_q5_0(src, y, n); break;
    case DT_Q4_K: quant_q4_K(src, y, n, NULL); break;
    case DT_Q5_K: quant_q5_K(src, y, n, NULL); break;
    case DT_Q6_K: quant_q6_K(src, y, n, NULL); break;
    default: return 0;
    }
    return bytes;
}

/* ---- dequantization ------------------------------------------------------------
 * The scalar definition of every format's values, with ggml's operation
 * order (dequantize_row_*). The vector versions in dequant_x86.c produce the
 * same floats. */

static float rd_h(const uint8_t *p) { uint16_t h; memcpy(&h, p, 2); return fp16_to_f32(h); }

void dequant_row_scalar(dtype t, const void *src, float *y, int64_t n)
{
    const uint8_t *b = src;
    switch (t) {
    case DT_F32: memcpy(y, src, (size_t)n * 4); return;
    case DT_F16:
        for (int64_t i = 0; i < n; i++) y[i] = rd_h(b + 2 * i);
        return;
    case DT_BF16:
        for (int64_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, b + 2 * i, 2); y[i] = bf16_to_f32(h); }
        return;
    case DT_Q8_0:
        for (int64_t i = 0; i < n / 32; i++, b += 34, y += 32) {
            const float d = rd_h(b);
            for (int j = 0; j < 32; j++) y[j] = (int8_t)b[2 + j] * d;
        }
        return;
    case DT_Q4_0:
        for (int64_t i = 0; i < n / 32; i++, b += 18, y += 32) {
            const float d = rd_h(b);
            for (int j = 0; j < 16; j++) {
                y[j] = ((b[2 + j] & 0x0F) - 8) * d;
                y[j + 16] = ((b[2 + j] >> 4) - 8) * d;
            }
        }
        return;
    case DT_Q4_1:
        for (int64_t i = 0; i < n / 32; i++, b += 20, y += 32) {
            const float d = rd_h(b), m = rd_h(b + 2);
            for (int j = 0; j < 16; j++) {
                y[j] = (b[4 + j] & 0x0F) * d + m;
                y[j + 16] = (b[4 + j] >> 4) * d + m;
            }
        }
        return;
    case DT_Q5_0:
        for (int64_t i = 0; i < n / 32; i++, b += 22, y += 32) {
            const float d = rd_h(b);
            uint32_t qh;
            memcpy(&qh, b + 2, 4);
            for (int j = 0; j < 16; j++) {
                const int x0 = ((b[6 + j] & 0x0F) | (((qh >> j) << 4) & 0x10)) - 16;
                const int x1 = ((b[6 + j] >> 4) | ((qh >> (j + 12)) & 0x10)) - 16;
                y[j] = x0 * d;
                y[j + 16] = x1 * d;
            }
        }
        return;
    case DT_Q5_1:
        for (int64_t i = 0; i < n / 32; i++, b += 24, y += 32) {
            const float d = rd_h(b), m = rd_h(b + 2);
            uint32_t qh;
            memcpy(&qh, b + 4, 4);
            for (int j = 0; j < 16; j++) {
                const int x0 = (b[8 + j] & 0x0F) | (((qh >> j) << 4) & 0x10);
                const int x1 = (b[8 + j] >> 4) | ((qh >> (j + 12)) & 0x10);
                y[j] = x0 * d + m;
                y[j + 16] = x1 * d + m;
            }
        }
        return;
    case DT_Q4_K:
        for (int64_t i = 0; i < n / QK_K; i++, b += 144) {
            const float d = rd_h(b), min = rd_h(b + 2);
            const uint8_t *q = b + 16;
            for (int j = 0, is = 0; j < QK_K; j += 64, is += 2, q += 32) {
                uint8_t sc, m;
                kern_scmin_k4(b + 4, is + 0, &sc, &m);
                const float d1 = d * sc, m1 = min * m;
                kern_scmin_k4(b + 4, is + 1, &sc, &m);
                const float d2 = d * sc, m2 = min * m;
                for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
                for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
            }
        }
        return;
    case DT_Q5_K:
        for (int64_t i = 0; i < n / QK_K; i++, b += 176) {
            const float d = rd_h(b), min = rd_h(b + 2);
            const uint8_t *qh = b + 16, *ql = b + 48;
            uint8_t u1 = 1, u2 = 2;
            for (int j = 0, is = 0; j < QK_K; j += 64, is += 2, ql += 32) {
                uint8_t sc, m;
                kern_scmin_k4(b + 4, is + 0, &sc, &m);
                const float d1 = d * sc, m1 = min * m;
                kern_scmin_k4(b + 4, is + 1, &sc, &m);
                const float d2 = d * sc, m2 = min * m;
                for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
                for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
                u1 = (uint8_t)(u1 << 2);
                u2 = (uint8_t)(u2 << 2);
            }
        }
        return;
    case DT_Q6_K:
        for (int64_t i = 0; i < n / QK_K; i++, b += 210) {
            const float d = rd_h(b + 208);
            const uint8_t *ql = b, *qh = b + 128;
            const int8_t *sc = (const int8_t *)(b + 192);
            for (int n0 = 0; n0 < QK_K; n0 += 128, y += 128, ql += 64, qh += 32, sc += 8) {
                for (int l = 0; l < 32; ++l) {
                    int is = l / 16;
                    const int q1 = (int8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                    const int q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                    const int q3 = (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                    const int q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                    y[l + 0] = d * sc[is + 0] * q1;
                    y[l + 32] = d * sc[is + 2] * q2;
                    y[l + 64] = d * sc[is + 4] * q3;
                    y[l + 96] = d * sc[is + 6] * q4;
                }
            }
        }
        return;
    default:
        for (int64_t i = 0; i < n; i++) y[i] = 0.f;
        return;
    }
}

void kern_dequant_row(dtype t, const void *src, float *dst, int64_t n)
{
    if (n <= 0) return;
    if (!kern_isa_get()->dequant || !kern_isa_get()->dequant(t, src, dst, n))
        dequant_row_scalar(t, src, dst, n);
}
