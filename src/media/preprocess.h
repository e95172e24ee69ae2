/* preprocess — image → pixel values, as each base's transformers image
 * processor (the PIL backend: SiglipImageProcessorPil for PaliGemma,
 * Qwen2VLImageProcessorPil), value for value.
 *
 *   resize    Pillow 13's Image.resize on 8-bit RGB (Resample.c: double
 *             coefficients normalised, then 22-bit fixed point; two passes
 *             with an 8-bit intermediate, vertical first when the height
 *             shrinks by more than twice what the width does, else
 *             horizontal first over the rows the vertical pass reads;
 *             rounding and clipping as Pillow)
 *   rescale   float32(double(v) * rescale_factor)
 *   normalize float32 (x - mean) / std, mean and std as float32
 *
 * convert_rgb is transformers' convert_to_rgb on the image load_image gave:
 * an image with info["transparency"] (image_rgb.has_key) is composited on
 * white, which turns the key color's pixels white and leaves the rest.
 * paligemma-3b-mix-224's config has do_convert_rgb null (no conversion);
 * Qwen2-VL's processor converts.
 *
 * SigLIP/PaliGemma: resize to size (224x224 for paligemma-3b-mix-224,
 * bicubic), channel-first [3][H][W]. Qwen2-VL: smart_resize to multiples of
 * patch*merge (28) within min/max pixels, bicubic, CLIP mean/std, then
 * patchify: rows in 2x2 merge order, each [C][temporal 2][14][14] (the one
 * image repeated over the temporal patch), image_grid_thw = (1, H/14, W/14). */
#ifndef DLM_MEDIA_PREPROCESS_H
#define DLM_MEDIA_PREPROCESS_H

#include <stdint.h>

#include "media/image.h"
#include "util/err.h"

enum { PIL_BILINEAR = 2, PIL_BICUBIC = 3 };   /* PIL.Image.Resampling values */

typedef enum { PROC_SIGLIP = 0, PROC_QWEN2VL } proc_kind;

typedef struct proc_cfg {
    proc_kind kind;
    int convert_rgb;                  /* do_convert_rgb: a color key's pixels turn white */
    int height, width;                /* siglip: the output size */
    int resample;                     /* PIL_BICUBIC or PIL_BILINEAR */
    double rescale_factor;
    float mean[3], std[3];
    long long min_pixels, max_pixels; /* qwen2-vl: size.shortest_edge / longest_edge */
    int patch, temporal, merge;       /* qwen2-vl: 14, 2, 2 */
} proc_cfg;

/* preprocessor_config.json of the registry rows */
extern const proc_cfg PROC_PALIGEMMA_224;   /* google/paligemma-3b-mix-224 */
extern const proc_cfg PROC_QWEN2_VL;        /* Qwen/Qwen2-VL-2B-Instruct */

/* Pillow's Image.resize((ow, oh), filter) of an 8-bit RGB image; the same
 * size is a copy, as Pillow. out: oh*ow*3. */
int pil_resize_rgb(const uint8_t *in, int w, int h, uint8_t *out, int ow, int oh, int filter, dlm_err *e);

/* Qwen2-VL's smart_resize (round half to even, as Python's round). */
int qwen2vl_smart_resize(int h, int w, int factor, long long min_pixels, long long max_pixels, int *oh, int *ow,
                         dlm_err *e);

typedef struct proc_out {
    float *pixels;       /* siglip: [3][H][W]; qwen2-vl: [n_rows][row_len] */
    int n_rows, row_len; /* siglip: 3*H, W */
    int grid_thw[3];     /* qwen2-vl: 1, H/patch, W/patch; siglip: 1, H, W */
} proc_out;

int proc_image(const image_rgb *im, const proc_cfg *c, proc_out *out, dlm_err *e);
void proc_out_free(proc_out *o);

#endif
