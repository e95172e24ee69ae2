/* pali — PaliGemma's image path on a loaded base (vision/pali.h). */
#include "vision/pali.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/hash.h"
#include "weights/safetensors.h"

int pali_tower_load(const model *m, siglip *s, dlm_err *e)
{
    const model_config *c = &m->cfg;
    if (!c->pali) return err_set(e, "ModelLoadError", "'%s' is not a PaliGemma model", m->source);
    static const char *const TOWER[] = {"model.vision_tower.vision_model.", "model.vision_tower.",
                                        "vision_tower.vision_model.", "vision_tower."};
    static const char *const PROJ[] = {"model.multi_modal_projector.linear.", "multi_modal_projector.linear."};
    st_file *f = NULL;
    if (st_open(m->source, &f, e)) return -1;
    const char *tower = NULL, *proj = NULL;
    char name[256];
    for (size_t i = 0; i < sizeof TOWER / sizeof *TOWER && !tower; i++) {
        snprintf(name, sizeof name, "%sembeddings.patch_embedding.weight", TOWER[i]);
        if (st_find(f, name)) tower = TOWER[i];
    }
    for (size_t i = 0; i < sizeof PROJ / sizeof *PROJ && !proj; i++) {
        snprintf(name, sizeof name, "%sweight", PROJ[i]);
        if (st_find(f, name)) proj = PROJ[i];
    }
    if (!tower || !proj) {
        st_close(f);
        err_set(e, "ModelLoadError", "'%s' has no %s", m->source,
                tower ? "multi_modal_projector.linear.weight" : "vision_tower (embeddings.patch_embedding.weight)");
        return err_hint(e, "a PaliGemma checkpoint holds the SigLIP tower and the projector beside the language model");
    }
    siglip_cfg sc = {.layers = c->pali_vis.layers, .hidden = c->pali_vis.hidden, .heads = c->pali_vis.heads,
                     .mlp_hidden = c->pali_vis.mlp_hidden, .image_size = c->pali_vis.image_size,
                     .patch = c->pali_vis.patch, .in_ch = 3, .proj_dim = c->pali_proj};
    int rc = siglip_load(f, tower, proj, &sc, s, e);   /* copies into f32: f may close */
    st_close(f);
    return rc;
}

proc_cfg pali_proc(const model_config *c)
{
    proc_cfg p = PROC_PALIGEMMA_224;
    p.height = p.width = c->pali_vis.image_size;
    return p;
}

int pali_image_features(const siglip *s, const model_config *c, const proc_cfg *pc, const image_rgb *im, float **out,
                        dlm_err *e)
{
    *out = NULL;
    proc_out po;
    if (proc_image(im, pc, &po, e)) return -1;
    size_t n = (size_t)c->pali_tokens * c->d_model;
    float *f = malloc(n * sizeof *f);
    if (!f) {
        proc_out_free(&po);
        return err_set(e, "MemoryError", "out of memory");
    }
    int rc = siglip_forward(s, po.pixels, f, e);
    proc_out_free(&po);
    if (rc) {
        free(f);
        return -1;
    }
    float sc = c->embd_scale > 0 ? c->embd_scale : 1.0f;
    for (size_t i = 0; i < n; i++) f[i] /= sc;
    *out = f;
    return 0;
}

int pali_splice(const model_config *c, const int32_t *ids, int64_t n, int n_images, int32_t *embed_row, dlm_err *e)
{
    int64_t k = 0, run = 0;
    int runs = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] != c->pali_image_id) {
            if (run && run != c->pali_tokens) break;
            run = 0;
            embed_row[i] = -1;
            continue;
        }
        if (!run++) runs++;
        embed_row[i] = (int32_t)k++;
    }
    if (k != (int64_t)n_images * c->pali_tokens || runs != n_images)
        return err_set(e, "TrainError", "the prompt has %lld image tokens in %d runs; %d image%s need%s %d runs of %d",
                       (long long)k, runs, n_images, n_images == 1 ? "" : "s", n_images == 1 ? "s" : "", n_images,
                       c->pali_tokens);
    return 0;
}

void pali_feature_key(const model *m, const proc_cfg *pc, char hex[65])
{
    const model_config *c = &m->cfg;
    const st_file *f = model_safetensors(m);
    sha256_ctx h;
    sha256_init(&h);
    char buf[512];
    int n = snprintf(buf, sizeof buf, "pali-features 1\n%d %d %d %d %d %d %d %d %.9g\n%d %d %d %.17g\n",
                     c->pali_vis.layers, c->pali_vis.hidden, c->pali_vis.heads, c->pali_vis.mlp_hidden,
                     c->pali_vis.image_size, c->pali_vis.patch, c->pali_proj, c->d_model, (double)c->embd_scale,
                     pc->height, pc->width, pc->resample, pc->rescale_factor);
    sha256_update(&h, buf, (size_t)n);
    sha256_update(&h, pc->mean, sizeof pc->mean);
    sha256_update(&h, pc->std, sizeof pc->std);
    static const char *const PW[] = {"vision_tower.vision_model.embeddings.patch_embedding.weight",
                                     "vision_tower.embeddings.patch_embedding.weight",
                                     "model.vision_tower.vision_model.embeddings.patch_embedding.weight",
                                     "model.vision_tower.embeddings.patch_embedding.weight",
                                     "multi_modal_projector.linear.weight", "model.multi_modal_projector.linear.weight"};
    for (size_t i = 0; i < sizeof PW / sizeof *PW; i++) {
        const st_tensor *t = f ? st_find(f, PW[i]) : NULL;
        if (t) sha256_update(&h, t->data, t->nbytes);
    }
    unsigned char d[32];
    sha256_final(&h, d);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
}
