/* bf16 training numerics of the engine (training.precision: bf16).
 *
 * Always: on the committed fixtures (tests/ref/model/fixtures), the LoRA
 * gradients under kern_set_bf16 have identical bytes for 1, 2 and 3
 * threads, with and without recomputation, differ from the f32 ones, and
 * do not change when the projections are re-stored as BF16
 * (model_bf16_projections, what a bf16 run does to an F32/F16 base).
 *
 * With DLM_BF16_REF=DIR (tests/ref/r0415-bf16-torch.sh; DIR made by
 * tests/ref/engine/torch_bf16.py): the loss, every LoRA gradient and 10
 * AdamW steps against PyTorch with dlm's rounding points written out
 * ("match": issue 16's bounds — loss within 1e-2 relative, each gradient
 * cosine >= 0.999 and relative norm error <= 2e-2, step losses within 2% —
 * and much tighter ones) and under torch.autocast("cpu", bfloat16)
 * ("autocast": the same bounds, except that a gradient's norm error may be
 * as large as PyTorch's own match variant is from autocast; see bounds).
 * The figures are printed. */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"
#include "weights/model.h"
#include "weights/safetensors.h"
#include "adapter/adapter.h"
#include "decoder/decoder.h"
#include "decoder/lora.h"
#include "grad/backward.h"
#include "grad/optim.h"
#include "util/json.h"
#include "util/rng.h"

#define FIX "tests/ref/model/fixtures/"

static model *load(const char *path)
{
    dlm_err e;
    model *m = NULL;
    if (model_load(path, &m, &e)) {
        fprintf(stderr, "load %s: %s\n", path, e.msg);
        exit(1);
    }
    return m;
}

static void test_threads(const char *path)
{
    model *m = load(path);
    lora_config lc = {4, 8.0f, 0.1f, LM_ALL, 0};
    lora *l;
    dlm_err e;
    if (lora_create(&m->cfg, &lc, &l, &e) || lora_init(l, m, 5, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    for (size_t i = 0; i < l->n; i++) l->w[i] += 0.02f * rng_normal(9, 77, 0, i);   /* B != 0 */
    int B = 2, T = 24, V = m->cfg.vocab;
    int32_t tok[48], tgt[48], pos[48], seg[48];
    for (int i = 0; i < B * T; i++) {
        tok[i] = (int32_t)(rng_u64(3, 99, 0, (uint64_t)i) % (uint64_t)V);
        tgt[i] = i % 5 == 2 ? -1 : (int32_t)(rng_u64(3, 99, 1, (uint64_t)i) % (uint64_t)V);
        pos[i] = i % T;
        seg[i] = 0;
    }
    token_batch b = {.B = B, .T = T, .tokens = tok, .targets = tgt, .pos = pos, .seg = seg};
    float *g[6];
    kern_set_bf16(1);
    for (int k = 0; k < 6; k++) {
        kern_init(k % 3 + 1);
        decoder_opts o = {.B = B, .T = T, .recompute = k / 3};
        decoder *f;
        CHECK_INT(decoder_create(m, l, &o, &f, &e), 0);
        g[k] = calloc(l->n, 4);
        int64_t n;
        backward_step(f, &b, g[k], NULL, 0.01f, 1234, 0, &n);
        decoder_free(f);
    }
    kern_set_bf16(0);
    float *g32 = calloc(l->n, 4);
    {
        decoder_opts o = {.B = B, .T = T};
        decoder *f;
        CHECK_INT(decoder_create(m, l, &o, &f, &e), 0);
        int64_t n;
        backward_step(f, &b, g32, NULL, 0.01f, 1234, 0, &n);
        decoder_free(f);
    }
    for (int k = 1; k < 6; k++)
        CHECK_MSG(!memcmp(g[0], g[k], l->n * 4), "%s: bf16 gradients differ at %d threads, recompute %d", path,
                  k % 3 + 1, k / 3);
    CHECK_MSG(memcmp(g[0], g32, l->n * 4), "%s: bf16 gave the f32 bytes", path);
    /* the projections converted to BF16 once (what a bf16 run does to an
     * F32/F16 base) give the bytes of rounding them where they are packed */
    CHECK_INT(model_bf16_projections(m, &e), 0);
    kern_set_bf16(1);
    {
        decoder_opts o = {.B = B, .T = T};
        decoder *f;
        CHECK_INT(decoder_create(m, l, &o, &f, &e), 0);
        memset(g32, 0, l->n * 4);
        int64_t n;
        backward_step(f, &b, g32, NULL, 0.01f, 1234, 0, &n);
        decoder_free(f);
    }
    kern_set_bf16(0);
    CHECK_MSG(!memcmp(g[0], g32, l->n * 4), "%s: BF16-stored projections changed the bf16 gradients", path);
    for (int k = 0; k < 6; k++) free(g[k]);
    free(g32);
    lora_free(l);
    model_free(m);
    kern_init(2);
}

static const st_tensor *need(const st_file *f, const char *name)
{
    const st_tensor *t = st_find(f, name);
    if (!t) { fprintf(stderr, "reference lacks %s\n", name); exit(1); }
    return t;
}

/* norm: the bound on each gradient's relative norm error; with `beside`
 * set, a tensor may also be off by up to 1.25× (+1e-3) what PyTorch's own
 * `beside` variant is off from this one (autocast rounds every product's
 * output and the head's dlogits to bf16, points the other two do not
 * have: torch's match variant is 2-4% from autocast too) */
typedef struct bounds { double loss, cos, norm, step; const char *beside; } bounds;

/* One variant of DIR: the engine in bf16 against <variant>.json/.grads. */
static void ref_variant(const char *dir, const char *variant, const bounds *bd)
{
    char p[4096];
    dlm_err e;
    snprintf(p, sizeof p, "%s/model", dir);
    model *m = load(p);
    st_file *bf, *gf, *inf;
    snprintf(p, sizeof p, "%s/batch.safetensors", dir);
    if (st_open(p, &bf, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    snprintf(p, sizeof p, "%s/%s.grads.safetensors", dir, variant);
    if (st_open(p, &gf, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    snprintf(p, sizeof p, "%s/lora.init.safetensors", dir);
    if (st_open(p, &inf, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    st_file *sf = NULL;
    if (bd->beside) {
        snprintf(p, sizeof p, "%s/%s.grads.safetensors", dir, bd->beside);
        if (st_open(p, &sf, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    }
    snprintf(p, sizeof p, "%s/%s.json", dir, variant);
    json_t *hp = json_load_path(p, 1 << 20, &e);
    if (!hp) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    const st_tensor *tt = need(bf, "tokens");
    int B = (int)tt->shape[0], T = (int)tt->shape[1];
    token_batch b = {.B = B, .T = T, .tokens = need(bf, "tokens")->data, .targets = need(bf, "targets")->data, .pos = need(bf, "pos")->data, .seg = need(bf, "seg")->data};
    double rank, alpha;
    jget_num(hp, "rank", &rank);
    jget_num(hp, "alpha", &alpha);
    lora_config lc = {(int)rank, (float)alpha, 0.0f, LM_ALL, 0};
    lora *l;
    CHECK_INT(lora_create(&m->cfg, &lc, &l, &e), 0);
    CHECK_MSG(lora_load_st(l, inf, "init", &e) == 0, "%s", e.msg);
    size_t n = l->n;
    float *g = calloc(n, 4);
    decoder_opts o = {.B = B, .T = T};
    decoder *f;
    CHECK_INT(decoder_create(m, l, &o, &f, &e), 0);
    kern_set_bf16(1);
    int64_t nl;
    backward_step(f, &b, g, NULL, 0, 0, 0, &nl);   /* the token count */
    memset(g, 0, n * 4);
    double loss = backward_step(f, &b, g, NULL, 1.0f / (float)nl, 0, 0, &nl) / (double)nl, want_loss;
    jget_num(hp, "loss", &want_loss);
    double lerr = fabs(loss - want_loss) / fabs(want_loss);
    CHECK_MSG(lerr <= bd->loss, "%s %s: loss %.7f want %.7f (rel %.3g > %.3g)", dir, variant, loss, want_loss, lerr,
              bd->loss);
    /* every LoRA gradient: cosine and relative norm error of the difference */
    double min_cos = 1, max_nerr = 0, max_tne = 0;
    int ntens = 0;
    char name[256], worst[256] = "";
    for (int layer = 0; layer < l->n_layer; layer++)
        for (int mo = 0; mo < LM_COUNT; mo++) {
            const lora_mod *md = lora_mod_at(l, layer, mo);
            if (!md) continue;
            for (int ab = 0; ab < 2; ab++) {
                lora_tensor_name(l, layer, mo, ab ? "lora_B" : "lora_A", name, sizeof name);
                const float *got = g + (ab ? md->off_b : md->off_a);
                size_t cnt = (size_t)l->cfg.rank * (size_t)(ab ? md->out : md->in);
                const st_tensor *t = need(gf, name);
                CHECK_INT((int64_t)t->nbytes, (int64_t)cnt * 4);
                const float *want = t->data;
                double dot = 0, ng = 0, nw = 0, nd = 0;
                for (size_t i = 0; i < cnt; i++) {
                    dot += (double)got[i] * want[i];
                    ng += (double)got[i] * got[i];
                    nw += (double)want[i] * want[i];
                    nd += ((double)got[i] - want[i]) * ((double)got[i] - want[i]);
                }
                double cs = dot / sqrt(ng * nw + 1e-300), ne = sqrt(nd / (nw + 1e-300)), lim = bd->norm;
                if (sf) {
                    const float *ot = need(sf, name)->data;
                    double od = 0;
                    for (size_t i = 0; i < cnt; i++) od += ((double)ot[i] - want[i]) * ((double)ot[i] - want[i]);
                    double tne = sqrt(od / (nw + 1e-300));
                    if (1.25 * tne + 1e-3 > lim) lim = 1.25 * tne + 1e-3;
                    if (tne > max_tne) max_tne = tne;
                }
                CHECK_MSG(cs >= bd->cos && ne <= lim, "%s %s %s: cosine %.6f, relative norm error %.3g (bound %.3g)",
                          dir, variant, name, cs, ne, lim);
                if (cs < min_cos) min_cos = cs;
                if (ne > max_nerr) { max_nerr = ne; snprintf(worst, sizeof worst, "%s", name); }
                ntens++;
            }
        }
    CHECK_INT(ntens, st_count(gf));
    /* 10 AdamW steps on the batch, as the trainer takes them */
    optim_config oc;
    optim_defaults(&oc);
    double d;
    jget_num(hp, "lr", &d); oc.lr = d;
    jget_num(hp, "weight_decay", &d); oc.weight_decay = d;
    jget_num(hp, "max_grad_norm", &d); oc.max_grad_norm = d;
    jget_num(hp, "warmup_ratio", &d); oc.warmup_ratio = d;
    jget_num(hp, "steps", &d); oc.total_steps = (int64_t)d;
    oc.sched = SCHED_COSINE;
    json_t *sl = json_object_get(hp, "step_losses");
    float *mo = calloc(n, 4), *vo = calloc(n, 4);
    double max_step = 0;
    for (int64_t step = 0; step < oc.total_steps; step++) {
        memset(g, 0, n * 4);
        double s = backward_step(f, &b, g, NULL, 1.0f / (float)nl, 0, (uint64_t)step, &nl) / (double)nl;
        double want = json_real_value(json_array_get(sl, (size_t)step)), rel = fabs(s - want) / fabs(want);
        CHECK_MSG(rel <= bd->step, "%s %s step %lld loss %.7f want %.7f", dir, variant, (long long)step + 1, s, want);
        if (rel > max_step) max_step = rel;
        optim_clip(g, n, oc.max_grad_norm);
        optim_adamw_step(&oc, l->w, g, mo, vo, n, optim_lr_at(&oc, step), step + 1);
    }
    double fin = decoder_loss(f, &b, NULL, NULL, &nl) / (double)nl, wantf;
    jget_num(hp, "final_loss", &wantf);
    double ferr = fabs(fin - wantf) / fabs(wantf);
    CHECK_MSG(ferr <= bd->step, "%s %s final loss %.7f want %.7f", dir, variant, fin, wantf);
    if (ferr > max_step) max_step = ferr;
    kern_set_bf16(0);
    printf("bf16 vs torch %-8s %s: loss %.6f (torch %.6f, rel %.2e); %d gradients: min cosine %.7f, max rel norm err "
           "%.2e (%s); 10 steps: max rel loss diff %.2e, final %.6f (torch %.6f)\n", variant, dir, loss, want_loss,
           lerr, ntens, min_cos, max_nerr, worst, max_step, fin, wantf);
    if (sf) printf("  (torch's %s variant vs %s: max rel norm err %.2e)\n", bd->beside, variant, max_tne);
    free(mo); free(vo); free(g);
    decoder_free(f);
    json_decref(hp);
    st_close(bf); st_close(gf); st_close(inf);
    if (sf) st_close(sf);
    lora_free(l);
    model_free(m);
}

int main(void)
{
    kern_init(2);
    const char *ref = getenv("DLM_BF16_REF");
    if (ref && *ref) {
        /* the same rounding points as dlm: issue 16's bounds and much
         * tighter ones (f32 summation order is left, and over 10 steps a
         * bf16 rounding that flips on a last-bit difference). The norm
         * bound is 1e-2 (cosine 0.99995) since the attention rounds too
         * (q̃, k, v, P, dS: five more points where a last-bit difference
         * upstream flips a rounding): measured 6.9e-3 llama, 2.1e-3 qwen2 (4.5e-3 and
         * 1.5e-6 with the f32 attention); the attention alone equals its
         * written-out rounding points to 1e-7 (test_attn_bf16, one key
         * block as here) */
        const bounds same = {1e-5, 0.99995, 1e-2, 2e-3, NULL};
        /* the peer's real bf16 arithmetic: issue 16's bounds, the norm as
         * close as PyTorch's own same-rounding-points script gets */
        const bounds peer = {1e-2, 0.999, 2e-2, 2e-2, "match"};
        ref_variant(ref, "match", &same);
        ref_variant(ref, "autocast", &peer);
        return check_done();
    }
    test_threads(FIX "qwen2-f32");
    test_threads(FIX "llama-bf16.q8_0.gguf");
    return check_done();
}
