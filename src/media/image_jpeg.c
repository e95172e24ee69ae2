/* image_jpeg — JPEG through libjpeg-turbo (the library Pillow's wheels bundle),
 * default decoding (islow IDCT, fancy upsampling) as Pillow's JpegDecode,
 * converted as convert("RGB") (media/image.h). */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#include "media/image.h"

typedef struct jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} jerr;

static void on_exit_(j_common_ptr c)
{
    jerr *j = (jerr *)c->err;
    c->err->format_message(c, j->msg);
    longjmp(j->jb, 1);
}

/* Pillow refuses a JPEG whose data ends early ("image file is truncated");
 * libjpeg only warns and pads with gray. Other warnings pass, as in Pillow. */
static void on_message(j_common_ptr c, int level)
{
    if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) on_exit_(c);
}

/* Pillow's cmyk2rgb (Convert.c): MULDIV255 is its rounded a*b/255. */
static uint8_t cmyk_ch(int v, int nk)
{
    int tmp = v * nk + 128;
    int r = nk - (((tmp >> 8) + tmp) >> 8);
    return (uint8_t)(r < 0 ? 0 : r > 255 ? 255 : r);
}

int image_decode_jpeg(const uint8_t *data, size_t n, image_rgb *out, int *orient, dlm_err *e)
{
    struct jpeg_decompress_struct c;
    jerr j;
    memset(&c, 0, sizeof c);
    c.err = jpeg_std_error(&j.pub);
    j.pub.error_exit = on_exit_;
    j.pub.emit_message = on_message;
    uint8_t *volatile row = NULL;
    volatile int rc = -1;
    if (setjmp(j.jb)) {
        err_set(e, "ImageError", "corrupt or truncated JPEG: %s", j.msg);
        goto out;
    }
    jpeg_create_decompress(&c);
    jpeg_mem_src(&c, data, (unsigned long)n);
    jpeg_save_markers(&c, JPEG_APP0 + 1, 0xffff);
    jpeg_read_header(&c, TRUE);
    if (image_alloc(out, c.image_width, c.image_height, "JPEG", e)) goto out;
    /* Pillow: the first Exif APP1 is info["exif"], the last XMP APP1 info["xmp"] */
    int ex = -1, xmp = 0;
    static const char xmp_id[] = "http://ns.adobe.com/xap/1.0/";
    for (jpeg_saved_marker_ptr m = c.marker_list; m; m = m->next) {
        if (m->marker != JPEG_APP0 + 1) continue;
        if (ex < 0 && m->data_length >= 6 && !memcmp(m->data, "Exif\0\0", 6)) ex = image_exif_orientation(m->data, m->data_length);
        else if (m->data_length >= sizeof xmp_id && !memcmp(m->data, xmp_id, sizeof xmp_id))
            xmp = image_xmp_orientation(m->data + sizeof xmp_id, m->data_length - sizeof xmp_id);
    }
    *orient = ex > 0 ? ex : xmp;
    int cmyk = c.jpeg_color_space == JCS_CMYK || c.jpeg_color_space == JCS_YCCK;
    int adobe = c.saw_Adobe_marker;
    c.out_color_space = cmyk ? JCS_CMYK : c.num_components == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&c);
    int ch = c.output_components;
    row = malloc((size_t)c.output_width * ch);
    if (!row) { err_set(e, "MemoryError", "out of memory"); goto out; }
    while (c.output_scanline < c.output_height) {
        JSAMPROW rp = row;
        uint8_t *dst = out->px + (size_t)c.output_scanline * out->w * 3;
        jpeg_read_scanlines(&c, &rp, 1);
        for (int x = 0; x < out->w; x++, dst += 3) {
            const uint8_t *s = row + (size_t)x * ch;
            if (ch == 1) dst[0] = dst[1] = dst[2] = s[0];
            else if (ch == 3) memcpy(dst, s, 3);
            else {   /* Adobe CMYK is stored inverted: Pillow reads it as CMYK;I */
                int k = adobe ? 255 - s[3] : s[3], nk = 255 - k;
                for (int i = 0; i < 3; i++) dst[i] = cmyk_ch(adobe ? 255 - s[i] : s[i], nk);
            }
        }
    }
    jpeg_finish_decompress(&c);
    rc = 0;
out:
    free(row);
    jpeg_destroy_decompress(&c);
    return rc;
}
