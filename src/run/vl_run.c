/* vl_run — a training run on a Qwen2-VL base (run/vl_run.h). */
#include "run/vl_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "media/blob.h"
#include "media/image.h"
#include "media/ingest.h"
#include "run/doctor.h"
#include "util/fs.h"
#include "util/log.h"
#include "vision/pali.h"
#include "vision/qwen2vl.h"

/* an image by its blob in store, or (store NULL: doctor, nothing ingested)
 * the section's file */
static int read_image(const char *store, const dlm_doc *doc, const doc_section *s, const char *sha, image_rgb *im,
                      dlm_err *e)
{
    char p[4200];
    if (store) {
        int r = blob_find(store, sha, p, sizeof p, e);
        if (r < 0) return -1;
        if (r) return err_set(e, "ImageError", "blob %s is not in the store %s", sha, store);
    } else {
        media_section_file(doc, s, p, sizeof p);
    }
    int r;
    char *buf;
    size_t n;
    if (fs_read_all(p, 64u << 20, &buf, &n, e)) return -1;
    r = image_decode((const uint8_t *)buf, n, im, e);
    free(buf);
    if (r) err_prefix(e, "%s", p);
    return r;
}

int vl_grids(const dlm_doc *doc, const model_config *c, const char *store, ds_image **images, ds_vl *vl,
             dlm_err *e)
{
    memset(vl, 0, sizeof *vl);
    *images = NULL;
    if (c->vl != VL_QWEN2 && c->vl != VL_PALI) return 0;
    int n = 0;
    for (int i = 0; i < doc_nsections(doc); i++) n += doc_section_at(doc, i)->type == DOC_IMAGE;
    ds_image *im_tab = calloc((size_t)(n ? n : 1), sizeof *im_tab);
    if (!im_tab) return err_set(e, "MemoryError", "out of memory");
    *images = im_tab;
    proc_cfg pc = qwen2vl_proc(c);
    int k = 0;
    int64_t rows = 0;
    for (int i = 0; i < doc_nsections(doc); i++) {
        const doc_section *s = doc_section_at(doc, i);
        if (s->type != DOC_IMAGE) continue;
        int dup = 0;
        for (int j = 0; j < k && !dup; j++) dup = !strcmp(im_tab[j].sha, s->media_blob_sha);
        if (dup) continue;
        if (c->vl == VL_PALI) {   /* a fixed square grid: every image is resized to image_size */
            ds_image *d = &im_tab[k++];
            image_rgb im;
            if (read_image(store, doc, s, s->media_blob_sha, &im, e)) return -1;   /* checked now, not at feature time */
            image_free(&im);
            snprintf(d->sha, sizeof d->sha, "%s", s->media_blob_sha);
            int g = c->pali_vis.image_size / c->pali_vis.patch;
            d->grid[0] = 1;
            d->grid[1] = d->grid[2] = g;
            d->n_tok = c->pali_tokens;
            d->row0 = rows;
            rows += d->n_tok;
            continue;
        }
        image_rgb im;
        if (read_image(store, doc, s, s->media_blob_sha, &im, e)) return -1;
        int oh, ow, f = pc.patch * pc.merge;
        int rc = qwen2vl_smart_resize(im.h, im.w, f, pc.min_pixels, pc.max_pixels, &oh, &ow, e);
        image_free(&im);
        if (rc) return -1;
        ds_image *d = &im_tab[k++];
        snprintf(d->sha, sizeof d->sha, "%s", s->media_blob_sha);
        d->grid[0] = 1;
        d->grid[1] = oh / pc.patch;
        d->grid[2] = ow / pc.patch;
        d->n_tok = qwen2vl_grid_tokens(c, d->grid);
        d->row0 = rows;
        rows += d->n_tok;
    }
    *vl = (ds_vl){.image_id = c->image_id, .vision_start_id = c->vision_start_id, .vision_end_id = c->vision_end_id,
                  .merge = c->vis.merge, .prefix_lm = c->vl == VL_PALI, .images = im_tab, .n_images = k,
                  .n_rows = rows};
    return 0;
}

int vl_run_grids(run *R, dlm_err *e)
{
    return vl_grids(R->doc, &R->P.base.cfg, R->store, &R->vl_images, &R->vl, e);
}

int vl_run_features(run *R, dlm_err *e)
{
    if (!R->vl.n_images) return 0;
    const model_config *c = &R->m->cfg;
    int C = c->d_model;
    R->vl_feat = malloc((size_t)R->vl.n_rows * C * sizeof(float));
    if (!R->vl_feat) return err_set(e, "OOMError", "cannot allocate the images' features");
    int pali = c->vl == VL_PALI;
    proc_cfg pc = pali ? pali_proc(c) : qwen2vl_proc(c);
    char key[65];
    if (pali) pali_feature_key(R->m, &pc, key);
    else qwen2vl_feature_key(R->m, &pc, key);
    qwen2vl_vit v;
    siglip sg;
    int tower = 0, rc = -1;
    for (int k = 0; k < R->vl.n_images; k++) {
        const ds_image *d = &R->vl_images[k];
        char p[4400], dir[4300];
        qwen2vl_cache_path(R->store, d->sha, key, dir, sizeof dir, p, sizeof p);
        size_t want = (size_t)d->n_tok * C * sizeof(float);
        float *dst = R->vl_feat + (size_t)d->row0 * C;
        if (!qwen2vl_cache_read(p, dst, want)) {
            R->vl_cached++;
            continue;
        }
        if (!tower) {
            if (pali ? pali_tower_load(R->m, &sg, e) : qwen2vl_tower_load(R->m, &v, e)) goto out;
            tower = 1;
        }
        image_rgb im;
        float *f;
        int nr, grid[3];
        if (read_image(R->store, R->doc, NULL, d->sha, &im, e)) goto out;
        int r;
        if (pali) {   /* a fixed (image_size/patch)² rows, divided by √hidden for the splice */
            r = pali_image_features(&sg, c, &pc, &im, &f, e);
            nr = c->pali_tokens;
            memcpy(grid, d->grid, sizeof grid);
        } else {
            r = qwen2vl_image_features(&v, c, &pc, &im, &f, &nr, grid, e);
        }
        image_free(&im);
        if (r) goto out;
        if (nr != d->n_tok || grid[1] != d->grid[1] || grid[2] != d->grid[2]) {
            free(f);
            err_set(e, "ImageError", "blob %.12s: the processor gave grid (%d, %d, %d), the plan (1, %d, %d)", d->sha,
                    grid[0], grid[1], grid[2], d->grid[1], d->grid[2]);
            goto out;
        }
        memcpy(dst, f, want);
        free(f);
        if (fs_mkdir_p(dir, e) || fs_write_atomic(p, dst, want, 0644, e)) goto out;
        log_debug("vl-cache: wrote %s", p);
    }
    rc = 0;
out:
    if (tower && pali) siglip_free(&sg);
    else if (tower) qwen2vl_vit_free(&v);
    return rc;
}

int vl_run_fill(run *R, const int *items, int n, token_batch *b, int64_t *n_loss)
{
    return dataset_fill_vl(R->P.data.ds, items, n, R->packing, R->micro_batch, R->T, R->btok, R->btgt, R->bpos,
                           R->bseg, R->brow, R->bpos3, R->bprefix, R->vl_feat, b, n_loss);
}

uint64_t vl_run_feature_bytes(const ds_vl *vl, const model_config *c)
{
    return vl ? (uint64_t)vl->n_rows * (uint64_t)c->d_model * sizeof(float) : 0;
}

uint64_t vl_run_tower_bytes(const model_config *c, const ds_vl *vl)
{
    if (c->vl == VL_PALI && vl && vl->n_images) return doctor_pali_tower_bytes(c);
    if (c->vl != VL_QWEN2 || !vl || !vl->n_images) return 0;
    const struct model_vision *s = &c->vis;
    uint64_t D = (uint64_t)s->embed_dim, F = D * (uint64_t)s->mlp_ratio;
    uint64_t K = (uint64_t)s->in_ch * (uint64_t)s->temporal * (uint64_t)s->patch * (uint64_t)s->patch;
    uint64_t params = qwen2vl_tower_params(c);
    uint64_t N = 0;   /* the largest image's patches */
    for (int i = 0; i < vl->n_images; i++) {
        uint64_t p = (uint64_t)vl->images[i].grid[0] * (uint64_t)vl->images[i].grid[1] * (uint64_t)vl->images[i].grid[2];
        if (p > N) N = p;
    }
    uint64_t hd = D / (uint64_t)s->heads, big = 3 * D > F ? 3 * D : F;
    uint64_t acts = N * (3 * D + big + 2 * hd + K) + N * N + N * (uint64_t)c->d_model;
    return (params + acts) * sizeof(float);
}

void vl_run_free(run *R)
{
    free(R->vl_images);
    free(R->vl_feat);
    free(R->brow);
    free(R->bpos3);
    free(R->bprefix);
    R->bprefix = NULL;
    R->vl_images = NULL;
    R->vl_feat = NULL;
    R->brow = R->bpos3 = NULL;
}
