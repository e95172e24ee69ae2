/* vl_prompt — a prompt with images for a Qwen2-VL base (infer/vl_prompt.h). */
#include "infer/vl_prompt.h"

#include <stdlib.h>
#include <string.h>

#include "media/image.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/str.h"
#include "vision/pali.h"
#include "vision/qwen2vl.h"

void vl_prompt_free(vl_prompt *p)
{
    tok_ids_free(&p->ids);
    free(p->embeds);
    free(p->row);
    free(p->pos3);
    memset(p, 0, sizeof *p);
}

/* PaliGemma: PaliGemmaProcessor's layout, <image>×tokens per image, <bos>,
 * the query, "\n" (the original's training rows are image, "\n",
 * caption, so "" continues with a caption); all of it the prefix-LM block,
 * positions from 1 (session_splice.prefix, delta). */
static int pali_build(const model *m, tok *t, const char *query, const vl_image_in *images, int n_images,
                      vl_prompt *out, dlm_err *e)
{
    const model_config *c = &m->cfg;
    siglip s;
    if (pali_tower_load(m, &s, e)) return -1;
    proc_cfg pc = pali_proc(c);
    int rc = -1;
    size_t per = (size_t)c->pali_tokens * c->d_model;
    if (!(out->embeds = malloc(per * (size_t)(n_images ? n_images : 1) * sizeof *out->embeds))) {
        err_set(e, "MemoryError", "out of memory");
        goto out;
    }
    for (int i = 0; i < n_images; i++) {
        image_rgb im;
        float *f;
        if (image_decode(images[i].data, images[i].n, &im, e)) { err_prefix(e, "%s", images[i].label); goto out; }
        int r = pali_image_features(&s, c, &pc, &im, &f, e);
        image_free(&im);
        if (r) { err_prefix(e, "%s", images[i].label); goto out; }
        memcpy(out->embeds + per * (size_t)i, f, per * sizeof *f);
        free(f);
        out->n_embeds += c->pali_tokens;
    }
    if (tok_bos(t) < 0) { err_set(e, "TokenizerError", "the tokenizer has no <bos> token, which PaliGemma's prompt needs"); goto out; }
    for (int i = 0; i < n_images * c->pali_tokens; i++)
        if (tok_ids_push(&out->ids, c->image_id)) { err_set(e, "MemoryError", "out of memory"); goto out; }
    if (tok_ids_push(&out->ids, tok_bos(t)) ||
        (*query && tok_encode_append(t, query, strlen(query), TOK_PARSE_SPECIAL, &out->ids, e)) ||
        tok_encode_append(t, "\n", 1, TOK_PARSE_SPECIAL, &out->ids, e))
        goto out;
    size_t n = out->ids.n;
    if (!(out->row = malloc(n * sizeof *out->row))) { err_set(e, "MemoryError", "out of memory"); goto out; }
    if (pali_splice(c, out->ids.v, (int64_t)n, n_images, out->row, e)) {
        err_hint(e, "leave the image token out of the query: each --image puts its tokens first");
        goto out;
    }
    out->sp = (session_splice){.embeds = out->embeds, .n_embeds = out->n_embeds, .embed_row = out->row,
                               .delta = 1, .prefix = (int)n};
    rc = 0;
out:
    siglip_free(&s);
    if (rc) vl_prompt_free(out);
    return rc;
}

int vl_prompt_build(const model *m, tok *t, const vl_chat *chat, const char *query, const vl_image_in *images,
                    int n_images, vl_prompt *out, dlm_err *e)
{
    chat_msg msg = {"user", query};
    return vl_prompt_build_msgs(m, t, chat, &msg, 1, NULL, images, n_images, out, e);
}

int vl_prompt_build_msgs(const model *m, tok *t, const vl_chat *chat, const chat_msg *msgs, size_t n_msgs,
                         const int *img_msg, const vl_image_in *images, int n_images, vl_prompt *out, dlm_err *e)
{
    const char *query = msgs[n_msgs - 1].content;
    memset(out, 0, sizeof *out);
    const model_config *c = &m->cfg;
    if (c->vl == VL_PALI) return pali_build(m, t, query, images, n_images, out, e);
    if (c->vl != VL_QWEN2) {
        err_set(e, "ModalityError", "--image needs a vision-language base; %s is a text model", m->source);
        return err_hint(e, "prompt with text, or train the document on qwen2-vl-2b-instruct or paligemma-3b-mix-224 "
                           "(docs/images.md)");
    }
    qwen2vl_vit v;
    int tower = 0;
    proc_cfg pc = qwen2vl_proc(c);
    char key[65] = "";
    if (chat && chat->store && chat->store[0]) qwen2vl_feature_key(m, &pc, key);
    int (*grid)[3] = calloc((size_t)n_images + 1, sizeof *grid);
    int *ntok = calloc((size_t)n_images + 1, sizeof *ntok);
    tok_ids raw = {0};
    strbuf sb = STRBUF_INIT;
    int rc = -1;
    if (!grid || !ntok) { err_set(e, "MemoryError", "out of memory"); goto out; }
    for (int i = 0; i < n_images; i++) {
        image_rgb im;
        float *f;
        if (image_decode(images[i].data, images[i].n, &im, e)) {
            err_prefix(e, "%s", images[i].label);
            goto out;
        }
        /* an image the document trained on: its features from the store's vl-cache (read only) */
        int oh, ow, r = 0;
        f = NULL;
        if (key[0] && !qwen2vl_smart_resize(im.h, im.w, pc.patch * pc.merge, pc.min_pixels, pc.max_pixels, &oh, &ow,
                                            NULL)) {
            int g[3] = {1, oh / pc.patch, ow / pc.patch}, nt = qwen2vl_grid_tokens(c, g);
            char sha[65], dir[4300], path[4400];
            sha256_hex(images[i].data, images[i].n, sha);
            qwen2vl_cache_path(chat->store, sha, key, dir, sizeof dir, path, sizeof path);
            f = malloc((size_t)nt * c->d_model * sizeof *f);
            if (f && !qwen2vl_cache_read(path, f, (size_t)nt * c->d_model * sizeof *f)) {
                memcpy(grid[i], g, sizeof g);
                ntok[i] = nt;
                out->n_cached++;
            } else {
                free(f);
                f = NULL;
            }
        }
        if (!f && !tower && !(r = qwen2vl_tower_load(m, &v, e))) tower = 1;
        if (!f && !r) r = qwen2vl_image_features(&v, c, &pc, &im, &f, &ntok[i], grid[i], e);
        image_free(&im);
        if (r) { err_prefix(e, "%s", images[i].label); goto out; }
        float *all = realloc(out->embeds, ((size_t)out->n_embeds + ntok[i]) * c->d_model * sizeof *all);
        if (!all) { free(f); err_set(e, "MemoryError", "out of memory"); goto out; }
        out->embeds = all;
        memcpy(all + (size_t)out->n_embeds * c->d_model, f, (size_t)ntok[i] * c->d_model * sizeof *f);
        out->n_embeds += ntok[i];
        free(f);
    }
    size_t bl, b0, b2;
    const char *img_text = tok_token_bytes(t, c->image_id, &bl);
    const char *vs = tok_token_bytes(t, c->vision_start_id, &b0), *ve = tok_token_bytes(t, c->vision_end_id, &b2);
    if (!img_text || !bl) { err_set(e, "TokenizerError", "the tokenizer has no text for the image token %d", c->image_id); goto out; }
    char itxt[64];
    snprintf(itxt, sizeof itxt, "%.*s", (int)(bl < 63 ? bl : 63), img_text);
    if (chat && chat->dialect && (query[0] || n_msgs > 1) && !strstr(query, itxt) && vs && ve) {
        /* a question (or a conversation): the chat turns, each user turn's
         * images first, as Qwen2-VL's template writes an image item */
        strbuf *u = calloc(n_msgs, sizeof *u);
        chat_msg *cm = calloc(n_msgs, sizeof *cm);
        int r = !u || !cm ? err_set(e, "MemoryError", "out of memory") : 0;
        for (size_t k = 0; !r && k < n_msgs; k++) {
            for (int i = 0; i < n_images; i++)
                if ((img_msg ? (size_t)img_msg[i] : n_msgs - 1) == k) {
                    sb_append(&u[k], vs, b0);
                    sb_puts(&u[k], itxt);
                    sb_append(&u[k], ve, b2);
                }
            sb_puts(&u[k], msgs[k].content);
            if (u[k].oom) r = err_set(e, "MemoryError", "out of memory");
            cm[k] = (chat_msg){msgs[k].role, sb_str(&u[k])};
        }
        if (!r) r = chat_render(chat->dialect, chat->system_prompt, cm, n_msgs, 1, &sb, NULL, NULL, e);
        for (size_t k = 0; u && k < n_msgs; k++) sb_free(&u[k]);
        free(u);
        free(cm);
        if (r) goto out;
    } else if (n_msgs > 1) {
        err_set(e, "PromptError", "a conversation with images needs the base's chat template");
        goto out;
    } else {
        /* the original's format_vl_prompt: the query as it is when it
         * places the images itself, else one image token per image, "\n",
         * the query */
        if (!strstr(query, itxt)) {
            for (int i = 0; i < n_images; i++) sb_puts(&sb, itxt);
            sb_puts(&sb, "\n");
        }
        sb_puts(&sb, query);
    }
    if (sb.oom) { err_set(e, "MemoryError", "out of memory"); goto out; }
    if (tok_encode_append(t, sb.buf, sb.len, TOK_PARSE_SPECIAL, &raw, e)) goto out;
    int seen = 0;
    for (size_t i = 0; i < raw.n; i++) {
        int k = raw.v[i] == c->image_id ? ntok[seen < n_images ? seen : 0] : 1;
        if (raw.v[i] == c->image_id && ++seen > n_images) break;
        for (int j = 0; j < k; j++)
            if (tok_ids_push(&out->ids, raw.v[i])) { err_set(e, "MemoryError", "out of memory"); goto out; }
    }
    if (seen != n_images) {
        err_set(e, "PromptError", "the query places %d image token(s) (%s) for %d image(s)", seen, itxt, n_images);
        err_hint(e, "give one --image per %s in the query, or leave %s out to put the images first", itxt, itxt);
        goto out;
    }
    size_t n = out->ids.n;
    out->row = malloc(n * sizeof *out->row);
    out->pos3 = malloc(3 * n * sizeof *out->pos3);
    int64_t delta;
    if (!out->row || !out->pos3) { err_set(e, "MemoryError", "out of memory"); goto out; }
    if (qwen2vl_splice(c, out->ids.v, (int64_t)n, (const int (*)[3])grid, n_images, out->row, out->pos3, &delta, e))
        goto out;
    out->sp = (session_splice){.embeds = out->embeds, .n_embeds = out->n_embeds, .embed_row = out->row,
                               .pos3 = out->pos3, .delta = (int)delta};
    rc = 0;
out:
    if (tower) qwen2vl_vit_free(&v);
    free(grid);
    free(ntok);
    tok_ids_free(&raw);
    sb_free(&sb);
    if (rc) vl_prompt_free(out);
    return rc;
}

int vl_prompt_build_files(const model *m, tok *t, const vl_chat *chat, const char *query, const char *const *paths,
                          int n_images, vl_prompt *out, dlm_err *e)
{
    memset(out, 0, sizeof *out);
    vl_image_in *in = calloc((size_t)n_images + 1, sizeof *in);
    char **bufs = calloc((size_t)n_images + 1, sizeof *bufs);
    int rc = -1, i = 0;
    if (!in || !bufs) { err_set(e, "MemoryError", "out of memory"); goto out; }
    if (m->cfg.vl != VL_QWEN2 && m->cfg.vl != VL_PALI) {   /* before any file is read */
        rc = vl_prompt_build(m, t, chat, query, NULL, 0, out, e);
        goto out;
    }
    for (; i < n_images; i++) {
        size_t n;
        if (!fs_is_file(paths[i])) {
            err_set(e, "ImageError", "%s: no such image file", paths[i]);
            goto out;
        }
        if (fs_read_all(paths[i], 64u << 20, &bufs[i], &n, e)) { err_prefix(e, "%s", paths[i]); goto out; }
        in[i] = (vl_image_in){(const uint8_t *)bufs[i], n, paths[i]};
    }
    rc = vl_prompt_build(m, t, chat, query, in, n_images, out, e);
out:
    for (int k = 0; bufs && k < i; k++) free(bufs[k]);
    free(bufs);
    free(in);
    return rc;
}
