/* ptstate — the original DocumentLanguageModel's training_state.pt beside
 * each version dlm commits, so its tools find the files they read next to
 * an adapter (issue 31): the original's trainer writes them in
 * dlm.train.state_sidecar.save_state, and loads the .pt with
 * torch.load(weights_only=True).
 *
 *   training_state.pt          torch zip + pickle (util/torchpt.h) of the
 *                              original's v2 payload: torch.optim.AdamW's
 *                              state_dict over the PEFT parameters in
 *                              named_parameters order (the LoRA slab's own
 *                              order: per layer, per module q k v o gate up
 *                              down, lora_A, lora_B[, magnitude]), HF's two
 *                              param groups (decay, no decay: empty for a
 *                              LoRA), the LambdaLR state, the step counters
 *   training_state.pt.sha256   its hex digest + "\n"
 *   training_state.rng.json    numpy's and Python's generator state
 *   pinned_versions.json       the versions that wrote it ({"dlm": ...})
 *
 * The generator states are those seeding with the run's seed gives
 * (torch.manual_seed, numpy.random.seed, random.seed, as transformers'
 * set_seed): dlm's draws are pure functions of (seed, step, index), it
 * keeps no generator to save. The moments are dlm's AdamW moments, which
 * follow torch.optim.AdamW's update; 8-bit AdamW's block-wise state
 * (bitsandbytes' layout in the original) is left out: an empty "state",
 * as a torch optimizer that has not stepped. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "adapter/state.h"
#include "run/run.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/json.h"
#include "util/torchpt.h"
#include "version.h"

enum { MT_N = 624, TORCH_RNG_BYTES = 5056 };

/* init_genrand (MT19937's reference seeding): torch's at::mt19937,
 * numpy's legacy seed and the first stage of Python's init_by_array */
static void mt_seed(uint32_t mt[MT_N], uint32_t s)
{
    mt[0] = s;
    for (uint32_t j = 1; j < MT_N; j++) mt[j] = 1812433253u * (mt[j - 1] ^ (mt[j - 1] >> 30)) + j;
}

/* torch.manual_seed(seed); torch.get_rng_state(): CPUGeneratorImplStateLegacy
 * {THGeneratorState {u64 the_initial_seed; i32 left; i32 seeded; u64 next;
 * u64 state[624]; f64 normal_x, normal_y, normal_rho; i32 normal_is_valid};
 * f32 next_float_normal_sample; bool valid}, zero padding, 5056 bytes */
static void pt_torch_rng_state(uint64_t seed, uint8_t out[TORCH_RNG_BYTES])
{
    uint32_t mt[MT_N];
    mt_seed(mt, (uint32_t)seed);
    memset(out, 0, TORCH_RNG_BYTES);
    memcpy(out, &seed, 8);              /* the_initial_seed (little-endian host) */
    int32_t left = 1, seeded = 1;
    memcpy(out + 8, &left, 4);
    memcpy(out + 12, &seeded, 4);
    /* next = 0 at 16; state at 24 */
    for (int i = 0; i < MT_N; i++) {
        uint64_t v = mt[i];
        memcpy(out + 24 + 8 * i, &v, 8);
    }
}

/* random.seed(seed) (CPython's init_by_array over the seed's 32-bit words,
 * least significant first): the 624 words; the index is 624 */
static void pt_python_mt(uint64_t seed, uint32_t mt[MT_N])
{
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    int klen = key[1] ? 2 : 1;
    mt_seed(mt, 19650218u);
    int i = 1, j = 0;
    for (int k = MT_N > klen ? MT_N : klen; k; k--) {
        mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1664525u)) + key[j] + (uint32_t)j;
        i++, j++;
        if (i >= MT_N) { mt[0] = mt[MT_N - 1]; i = 1; }
        if (j >= klen) j = 0;
    }
    for (int k = MT_N - 1; k; k--) {
        mt[i] = (mt[i] ^ ((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1566083941u)) - (uint32_t)i;
        i++;
        if (i >= MT_N) { mt[0] = mt[MT_N - 1]; i = 1; }
    }
    mt[0] = 0x80000000u;
}

static json_t *rng_json(uint64_t seed)
{
    uint32_t mt[MT_N];
    json_t *np = json_null();
    if (seed <= 0xffffffffu) {   /* numpy's legacy seed takes 32 bits (larger: it raises) */
        mt_seed(mt, (uint32_t)seed);
        char *hex = malloc(MT_N * 8 + 1);
        if (!hex) return NULL;
        hex_encode((const unsigned char *)mt, sizeof mt, hex);   /* uint32 little-endian, as bytes(ndarray) */
        np = json_pack("{s:s, s:s, s:s, s:[i], s:i, s:i, s:f}", "name", "MT19937", "state_hex", hex, "state_dtype",
                       "uint32", "state_shape", MT_N, "pos", MT_N, "has_gauss", 0, "cached_gaussian", 0.0);
        free(hex);
    }
    pt_python_mt(seed, mt);
    json_t *st = json_array();
    for (int i = 0; i < MT_N; i++) json_array_append_new(st, json_integer(mt[i]));
    json_array_append_new(st, json_integer(MT_N));
    json_t *py = json_pack("{s:i, s:o, s:n}", "version", 3, "state", st, "gauss_next");
    return json_pack("{s:i, s:o, s:o}", "_rng_sidecar_version", 2, "numpy_rng_state", np ? np : json_null(),
                     "python_random_state", py);
}

/* one parameter's AdamW state: {"step": tensor(t), "exp_avg": m, "exp_avg_sq": v} */
static void param_state(tpt *w, int idx, const float *step, const float *m, const float *v, int ndim,
                        const int64_t *shape)
{
    tpt_int(w, idx);
    tpt_dict_begin(w);
    tpt_str(w, "step");
    tpt_tensor(w, TPT_F32, step, 0, NULL);
    tpt_str(w, "exp_avg");
    tpt_tensor(w, TPT_F32, m, ndim, shape);
    tpt_str(w, "exp_avg_sq");
    tpt_tensor(w, TPT_F32, v, ndim, shape);
    tpt_dict_end(w);
}

static void param_group(tpt *w, const optim_config *c, double wd, double lr, int first, int n)
{
    tpt_dict_begin(w);
    tpt_str(w, "weight_decay"), tpt_float(w, wd);
    tpt_str(w, "lr"), tpt_float(w, lr);
    tpt_str(w, "betas"), tpt_tuple_begin(w), tpt_float(w, c->beta1), tpt_float(w, c->beta2), tpt_tuple_end(w);
    tpt_str(w, "eps"), tpt_float(w, c->eps);
    tpt_str(w, "amsgrad"), tpt_bool(w, 0);
    tpt_str(w, "maximize"), tpt_bool(w, 0);
    tpt_str(w, "foreach"), tpt_none(w);
    tpt_str(w, "capturable"), tpt_bool(w, 0);
    tpt_str(w, "differentiable"), tpt_bool(w, 0);
    tpt_str(w, "fused"), tpt_none(w);
    tpt_str(w, "decoupled_weight_decay"), tpt_bool(w, 1);
    tpt_str(w, "initial_lr"), tpt_float(w, c->lr);
    tpt_str(w, "params"), tpt_list_begin(w);
    for (int i = 0; i < n; i++) tpt_int(w, first + i);
    tpt_list_end(w);
    tpt_dict_end(w);
}

int run_write_torch_state(run *R, const char *dir, const train_state *s, int use_qlora, dlm_err *e)
{
    const lora *l = R->l;
    int64_t steps = (int64_t)s->step;
    float stepf = (float)steps;
    /* the scheduler after `steps` updates: LambdaLR's last_epoch = steps */
    double lr_now = optim_lr_at(&R->optim, steps);
    uint8_t *trng = malloc(TORCH_RNG_BYTES);
    /* per-parameter shapes: [n_params][2] */
    int cap = l->n_layer * LM_COUNT * 3 + 2;
    int64_t(*shp)[2] = calloc((size_t)cap, sizeof *shp);
    int *nd = calloc((size_t)cap, sizeof *nd);
    const float **pm = calloc((size_t)cap, sizeof *pm), **pv = calloc((size_t)cap, sizeof *pv);
    if (!trng || !shp || !nd || !pm || !pv) {
        free(trng), free(shp), free(nd), free(pm), free(pv);
        return err_set(e, "MemoryError", "out of memory");
    }
    pt_torch_rng_state(R->seed, trng);
    int moments = s->optim_kind == STATE_OPTIM_ADAMW && steps > 0 && s->m && s->v;
    int np = 0;
    /* PEFT's named_parameters order: embed_tokens' modules_to_save copy
     * (model.embed_tokens comes first), the layers' LoRA tensors, lm_head's */
    /* (a copy this run kept frozen has no moments: a parameter without
     * state, as torch leaves one that never stepped) */
    int emb = l->embd != NULL, emb_mom = emb && R->emb_m && R->emb_v, tied = l->head == l->embd;
    if (emb) {
        shp[np][0] = l->we.rows, shp[np][1] = l->we.cols, nd[np] = 2;
        pm[np] = emb_mom ? R->emb_m : NULL, pv[np] = emb_mom ? R->emb_v : NULL, np++;
    }
    for (int layer = 0; layer < l->n_layer; layer++)
        for (int m = 0; m < LM_COUNT; m++) {
            const lora_mod *md = lora_mod_at(l, layer, m);
            if (!md) continue;
            shp[np][0] = l->cfg.rank, shp[np][1] = md->in, nd[np] = 2;
            pm[np] = s->m + md->off_a, pv[np] = s->v + md->off_a, np++;
            shp[np][0] = md->out, shp[np][1] = l->cfg.rank, nd[np] = 2;
            pm[np] = s->m + md->off_b, pv[np] = s->v + md->off_b, np++;
            if (l->cfg.dora) {
                shp[np][0] = md->out, nd[np] = 1;
                pm[np] = s->m + md->off_mag, pv[np] = s->v + md->off_mag, np++;
            }
        }
    if (emb && !tied) {
        size_t off = (size_t)l->we.rows * (size_t)l->we.cols;
        shp[np][0] = l->wo.rows, shp[np][1] = l->wo.cols, nd[np] = 2;
        pm[np] = emb_mom ? R->emb_m + off : NULL, pv[np] = emb_mom ? R->emb_v + off : NULL, np++;
    }

    tpt w;
    tpt_init(&w);
    tpt_dict_begin(&w);
    tpt_str(&w, "_state_sidecar_version"), tpt_int(&w, 2);
    tpt_str(&w, "optimizer_state_dict");
    tpt_dict_begin(&w);
    tpt_str(&w, "state");
    tpt_dict_begin(&w);
    for (int i = 0; moments && i < np; i++)
        if (pm[i]) param_state(&w, i, &stepf, pm[i], pv[i], nd[i], shp[i]);
    tpt_dict_end(&w);
    tpt_str(&w, "param_groups");
    tpt_list_begin(&w);
    param_group(&w, &R->optim, R->optim.weight_decay, lr_now, 0, np);
    param_group(&w, &R->optim, 0.0, lr_now, np, 0);
    tpt_list_end(&w);
    tpt_dict_end(&w);
    tpt_str(&w, "scheduler_state_dict");
    tpt_dict_begin(&w);
    tpt_str(&w, "base_lrs"), tpt_list_begin(&w), tpt_float(&w, R->optim.lr), tpt_float(&w, R->optim.lr), tpt_list_end(&w);
    tpt_str(&w, "last_epoch"), tpt_int(&w, steps);
    tpt_str(&w, "_step_count"), tpt_int(&w, steps + 1);
    tpt_str(&w, "_is_initial"), tpt_bool(&w, 0);
    tpt_str(&w, "_get_lr_called_within_step"), tpt_bool(&w, 0);
    tpt_str(&w, "_last_lr"), tpt_list_begin(&w), tpt_float(&w, lr_now), tpt_float(&w, lr_now), tpt_list_end(&w);
    /* LambdaLR keeps a non-function lambda's __dict__: {} for HF's partials */
    tpt_str(&w, "lr_lambdas"), tpt_list_begin(&w), tpt_dict_begin(&w), tpt_dict_end(&w), tpt_dict_begin(&w),
        tpt_dict_end(&w), tpt_list_end(&w);
    tpt_dict_end(&w);
    tpt_str(&w, "scaler_state_dict"), tpt_none(&w);
    int64_t rshape = TORCH_RNG_BYTES;
    tpt_str(&w, "torch_rng_state"), tpt_tensor(&w, TPT_U8, trng, 1, &rshape);
    tpt_str(&w, "cuda_rng_state"), tpt_none(&w);
    tpt_str(&w, "global_step"), tpt_int(&w, steps);
    tpt_str(&w, "epoch"), tpt_float(&w, R->steps_per_epoch > 0 ? (double)steps / R->steps_per_epoch : 0.0);
    tpt_str(&w, "best_val_loss");
    if (isfinite(s->best_val)) tpt_float(&w, s->best_val);
    else tpt_none(&w);
    tpt_str(&w, "dlm_manifest_hash"), tpt_none(&w);
    tpt_str(&w, "base_model_revision"), tpt_str(&w, R->revision);
    tpt_str(&w, "pinned_versions"), tpt_dict_begin(&w), tpt_str(&w, "dlm"), tpt_str(&w, DLM_VERSION), tpt_dict_end(&w);
    tpt_str(&w, "use_qlora"), tpt_bool(&w, use_qlora);
    tpt_dict_end(&w);

    strbuf out = {0};
    int rc = tpt_finish(&w, &out, e);
    tpt_free(&w);
    free(trng), free(shp), free(nd), free(pm), free(pv);
    char p[4600], hex[65], line[80];
    if (!rc) {
        snprintf(p, sizeof p, "%s/training_state.pt", dir);
        rc = fs_write_atomic(p, out.buf, out.len, 0644, e);
    }
    if (!rc) {
        sha256_hex(out.buf, out.len, hex);
        snprintf(line, sizeof line, "%s\n", hex);
        snprintf(p, sizeof p, "%s/training_state.pt.sha256", dir);
        rc = fs_write_atomic(p, line, strlen(line), 0644, e);
    }
    sb_free(&out);
    if (!rc) {
        json_t *rj = rng_json(R->seed);
        snprintf(p, sizeof p, "%s/training_state.rng.json", dir);
        rc = rj ? json_save_file(p, rj, e) : err_set(e, "MemoryError", "out of memory");
        json_decref(rj);
    }
    if (!rc) {
        json_t *pv2 = json_pack("{s:s}", "dlm", DLM_VERSION);
        snprintf(p, sizeof p, "%s/pinned_versions.json", dir);
        rc = json_save_file(p, pv2, e);
        json_decref(pv2);
    }
    return rc;
}
