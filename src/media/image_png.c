/* image_png — PNG through libpng's progressive-free reader, converted as
 * Pillow's PngImagePlugin + convert("RGB") (media/image.h). */
#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "media/image.h"

typedef struct png_src {
    const uint8_t *p;
    size_t n, off;
    char msg[200];
} png_src;

static void on_read(png_structp png, png_bytep out, png_size_t len)
{
    png_src *s = png_get_io_ptr(png);
    if (len > s->n - s->off) png_error(png, "truncated PNG data");
    memcpy(out, s->p + s->off, len);
    s->off += len;
}

static void on_error(png_structp png, png_const_charp msg)
{
    png_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg) { (void)png; (void)msg; }

/* One decoded row (ch channels of 8 bits, or 1 channel of 16 for gray) → RGB. */
static void row_rgb(uint8_t *dst, const uint8_t *src, int w, int ch, int gray16)
{
    for (int x = 0; x < w; x++, dst += 3) {
        if (gray16) {   /* mode I;16 → RGB: Pillow's I16_RGB clips at 255 */
            unsigned v = (unsigned)src[2 * x] << 8 | src[2 * x + 1];
            dst[0] = dst[1] = dst[2] = (uint8_t)(v > 255 ? 255 : v);
        } else if (ch <= 2) {
            dst[0] = dst[1] = dst[2] = src[x * ch];
        } else {
            memcpy(dst, src + (size_t)x * ch, 3);
        }
    }
}

int image_decode_png(const uint8_t *data, size_t n, image_rgb *out, int *orient, dlm_err *e)
{
    png_src s = {data, n, 0, ""};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, on_error, on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return err_set(e, "MemoryError", "out of memory");
    }
    uint8_t *volatile rows = NULL;
    png_bytep *volatile rp = NULL;   /* volatile: freed after a longjmp from png_read_image */
    volatile int rc = -1;
    if (setjmp(png_jmpbuf(png))) {
        err_set(e, "ImageError", "corrupt or truncated PNG: %s", s.msg[0] ? s.msg : "libpng error");
        goto out;
    }
    png_set_read_fn(png, &s, on_read);
    png_set_user_limits(png, 0x7fffffff, 0x7fffffff);   /* image_alloc bounds the pixel count */
    png_read_info(png, info);
    png_uint_32 w, h;
    int depth, ctype, ilace;
    png_get_IHDR(png, info, &w, &h, &depth, &ctype, &ilace, NULL, NULL);
    if (image_alloc(out, w, h, "PNG", e)) goto out;
    int gray16 = ctype == PNG_COLOR_TYPE_GRAY && depth == 16;
    png_bytep trns = NULL;
    int ntrns = 0;
    png_color_16p tc = NULL;
    if (png_get_tRNS(png, info, &trns, &ntrns, &tc)) {
        /* as PngImagePlugin's chunk_tRNS, then convert("RGB")'s new key */
        if (ctype == PNG_COLOR_TYPE_PALETTE) {
            int zero = -1, simple = 1;
            for (int i = 0; i < ntrns; i++) {
                if (trns[i] == 0 && zero < 0) zero = i;
                else if (trns[i] != 255) simple = 0;
            }
            png_colorp pal = NULL;
            int npal = 0;
            if (simple && zero >= 0 && png_get_PLTE(png, info, &pal, &npal) && zero < npal) {
                out->has_key = 1;
                out->key[0] = pal[zero].red; out->key[1] = pal[zero].green; out->key[2] = pal[zero].blue;
            }
        } else if (ctype == PNG_COLOR_TYPE_GRAY && tc) {
            int v = tc->gray;
            if (gray16 && v > 255) v = 255;   /* the key goes through I16_RGB too */
            out->has_key = 1;
            out->key[0] = out->key[1] = out->key[2] = v;
        } else if (ctype == PNG_COLOR_TYPE_RGB && tc) {
            out->has_key = 1;
            out->key[0] = tc->red; out->key[1] = tc->green; out->key[2] = tc->blue;
        }
    }
    if (ctype == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (ctype == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16 && !gray16) png_set_strip_16(png);   /* keeps the high byte: Pillow's ;16B unpackers */
    int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    int ch = png_get_channels(png, info);
    size_t rb = png_get_rowbytes(png, info);
    if (passes == 1) {
        rows = malloc(rb);
        if (!rows) { err_set(e, "MemoryError", "out of memory"); goto out; }
        for (png_uint_32 y = 0; y < h; y++) {
            png_read_row(png, rows, NULL);
            row_rgb(out->px + (size_t)y * w * 3, rows, (int)w, ch, gray16);
        }
    } else {
        rows = malloc(rb * h);
        rp = rows ? malloc(h * sizeof *rp) : NULL;
        if (!rp) { err_set(e, "MemoryError", "out of memory"); goto out; }
        for (png_uint_32 y = 0; y < h; y++) rp[y] = rows + rb * y;
        png_read_image(png, rp);
        for (png_uint_32 y = 0; y < h; y++) row_rgb(out->px + (size_t)y * w * 3, rows + rb * y, (int)w, ch, gray16);
    }
    png_read_end(png, info);   /* an eXIf chunk may follow the image data */
    /* Pillow's getexif: the eXIf chunk, else a "Raw profile type exif" text
     * chunk (hex after its third line); XMP's tiff:Orientation when the
     * EXIF has none */
    int ex = 0, xmp = 0;
#ifdef PNG_eXIf_SUPPORTED
    png_bytep exif = NULL;
    png_uint_32 ne = 0;
    int has_exif = png_get_eXIf_1(png, info, &ne, &exif) && exif;
    if (has_exif) ex = image_exif_orientation(exif, ne);
#else
    int has_exif = 0;
#endif
    png_textp text = NULL;
    int nt = png_get_text(png, info, &text, NULL);
    for (int i = 0; i < nt; i++) {
        const char *t = text[i].text ? text[i].text : "";
        size_t tl = text[i].itxt_length ? text[i].itxt_length : text[i].text_length;
        if (!strcmp(text[i].key, "XML:com.adobe.xmp")) xmp = image_xmp_orientation((const uint8_t *)t, tl);
        else if (!has_exif && !strcmp(text[i].key, "Raw profile type exif")) {
            const char *hx = t;   /* past the first three lines: "", "exif", the length */
            for (int line = 0; line < 3 && hx; line++) {
                const char *nl = memchr(hx, '\n', tl - (size_t)(hx - t));
                hx = nl ? nl + 1 : NULL;
            }
            uint8_t *raw = hx ? malloc(tl / 2 + 1) : NULL;
            size_t nr = 0;
            int hi = -1;
            for (const char *c = hx; raw && c < t + tl; c++) {
                int v = *c >= '0' && *c <= '9' ? *c - '0' : *c >= 'a' && *c <= 'f' ? *c - 'a' + 10
                      : *c >= 'A' && *c <= 'F' ? *c - 'A' + 10 : -1;
                if (v < 0) continue;
                if (hi < 0) hi = v;
                else { raw[nr++] = (uint8_t)(hi << 4 | v); hi = -1; }
            }
            if (raw) ex = image_exif_orientation(raw, nr);
            free(raw);
            has_exif = 1;
        }
    }
    *orient = ex > 0 ? ex : xmp;
    rc = 0;
out:
    free(rp);
    free(rows);
    png_destroy_read_struct(&png, &info, NULL);
    return rc;
}
