/* training.cpt.embed_warmup_steps: the adapter's modules_to_save
 * (decoder/lora.h, adapter/adapter.h, run/embed.c; docs/cpt.md).
 *
 * Always, on the tied (qwen2-f32) and untied (llama-bf16) fixtures:
 * - lora_own_embeddings copies the base's matrices as f32 (bf16 widened
 *   exactly); a decoder with them gives the base's logits bit for bit;
 * - adapter_save writes PEFT's names and "modules_to_save", adapter_load
 *   reads the same bytes back; a tied base's matrix is saved under both
 *   names and loaded once; an adapter that saves embed_tokens alone keeps
 *   the base's head; an unknown modules_to_save name is an AdapterError.
 *
 * With DLM_EMBED_REF=DIR (tests/ref/r0414-embed-warmup-torch.sh): the
 * PyTorch reference of tests/ref/engine/torch_embed.py — S steps on one
 * batch, the embedding and head trained in steps 1..N only, one clip over
 * every parameter with a gradient, AdamW — against dlm's backward
 * (embedding/head gradients beside the LoRA's), optim_clip_extra /
 * optim_clip_scale and optim_adamw_step, as the trainer's do_step and
 * run_embed_step compose them: every step's loss and grad norm, and the
 * final LoRA tensors, embedding and head within 1e-4 relative. */
#include "check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adapter/adapter.h"
#include "decoder/decoder.h"
#include "decoder/lora.h"
#include "grad/backward.h"
#include "grad/optim.h"
#include "kern/kern.h"
#include "util/fs.h"
#include "util/json.h"
#include "weights/safetensors.h"

#define FIX "tests/ref/model/fixtures/"

static double rel_err(const float *a, const float *b, size_t n)
{
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        r += (double)b[i] * b[i];
    }
    return r > 0 ? sqrt(d / r) : sqrt(d);
}

static void roundtrip(const char *path)
{
    dlm_err e;
    model *m = NULL;
    CHECK_MSG(model_load(path, &m, &e) == 0, "%s: %s", path, e.msg);
    if (!m) return;
    const model_config *c = &m->cfg;
    size_t nv = (size_t)c->vocab * (size_t)c->d_model;
    lora_config lc = {4, 8.0f, 0.0f, LM_ATTN, 0};
    lora *l, *l0;
    CHECK_INT(lora_create(c, &lc, &l, &e), 0);
    CHECK_INT(lora_create(c, &lc, &l0, &e), 0);
    CHECK_INT(lora_init(l, m, 3, &e), 0);
    memcpy(l0->w, l->w, l->n * 4);
    CHECK_INT(lora_own_embeddings(l, m, &e), 0);
    CHECK(l->we.type == DT_F32 && l->we.rows == c->vocab && l->we.cols == c->d_model);
    CHECK(c->tied ? l->head == l->embd : l->head != l->embd);
    /* f32 copies of the stored rows: the same logits as the base's matrices */
    enum { T = 7 };
    int32_t ids[T] = {1, 5, 9, 2, 7, 5, 3}, tgt[T] = {5, 9, 2, 7, 5, 3, 1}, pos[T], seg[T] = {0};
    for (int i = 0; i < T; i++) pos[i] = i;
    token_batch b = {.B = 1, .T = T, .tokens = ids, .targets = tgt, .pos = pos, .seg = seg};
    decoder_opts o = {.B = 1, .T = T, .full = 1};
    float *la = calloc((size_t)T * c->vocab, 4), *lb = calloc((size_t)T * c->vocab, 4);
    decoder *da, *db;
    int64_t nl;
    o.full = 0;
    CHECK_INT(decoder_create(m, l0, &o, &da, &e), 0);
    CHECK_INT(decoder_create(m, l, &o, &db, &e), 0);
    decoder_loss(da, &b, NULL, la, &nl);
    decoder_loss(db, &b, NULL, lb, &nl);
    CHECK_MSG(rel_err(lb, la, (size_t)T * c->vocab) < 1e-6, "%s: f32 copies change the logits (%.3g)", path,
              rel_err(lb, la, (size_t)T * c->vocab));
    /* a trained-looking change, saved and loaded back */
    for (size_t i = 0; i < nv; i += 7) l->embd[i] += 0.25f;
    if (!c->tied)
        for (size_t i = 3; i < nv; i += 5) l->head[i] -= 0.5f;
    char dir[] = "/tmp/dlm-test-embed-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    adapter_meta meta = {"fixture", NULL};
    CHECK_MSG(adapter_save(dir, l, &meta, &e) == 0, "%s", e.msg);
    unsigned mts = 0;
    CHECK_INT(adapter_modules_to_save(dir, &mts, &e), 0);
    CHECK_INT(mts, ADAPTER_SAVES_EMBED | ADAPTER_SAVES_HEAD);
    char p[4200];
    snprintf(p, sizeof p, "%s/adapter_model.safetensors", dir);
    st_file *f;
    CHECK_INT(st_open(p, &f, &e), 0);
    const st_tensor *te = st_find(f, "base_model.model.model.embed_tokens.weight"),
                    *th = st_find(f, "base_model.model.lm_head.weight");
    CHECK(te && th && te->dtype == ST_F32 && te->shape[0] == c->vocab && te->shape[1] == c->d_model);
    if (te) CHECK(!memcmp(te->data, l->embd, nv * 4));
    if (th) CHECK(!memcmp(th->data, l->head, nv * 4));
    st_close(f);
    lora *back;
    CHECK_MSG(adapter_load(dir, m, &back, &e) == 0, "%s", e.msg);
    CHECK(back->embd && !memcmp(back->embd, l->embd, nv * 4) && !memcmp(back->head, l->head, nv * 4));
    CHECK(c->tied ? back->head == back->embd : back->head != back->embd);
    decoder *dc;
    CHECK_INT(decoder_create(m, back, &o, &dc, &e), 0);
    decoder_loss(db, &b, NULL, la, &nl);
    decoder_loss(dc, &b, NULL, lb, &nl);
    CHECK_MSG(!memcmp(la, lb, (size_t)T * c->vocab * 4), "%s: the loaded adapter's logits differ", path);
    decoder_free(dc);
    lora_free(back);
    /* modules_to_save [embed_tokens] alone: PEFT wraps only that module,
     * the head stays the base's (a tied base gets two matrices) */
    snprintf(p, sizeof p, "%s/adapter_config.json", dir);
    json_t *cfg = json_load_path(p, 1 << 20, &e);
    json_object_set_new(cfg, "modules_to_save", json_pack("[s]", "embed_tokens"));
    CHECK_INT(json_save_file(p, cfg, &e), 0);
    CHECK_MSG(adapter_load(dir, m, &back, &e) == 0, "%s", e.msg);
    if (back) {
        float *want = calloc(nv, 4);
        for (int64_t r = 0; r < c->vocab; r++)
            kern_dequant_row(m->output.type, (const char *)m->output.data + (size_t)r * m->output.row_bytes,
                             want + (size_t)r * c->d_model, c->d_model);
        CHECK(back->head != back->embd && !memcmp(back->head, want, nv * 4) && !memcmp(back->embd, l->embd, nv * 4));
        free(want);
        lora_free(back);
    }
    json_object_set_new(cfg, "modules_to_save", json_pack("[s]", "score"));
    CHECK_INT(json_save_file(p, cfg, &e), 0);
    CHECK_INT(adapter_load(dir, m, &back, &e), -1);
    CHECK_STR(e.kind, "AdapterError");
    json_decref(cfg);
    fs_remove_tree(dir, NULL);
    decoder_free(da);
    decoder_free(db);
    free(la);
    free(lb);
    lora_free(l);
    lora_free(l0);
    model_free(m);
}

static const st_tensor *need(const st_file *f, const char *name)
{
    const st_tensor *t = st_find(f, name);
    if (!t) {
        fprintf(stderr, "missing tensor %s\n", name);
        exit(1);
    }
    return t;
}

static void ref_case(const char *dir)
{
    char p[4096];
    dlm_err e;
    snprintf(p, sizeof p, "%s/model", dir);
    model *m = NULL;
    if (model_load(p, &m, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    const model_config *c = &m->cfg;
    st_file *bf, *inf, *fin;
    snprintf(p, sizeof p, "%s/batch.safetensors", dir);
    CHECK_INT(st_open(p, &bf, &e), 0);
    snprintf(p, sizeof p, "%s/lora.init.safetensors", dir);
    CHECK_INT(st_open(p, &inf, &e), 0);
    snprintf(p, sizeof p, "%s/embed.final.safetensors", dir);
    CHECK_INT(st_open(p, &fin, &e), 0);
    snprintf(p, sizeof p, "%s/embed.json", dir);
    json_t *hp = json_load_path(p, 1 << 20, &e);
    if (!hp) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    const st_tensor *tt = need(bf, "tokens");
    int B = (int)tt->shape[0], T = (int)tt->shape[1];
    token_batch b = {.B = B, .T = T, .tokens = need(bf, "tokens")->data, .targets = need(bf, "targets")->data, .pos = need(bf, "pos")->data, .seg = need(bf, "seg")->data};
    int64_t nl = 0;
    for (int i = 0; i < B * T; i++) nl += b.targets[i] >= 0;
    double d, rank, alpha;
    jget_num(hp, "rank", &rank);
    jget_num(hp, "alpha", &alpha);
    lora_config lc = {(int)rank, (float)alpha, 0.0f, LM_ALL, 0};
    lora *l;
    CHECK_INT(lora_create(c, &lc, &l, &e), 0);
    CHECK_MSG(lora_load_st(l, inf, "init", &e) == 0, "%s", e.msg);
    CHECK_INT(lora_own_embeddings(l, m, &e), 0);
    optim_config oc;
    optim_defaults(&oc);
    jget_num(hp, "lr", &d); oc.lr = d;
    jget_num(hp, "weight_decay", &d); oc.weight_decay = d;
    jget_num(hp, "max_grad_norm", &d); oc.max_grad_norm = (float)d;
    jget_num(hp, "warmup_ratio", &d); oc.warmup_ratio = d;
    jget_num(hp, "steps", &d); oc.total_steps = (int64_t)d;
    jget_num(hp, "warm", &d);
    int64_t N = (int64_t)d;
    oc.sched = SCHED_COSINE;
    size_t n = l->n, nv = (size_t)c->vocab * (size_t)c->d_model;
    int nm = c->tied ? 1 : 2;
    float *g = calloc(n, 4), *mo = calloc(n, 4), *vo = calloc(n, 4);
    float *eg = calloc(nv * nm, 4), *em = calloc(nv * nm, 4), *ev = calloc(nv * nm, 4);
    decoder_opts o = {.B = B, .T = T, .head_grad = 1};
    decoder *dec;
    CHECK_INT(decoder_create(m, l, &o, &dec, &e), 0);
    json_t *sl = json_object_get(hp, "step_losses"), *sn = json_object_get(hp, "grad_norms");
    for (int64_t step = 0; step < oc.total_steps; step++) {
        int warm = step < N;
        memset(g, 0, n * 4);
        memset(eg, 0, nv * nm * 4);
        full_grads fg = {.tok_embd = eg, .output = c->tied ? NULL : eg + nv};
        int64_t got;
        double loss = backward_step(dec, &b, g, warm ? &fg : NULL, 1.0f / (float)nl, 0, (uint64_t)step, &got) / (double)nl;
        double want = json_real_value(json_array_get(sl, (size_t)step));
        CHECK_MSG(fabs(loss - want) <= 1e-4 * fabs(want), "%s step %lld loss %.7f want %.7f", dir, (long long)step + 1,
                  loss, want);
        double extra = warm ? optim_grad_sumsq(eg, nv * nm) : 0.0;
        double gn = optim_clip_extra(g, n, oc.max_grad_norm, extra);
        want = json_real_value(json_array_get(sn, (size_t)step));
        CHECK_MSG(fabs(gn - want) <= 1e-4 * fabs(want), "%s step %lld grad norm %.7f want %.7f", dir,
                  (long long)step + 1, gn, want);
        double lr = optim_lr_at(&oc, step);
        optim_adamw_step(&oc, l->w, g, mo, vo, n, lr, step + 1);
        if (warm) {
            optim_clip_scale(eg, nv * nm, oc.max_grad_norm, gn);
            optim_adamw_step(&oc, l->embd, eg, em, ev, nv, lr, step + 1);
            if (!c->tied) optim_adamw_step(&oc, l->head, eg + nv, em + nv, ev + nv, nv, lr, step + 1);
        }
    }
    char name[256];
    int ntens = 0;
    double worst = 0;
    for (int layer = 0; layer < l->n_layer; layer++)
        for (int mm = 0; mm < LM_COUNT; mm++) {
            const lora_mod *md = lora_mod_at(l, layer, mm);
            const char *parts[2] = {"lora_A", "lora_B"};
            size_t off[2] = {md->off_a, md->off_b}, cnt[2] = {(size_t)l->cfg.rank * md->in, (size_t)l->cfg.rank * md->out};
            for (int k = 0; k < 2; k++) {
                lora_tensor_name(l, layer, mm, parts[k], name, sizeof name);
                double r = rel_err(l->w + off[k], need(fin, name)->data, cnt[k]);
                CHECK_MSG(r <= 1e-4, "%s %s: relative error %.3g", dir, name, r);
                if (r > worst) worst = r;
                ntens++;
            }
        }
    double re = rel_err(l->embd, need(fin, "embed_tokens")->data, nv);
    CHECK_MSG(re <= 1e-4, "%s embed_tokens: relative error %.3g", dir, re);
    double rh = c->tied ? 0 : rel_err(l->head, need(fin, "lm_head")->data, nv);
    CHECK_MSG(rh <= 1e-4, "%s lm_head: relative error %.3g", dir, rh);
    CHECK_INT(ntens + 1 + !c->tied, st_count(fin));
    printf("ref %s: %lld steps (%lld with the embeddings): %d LoRA tensors (worst %.2g), embed_tokens %.2g, lm_head %s"
           " %.2g relative\n", dir, (long long)oc.total_steps, (long long)N, ntens, worst, re,
           c->tied ? "(tied)" : "", rh);
    decoder_free(dec);
    free(g); free(mo); free(vo); free(eg); free(em); free(ev);
    json_decref(hp);
    st_close(bf); st_close(inf); st_close(fin);
    lora_free(l);
    model_free(m);
}

int main(void)
{
    const char *ref = getenv("DLM_EMBED_REF");
    if (ref) {
        ref_case(ref);
        return check_done();
    }
    roundtrip(FIX "qwen2-f32");
    roundtrip(FIX "llama-bf16");
    return check_done();
}
