/* embed — training.cpt.embed_warmup_steps (docs/cpt.md): for steps 1..N
 * the input embedding and the LM head (one matrix when tied) train beside
 * the LoRA weights, with AdamW and the run's learning rate; from step N+1
 * they keep their warmed-up values. The trained matrices are the adapter's
 * f32 modules_to_save copies (decoder/lora.h: lora_own_embeddings), so the
 * decoder, the saved adapter and every later load use them.
 *
 * A checkpoint keeps them in embed_state.safetensors beside
 * training_state.bin: the matrices, their AdamW moments (exp_avg,
 * exp_avg_sq, torch's names) and their copy at the best evaluation (.best,
 * for early stopping, as training_state.bin keeps the LoRA's), with a
 * "<file>.sha256" sidecar as training_state.bin has (adapter/state.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter/adapter.h"
#include "grad/optim.h"
#include "run/run.h"
#include "util/fs.h"
#include "util/hash.h"
#include "weights/safetensors.h"

#define EMBED_STATE "embed_state.safetensors"

static size_t mat_n(const run *R) { return (size_t)R->m->cfg.vocab * (size_t)R->m->cfg.d_model; }
static int n_mats(const run *R) { return R->m->cfg.tied ? 1 : 2; }

int run_embed_alloc(run *R, dlm_err *e)
{
    if (lora_own_embeddings(R->l, R->m, e)) return -1;
    size_t n = mat_n(R) * (size_t)n_mats(R);
    R->emb_g = malloc(n * sizeof(float));
    R->emb_m = malloc(n * sizeof(float));
    R->emb_v = malloc(n * sizeof(float));
    if (!R->emb_g || !R->emb_m || !R->emb_v)
        return err_set(e, "OOMError", "cannot allocate the embed warm-up's gradients and moments (%zu MiB)",
                       (n * 12) >> 20);
    /* every page taken before step 1 (overcommit) */
    memset(R->emb_g, 0, n * sizeof(float));
    memset(R->emb_m, 0, n * sizeof(float));
    memset(R->emb_v, 0, n * sizeof(float));
    R->head_g = R->m->cfg.tied ? NULL : R->emb_g + mat_n(R);
    if (R->best) {
        if (!(R->emb_best = malloc(n * sizeof(float))))
            return err_set(e, "OOMError", "cannot allocate the embed warm-up's best-evaluation copy");
        run_embed_keep_best(R);
    }
    return 0;
}

void run_embed_keep_best(run *R)
{
    if (!R->emb_best || !R->l->embd) return;
    size_t n = mat_n(R);
    memcpy(R->emb_best, R->l->embd, n * sizeof(float));
    if (!R->m->cfg.tied) memcpy(R->emb_best + n, R->l->head, n * sizeof(float));
}

void run_embed_restore_best(run *R)
{
    if (!R->emb_best || !R->l->embd) return;
    size_t n = mat_n(R);
    memcpy(R->l->embd, R->emb_best, n * sizeof(float));
    if (!R->m->cfg.tied) memcpy(R->l->head, R->emb_best + n, n * sizeof(float));
}

void run_embed_zero_grads(run *R)
{
    memset(R->emb_g, 0, mat_n(R) * (size_t)n_mats(R) * sizeof(float));
}

double run_embed_sumsq(const run *R)
{
    size_t n = mat_n(R);
    return optim_grad_sumsq(R->emb_g, n) + (R->head_g ? optim_grad_sumsq(R->head_g, n) : 0.0);
}

void run_embed_step(run *R, double norm, double lr, int64_t step)
{
    size_t n = mat_n(R);
    /* the clip coefficient of the whole step (torch's clip_grad_norm_ over
     * every parameter that has a gradient) */
    optim_clip_scale(R->emb_g, n * (size_t)n_mats(R), R->optim.max_grad_norm, norm);
    /* these moments start with the run: Adam's step is this run's step */
    optim_adamw_step(&R->optim, R->l->embd, R->emb_g, R->emb_m, R->emb_v, n, lr, step + 1);
    if (R->head_g) optim_adamw_step(&R->optim, R->l->head, R->head_g, R->emb_m + n, R->emb_v + n, n, lr, step + 1);
}

int run_embed_save(const run *R, const char *dir, dlm_err *e)
{
    if (!R->l->embd) return 0;
    int64_t V = R->m->cfg.vocab, C = R->m->cfg.d_model;
    size_t n = mat_n(R);
    st_out t[8];
    int k = 0;
    const char *names[2][3] = {{"embed_tokens", "embed_tokens.exp_avg", "embed_tokens.exp_avg_sq"},
                               {"lm_head", "lm_head.exp_avg", "lm_head.exp_avg_sq"}};
    const char *best[2] = {"embed_tokens.best", "lm_head.best"};
    const float *w[2] = {R->l->embd, R->l->head};
    for (int i = 0; i < n_mats(R); i++) {
        t[k++] = (st_out){.name = names[i][0], .dtype = ST_F32, .ndim = 2, .shape = {V, C}, .data = w[i]};
        if (R->emb_best)
            t[k++] = (st_out){.name = best[i], .dtype = ST_F32, .ndim = 2, .shape = {V, C}, .data = R->emb_best + i * n};
        if (!R->emb_m) continue;   /* frozen copies from an earlier version: no moments */
        t[k++] = (st_out){.name = names[i][1], .dtype = ST_F32, .ndim = 2, .shape = {V, C}, .data = R->emb_m + i * n};
        t[k++] = (st_out){.name = names[i][2], .dtype = ST_F32, .ndim = 2, .shape = {V, C}, .data = R->emb_v + i * n};
    }
    char p[4600], sp[4700], hex[65];
    snprintf(p, sizeof p, "%s/" EMBED_STATE, dir);
    const char *meta[] = {"format", "pt", NULL};
    if (st_write(p, t, k, meta, e) || sha256_file_hex(p, hex, e)) return -1;
    snprintf(sp, sizeof sp, "%s.sha256", p);
    hex[64] = '\n';
    return fs_write_atomic(sp, hex, 65, 0644, e);
}

static int load_mat(float *dst, const st_file *f, const char *name, int64_t V, int64_t C, const char *path, dlm_err *e)
{
    const st_tensor *t = st_find(f, name);
    if (!t || t->dtype != ST_F32 || t->ndim != 2 || t->shape[0] != V || t->shape[1] != C ||
        t->nbytes != (uint64_t)V * (uint64_t)C * 4)
        return err_set(e, "ResumeIntegrityError", "%s: tensor '%s' is missing or not f32 [%lld, %lld]", path, name,
                       (long long)V, (long long)C);
    memcpy(dst, t->data, (size_t)t->nbytes);
    return 0;
}

int run_embed_load(run *R, const char *dir, dlm_err *e)
{
    char p[4600], sp[4700], hex[65];
    snprintf(p, sizeof p, "%s/" EMBED_STATE, dir);
    if (!fs_exists(p)) {
        if (!R->l->embd) return 0;
        err_set(e, "ResumeIntegrityError", "%s has no %s: the checkpoint predates training.cpt.embed_warmup_steps",
                dir, EMBED_STATE);
        return err_hint(e, "start over with 'dlm train %s --fresh'", R->o->doc_path);
    }
    snprintf(sp, sizeof sp, "%s.sha256", p);
    char *want = NULL;
    size_t wl = 0;
    if (fs_read_all(sp, 256, &want, &wl, e) || sha256_file_hex(p, hex, e)) { free(want); return -1; }
    int ok = wl >= 64 && !memcmp(want, hex, 64);
    free(want);
    if (!ok) {
        err_set(e, "ResumeIntegrityError", "%s does not match its sha256 sidecar", p);
        return err_hint(e, "start over with 'dlm train %s --fresh'", R->o->doc_path);
    }
    if (!R->l->embd && lora_own_embeddings(R->l, R->m, e)) return -1;
    st_file *f;
    if (st_open(p, &f, e)) return -1;
    int64_t V = R->m->cfg.vocab, C = R->m->cfg.d_model;
    size_t n = mat_n(R);
    const char *names[2][3] = {{"embed_tokens", "embed_tokens.exp_avg", "embed_tokens.exp_avg_sq"},
                               {"lm_head", "lm_head.exp_avg", "lm_head.exp_avg_sq"}};
    float *w[2] = {R->l->embd, R->l->head};
    int rc = 0;
    for (int i = 0; !rc && i < n_mats(R); i++) {
        rc = load_mat(w[i], f, names[i][0], V, C, p, e);
        if (!rc && R->emb_best && st_find(f, i ? "lm_head.best" : "embed_tokens.best"))
            rc = load_mat(R->emb_best + i * n, f, i ? "lm_head.best" : "embed_tokens.best", V, C, p, e);
        if (!rc && R->emb_m && st_find(f, names[i][1])) {
            rc = load_mat(R->emb_m + i * n, f, names[i][1], V, C, p, e) ||
                 load_mat(R->emb_v + i * n, f, names[i][2], V, C, p, e);
        }
    }
    st_close(f);
    return rc ? -1 : 0;
}

int run_embed_from_version(run *R, const char *vdir, dlm_err *e)
{
    unsigned mts;
    if (adapter_modules_to_save(vdir, &mts, e)) return -1;
    if (!mts) return 0;
    lora *prev;
    if (adapter_load(vdir, R->m, &prev, e)) return -1;
    if (R->l->embd) { /* copy into the buffers the run already has */
        size_t n = mat_n(R);
        memcpy(R->l->embd, prev->embd, n * sizeof(float));
        if (R->l->head != R->l->embd) memcpy(R->l->head, prev->head, n * sizeof(float));
        else if (prev->head != prev->embd) { /* a foreign adapter untied a tied base: keep its two matrices */
            lora_take_embeddings(R->l, prev);
        }
    } else {
        lora_take_embeddings(R->l, prev);
    }
    lora_free(prev);
    run_embed_keep_best(R);
    return 0;
}
