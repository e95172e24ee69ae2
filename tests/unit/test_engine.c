/* Training engine tests.
 *
 * Always: on the committed fixture models (tests/ref/model/fixtures) —
 * recomputation on/off and 1/2/3 threads give identical gradient bytes;
 * finite differences agree with the backward pass for LoRA A/B, DoRA
 * magnitudes and full weights; dropout is a pure function of its key;
 * the KV-cache session gives the training forward's logits; 30 LoRA steps
 * halve the loss on a short text.
 *
 * With DLM_ENGINE_REF=DIR (set by tests/ref/r0401-engine-torch.sh, DIR made
 * by tests/ref/engine/torch_ref.py): logits, loss, every gradient and 10
 * AdamW steps are compared with PyTorch. */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"
#include "weights/model.h"
#include "weights/safetensors.h"
#include "decoder/kvpool.h"
#include "decoder/session.h"
#include "adapter/adapter.h"
#include "decoder/decoder.h"
#include "grad/backward.h"
#include "grad/full.h"
#include "decoder/lora.h"
#include "grad/optim.h"
#include "util/fs.h"
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

/* A deterministic batch: B rows of T, row 0 packed as two segments. */
typedef struct tbatch { int32_t tok[256], tgt[256], pos[256], seg[256]; token_batch b; } tbatch;
static void make_batch(tbatch *t, int B, int T, int V, uint64_t seed, int packed)
{
    for (int i = 0; i < B * T; i++) {
        t->tok[i] = (int32_t)(rng_u64(seed, 99, 0, (uint64_t)i) % (uint64_t)V);
        t->tgt[i] = (int32_t)(rng_u64(seed, 99, 1, (uint64_t)i) % (uint64_t)V);
        int r = i / T, c = i % T;
        t->seg[i] = (packed && r == 0 && c >= T / 2) ? 1 : 0;
        t->pos[i] = (packed && r == 0 && c >= T / 2) ? c - T / 2 : c;
        if (i % 7 == 3) t->tgt[i] = -1;
    }
    t->b = (token_batch){.B = B, .T = T, .tokens = t->tok, .targets = t->tgt, .pos = t->pos, .seg = t->seg};
}

static lora *make_lora(const model *m, int dora, float dropout, uint64_t seed)
{
    lora_config lc = {4, 8.0f, dropout, LM_ALL, dora};
    lora *l;
    dlm_err e;
    if (lora_create(&m->cfg, &lc, &l, &e) || lora_init(l, m, seed, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    /* B = 0 at init would make dA vanish: give B values so A is tested. */
    for (int i = 0; i < l->n_layer * LM_COUNT; i++) {
        if (!(lc.targets >> (i % LM_COUNT) & 1)) continue;
        lora_mod *md = &l->mods[i];
        for (size_t j = 0; j < (size_t)md->out * 4; j++)
            l->w[md->off_b + j] = 0.05f * rng_normal(seed, 77, (uint64_t)i, j);
    }
    return l;
}

/* grads of one micro-batch; returns loss sum. */
static double grads(const model *m, const lora *l, full_model *fm, int recompute, const token_batch *b,
                    float *g, uint64_t micro)
{
    decoder_opts o = {.B = b->B, .T = b->T, .recompute = recompute, .full = fm != NULL, .logit_rows = 5};
    decoder *f;
    dlm_err e;
    if (decoder_create(fm ? &fm->m : m, l, &o, &f, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    full_grads fg;
    layer_grads *lay = NULL;
    if (fm) {
        lay = calloc((size_t)m->cfg.n_layer, sizeof *lay);
        fg.layers = lay;
        full_grads_carve(&m->cfg, g, &fg);
    }
    int64_t n;
    double loss = backward_step(f, b, fm ? NULL : g, fm ? &fg : NULL, 0.01f, 1234, micro, &n);
    decoder_free(f);
    free(lay);
    return loss;
}

static void test_identical_bytes(const char *path)
{
    model *m = load(path);
    tbatch tb;
    make_batch(&tb, 2, 10, m->cfg.vocab, 5, 1);
    for (int mode = 0; mode < 3; mode++) { /* lora+dropout, dora, full */
        lora *l = mode < 2 ? make_lora(m, mode == 1, mode == 0 ? 0.1f : 0.0f, 3) : NULL;
        full_model *fm = NULL;
        dlm_err e;
        if (mode == 2 && full_model_from(m, &fm, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
        size_t n = l ? l->n : fm->n;
        float *g0 = calloc(n, 4), *g1 = calloc(n, 4), *g2 = calloc(n, 4), *g3 = calloc(n, 4);
        kern_init(1);
        double l0 = grads(m, l, fm, 0, &tb.b, g0, 7);
        double l1 = grads(m, l, fm, 1, &tb.b, g1, 7);
        kern_init(2);
        double l2 = grads(m, l, fm, 0, &tb.b, g2, 7);
        kern_init(3);
        double l3 = grads(m, l, fm, 1, &tb.b, g3, 7);
        CHECK_MSG(!memcmp(g0, g1, n * 4) && l0 == l1, "%s mode %d: recompute changed bytes", path, mode);
        CHECK_MSG(!memcmp(g0, g2, n * 4) && l0 == l2, "%s mode %d: 2 threads changed bytes", path, mode);
        CHECK_MSG(!memcmp(g0, g3, n * 4) && l0 == l3, "%s mode %d: 3 threads changed bytes", path, mode);
        if (mode == 0) { /* dropout draws are keyed: another micro step differs */
            float *g4 = calloc(n, 4);
            grads(m, l, fm, 0, &tb.b, g4, 8);
            CHECK(memcmp(g0, g4, n * 4) != 0);
            free(g4);
        }
        free(g0); free(g1); free(g2); free(g3);
        lora_free(l);
        full_model_free(fm);
    }
    kern_init(2);
    model_free(m);
}

/* Loss as a function of the parameter vector (double sum / count). */
static double loss_at(const model *m, const lora *l, full_model *fm, const token_batch *b)
{
    decoder_opts o = {.B = b->B, .T = b->T};
    decoder *f;
    dlm_err e;
    if (decoder_create(fm ? &fm->m : m, l, &o, &f, &e)) exit(1);
    int64_t n;
    double s = decoder_loss(f, b, NULL, NULL, &n);
    decoder_free(f);
    return s / (double)n;
}

static void test_finite_differences(const char *path)
{
    model *m = load(path);
    tbatch tb;
    make_batch(&tb, 2, 8, m->cfg.vocab, 11, 1);
    int64_t nl = 0;
    for (int i = 0; i < 16; i++) nl += tb.tgt[i] >= 0;
    for (int mode = 0; mode < 3; mode++) {
        lora *l = mode < 2 ? make_lora(m, mode == 1, 0.0f, 4) : NULL;
        full_model *fm = NULL;
        dlm_err e;
        if (mode == 2) full_model_from(m, &fm, &e);
        float *w = l ? l->w : fm->slab;
        size_t n = l ? l->n : fm->n;
        float *g = calloc(n, 4);
        decoder_opts o = {.B = 2, .T = 8, .full = fm != NULL};
        decoder *f;
        decoder_create(fm ? &fm->m : m, l, &o, &f, &e);
        full_grads fg;
        layer_grads *lay = calloc((size_t)m->cfg.n_layer, sizeof *lay);
        fg.layers = lay;
        if (fm) full_grads_carve(&m->cfg, g, &fg);
        int64_t cnt;
        backward_step(f, &tb.b, fm ? NULL : g, fm ? &fg : NULL, 1.0f / (float)nl, 0, 0, &cnt);
        decoder_free(f);
        /* Probe 24 parameters spread over the vector, largest-gradient ones
         * included, with central differences in f32 (eps 1e-2·scale). */
        int bad = 0;
        for (int k = 0; k < 24; k++) {
            size_t i = (size_t)(rng_u64(9, 1, (uint64_t)mode, (uint64_t)k) % n);
            if (mode == 1) {
                /* DoRA detaches ‖W + sBA‖ (as PEFT), so only the magnitude
                 * gradient is the true derivative of the loss: probe those
                 * (A and B are checked against PyTorch's DoRA instead). */
                const lora_mod *md = &l->mods[(k % l->n_layer) * LM_COUNT + (k % LM_COUNT)];
                i = md->off_mag + (size_t)(rng_u64(9, 2, 0, (uint64_t)k) % (uint64_t)md->out);
            } else if (k < 4) { /* the largest |g| entries are the most telling */
                size_t best = 0;
                for (size_t j = 0; j < n; j++)
                    if (fabsf(g[j]) > fabsf(g[best]) && (j % 4) == (size_t)k) best = j;
                i = best;
            }
            float save = w[i], h = 1e-2f * (fabsf(save) > 0.1f ? fabsf(save) : 0.1f);
            w[i] = save + h;
            double lp = loss_at(m, l, fm, &tb.b);
            w[i] = save - h;
            double lm = loss_at(m, l, fm, &tb.b);
            w[i] = save;
            double fd = (lp - lm) / (2.0 * (double)h);
            double tol = 2e-3 + 3e-2 * fabs(fd);
            if (fabs(fd - g[i]) > tol) {
                bad++;
                fprintf(stderr, "FD mode %d param %zu: fd %.6g backward %.6g\n", mode, i, fd, (double)g[i]);
            }
        }
        CHECK_MSG(bad == 0, "%s mode %d: %d finite-difference mismatches", path, mode, bad);
        free(g);
        free(lay);
        lora_free(l);
        full_model_free(fm);
    }
    model_free(m);
}

/* The KV-cache session against the training forward. Decode steps on a
 * quantized base normally round x to int8 (kern_matvec, llama.cpp's
 * numerics: checked against llama.cpp in ref/r0304 and r0501); with that
 * switched off the session must give the training forward's logits, which
 * checks the cache itself. With it on, only the int8 rounding may differ. */
static void test_session_matches(const char *path, int i8, double tol)
{
    kern_set_int8_decode(i8);
    model *m = load(path);
    lora *l = make_lora(m, 0, 0.0f, 6);
    tbatch tb;
    make_batch(&tb, 1, 12, m->cfg.vocab, 13, 0);
    int V = m->cfg.vocab;
    float *full = calloc((size_t)12 * V, 4), *one = calloc((size_t)V, 4);
    decoder_opts o = {.B = 1, .T = 12};
    decoder *f;
    dlm_err e;
    decoder_create(m, l, &o, &f, &e);
    int64_t n;
    decoder_loss(f, &tb.b, NULL, full, &n);
    decoder_free(f);
    session *s;
    CHECK_INT(session_create(m, l, 32, 5, &s, &e), 0);
    /* prompt of 7 in batches of 5, then one token at a time */
    CHECK_INT(session_eval(s, tb.tok, 7, one, 0, &e), 0);
    check_tensor("session prompt last", one, full + (size_t)6 * V, (size_t)V, tol);
    for (int t = 7; t < 12; t++) {
        session_eval(s, tb.tok + t, 1, one, 0, &e);
        check_tensor("session step", one, full + (size_t)t * V, (size_t)V, tol);
    }
    kern_set_int8_decode(1);
    session_free(s);
    free(full);
    free(one);
    lora_free(l);
    model_free(m);
}

/* Several sequences decoded together (kvpool: one pass over every row,
 * attention per sequence) against one session per sequence: the prefill of
 * prompts longer than a pass, decode steps of all sequences at once, and
 * a cache prefix copied to another sequence. The row batches go through
 * the GEMM where the sessions' single rows go through kern_matvec, so the
 * logits agree to rounding, not bit for bit. */
static void test_kvpool_matches(const char *path, int dora)
{
    kern_set_int8_decode(0);
    model *m = load(path);
    lora *l = make_lora(m, dora, 0.0f, 7);
    int V = m->cfg.vocab, lens[3] = {7, 3, 11}, steps = 4;
    tbatch tb;
    make_batch(&tb, 1, 32, V, 21, 0);
    const int32_t *toks[3] = {tb.tok, tb.tok + 8, tb.tok + 12};
    dlm_err e;
    kv_pool *p;
    CHECK_INT(kv_pool_create(m, l, 3, 32, 8, &p, &e), 0);
    float *got = calloc((size_t)3 * V, 4), *want = calloc((size_t)V, 4);
    session *s[3];
    for (int i = 0; i < 3; i++) CHECK_INT(session_create(m, l, 32, 5, &s[i], &e), 0);
    int seq[3] = {0, 1, 2}, ntok[3];
    for (int i = 0; i < 3; i++) ntok[i] = lens[i];
    CHECK_INT(kv_pool_eval(p, 3, seq, toks, ntok, got, &e), 0);
    for (int i = 0; i < 3; i++) {
        CHECK_INT(session_eval(s[i], toks[i], lens[i], want, 0, &e), 0);
        check_tensor("kvpool prefill", got + (size_t)i * V, want, (size_t)V, 1e-4);
        CHECK_INT(kv_pool_n_past(p, i), lens[i]);
    }
    for (int t = 0; t < steps; t++) {
        const int32_t *next[3];
        int one[3] = {1, 1, 1};
        for (int i = 0; i < 3; i++) next[i] = toks[i] + lens[i] + t;
        CHECK_INT(kv_pool_eval(p, 3, seq, next, one, got, &e), 0);
        for (int i = 0; i < 3; i++) {
            session_eval(s[i], next[i], 1, want, 0, &e);
            check_tensor("kvpool step", got + (size_t)i * V, want, (size_t)V, 1e-4);
        }
    }
    /* sequence 1 restarts from sequence 0's first 5 positions */
    CHECK_INT(kv_pool_copy(p, 1, 0, 5, &e), 0);
    CHECK_INT(kv_pool_n_past(p, 1), 5);
    int s1 = 1, n2 = 2;
    const int32_t *cont = tb.tok + 20;
    CHECK_INT(kv_pool_eval(p, 1, &s1, &cont, &n2, got, &e), 0);
    session_reset(s[1]);
    session_eval(s[1], toks[0], 5, want, 0, &e);
    session_eval(s[1], cont, 2, want, 0, &e);
    check_tensor("kvpool copied prefix", got, want, (size_t)V, 1e-4);
    CHECK(kv_pool_eval(p, 1, &s1, &cont, (int[]){40}, got, &e) != 0);   /* past the context */
    for (int i = 0; i < 3; i++) session_free(s[i]);
    kv_pool_free(p);
    kern_set_int8_decode(1);
    free(got);
    free(want);
    lora_free(l);
    model_free(m);
}

static void test_smoke_training(const char *path)
{
    /* 30 LoRA steps on one short text must at least halve the loss. */
    model *m = load(path);
    lora_config lc = {8, 16.0f, 0.0f, LM_ALL, 0};
    lora *l;
    dlm_err e;
    lora_create(&m->cfg, &lc, &l, &e);
    lora_init(l, m, 1, &e);
    int T = 24;
    int32_t tok[24], tgt[24], pos[24];
    for (int i = 0; i < T; i++) tok[i] = (int32_t)((i * 37 + 11) % m->cfg.vocab);
    for (int i = 0; i < T; i++) { tgt[i] = i + 1 < T ? tok[i + 1] : -1; pos[i] = i; }
    token_batch b = {.B = 1, .T = T, .tokens = tok, .targets = tgt, .pos = pos, .seg = NULL};
    decoder_opts o = {.B = 1, .T = T};
    decoder *f;
    decoder_create(m, l, &o, &f, &e);
    float *g = calloc(l->n, 4), *mm = calloc(l->n, 4), *vv = calloc(l->n, 4);
    optim_config oc;
    optim_defaults(&oc);
    oc.lr = 1e-2f;
    oc.warmup_ratio = 0;
    oc.sched = SCHED_CONSTANT;
    oc.total_steps = 30;
    double first = 0, last = 0;
    for (int step = 0; step < 30; step++) {
        memset(g, 0, l->n * 4);
        int64_t n;
        double s = backward_step(f, &b, g, NULL, 1.0f / (float)(T - 1), 0, (uint64_t)step, &n) / (double)n;
        if (step == 0) first = s;
        last = s;
        optim_clip(g, l->n, oc.max_grad_norm);
        optim_adamw_step(&oc, l->w, g, mm, vv, l->n, optim_lr_at(&oc, step), step + 1);
    }
    CHECK_MSG(last < 0.5 * first, "loss %.4f -> %.4f did not halve", first, last);
    decoder_free(f);
    free(g); free(mm); free(vv);
    lora_free(l);
    model_free(m);
}

/* LoRA on a quantized base (our QLoRA): the kernels dequantize tile by tile.
 * Gradients must equal those of the same weights dequantized to f32 up
 * front (that f32 path is the one checked against PyTorch). */
static void test_quantized_base(dtype qt)
{
    model_config c = {0};
    c.arch = ARCH_LLAMA; c.n_layer = 2; c.d_model = 256; c.n_ff = 512; c.n_head = 4;
    c.n_kv_head = 2; c.head_dim = 64; c.vocab = 300; c.max_pos = 128; c.rms_eps = 1e-5f;
    c.rope_theta = 10000; c.tied = 1; c.bos_id = c.eos_id = -1;
    full_model *src;
    dlm_err e;
    CHECK_INT(full_model_new(&c, &src, &e), 0);
    for (size_t i = 0; i < src->n; i++) src->slab[i] = 0.05f * rng_normal(3, RNG_WEIGHT_INIT, 0, i);
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < 256; i++) { src->p.layers[l].attn_norm[i] += 1.0f; src->p.layers[l].ffn_norm[i] += 1.0f; }
    for (int i = 0; i < 256; i++) src->p.out_norm[i] += 1.0f;
    /* the quantized model: same struct, the seven projections re-stored as qt */
    model qm = src->m;
    layer_weights lw[2];
    memcpy(lw, src->m.layers, sizeof lw);
    qm.layers = lw;
    void *bufs[14];
    int nb = 0;
    for (int l = 0; l < 2; l++) {
        wmat *ws[] = {&lw[l].wq, &lw[l].wk, &lw[l].wv, &lw[l].wo, &lw[l].w_gate, &lw[l].w_up, &lw[l].w_down};
        for (int j = 0; j < 7; j++) {
            wmat *w = ws[j];
            size_t rb = dtype_row_bytes(qt, w->cols);
            unsigned char *q = malloc(rb * (size_t)w->rows);
            for (int64_t r = 0; r < w->rows; r++)
                kern_quant_row(qt, (const float *)w->data + r * w->cols, q + (size_t)r * rb, w->cols);
            w->type = qt; w->row_bytes = rb; w->data = q;
            bufs[nb++] = q;
        }
    }
    full_model *deq;
    CHECK_INT(full_model_from(&qm, &deq, &e), 0);
    tbatch tb;
    make_batch(&tb, 2, 10, c.vocab, 21, 1);
    lora *l = make_lora(&qm, 0, 0.0f, 8);
    float *gq = calloc(l->n, 4), *gd = calloc(l->n, 4);
    grads(&qm, l, NULL, 0, &tb.b, gq, 0);
    grads(&deq->m, l, NULL, 0, &tb.b, gd, 0);
    char label[64];
    snprintf(label, sizeof label, "LoRA grads on a %s base", dtype_name(qt));
    check_tensor(label, gq, gd, l->n, 1e-4);
    free(gq); free(gd);
    lora_free(l);
    for (int i = 0; i < nb; i++) free(bufs[i]);
    full_model_free(deq);
    full_model_free(src);
}

/* adapter: qlora on an f32 base: the projections are quantized in memory
 * (32-wide rows: Q4_K falls back to Q5_0, as llama.cpp does) and the LoRA
 * gradients equal those on the same weights dequantized up front. */
static void test_qlora_in_memory(void)
{
    model *m = load(FIX "qwen2-f32");
    dlm_err e;
    CHECK_MSG(model_quantize_projections(m, DT_Q4_K, &e) == 0, "%s", e.msg);
    CHECK_INT(m->layers[0].wq.type, DT_Q5_0);
    CHECK_INT(m->layers[1].w_down.type, DT_Q5_0); /* in = 64: still not 256-wide */
    full_model *deq;
    CHECK_INT(full_model_from(m, &deq, &e), 0);
    tbatch tb;
    make_batch(&tb, 2, 10, m->cfg.vocab, 31, 1);
    lora *l = make_lora(m, 0, 0.0f, 9);
    float *gq = calloc(l->n, 4), *gd = calloc(l->n, 4);
    grads(m, l, NULL, 0, &tb.b, gq, 0);
    grads(&deq->m, l, NULL, 0, &tb.b, gd, 0);
    check_tensor("LoRA grads on an in-memory Q5_0 base", gq, gd, l->n, 1e-4);
    free(gq); free(gd);
    lora_free(l);
    full_model_free(deq);
    model_free(m);
}

/* ---- PyTorch reference ---------------------------------------------------- */

static const st_tensor *need(const st_file *f, const char *name)
{
    const st_tensor *t = st_find(f, name);
    if (!t) { fprintf(stderr, "reference lacks %s\n", name); exit(1); }
    return t;
}

static void ref_mode(const char *dir, const char *mode)
{
    char p[4096];
    dlm_err e;
    snprintf(p, sizeof p, "%s/model", dir);
    model *m = load(p);
    st_file *bf, *gf, *inf;
    snprintf(p, sizeof p, "%s/batch.safetensors", dir);
    if (st_open(p, &bf, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    snprintf(p, sizeof p, "%s/%s.grads.safetensors", dir, mode);
    if (st_open(p, &gf, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    snprintf(p, sizeof p, "%s/%s.init.safetensors", dir, mode);
    if (st_open(p, &inf, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    snprintf(p, sizeof p, "%s/%s.json", dir, mode);
    json_t *hp = json_load_path(p, 1 << 20, &e);
    if (!hp) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    const st_tensor *tt = need(bf, "tokens");
    int B = (int)tt->shape[0], T = (int)tt->shape[1];
    token_batch b = {.B = B, .T = T, .tokens = need(bf, "tokens")->data, .targets = need(bf, "targets")->data, .pos = need(bf, "pos")->data, .seg = need(bf, "seg")->data};
    int full = !strcmp(mode, "full"), dora = !strcmp(mode, "dora");
    lora *l = NULL;
    full_model *fm = NULL;
    double rank, alpha;
    jget_num(hp, "rank", &rank);
    jget_num(hp, "alpha", &alpha);
    if (full) {
        CHECK_INT(full_model_from(m, &fm, &e), 0);
    } else {
        /* mixtral: the reference trains the attention only; phi3: its four
         * modules qkv_proj, o_proj, gate_up_proj, down_proj */
        unsigned tg = m->cfg.n_expert ? 0xFu
                    : m->cfg.fused ? (1u << LM_Q) | (1u << LM_O) | (1u << LM_GATE) | (1u << LM_DOWN) : LM_ALL;
        lora_config lc = {(int)rank, (float)alpha, 0.0f, tg, dora};
        CHECK_INT(lora_create(&m->cfg, &lc, &l, &e), 0);
        CHECK_MSG(lora_load_st(l, inf, "init", &e) == 0, "%s", e.msg);
    }
    const model *mm = full ? &fm->m : m;
    size_t n = l ? l->n : fm->n;
    float *w = l ? l->w : fm->slab;
    float *g = calloc(n, 4);
    layer_grads *lay = calloc((size_t)m->cfg.n_layer, sizeof *lay);
    full_grads fg = {0};
    fg.layers = lay;
    if (full) full_grads_carve(&m->cfg, g, &fg);
    decoder_opts o = {.B = B, .T = T, .full = full, .logit_rows = 7};
    decoder *f;
    CHECK_INT(decoder_create(mm, l, &o, &f, &e), 0);
    int64_t nl;
    if (!strcmp(mode, "lora")) {
        float *logits = calloc((size_t)B * T * m->cfg.vocab, 4);
        snprintf(p, sizeof p, "%s/logits.safetensors", dir);
        st_file *lf;
        st_open(p, &lf, &e);
        decoder_loss(f, &b, NULL, logits, &nl);
        const float *want = need(lf, "logits")->data;
        double maxabs = 0;
        for (size_t i = 0; i < (size_t)B * T * m->cfg.vocab; i++)
            if (fabs(logits[i] - want[i]) > maxabs) maxabs = fabs(logits[i] - want[i]);
        CHECK_MSG(maxabs <= 1e-4, "%s logits max abs err %.3g", dir, maxabs);
        st_close(lf);
        free(logits);
    }
    double sum = backward_step(f, &b, full ? NULL : g, full ? &fg : NULL, 0, 0, 0, &nl);
    memset(g, 0, n * 4);
    sum = backward_step(f, &b, full ? NULL : g, full ? &fg : NULL, 1.0f / (float)nl, 0, 0, &nl);
    double want_loss;
    jget_num(hp, "loss", &want_loss);
    CHECK_MSG(fabs(sum / (double)nl - want_loss) <= 1e-4 * fabs(want_loss), "%s %s loss %.7f want %.7f",
              dir, mode, sum / (double)nl, want_loss);
    /* every gradient tensor, by name */
    int ntens = 0;
    if (full) {
        full_tensor *ts = calloc((size_t)full_tensor_max(&m->cfg), sizeof *ts);
        int k = full_tensors(&m->cfg, &fg, ts);
        for (int i = 0; i < k; i++) {
            const st_tensor *t = need(gf, ts[i].name);
            check_tensor(ts[i].name, ts[i].p, t->data, (size_t)(ts[i].rows * ts[i].cols), 1e-4);
            ntens++;
        }
        free(ts);
    } else {
        char name[256];
        for (int layer = 0; layer < l->n_layer; layer++)
            for (int mo = 0; mo < LM_COUNT; mo++) {
                const lora_mod *md = lora_mod_at(l, layer, mo);
                if (!md) continue;
                lora_tensor_name(l, layer, mo, "lora_A", name, sizeof name);
                check_tensor(name, g + md->off_a, need(gf, name)->data, (size_t)l->cfg.rank * md->in, 1e-4);
                lora_tensor_name(l, layer, mo, "lora_B", name, sizeof name);
                check_tensor(name, g + md->off_b, need(gf, name)->data, (size_t)l->cfg.rank * md->out, 1e-4);
                ntens += 2;
                if (dora) {
                    lora_tensor_name(l, layer, mo, "lora_magnitude_vector", name, sizeof name);
                    check_tensor(name, g + md->off_mag, need(gf, name)->data, (size_t)md->out, 1e-4);
                    ntens++;
                }
            }
    }
    CHECK_INT(ntens, st_count(gf));
    /* 10 AdamW steps on the same batch */
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
    for (int64_t step = 0; step < oc.total_steps; step++) {
        memset(g, 0, n * 4);
        double s = backward_step(f, &b, full ? NULL : g, full ? &fg : NULL, 1.0f / (float)nl, 0, (uint64_t)step, &nl) / (double)nl;
        double want = json_real_value(json_array_get(sl, (size_t)step));
        CHECK_MSG(fabs(s - want) <= 1e-4 * fabs(want), "%s %s step %lld loss %.7f want %.7f", dir, mode,
                  (long long)step, s, want);
        double gn = optim_clip(g, n, oc.max_grad_norm);
        if (getenv("ENGINE_DEBUG")) fprintf(stderr, "step %lld norm %.6f lr %.6g\n", (long long)step, gn, optim_lr_at(&oc, step));
        optim_adamw_step(&oc, w, g, mo, vo, n, optim_lr_at(&oc, step), step + 1);
    }
    double fin = decoder_loss(f, &b, NULL, NULL, &nl) / (double)nl, wantf;
    jget_num(hp, "final_loss", &wantf);
    CHECK_MSG(fabs(fin - wantf) <= 1e-4 * fabs(wantf), "%s %s final loss %.7f want %.7f", dir, mode, fin, wantf);
    printf("ref %s %s: loss %.6f, %d gradient tensors, 10 steps -> %.6f (torch %.6f)\n", dir, mode,
           sum / (double)nl, ntens, fin, wantf);
    free(mo); free(vo); free(g); free(lay);
    decoder_free(f);
    json_decref(hp);
    st_close(bf); st_close(gf); st_close(inf);
    lora_free(l);
    full_model_free(fm);
    model_free(m);
}

/* Inference path vs PyTorch: logits of the KV-cache session (prompt in
 * chunks, then one token at a time) for DLM_INFER_MODEL (an HF folder or a
 * .gguf) on the ids of DLM_INFER_IDS against DLM_INFER_LOGITS (raw f32 [T,V]),
 * max abs error <= DLM_INFER_TOL (default 1e-4). */
static int infer_ref(const char *mpath)
{
    dlm_err e;
    model *m = load(mpath);
    char *ids_text, *lg;
    size_t il, ll;
    if (fs_read_all(getenv("DLM_INFER_IDS"), 1 << 20, &ids_text, &il, &e) ||
        fs_read_all(getenv("DLM_INFER_LOGITS"), 1u << 30, &lg, &ll, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    json_t *a = json_loads(ids_text, 0, NULL);
    int T = (int)json_array_size(a), V = m->cfg.vocab;
    int32_t ids[512];
    for (int i = 0; i < T && i < 512; i++) ids[i] = (int32_t)json_integer_value(json_array_get(a, (size_t)i));
    CHECK_INT((int64_t)ll, (int64_t)T * V * 4);
    double tol = getenv("DLM_INFER_TOL") ? atof(getenv("DLM_INFER_TOL")) : 1e-4;
    session *s;
    float *out = calloc((size_t)T * V, 4);
    lora *ad = NULL;
    if (getenv("DLM_INFER_ADAPTER")) CHECK_MSG(adapter_load(getenv("DLM_INFER_ADAPTER"), m, &ad, &e) == 0, "%s", e.msg);
    CHECK_INT(session_create(m, ad, T, 5, &s, &e), 0);
    int half = T / 2;
    CHECK_INT(session_eval(s, ids, half, out, 1, &e), 0);
    for (int i = half; i < T; i++) session_eval(s, ids + i, 1, out + (size_t)i * V, 1, &e);
    const float *want = (const float *)lg;
    double mx = 0;
    for (size_t i = 0; i < (size_t)T * V; i++) if (fabs(out[i] - want[i]) > mx) mx = fabs(out[i] - want[i]);
    CHECK_MSG(mx <= tol, "%s: logits max abs err %.3g > %.1g", mpath, mx, tol);
    printf("infer %s: %d positions, max abs err %.3g\n", mpath, T, mx);
    session_free(s);
    lora_free(ad);
    free(out); free(ids_text); free(lg);
    json_decref(a);
    model_free(m);
    return check_done();
}

int main(void)
{
    kern_init(2);
    if (getenv("DLM_INFER_MODEL")) return infer_ref(getenv("DLM_INFER_MODEL"));
    const char *ref = getenv("DLM_ENGINE_REF");
    if (ref && *ref) {
        ref_mode(ref, "lora");
        ref_mode(ref, "dora");
        char fp[4096];
        snprintf(fp, sizeof fp, "%s/full.json", ref);
        if (fs_is_file(fp)) ref_mode(ref, "full");   /* mixtral: no full mode */
        return check_done();
    }
    test_identical_bytes(FIX "qwen2-f32");
    test_identical_bytes(FIX "llama-bf16.q8_0.gguf");
    test_finite_differences(FIX "qwen2-f32");
    test_session_matches(FIX "qwen2-f32", 1, 1e-5);
    test_session_matches(FIX "llama-bf16.q8_0.gguf", 0, 1e-5);
    test_session_matches(FIX "llama-bf16.q8_0.gguf", 1, 6e-2);
    test_kvpool_matches(FIX "qwen2-f32", 0);
    test_kvpool_matches(FIX "llama-bf16.q8_0.gguf", 1);
    test_smoke_training(FIX "qwen2-f32");
    test_quantized_base(DT_Q8_0);
    test_quantized_base(DT_Q4_K);
    test_quantized_base(DT_Q6_K);
    test_qlora_in_memory();
    return check_done();
}
