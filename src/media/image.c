/* image — format dispatch, the pixel bound, EXIF orientation (media/image.h). */
#include "media/image.h"

#include <stdlib.h>
#include <string.h>

int image_alloc(image_rgb *out, long long w, long long h, const char *fmt, dlm_err *e)
{
    out->format = fmt;
    if (w <= 0 || h <= 0) return err_set(e, "ImageError", "%s header gives an empty image (%lldx%lld)", fmt, w, h);
    if (w > IMAGE_MAX_PIXELS || h > IMAGE_MAX_PIXELS || w * h > IMAGE_MAX_PIXELS) {
        err_set(e, "ImageError", "%s image is %lldx%lld = %lld pixels, over the bound of %lld (a decompression bomb?)", fmt,
                w, h, w * h, IMAGE_MAX_PIXELS);
        return err_hint(e, "scale the image down; vision towers see at most a few megapixels anyway");
    }
    out->w = (int)w;
    out->h = (int)h;
    out->px = malloc((size_t)(w * h * 3));
    if (!out->px) return err_set(e, "MemoryError", "out of memory for a %lldx%lld image", w, h);
    return 0;
}

void image_free(image_rgb *im)
{
    free(im->px);
    im->px = NULL;
    im->w = im->h = 0;
}

static unsigned rd16(const uint8_t *p, int le) { return le ? p[0] | p[1] << 8 : p[0] << 8 | p[1]; }
static uint32_t rd32(const uint8_t *p, int le)
{
    return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
              : (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

int image_exif_orientation(const uint8_t *p, size_t n)
{
    if (n >= 6 && !memcmp(p, "Exif\0\0", 6)) { p += 6; n -= 6; }   /* Exif.load strips it */
    if (n < 8) return 0;
    int le;
    if (!memcmp(p, "II*\0", 4)) le = 1;
    else if (!memcmp(p, "MM\0*", 4)) le = 0;
    else return 0;
    uint32_t ifd = rd32(p + 4, le);
    if (ifd > n - 2 || ifd < 8) return 0;
    unsigned cnt = rd16(p + ifd, le);
    for (unsigned i = 0; i < cnt; i++) {
        size_t o = ifd + 2 + (size_t)i * 12;
        if (o + 12 > n) return 0;
        if (rd16(p + o, le) == 0x0112) {
            unsigned type = rd16(p + o + 2, le);
            uint32_t v = type == 3 ? rd16(p + o + 8, le) : type == 4 ? rd32(p + o + 8, le) : 0;
            return v > 255 ? 255 : (int)v;   /* present: XMP is not consulted; only 2..8 transpose */
        }
    }
    return 0;
}

int image_xmp_orientation(const uint8_t *p, size_t n)
{
    static const char key[] = "tiff:Orientation";
    size_t k = sizeof key - 1;
    for (size_t i = 0; i + k + 2 <= n; i++) {
        if (memcmp(p + i, key, k)) continue;
        const uint8_t *q = p + i + k;
        size_t left = n - i - k;
        if (left >= 3 && q[0] == '=' && q[1] == '"' && q[2] >= '0' && q[2] <= '9') return q[2] - '0';
        if (left >= 2 && q[0] == '>' && q[1] >= '0' && q[1] <= '9') return q[1] - '0';
    }
    return 0;
}

/* PIL.ImageOps.exif_transpose: 2 FLIP_LEFT_RIGHT, 3 ROTATE_180, 4
 * FLIP_TOP_BOTTOM, 5 TRANSPOSE, 6 ROTATE_270, 7 TRANSVERSE, 8 ROTATE_90
 * (PIL's rotations are counter-clockwise). out(x, y) reads in(sx, sy). */
static int orient(image_rgb *im, int o, dlm_err *e)
{
    if (o <= 1 || o > 8) return 0;
    int W = im->w, H = im->h, swap = o >= 5;
    int ow = swap ? H : W, oh = swap ? W : H;
    uint8_t *dst = malloc((size_t)ow * oh * 3);
    if (!dst) return err_set(e, "MemoryError", "out of memory");
    for (int y = 0; y < oh; y++)
        for (int x = 0; x < ow; x++) {
            int sx, sy;
            switch (o) {
            case 2: sx = W - 1 - x; sy = y; break;
            case 3: sx = W - 1 - x; sy = H - 1 - y; break;
            case 4: sx = x; sy = H - 1 - y; break;
            case 5: sx = y; sy = x; break;
            case 6: sx = y; sy = H - 1 - x; break;
            case 7: sx = W - 1 - y; sy = H - 1 - x; break;
            default: sx = W - 1 - y; sy = x; break;   /* 8 */
            }
            memcpy(dst + ((size_t)y * ow + x) * 3, im->px + ((size_t)sy * W + sx) * 3, 3);
        }
    free(im->px);
    im->px = dst;
    im->w = ow;
    im->h = oh;
    return 0;
}

int image_decode(const uint8_t *d, size_t n, image_rgb *out, dlm_err *e)
{
    memset(out, 0, sizeof *out);
    int o = 1, rc;
    if (n >= 8 && !memcmp(d, "\x89PNG\r\n\x1a\n", 8)) rc = image_decode_png(d, n, out, &o, e);
    else if (n >= 3 && d[0] == 0xff && d[1] == 0xd8 && d[2] == 0xff) rc = image_decode_jpeg(d, n, out, &o, e);
    else if (n >= 12 && !memcmp(d, "RIFF", 4) && !memcmp(d + 8, "WEBP", 4)) rc = image_decode_webp(d, n, out, &o, e);
    else if (n >= 6 && (!memcmp(d, "GIF87a", 6) || !memcmp(d, "GIF89a", 6))) rc = image_decode_gif(d, n, out, e);
    else if (n >= 2 && !memcmp(d, "BM", 2)) rc = image_decode_bmp(d, n, out, e);
    else if (n >= 4 && (!memcmp(d, "II*\0", 4) || !memcmp(d, "MM\0*", 4))) rc = image_decode_tiff(d, n, out, e);
    else {
        err_set(e, "ImageError", "not an image dlm can read (%s)", n ? "unknown signature" : "empty file");
        return err_hint(e, "dlm reads PNG, JPEG, WebP, GIF, BMP and TIFF");
    }
    if (!rc) rc = orient(out, o, e);
    if (rc) image_free(out);
    return rc;
}
