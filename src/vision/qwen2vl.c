/* qwen2vl — a Qwen2-VL base's image path (vision/qwen2vl.h). */
#include "vision/qwen2vl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/fs.h"
#include "util/hash.h"
#include "vision/mrope.h"

int qwen2vl_tower_load(const model *m, qwen2vl_vit *v, dlm_err *e)
{
    const model_config *c = &m->cfg;
    const st_file *f = model_safetensors(m);
    if (c->vl != VL_QWEN2 || !f)
        return err_set(e, "ModalityError", "'%s' is not a Qwen2-VL model folder (no vision tower)", m->source);
    const struct model_vision *s = &c->vis;
    vit_cfg vc = {.depth = s->depth, .embed_dim = s->embed_dim, .heads = s->heads,
                  .mlp_hidden = s->embed_dim * s->mlp_ratio, .in_ch = s->in_ch, .patch = s->patch,
                  .temporal = s->temporal, .merge = s->merge, .hidden_size = c->d_model, .rope_theta = 10000.0};
    const char *prefix = st_find(f, "model.visual.patch_embed.proj.weight") ? "model.visual." : "visual.";
    return qwen2vl_vit_load(f, prefix, &vc, v, e);
}

proc_cfg qwen2vl_proc(const model_config *c)
{
    proc_cfg p = PROC_QWEN2_VL;
    p.patch = c->vis.patch;
    p.temporal = c->vis.temporal;
    p.merge = c->vis.merge;
    return p;
}

uint64_t qwen2vl_tower_params(const model_config *c)
{
    const struct model_vision *s = &c->vis;
    uint64_t D = (uint64_t)s->embed_dim, F = D * (uint64_t)s->mlp_ratio, M = D * (uint64_t)(s->merge * s->merge);
    uint64_t K = (uint64_t)s->in_ch * (uint64_t)s->temporal * (uint64_t)s->patch * (uint64_t)s->patch;
    return D * K + (uint64_t)s->depth * (4 * D + 3 * D * D + 3 * D + D * D + D + 2 * D * F + F + D) + 2 * D + M * M +
           M + (uint64_t)c->d_model * (M + 1);
}

int qwen2vl_grid_tokens(const model_config *c, const int grid[3])
{
    return grid[0] * grid[1] * grid[2] / (c->vis.merge * c->vis.merge);
}

int qwen2vl_image_features(const qwen2vl_vit *v, const model_config *c, const proc_cfg *pc, const image_rgb *im,
                           float **out, int *n_rows, int grid[3], dlm_err *e)
{
    *out = NULL;
    proc_out po;
    if (proc_image(im, pc, &po, e)) return -1;
    for (int i = 0; i < 3; i++) grid[i] = po.grid_thw[i];
    int n = qwen2vl_grid_tokens(c, grid);
    float *f = malloc((size_t)n * c->d_model * sizeof *f);
    int rc = -1;
    if (!f) err_set(e, "MemoryError", "out of memory");
    else if (!qwen2vl_vit_forward(v, po.pixels, (const int (*)[3])grid, 1, f, e)) rc = 0;
    proc_out_free(&po);
    if (rc) {
        free(f);
        return -1;
    }
    *out = f;
    *n_rows = n;
    return 0;
}

void qwen2vl_feature_key(const model *m, const proc_cfg *pc, char hex[65])
{
    const model_config *c = &m->cfg;
    const st_file *f = model_safetensors(m);
    sha256_ctx h;
    sha256_init(&h);
    char buf[512];
    int n = snprintf(buf, sizeof buf, "qwen2vl-features 1\n%d %d %d %d %d %d %d %d %d\n%lld %lld %d %.17g\n",
                     c->vis.depth, c->vis.embed_dim, c->vis.heads, c->vis.mlp_ratio, c->vis.in_ch, c->vis.patch,
                     c->vis.temporal, c->vis.merge, c->d_model, pc->min_pixels, pc->max_pixels, pc->resample,
                     pc->rescale_factor);
    sha256_update(&h, buf, (size_t)n);
    sha256_update(&h, pc->mean, sizeof pc->mean);
    sha256_update(&h, pc->std, sizeof pc->std);
    static const char *const W[] = {"patch_embed.proj.weight", "merger.mlp.2.weight"};
    for (int i = 0; i < 2; i++)
        for (int p = 0; p < 2; p++) {
            snprintf(buf, sizeof buf, "%s%s", p ? "visual." : "model.visual.", W[i]);
            const st_tensor *t = f ? st_find(f, buf) : NULL;
            if (t) sha256_update(&h, t->data, t->nbytes);
        }
    unsigned char d[32];
    sha256_final(&h, d);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

void qwen2vl_cache_path(const char *store, const char *sha, const char *key, char *dir, size_t dcap, char *path,
                        size_t pcap)
{
    snprintf(dir, dcap, "%s/vl-cache/%.2s", store, sha);
    snprintf(path, pcap, "%s/%s.%.16s.f32", dir, sha, key);
}

int qwen2vl_cache_read(const char *path, float *out, size_t want)
{
    char *buf = NULL;
    size_t got = 0;
    if (fs_file_size(path) != (int64_t)want || fs_read_all(path, want + 1, &buf, &got, NULL) || got != want) {
        free(buf);
        return -1;
    }
    memcpy(out, buf, want);
    free(buf);
    return 0;
}

int qwen2vl_splice(const model_config *c, const int32_t *ids, int64_t n, const int (*grid)[3], int n_images,
                   int32_t *embed_row, int32_t *pos3, int64_t *delta, dlm_err *e)
{
    if (qwen2vl_rope_index(ids, n, c->image_id, grid, n_images, c->vis.merge, pos3, delta, e)) return -1;
    int32_t k = 0;
    for (int64_t i = 0; i < n; i++) embed_row[i] = ids[i] == c->image_id ? k++ : -1;
    return 0;
}
