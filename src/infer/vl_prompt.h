/* vl_prompt — a prompt with images for a Qwen2-VL or PaliGemma base
 * (docs/images.md). PaliGemma: PaliGemmaProcessor's layout, <image>×N per
 * image, <bos>, the query, "\n", all one prefix-LM block (sp.prefix, positions
 * from 1: sp.delta); pos3 is NULL. Qwen2-VL: as the original's
 * inference/vl_generate.py builds it: one image token per
 * image before "\n" + the query (a query that already holds the image
 * token's text is taken as it is, its i-th image token being image i), no
 * chat template (the rows trained on are `<image>\n<caption>`, so an empty
 * query lets the model continue with a caption), then each image token
 * expanded to the image's t·h·w/merge² tokens, their rows spliced from the
 * frozen tower's features with M-RoPE positions (vision/qwen2vl.h) and the
 * delta the session keeps for the generated tokens. */
#ifndef DLM_INFER_VL_PROMPT_H
#define DLM_INFER_VL_PROMPT_H

#include <stddef.h>
#include <stdint.h>

#include "decoder/session.h"
#include "tokens/tok.h"
#include "util/err.h"
#include "weights/model.h"

typedef struct vl_image_in {
    const uint8_t *data;   /* the encoded file (png, jpeg, webp, gif, bmp, tiff) */
    size_t n;
    const char *label;     /* for errors: the file name, "image 2 of the request", ... */
} vl_image_in;

typedef struct vl_prompt {
    tok_ids ids;           /* the expanded prompt */
    float *embeds;         /* [n_embeds][d_model] */
    int32_t *row, *pos3;   /* [ids.n], [3][ids.n] */
    int n_embeds;
    session_splice sp;     /* points into the above: session_eval_splice's argument */
} vl_prompt;

/* 0, or -1 with e naming the image (a corrupt file, a decompression bomb) or
 * the mismatch (image tokens in the query vs images given). A text base is
 * refused: "--image needs a vision-language base". */
int vl_prompt_build(const model *m, tok *t, const char *query, const vl_image_in *images, int n_images,
                    vl_prompt *out, dlm_err *e);
/* The same from files (read up to 64 MiB each; errors name the file). */
int vl_prompt_build_files(const model *m, tok *t, const char *query, const char *const *paths, int n_images,
                          vl_prompt *out, dlm_err *e);
void vl_prompt_free(vl_prompt *p);

#endif
