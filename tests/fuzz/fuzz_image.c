/* libFuzzer target: image_decode on arbitrary bytes (documents name image
 * files; every format's decoder, the EXIF parser and the pixel bound), then
 * the Qwen2-VL processor on what decodes, with a small max_pixels so a run
 * stays fast. */
#include <stddef.h>
#include <stdint.h>

#include "media/image.h"
#include "media/preprocess.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    image_rgb im;
    dlm_err e;
    if (image_decode(data, size, &im, &e)) return 0;
    if ((long long)im.w * im.h <= 1 << 20) {
        proc_cfg c = PROC_QWEN2_VL;
        c.max_pixels = 28 * 28 * 16;
        proc_out po;
        if (!proc_image(&im, &c, &po, &e)) proc_out_free(&po);
    }
    image_free(&im);
    return 0;
}
