/* preprocess — transformers' image processors, PIL backend (media/preprocess.h). */
#include "media/preprocess.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const proc_cfg PROC_PALIGEMMA_224 = {PROC_SIGLIP, 0, 224, 224, PIL_BICUBIC, 0.00392156862745098,
                                     {0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}, 0, 0, 0, 0, 0};
const proc_cfg PROC_QWEN2_VL = {PROC_QWEN2VL, 1, 0, 0, PIL_BICUBIC, 0.00392156862745098,
                                {0.48145466f, 0.4578275f, 0.40821073f}, {0.26862954f, 0.26130258f, 0.27577711f},
                                3136, 12845056, 14, 2, 2};

#define PREC 22   /* Pillow's PRECISION_BITS for 8-bit images: 32 - 8 - 2 */

static double f_bicubic(double x)
{
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}

static double f_bilinear(double x)
{
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Per output index: the first input index, the count, and ksize fixed-point
 * weights (Pillow's precompute_coeffs then normalize_coeffs_8bpc). */
static int coeffs(int in_size, int out_size, int filter, int **bounds_out, int32_t **kk_out, int *ksize_out)
{
    double (*fn)(double) = filter == PIL_BICUBIC ? f_bicubic : f_bilinear;
    double fsupport = filter == PIL_BICUBIC ? 2.0 : 1.0;
    double scale = (double)((float)in_size - 0.0f) / out_size, filterscale = scale < 1.0 ? 1.0 : scale;
    double support = fsupport * filterscale;
    int ksize = (int)ceil(support) * 2 + 1;
    double *kd = malloc((size_t)out_size * ksize * sizeof *kd);
    int *bounds = malloc((size_t)out_size * 2 * sizeof *bounds);
    int32_t *kk = malloc((size_t)out_size * ksize * sizeof *kk);
    if (!kd || !bounds || !kk) { free(kd); free(bounds); free(kk); return -1; }
    double inv = 1.0 / filterscale;
    for (int xx = 0; xx < out_size; xx++) {
        double center = 0.0 + (xx + 0.5) * scale, ww = 0.0;
        int xmin = (int)(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int xmax = (int)(center + support + 0.5);
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        double *k = kd + (size_t)xx * ksize;
        int x;
        for (x = 0; x < xmax; x++) {
            double w = fn((x + xmin - center + 0.5) * inv);
            k[x] = w;
            ww += w;
        }
        if (ww != 0.0)
            for (x = 0; x < xmax; x++) k[x] /= ww;
        for (; x < ksize; x++) k[x] = 0;
        bounds[2 * xx] = xmin;
        bounds[2 * xx + 1] = xmax;
    }
    for (size_t i = 0; i < (size_t)out_size * ksize; i++)
        kk[i] = kd[i] < 0 ? (int32_t)(-0.5 + kd[i] * (1 << PREC)) : (int32_t)(0.5 + kd[i] * (1 << PREC));
    free(kd);
    *bounds_out = bounds;
    *kk_out = kk;
    *ksize_out = ksize;
    return 0;
}

static uint8_t clip8(int v)
{
    v >>= PREC;   /* arithmetic shift, as Pillow's lookup index */
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* One horizontal pass: rows of src (width w) → rows of dst (width ow). */
static void pass_h(const uint8_t *src, int w, int rows, uint8_t *dst, int ow, const int *b, const int32_t *kk, int ks)
{
    for (int y = 0; y < rows; y++) {
        const uint8_t *row = src + (size_t)y * w * 3;
        uint8_t *o = dst + (size_t)y * ow * 3;
        for (int xx = 0; xx < ow; xx++) {
            int xmin = b[2 * xx], xmax = b[2 * xx + 1];
            const int32_t *k = kk + (size_t)xx * ks;
            int s0 = 1 << (PREC - 1), s1 = s0, s2 = s0;
            for (int x = 0; x < xmax; x++) {
                const uint8_t *p = row + (size_t)(x + xmin) * 3;
                s0 += p[0] * k[x];
                s1 += p[1] * k[x];
                s2 += p[2] * k[x];
            }
            o[3 * xx] = clip8(s0);
            o[3 * xx + 1] = clip8(s1);
            o[3 * xx + 2] = clip8(s2);
        }
    }
}

/* One vertical pass: src (width w) → oh rows of dst; b's row indices are
 * relative to src. */
static void pass_v(const uint8_t *src, int w, uint8_t *dst, int oh, const int *b, const int32_t *kk, int ks)
{
    for (int yy = 0; yy < oh; yy++) {
        int ymin = b[2 * yy], ymax = b[2 * yy + 1];
        const int32_t *k = kk + (size_t)yy * ks;
        uint8_t *o = dst + (size_t)yy * w * 3;
        for (int xx = 0; xx < w * 3; xx++) {
            int s = 1 << (PREC - 1);
            for (int y = 0; y < ymax; y++) s += src[(size_t)(y + ymin) * w * 3 + xx] * k[y];
            o[xx] = clip8(s);
        }
    }
}

int pil_resize_rgb(const uint8_t *in, int w, int h, uint8_t *out, int ow, int oh, int filter, dlm_err *e)
{
    if (filter != PIL_BICUBIC && filter != PIL_BILINEAR) return err_set(e, "ImageError", "resample filter %d is not supported", filter);
    if (ow == w && oh == h) { memcpy(out, in, (size_t)w * h * 3); return 0; }
    int need_h = ow != w, need_v = oh != h;
    /* Pillow 13 runs the vertical pass first when the height shrinks by more
     * than twice what the width does; the 8-bit intermediate makes the order
     * visible in the result */
    int h_first = !(h - oh > 0 && h - oh > (w - ow) * 2);
    int *bv = NULL, *bh = NULL, kv = 0, kh = 0;
    int32_t *cv = NULL, *ch = NULL;
    uint8_t *tmp = NULL;
    int rc = -1;
    if ((need_v && coeffs(h, oh, filter, &bv, &cv, &kv)) || (need_h && coeffs(w, ow, filter, &bh, &ch, &kh))) goto oom;
    if (!need_v) { pass_h(in, w, h, out, ow, bh, ch, kh); rc = 0; goto out; }
    if (!need_h) { pass_v(in, w, out, oh, bv, cv, kv); rc = 0; goto out; }
    if (h_first) {
        /* horizontal pass over only the input rows the vertical pass reads */
        int y0 = bv[0], y1 = bv[2 * oh - 2] + bv[2 * oh - 1];
        for (int i = 0; i < oh; i++) bv[2 * i] -= y0;
        if (!(tmp = malloc((size_t)ow * (y1 - y0) * 3))) goto oom;
        pass_h(in + (size_t)y0 * w * 3, w, y1 - y0, tmp, ow, bh, ch, kh);
        pass_v(tmp, ow, out, oh, bv, cv, kv);
    } else {
        if (!(tmp = malloc((size_t)w * oh * 3))) goto oom;
        pass_v(in, w, tmp, oh, bv, cv, kv);
        pass_h(tmp, w, oh, out, ow, bh, ch, kh);
    }
    rc = 0;
    goto out;
oom:
    err_set(e, "MemoryError", "out of memory resizing a %dx%d image", w, h);
out:
    free(bv); free(cv); free(bh); free(ch); free(tmp);
    return rc;
}

int qwen2vl_smart_resize(int h, int w, int factor, long long min_pixels, long long max_pixels, int *oh, int *ow,
                         dlm_err *e)
{
    double big = h > w ? h : w, small = h > w ? w : h;
    if (big / small > 200)
        return err_set(e, "ImageError", "absolute aspect ratio must be smaller than 200, got %g", big / small);
    /* nearbyint rounds half to even under the default rounding mode, as Python's round */
    long long hb = (long long)nearbyint((double)h / factor) * factor, wb = (long long)nearbyint((double)w / factor) * factor;
    if (hb * wb > max_pixels) {
        double beta = sqrt((double)h * w / (double)max_pixels);
        hb = (long long)floor(h / beta / factor) * factor;
        wb = (long long)floor(w / beta / factor) * factor;
        if (hb < factor) hb = factor;
        if (wb < factor) wb = factor;
    } else if (hb * wb < min_pixels) {
        double beta = sqrt((double)min_pixels / ((double)h * w));
        hb = (long long)ceil(h * beta / factor) * factor;
        wb = (long long)ceil(w * beta / factor) * factor;
    }
    if (hb > IMAGE_MAX_PIXELS || wb > IMAGE_MAX_PIXELS || hb * wb > IMAGE_MAX_PIXELS)
        return err_set(e, "ImageError", "smart_resize gives %lldx%lld, over the pixel bound", hb, wb);
    *oh = (int)hb;
    *ow = (int)wb;
    return 0;
}

void proc_out_free(proc_out *o)
{
    free(o->pixels);
    o->pixels = NULL;
}

int proc_image(const image_rgb *im, const proc_cfg *c, proc_out *out, dlm_err *e)
{
    memset(out, 0, sizeof *out);
    int oh = c->height, ow = c->width;
    if (c->kind == PROC_QWEN2VL &&
        qwen2vl_smart_resize(im->h, im->w, c->patch * c->merge, c->min_pixels, c->max_pixels, &oh, &ow, e))
        return -1;
    uint8_t *rs = malloc((size_t)oh * ow * 3);
    float *chw = malloc((size_t)oh * ow * 3 * sizeof *chw);
    if (!rs || !chw) { free(rs); free(chw); return err_set(e, "MemoryError", "out of memory"); }
    const uint8_t *src = im->px;
    uint8_t *keyed = NULL;
    if (c->convert_rgb && im->has_key) {
        /* alpha_composite over opaque white: alpha 0 gives the white, 255 the pixel */
        if (!(keyed = malloc((size_t)im->w * im->h * 3))) { free(rs); free(chw); return err_set(e, "MemoryError", "out of memory"); }
        for (size_t i = 0; i < (size_t)im->w * im->h; i++) {
            const uint8_t *p = im->px + 3 * i;
            int hit = p[0] == im->key[0] && p[1] == im->key[1] && p[2] == im->key[2];
            memset(keyed + 3 * i, 255, 3);
            if (!hit) memcpy(keyed + 3 * i, p, 3);
        }
        src = keyed;
    }
    int rr = pil_resize_rgb(src, im->w, im->h, rs, ow, oh, c->resample, e);
    free(keyed);
    if (rr) { free(rs); free(chw); return -1; }
    /* rescale in double then to float32, normalize in float32 (transformers' rescale and normalize) */
    for (int ch = 0; ch < 3; ch++)
        for (size_t i = 0; i < (size_t)oh * ow; i++) {
            float v = (float)((double)rs[3 * i + ch] * c->rescale_factor);
            chw[(size_t)ch * oh * ow + i] = (v - c->mean[ch]) / c->std[ch];
        }
    free(rs);
    if (c->kind == PROC_SIGLIP) {
        out->pixels = chw;
        out->n_rows = 3 * oh;
        out->row_len = ow;
        out->grid_thw[0] = 1; out->grid_thw[1] = oh; out->grid_thw[2] = ow;
        return 0;
    }
    /* patchify: (C, gh/m, m, P, gw/m, m, P) → (gh/m, gw/m, m, m, C, T, P, P) */
    int P = c->patch, M = c->merge, T = c->temporal, gh = oh / P, gw = ow / P;
    int row_len = 3 * T * P * P;
    float *pv = malloc((size_t)gh * gw * row_len * sizeof *pv);
    if (!pv) { free(chw); return err_set(e, "MemoryError", "out of memory"); }
    size_t r = 0;
    for (int bh = 0; bh < gh / M; bh++)
        for (int bw = 0; bw < gw / M; bw++)
            for (int mh = 0; mh < M; mh++)
                for (int mw = 0; mw < M; mw++, r++) {
                    int py = bh * M + mh, px = bw * M + mw;
                    float *o = pv + r * row_len;
                    for (int ch = 0; ch < 3; ch++)
                        for (int t = 0; t < T; t++)
                            for (int y = 0; y < P; y++) {
                                const float *s = chw + (size_t)ch * oh * ow + (size_t)(py * P + y) * ow + (size_t)px * P;
                                memcpy(o, s, (size_t)P * sizeof *o);
                                o += P;
                            }
                }
    free(chw);
    out->pixels = pv;
    out->n_rows = gh * gw;
    out->row_len = row_len;
    out->grid_thw[0] = 1; out->grid_thw[1] = gh; out->grid_thw[2] = gw;
    return 0;
}
