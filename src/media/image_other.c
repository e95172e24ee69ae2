/* image_other — WebP (libwebp), GIF (giflib), TIFF (libtiff) and BMP (read
 * here, as Pillow has its own reader), converted as Pillow's convert("RGB")
 * (media/image.h). */
#include <gif_lib.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>
#include <webp/decode.h>

#include "media/image.h"

/* ---- WebP ------------------------------------------------------------------------ */

static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

int image_decode_webp(const uint8_t *data, size_t n, image_rgb *out, int *orient, dlm_err *e)
{
    WebPBitstreamFeatures f;
    if (WebPGetFeatures(data, n, &f) != VP8_STATUS_OK)
        return err_set(e, "ImageError", "corrupt or truncated WebP: the header cannot be read");
    if (f.has_animation) return err_set(e, "ImageError", "animated WebP is not supported");
    if (image_alloc(out, f.width, f.height, "WEBP", e)) return -1;
    /* alpha is dropped by convert("RGB"): decoding to RGB gives the same colors */
    if (!WebPDecodeRGBInto(data, n, out->px, (size_t)out->w * out->h * 3, out->w * 3))
        return err_set(e, "ImageError", "corrupt or truncated WebP data");
    /* the extended format's EXIF and XMP chunks (Pillow's info["exif"], info["xmp"]) */
    int ex = 0, xmp = 0;
    for (size_t o = 12; o + 8 <= n;) {
        uint32_t len = le32(data + o + 4);
        if (len > n - o - 8) break;
        if (!memcmp(data + o, "EXIF", 4)) ex = image_exif_orientation(data + o + 8, len);
        else if (!memcmp(data + o, "XMP ", 4)) xmp = image_xmp_orientation(data + o + 8, len);
        o += 8 + (size_t)len + (len & 1);
    }
    *orient = ex > 0 ? ex : xmp;
    return 0;
}

/* ---- GIF ------------------------------------------------------------------------- */

typedef struct gif_src { const uint8_t *p; size_t n, off; } gif_src;

static int gif_read(GifFileType *g, GifByteType *buf, int len)
{
    gif_src *s = g->UserData;
    size_t k = (size_t)len < s->n - s->off ? (size_t)len : s->n - s->off;
    memcpy(buf, s->p + s->off, k);
    s->off += k;
    return (int)k;
}

/* Read records up to the first image, as Image.open shows it: its
 * descriptor is checked (covering the screen, inside the pixel bound)
 * before any line is decoded, so a frame header claiming 65535x65535 costs
 * nothing; the graphics control extension before it gives the transparent
 * index. */
int image_decode_gif(const uint8_t *data, size_t n, image_rgb *out, dlm_err *e)
{
    gif_src s = {data, n, 0};
    int ge = 0;
    GifFileType *g = DGifOpen(&s, gif_read, &ge);
    if (!g) return err_set(e, "ImageError", "corrupt GIF: %s", GifErrorString(ge));
    int rc = -1, trans = -1;
    uint8_t *line = NULL;
    if (image_alloc(out, g->SWidth, g->SHeight, "GIF", e)) goto out;
    for (;;) {
        GifRecordType rt;
        if (DGifGetRecordType(g, &rt) != GIF_OK) goto corrupt;
        if (rt == TERMINATE_RECORD_TYPE) { err_set(e, "ImageError", "GIF has no image"); goto out; }
        if (rt == EXTENSION_RECORD_TYPE) {
            int code;
            GifByteType *ext;
            if (DGifGetExtension(g, &code, &ext) != GIF_OK) goto corrupt;
            while (ext) {
                GraphicsControlBlock gcb;
                if (code == GRAPHICS_EXT_FUNC_CODE && DGifExtensionToGCB(ext[0], ext + 1, &gcb) == GIF_OK)
                    trans = gcb.TransparentColor;
                if (DGifGetExtensionNext(g, &ext) != GIF_OK) goto corrupt;
            }
            continue;
        }
        if (rt != IMAGE_DESC_RECORD_TYPE) continue;
        if (DGifGetImageDesc(g) != GIF_OK) goto corrupt;
        const GifImageDesc *d = &g->Image;
        if (d->Left != 0 || d->Top != 0 || d->Width != g->SWidth || d->Height != g->SHeight) {
            err_set(e, "ImageError", "GIF whose first frame does not cover the screen (%dx%d at %d,%d in %dx%d) is not supported",
                    d->Width, d->Height, d->Left, d->Top, g->SWidth, g->SHeight);
            goto out;
        }
        ColorMapObject *cm = d->ColorMap ? d->ColorMap : g->SColorMap;
        if (!cm) { err_set(e, "ImageError", "GIF has no color table"); goto out; }
        if (trans >= 0 && trans < cm->ColorCount) {
            out->has_key = 1;
            out->key[0] = cm->Colors[trans].Red; out->key[1] = cm->Colors[trans].Green; out->key[2] = cm->Colors[trans].Blue;
        }
        if (!(line = malloc((size_t)out->w))) { err_set(e, "MemoryError", "out of memory"); goto out; }
        /* interlaced GIFs store rows in four passes */
        static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
        int passes = d->Interlace ? 4 : 1;
        for (int p = 0; p < passes; p++)
            for (int y = d->Interlace ? start[p] : 0; y < out->h; y += d->Interlace ? step[p] : 1) {
                if (DGifGetLine(g, line, out->w) != GIF_OK) goto corrupt;
                uint8_t *o = out->px + (size_t)y * out->w * 3;
                for (int x = 0; x < out->w; x++) {
                    GifColorType c = line[x] < cm->ColorCount ? cm->Colors[line[x]] : (GifColorType){0, 0, 0};
                    o[3 * x] = c.Red; o[3 * x + 1] = c.Green; o[3 * x + 2] = c.Blue;
                }
            }
        rc = 0;
        goto out;
    }
corrupt:
    err_set(e, "ImageError", "corrupt or truncated GIF: %s", GifErrorString(g->Error));
out:
    free(line);
    DGifCloseFile(g, &ge);
    return rc;
}

/* ---- BMP ------------------------------------------------------------------------- */

static unsigned le16(const uint8_t *p) { return p[0] | p[1] << 8; }

/* BITMAPINFOHEADER and later (40, 52, 56, 108, 124 bytes): 1/4/8-bit
 * palettes, 24-bit BGR, 32-bit BGRX or byte-aligned bit fields; bottom-up or
 * top-down. RLE and 16-bit files are refused. */
int image_decode_bmp(const uint8_t *d, size_t n, image_rgb *out, dlm_err *e)
{
    if (n < 26) return err_set(e, "ImageError", "truncated BMP header");
    uint32_t off = le32(d + 10), hs = le32(d + 14);
    if (hs < 40 || n < 14 + (size_t)hs) return err_set(e, "ImageError", "BMP header of %u bytes is not supported (or truncated)", hs);
    long long w = (int32_t)le32(d + 18), hh = (int32_t)le32(d + 22);
    unsigned bpp = le16(d + 28);
    uint32_t comp = le32(d + 30), ncol = le32(d + 46);
    int topdown = hh < 0;
    long long h = topdown ? -hh : hh;
    if (comp != 0 && !(comp == 3 && bpp == 32))
        return err_set(e, "ImageError", "BMP compression %u is not supported (dlm reads uncompressed BMP)", comp);
    if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 24 && bpp != 32)
        return err_set(e, "ImageError", "%u-bit BMP is not supported", bpp);
    int shift[3] = {16, 8, 0};   /* R, G, B in a little-endian 32-bit pixel */
    if (comp == 3) {
        const uint8_t *mk = hs >= 52 ? d + 54 : d + 14 + hs;
        if ((size_t)(mk - d) + 12 > n) return err_set(e, "ImageError", "truncated BMP bit fields");
        for (int i = 0; i < 3; i++) {
            uint32_t m = le32(mk + 4 * i);
            int s = m == 0xffu ? 0 : m == 0xff00u ? 8 : m == 0xff0000u ? 16 : m == 0xff000000u ? 24 : -1;
            if (s < 0) return err_set(e, "ImageError", "BMP bit field mask 0x%08x is not supported", m);
            shift[i] = s;
        }
    }
    if (image_alloc(out, w, h, "BMP", e)) return -1;
    const uint8_t *pal = d + 14 + hs;
    if (comp == 3 && hs == 40) pal += 12;
    if (bpp <= 8) {
        if (!ncol || ncol > (1u << bpp)) ncol = 1u << bpp;
        if ((size_t)(pal - d) + 4 * (size_t)ncol > n) return err_set(e, "ImageError", "truncated BMP palette");
    }
    size_t stride = (((size_t)w * bpp + 31) / 32) * 4;
    if (off > n || (n - off) / stride < (size_t)h) return err_set(e, "ImageError", "truncated BMP pixel data");
    for (long long y = 0; y < h; y++) {
        const uint8_t *r = d + off + stride * (size_t)(topdown ? y : h - 1 - y);
        uint8_t *o = out->px + (size_t)y * w * 3;
        for (long long x = 0; x < w; x++, o += 3) {
            if (bpp <= 8) {
                unsigned bit = (unsigned)(x * bpp), k = (r[bit / 8] >> (8 - bpp - bit % 8)) & ((1u << bpp) - 1);
                const uint8_t *c = k < ncol ? pal + 4 * k : (const uint8_t *)"\0\0\0";
                o[0] = c[2]; o[1] = c[1]; o[2] = c[0];
            } else if (bpp == 24) {
                o[0] = r[3 * x + 2]; o[1] = r[3 * x + 1]; o[2] = r[3 * x];
            } else {
                uint32_t v = le32(r + 4 * x);
                for (int i = 0; i < 3; i++) o[i] = (uint8_t)(v >> shift[i]);
            }
        }
    }
    return 0;
}

/* ---- TIFF ------------------------------------------------------------------------ */

typedef struct tif_src { const uint8_t *p; toff_t n, off; } tif_src;

static tmsize_t t_read(thandle_t h, void *buf, tmsize_t len)
{
    tif_src *s = h;
    toff_t k = (toff_t)len < s->n - s->off ? (toff_t)len : s->n - s->off;
    memcpy(buf, s->p + s->off, k);
    s->off += k;
    return (tmsize_t)k;
}
static tmsize_t t_write(thandle_t h, void *buf, tmsize_t len) { (void)h; (void)buf; (void)len; return -1; }
static toff_t t_seek(thandle_t h, toff_t o, int wh)
{
    tif_src *s = h;
    toff_t base = wh == SEEK_SET ? 0 : wh == SEEK_CUR ? s->off : s->n;
    if (base + o > s->n) return (toff_t)-1;
    return s->off = base + o;
}
static int t_close(thandle_t h) { (void)h; return 0; }
static toff_t t_size(thandle_t h) { return ((tif_src *)h)->n; }

static char tiff_msg[256];
static void t_err(const char *mod, const char *fmt, va_list ap) { (void)mod; vsnprintf(tiff_msg, sizeof tiff_msg, fmt, ap); }

/* 8-bit strips, contiguous samples: gray (min-is-black/white, with or
 * without alpha), RGB(A) and palette; the Orientation tag must be 1. Other
 * TIFFs are refused, not approximated (libtiff's RGBA reader premultiplies
 * and rounds 16-bit samples differently from Pillow). */
int image_decode_tiff(const uint8_t *data, size_t n, image_rgb *out, dlm_err *e)
{
    tif_src s = {data, n, 0};
    tiff_msg[0] = 0;
    TIFFSetErrorHandler(t_err);
    TIFFSetWarningHandler(NULL);
    TIFF *t = TIFFClientOpen("image", "rm", &s, t_read, t_write, t_seek, t_close, t_size, NULL, NULL);
    if (!t) return err_set(e, "ImageError", "corrupt TIFF: %s", tiff_msg[0] ? tiff_msg : "header unreadable");
    int rc = -1;
    uint8_t *row = NULL;
    uint32_t w = 0, h = 0;
    uint16_t bps = 1, spp = 1, photo = 0, planar = 1, orient = 1;
    TIFFGetField(t, TIFFTAG_IMAGEWIDTH, &w);
    TIFFGetField(t, TIFFTAG_IMAGELENGTH, &h);
    TIFFGetFieldDefaulted(t, TIFFTAG_BITSPERSAMPLE, &bps);
    TIFFGetFieldDefaulted(t, TIFFTAG_SAMPLESPERPIXEL, &spp);
    TIFFGetFieldDefaulted(t, TIFFTAG_PLANARCONFIG, &planar);
    if (!TIFFGetField(t, TIFFTAG_PHOTOMETRIC, &photo)) { err_set(e, "ImageError", "TIFF has no photometric tag"); goto out; }
    int ok = bps == 8 && planar == PLANARCONFIG_CONTIG && !TIFFIsTiled(t) &&
             ((photo == PHOTOMETRIC_RGB && (spp == 3 || spp == 4)) ||
              ((photo == PHOTOMETRIC_MINISBLACK || photo == PHOTOMETRIC_MINISWHITE) && (spp == 1 || spp == 2)) ||
              (photo == PHOTOMETRIC_PALETTE && spp == 1));
    if (!ok) {
        err_set(e, "ImageError", "this TIFF layout is not supported (%u-bit, %u samples, photometric %u%s%s)", bps, spp, photo,
                planar != PLANARCONFIG_CONTIG ? ", planar" : "", TIFFIsTiled(t) ? ", tiled" : "");
        err_hint(e, "dlm reads 8-bit stripped gray, RGB(A) and palette TIFFs; convert it to PNG");
        goto out;
    }
    uint32_t nx = 0;
    const uint8_t *xp = NULL;
    int xo = TIFFGetField(t, TIFFTAG_ORIENTATION, &orient) ? 1 : (TIFFGetField(t, TIFFTAG_XMLPACKET, &nx, &xp) && xp)
                                                                    ? image_xmp_orientation(xp, nx) : 1;
    if (orient != 1 || (xo >= 2 && xo <= 8)) {
        err_set(e, "ImageError", "TIFF orientation %u is not supported (only 1)", orient != 1 ? orient : (unsigned)xo);
        goto out;
    }
    if (image_alloc(out, w, h, "TIFF", e)) goto out;
    uint16_t *cr = NULL, *cg = NULL, *cb = NULL;
    if (photo == PHOTOMETRIC_PALETTE && !TIFFGetField(t, TIFFTAG_COLORMAP, &cr, &cg, &cb)) {
        err_set(e, "ImageError", "palette TIFF without a color map");
        goto out;
    }
    row = malloc(TIFFScanlineSize(t));
    if (!row) { err_set(e, "MemoryError", "out of memory"); goto out; }
    for (uint32_t y = 0; y < h; y++) {
        if (TIFFReadScanline(t, row, y, 0) < 0) {
            err_set(e, "ImageError", "corrupt or truncated TIFF: %s", tiff_msg[0] ? tiff_msg : "row unreadable");
            goto out;
        }
        uint8_t *o = out->px + (size_t)y * w * 3;
        for (uint32_t x = 0; x < w; x++, o += 3) {
            const uint8_t *p = row + (size_t)x * spp;
            if (photo == PHOTOMETRIC_RGB) memcpy(o, p, 3);
            else if (photo == PHOTOMETRIC_PALETTE) { o[0] = (uint8_t)(cr[p[0]] >> 8); o[1] = (uint8_t)(cg[p[0]] >> 8); o[2] = (uint8_t)(cb[p[0]] >> 8); }
            else o[0] = o[1] = o[2] = photo == PHOTOMETRIC_MINISWHITE ? (uint8_t)(255 - p[0]) : p[0];
        }
    }
    rc = 0;
out:
    free(row);
    TIFFClose(t);
    return rc;
}
