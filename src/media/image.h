/* image — decode an image file's bytes to 8-bit RGB as transformers sees it.
 *
 * transformers' load_image does PIL.Image.open, ImageOps.exif_transpose and
 * .convert("RGB"); its image processors start from that. image_decode gives
 * the same pixels from Debian's libraries (libpng, libjpeg-turbo, libwebp,
 * giflib, libtiff) and a small BMP reader, following Pillow's conversions:
 *
 *   palette → its RGB entries; gray → replicated; alpha → dropped (no
 *   compositing: convert("RGB") drops it); 16-bit RGB/RGBA/LA → the high
 *   byte (Pillow's RGB;16B unpackers); 16-bit gray → mode I;16, whose
 *   convert("RGB") clips at 255; 1/2/4-bit gray → scaled to 0..255; CMYK
 *   JPEG → Pillow's cmyk2rgb (Adobe files inverted first, as Pillow's
 *   CMYK;I); Orientation 2..8 → the same transposes as exif_transpose,
 *   found where Pillow's getexif finds it: EXIF (JPEG APP1, PNG eXIf or a
 *   "Raw profile type exif" text chunk, WebP EXIF chunk), else XMP's
 *   tiff:Orientation (JPEG APP1, PNG XML:com.adobe.xmp, WebP XMP chunk).
 *
 * Bounds: an image over IMAGE_MAX_PIXELS is refused from its header, before
 * any pixel is decoded (Pillow's MAX_IMAGE_PIXELS, which it warns about and
 * refuses at twice that: dlm refuses at the bound). Truncated or corrupt
 * data is an error, never a partial image. The format comes from the bytes'
 * signature, not the file name (as Pillow). */
#ifndef DLM_MEDIA_IMAGE_H
#define DLM_MEDIA_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

#define IMAGE_MAX_PIXELS 89478485LL   /* PIL.Image.MAX_IMAGE_PIXELS: 1024*1024*1024 // 4 // 3 */

typedef struct image_rgb {
    int w, h;
    uint8_t *px;       /* h rows of w RGB triples */
    const char *format;   /* "PNG", "JPEG", "WEBP", "GIF", "BMP", "TIFF" */
    /* Pillow's info["transparency"] after convert("RGB"): a color key
     * (PNG tRNS with one fully transparent palette entry, a gray or RGB
     * tRNS value as stored, a GIF's transparent index). Processors that
     * convert to RGB (transformers' convert_to_rgb) turn pixels equal to it
     * white; the values may exceed 255 (16-bit keys), and then match nothing. */
    int has_key;
    int key[3];
} image_rgb;

/* Decode data (n bytes). On error e says what is wrong ("truncated PNG
 * data", "image is 100000x100000 = ... pixels, over the bound ...") without
 * naming the file: the caller prefixes its file or document line. */
int image_decode(const uint8_t *data, size_t n, image_rgb *out, dlm_err *e);
void image_free(image_rgb *im);

/* The decoders (image_png.c, image_jpeg.c, image_other.c): before
 * orientation. *orient receives the Orientation (0 or 1 when none). */
int image_decode_png(const uint8_t *data, size_t n, image_rgb *out, int *orient, dlm_err *e);
int image_decode_jpeg(const uint8_t *data, size_t n, image_rgb *out, int *orient, dlm_err *e);
int image_decode_webp(const uint8_t *data, size_t n, image_rgb *out, int *orient, dlm_err *e);
int image_decode_gif(const uint8_t *data, size_t n, image_rgb *out, dlm_err *e);
int image_decode_bmp(const uint8_t *data, size_t n, image_rgb *out, dlm_err *e);
int image_decode_tiff(const uint8_t *data, size_t n, image_rgb *out, dlm_err *e);

/* Shared by the decoders: refuse w x h over the bound (or not positive),
 * else allocate out->px. */
int image_alloc(image_rgb *out, long long w, long long h, const char *fmt, dlm_err *e);
/* The Orientation tag of IFD0 in an EXIF block (TIFF-structured, with or
 * without a leading "Exif\0\0"), as stored; 0 when absent or unreadable. */
int image_exif_orientation(const uint8_t *p, size_t n);
/* XMP's tiff:Orientation="N" or tiff:Orientation>N (one digit, Pillow's
 * pattern), 0 when absent. */
int image_xmp_orientation(const uint8_t *p, size_t n);

#endif
