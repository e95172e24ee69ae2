/* vl_prompt — a prompt with images for a Qwen2-VL or PaliGemma base
 * (docs/images.md).
 *
 * PaliGemma: PaliGemmaProcessor's layout, <image>×N per image, <bos>, the
 * query, "\n", all one prefix-LM block (sp.prefix, positions from 1:
 * sp.delta); no chat template, pos3 NULL. Qwen2-VL:
 *
 * The text takes one of two forms, as the rows trained on do:
 *   - an empty query (or no chat template, or a query that places the
 *     image token's text itself): the original's inference/vl_generate.py
 *     format, one image token per image before "\n" + the query, no chat
 *     template: the `<image>\n<caption>` rows of image sections, so the
 *     model continues with a caption;
 *   - a question (or a conversation), with a chat template: user turns
 *     whose content is each of their images as Qwen2-VL's template writes
 *     an image item
 *     (<|vision_start|><|image_pad|><|vision_end|>) then the question, with
 *     the generation prompt: the rows of a Q/A section that follows an
 *     image section (tokens/dataset.h).
 * Then each image token is expanded to the image's t·h·w/merge² tokens,
 * their rows spliced from the frozen tower's features with M-RoPE
 * positions (vision/qwen2vl.h) and the delta the session keeps for the
 * generated tokens. */
#ifndef DLM_INFER_VL_PROMPT_H
#define DLM_INFER_VL_PROMPT_H

#include <stddef.h>
#include <stdint.h>

#include "decoder/session.h"
#include "tokens/chat.h"
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
    int n_cached;          /* images whose features came from the vl-cache */
    session_splice sp;     /* points into the above: session_eval_splice's argument */
} vl_prompt;

/* 0, or -1 with e naming the image (a corrupt file, a decompression bomb) or
 * the mismatch (image tokens in the query vs images given). A text base is
 * refused: "--image needs a vision-language base". */
typedef struct vl_chat {
    const chat_dialect *dialect;   /* NULL: the caption form always */
    const char *system_prompt;     /* or NULL */
    const char *store;             /* a document's store: an image it trained on takes its features from the
                                    * store's vl-cache (run/vl_run.h; read only), not the tower; NULL or "" none */
} vl_chat;
int vl_prompt_build(const model *m, tok *t, const vl_chat *chat, const char *query, const vl_image_in *images,
                    int n_images, vl_prompt *out, dlm_err *e);
/* A conversation (dlm api): msgs[0..n) with images[i] in message
 * img_msg[i] (a user turn; images in message order); the chat form, each
 * user turn's images before its text (one user message with an empty text:
 * the caption form, as vl_prompt_build). */
int vl_prompt_build_msgs(const model *m, tok *t, const vl_chat *chat, const chat_msg *msgs, size_t n_msgs,
                         const int *img_msg, const vl_image_in *images, int n_images, vl_prompt *out, dlm_err *e);
/* The same from files (read up to 64 MiB each; errors name the file). */
int vl_prompt_build_files(const model *m, tok *t, const vl_chat *chat, const char *query, const char *const *paths,
                          int n_images, vl_prompt *out, dlm_err *e);
void vl_prompt_free(vl_prompt *p);

#endif
