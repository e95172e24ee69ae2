/* PaliGemma (vision/pali.h, the gemma architecture, the prefix-LM mask).
 *
 * Without arguments (test_pali_*):
 *  - the prefix-LM attention (attn_shape.prefix) forward and backward equal
 *    kern_ref's double-precision loops over the same mask, on shapes of
 *    one and several tiles, GQA, head 256, a prefill and a decode step;
 *    rows past the block and prefix 0 give the causal kernel's bits; the
 *    first query sees the block's last key;
 *  - a paligemma config.json (the hub's layout) parses into a gemma text
 *    model with its tower's shape and image token;
 *  - pali_splice numbers the image rows and refuses a wrong count.
 *
 * --ref DIR (tests/ref/r2101-slow-paligemma-hf.sh, DIR from
 * tests/ref/media/paligemma_hf.py): the whole model — SigLIP + projector
 * features spliced at the image tokens, the Gemma decoder with the prefix
 * mask, positions from 1 — against PaliGemmaForConditionalGeneration's
 * logits, in the training forward (decoder_loss) and in a KV-cache session
 * (the prefix in one prefill, then the suffix token by token), within
 * 1e-4 of the largest logit; LoRA (rank 4 on q/k/v/o) gradients of the
 * suffix loss and the adapter after 5 AdamW steps vs PEFT and
 * torch.optim.AdamW, within 1e-4.
 *
 * --make DIR: a small random PaliGemma base in the hub's layout
 * (language_model.model.*, vision_tower.vision_model.*,
 * multi_modal_projector.linear.*), written with dlm's own safetensors
 * writer, with the tiny tokenizer plus <image> (tests/cli/t2101). */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "decoder/decoder.h"
#include "decoder/kvpool.h"
#include "doc/doc.h"
#include "media/ingest.h"
#include "run/vl_run.h"
#include "tokens/chat.h"
#include "tokens/dataset.h"
#include "tokens/tok.h"
#include "decoder/session.h"
#include "grad/backward.h"
#include "grad/optim.h"
#include "kern/kern.h"
#include "kern/kern_impl.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/rng.h"
#include "weights/safetensors.h"
#include "vision/pali.h"
#include "weights/model.h"

static void fill(float *x, size_t n, uint64_t key)
{
    for (size_t i = 0; i < n; i++) x[i] = rng_normal(5, 2101, key, i);
}

static double maxdiff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* kernel vs kern_ref over one shape (prefix given per sequence) */
static void attn_case(int B, int Tq, int Tk, int NH, int KVH, int HS, int q_off, const int32_t *prefix, int bwd,
                      const char *label)
{
    size_t nq = (size_t)B * Tq * NH * HS, nk = (size_t)B * Tk * KVH * HS;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *o = malloc(nq * 4), *oref = malloc(nq * 4);
    float *lse = malloc((size_t)B * NH * Tq * 4), *dout = malloc(nq * 4), *dq = malloc(nq * 4), *dk = malloc(nk * 4);
    float *dv = malloc(nk * 4), *dqr = malloc(nq * 4), *dkr = malloc(nk * 4), *dvr = malloc(nk * 4);
    fill(q, nq, 1);
    fill(k, nk, 2);
    fill(v, nk, 3);
    fill(dout, nq, 4);
    attn_shape s = {.B = B, .Tq = Tq, .Tk = Tk, .NH = NH, .KVH = KVH, .HS = HS, .q_off = q_off,
                    .kv_bstride = (int64_t)Tk * KVH * HS, .prefix = prefix};
    float *scr = malloc(kern_attn_bwd_scratch(&s) * 4);
    char l[96];
    kern_attn_fwd(o, lse, q, k, v, &s, scr);
    kern_attn_fwd_ref(oref, NULL, q, k, v, &s);
    snprintf(l, sizeof l, "%s: out", label);
    CHECK(check_tensor(l, o, oref, nq, 1e-5));
    if (bwd) {
        kern_attn_bwd(dq, dk, dv, dout, o, lse, q, k, v, &s, scr);
        kern_attn_bwd_ref(dqr, dkr, dvr, dout, q, k, v, &s);
        snprintf(l, sizeof l, "%s: dq", label);
        CHECK(check_tensor(l, dq, dqr, nq, 1e-5));
        snprintf(l, sizeof l, "%s: dk", label);
        CHECK(check_tensor(l, dk, dkr, nk, 1e-5));
        snprintf(l, sizeof l, "%s: dv", label);
        CHECK(check_tensor(l, dv, dvr, nk, 1e-5));
    }
    free(q); free(k); free(v); free(o); free(oref); free(lse); free(dout); free(dq); free(dk); free(dv);
    free(dqr); free(dkr); free(dvr); free(scr);
}

static void test_pali_attn(void)
{
    enum { B = 2, T = 13, NH = 4, KVH = 2, HS = 8 };
    const int32_t prefix[B] = {6, 13};
    /* against kern_ref's double loops: one block; several query and key
     * blocks with the block's end inside a tile and past one, a sequence
     * without a block; a prefill at q_off 0 of a cache; a decode step
     * inside a block (the grouped kernel); head size 256 as PaliGemma's */
    attn_case(B, T, T, NH, KVH, HS, 0, prefix, 1, "prefix 6/13, T 13");
    const int32_t p2[2] = {70, 0}, p3[2] = {129, 33}, p4[1] = {9}, p5[1] = {40};
    attn_case(2, 150, 150, 4, 2, 16, 0, p2, 1, "prefix 70/0, T 150");
    attn_case(2, 150, 150, 8, 1, 24, 0, p3, 1, "prefix 129/33, T 150, GQA 8/1");
    attn_case(1, 1, 12, 4, 1, 16, 5, p4, 0, "decode step at 5, prefix 9");
    attn_case(1, 45, 64, 8, 1, 256, 0, p5, 1, "prefill 45 of a 64 cache, prefix 40, head 256");
    size_t nq = (size_t)B * T * NH * HS, nk = (size_t)B * T * KVH * HS;
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *o = malloc(nq * 4), *oc = malloc(nq * 4);
    fill(q, nq, 1);
    fill(k, nk, 2);
    fill(v, nk, 3);
    attn_shape s = {.B = B, .Tq = T, .Tk = T, .NH = NH, .KVH = KVH, .HS = HS, .kv_bstride = (int64_t)T * KVH * HS,
                    .prefix = prefix};
    kern_attn_fwd(o, NULL, q, k, v, &s, NULL);
    /* rows past the prefix are causal: sequence 0's queries 6.. equal the causal kernel's */
    attn_shape c = s;
    c.prefix = NULL;
    kern_attn_fwd(oc, NULL, q, k, v, &c, NULL);
    size_t row = (size_t)NH * HS;
    CHECK(maxdiff(o + 6 * row, oc + 6 * row, (T - 6) * row) == 0);
    CHECK(maxdiff(o, oc, row) > 1e-3);   /* query 0 sees keys 1..5 */
    /* a zero-length prefix is causal, bit for bit */
    const int32_t zero[B] = {0, 0};
    attn_shape z = s;
    z.prefix = zero;
    float *oz = malloc(nq * 4);
    kern_attn_fwd(oz, NULL, q, k, v, &z, NULL);
    CHECK(maxdiff(oz, oc, nq) == 0);
    free(q); free(k); free(v); free(o); free(oc); free(oz);
}

/* google/paligemma-3b-mix-224's config.json (its text_config leaves
 * head_dim and the ids to GemmaConfig's defaults) */
static const char HUB_CFG[] =
    "{\"_name_or_path\": \"google/paligemma-3b-mix-224\", \"architectures\": [\"PaliGemmaForConditionalGeneration\"],"
    " \"bos_token_id\": 2, \"eos_token_id\": 1, \"hidden_size\": 2048, \"ignore_index\": -100,"
    " \"image_token_index\": 257152, \"model_type\": \"paligemma\", \"pad_token_id\": 0, \"projection_dim\": 2048,"
    " \"text_config\": {\"hidden_size\": 2048, \"intermediate_size\": 16384, \"model_type\": \"gemma\","
    " \"num_attention_heads\": 8, \"num_hidden_layers\": 18, \"num_image_tokens\": 256, \"num_key_value_heads\": 1,"
    " \"torch_dtype\": \"float32\", \"vocab_size\": 257216}, \"torch_dtype\": \"float32\","
    " \"transformers_version\": \"4.41.0.dev0\", \"vision_config\": {\"hidden_size\": 1152, \"intermediate_size\": 4304,"
    " \"model_type\": \"siglip_vision_model\", \"num_attention_heads\": 16, \"num_hidden_layers\": 27,"
    " \"num_image_tokens\": 256, \"patch_size\": 14, \"projection_dim\": 2048, \"projector_hidden_act\": \"gelu_fast\","
    " \"vision_use_head\": false}, \"vocab_size\": 257216}";

static void test_pali_config(void)
{
    model_config c;
    dlm_err e;
    CHECK_INT(model_config_parse(HUB_CFG, strlen(HUB_CFG), "config.json", &c, &e), 0);
    CHECK_INT(c.arch, ARCH_GEMMA);
    CHECK_INT(c.pali, 1);
    CHECK_INT(c.n_layer, 18);
    CHECK_INT(c.d_model, 2048);
    CHECK_INT(c.n_kv_head, 1);
    CHECK_INT(c.head_dim, 256);
    CHECK_INT(c.vocab, 257216);
    CHECK_INT(c.tied, 1);
    CHECK_INT(c.act_gelu, 1);
    CHECK_INT(c.sandwich, 0);
    CHECK(c.attn_softcap == 0 && c.final_softcap == 0 && c.sliding_window == 0);
    CHECK_NEAR(c.embd_scale, sqrt(2048.0), 1e-4);
    CHECK_INT(c.bos_id, 2);
    CHECK_INT(c.eos_id, 1);
    CHECK_INT(c.pali_image_id, 257152);
    CHECK_INT(c.pali_tokens, 256);
    CHECK_INT(c.pali_vis.layers, 27);
    CHECK_INT(c.pali_vis.hidden, 1152);
    CHECK_INT(c.pali_vis.mlp_hidden, 4304);
    CHECK_INT(c.pali_vis.image_size, 224);
    CHECK_STR(model_arch_name(c.arch), "gemma");
    /* PaliGemma 2 (a gemma2 text model) is refused by name */
    const char *pg2 = "{\"model_type\": \"paligemma\", \"text_config\": {\"model_type\": \"gemma2\"}, \"vision_config\": {}}";
    CHECK_INT(model_config_parse(pg2, strlen(pg2), "config.json", &c, &e), -1);
    CHECK(strstr(e.msg, "gemma2") != NULL);
    const char *np = "{\"model_type\": \"paligemma\", \"text_config\": {\"model_type\": \"gemma\", \"hidden_size\": 64,"
                     " \"intermediate_size\": 64, \"num_attention_heads\": 2, \"num_hidden_layers\": 1, \"vocab_size\": 300},"
                     " \"vision_config\": {}, \"projection_dim\": 48}";
    CHECK_INT(model_config_parse(np, strlen(np), "config.json", &c, &e), -1);
    CHECK(strstr(e.msg, "projection_dim") != NULL);
}

static void test_pali_splice(void)
{
    model_config c = {0};
    c.pali = 1;
    c.pali_image_id = 9;
    c.pali_tokens = 3;
    const int32_t ids[] = {9, 9, 9, 2, 5, 6, 10, 7, 1};
    int32_t row[9];
    dlm_err e;
    CHECK_INT(pali_splice(&c, ids, 9, 1, row, &e), 0);
    CHECK(row[0] == 0 && row[1] == 1 && row[2] == 2 && row[3] == -1 && row[8] == -1);
    CHECK_INT(pali_splice(&c, ids, 9, 2, row, &e), -1);
    const int32_t short_run[] = {9, 9, 2, 5};
    CHECK_INT(pali_splice(&c, short_run, 4, 1, row, &e), -1);
    CHECK(strstr(e.msg, "image tokens") != NULL);
}

static float *read_f32(const char *dir, const char *name, size_t *n)
{
    char p[4096], *buf = NULL;
    size_t len = 0;
    dlm_err e;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (fs_read_all(p, 1u << 30, &buf, &len, &e)) { fprintf(stderr, "%s\n", e.msg); return NULL; }
    *n = len / sizeof(float);
    return (float *)buf;
}

/* The adapter's A, B in the reference's order (per layer, q k v o: A then
 * B) to (to_slab = 1) or from dlm's slab. */
static void lora_order(lora *l, float *flat, int to_slab)
{
    size_t at = 0;
    for (int il = 0; il < l->n_layer; il++)
        for (int mm = LM_Q; mm <= LM_O; mm++) {
            const lora_mod *md = lora_mod_at(l, il, mm);
            size_t na = (size_t)l->cfg.rank * md->in, nb = (size_t)md->out * l->cfg.rank;
            float *a = l->w + md->off_a, *b = l->w + md->off_b;
            if (to_slab) { memcpy(a, flat + at, na * 4); memcpy(b, flat + at + na, nb * 4); }
            else { memcpy(flat + at, a, na * 4); memcpy(flat + at + na, b, nb * 4); }
            at += na + nb;
        }
}

static void lora_ref(const model *m, const token_batch *b, const char *dir)
{
    dlm_err e;
    lora_config lc = {4, 8.0f, 0.0f, LM_ATTN, 0};
    lora *l = NULL;
    CHECK_INT(lora_create(&m->cfg, &lc, &l, &e), 0);
    size_t ni = 0, ng = 0, na = 0;
    float *init = read_f32(dir, "lora_init.f32", &ni), *gwant = read_f32(dir, "lora_grad.f32", &ng);
    float *awant = read_f32(dir, "lora_adamw5.f32", &na);
    CHECK(l && init && gwant && awant && ni == l->n && ng == ni && na == ni);
    if (!l || !init || !gwant || !awant || ni != l->n) return;
    lora_order(l, init, 1);
    decoder_opts o = {.B = 1, .T = b->T};
    decoder *d = NULL;
    CHECK_INT(decoder_create(m, l, &o, &d, &e), 0);
    float *g = calloc(l->n, 4), *mo = calloc(l->n, 4), *vo = calloc(l->n, 4), *flat = calloc(l->n, 4);
    int64_t nl = 0;
    for (int i = 0; i < b->B * b->T; i++) nl += b->targets[i] >= 0;
    optim_config oc;
    optim_defaults(&oc);
    oc.lr = 1e-2;
    oc.weight_decay = 0.01;
    oc.max_grad_norm = 0;
    for (int step = 1; step <= 5; step++) {
        memset(g, 0, l->n * 4);
        int64_t n = 0;
        double nll = backward_step(d, b, g, NULL, 1.0f / (float)nl, 0, (uint64_t)step, &n);
        if (step == 1) printf("test_pali --ref: LoRA loss %.6f\n", nll / (double)n);
        if (step == 1) {
            float *gf = calloc(l->n, 4);
            float *keep = l->w;
            l->w = g;   /* read the gradient slab in the reference's order */
            lora_order(l, gf, 0);
            l->w = keep;
            CHECK(check_tensor("paligemma LoRA gradients", gf, gwant, l->n, 1e-4));
            printf("test_pali --ref: LoRA gradients, %zu values, max|diff| %.3g\n", l->n, maxdiff(gf, gwant, l->n));
            free(gf);
        }
        optim_adamw_step(&oc, l->w, g, mo, vo, l->n, oc.lr, step);
    }
    lora_order(l, flat, 0);
    CHECK(check_tensor("paligemma LoRA after 5 AdamW steps", flat, awant, l->n, 1e-4));
    printf("test_pali --ref: 5 AdamW steps, max|diff| %.3g\n", maxdiff(flat, awant, l->n));
    decoder_free(d);
    lora_free(l);
    free(g); free(mo); free(vo); free(flat); free(init); free(gwant); free(awant);
}

static int ref_mode(const char *dir)
{
    dlm_err e;
    char p[4096];
    snprintf(p, sizeof p, "%s/model", dir);
    model *m = NULL;
    if (model_load(p, &m, &e)) { fprintf(stderr, "load: %s\n", e.msg); return 1; }
    const model_config *c = &m->cfg;
    siglip s;
    if (pali_tower_load(m, &s, &e)) { fprintf(stderr, "tower: %s\n", e.msg); return 1; }
    snprintf(p, sizeof p, "%s/ids.json", dir);
    json_t *a = json_load_file(p, 0, NULL);
    snprintf(p, sizeof p, "%s/prefix.txt", dir);
    FILE *f = fopen(p, "r");
    int P = 0;
    CHECK(a && f && fscanf(f, "%d", &P) == 1);
    if (f) fclose(f);
    int T = (int)json_array_size(a), V = c->vocab, C = c->d_model;
    size_t npx = 0, nl = 0, ng = 0;
    float *px = read_f32(dir, "pixels.f32", &npx), *want = read_f32(dir, "logits.f32", &nl);
    float *gwant = read_f32(dir, "gen_logits.f32", &ng);
    CHECK(px && want && gwant && nl == (size_t)T * V && ng == nl && T <= 64);
    if (!px || !want || !gwant || nl != (size_t)T * V || T > 64) return check_done();
    int32_t ids[64], tgt[64], pos[64], row[64];
    for (int i = 0; i < T; i++) {
        ids[i] = (int32_t)json_integer_value(json_array_get(a, (size_t)i));
        pos[i] = i + 1;   /* PaliGemma's positions are 1-indexed */
    }
    for (int i = 0; i < T; i++) tgt[i] = i + 1 < T && i + 1 >= P ? ids[i + 1] : -1;   /* the processor's labels */
    CHECK_INT(pali_splice(c, ids, T, 1, row, &e), 0);
    float *feat = malloc((size_t)c->pali_tokens * C * sizeof *feat);
    CHECK_INT(siglip_forward(&s, px, feat, &e), 0);
    for (size_t i = 0; i < (size_t)c->pali_tokens * C; i++) feat[i] /= c->embd_scale;
    /* training forward */
    token_batch b = {.B = 1, .T = T, .tokens = ids, .targets = tgt, .pos = pos, .embeds = feat, .embed_row = row,
                     .n_embeds = c->pali_tokens, .prefix = &P};
    CHECK_INT(decoder_batch_check(c, &b, &e), 0);
    decoder_opts o = {.B = 1, .T = T, .full = 1};
    decoder *d = NULL;
    CHECK_INT(decoder_create(m, NULL, &o, &d, &e), -1);   /* full training refused by name */
    CHECK(strstr(e.msg, "paligemma") != NULL);
    o.full = 0;
    CHECK_INT(decoder_create(m, NULL, &o, &d, &e), 0);
    float *got = calloc((size_t)T * V, sizeof *got);
    int64_t n_loss = 0;
    decoder_loss(d, &b, NULL, got, &n_loss);
    CHECK(check_tensor("paligemma logits (training forward)", got, want, (size_t)T * V, 1e-4));
    printf("test_pali --ref: training forward, %d tokens (prefix %d), max|diff| %.3g\n", T, P,
           maxdiff(got, want, (size_t)T * V));
    /* KV-cache session: the prefix in one piece, then the suffix one by one */
    session *ss = NULL;
    CHECK_INT(session_create(m, NULL, 64, 16, &ss, &e), 0);
    memset(got, 0, (size_t)T * V * sizeof *got);
    session_splice sp = {.embeds = feat, .n_embeds = c->pali_tokens, .embed_row = row, .delta = 1, .prefix = P};
    CHECK_INT(session_eval_splice(ss, ids, P, &sp, got, 1, &e), 0);
    for (int i = P; i < T; i++) CHECK_INT(session_eval(ss, ids + i, 1, got + (size_t)i * V, 1, &e), 0);
    CHECK(check_tensor("paligemma logits (KV-cache session)", got, gwant, (size_t)T * V, 1e-4));
    printf("test_pali --ref: session, max|diff| %.3g\n", maxdiff(got, gwant, (size_t)T * V));
    session_free(ss);
    /* dlm api's batched pool (decoder/kvpool.h): the block beside a text
     * sequence that comes first in the step, in a pool of P+3 rows a pass,
     * so the block waits for the next pass and goes whole; then the suffix
     * token by token beside the text sequence's decode steps */
    kv_pool *kp = NULL;
    CHECK_INT(kv_pool_create(m, NULL, 2, 64, P + 3, &kp, &e), 0);
    if (kp) {
        int32_t txt[12];
        for (int i = 0; i < 12; i++) txt[i] = (int32_t)(7 + 31 * i) % V;
        kv_splice ks = {.embeds = feat, .embed_row = row, .delta = 1, .prefix = P};
        const int32_t *tk[2] = {txt, ids};
        const kv_splice *sps[2] = {NULL, &ks};
        int seqs[2] = {1, 0}, nt[2] = {12, P};
        float *lg = calloc((size_t)2 * V, sizeof *lg), *pg = calloc((size_t)T * V, sizeof *pg);
        CHECK_INT(kv_pool_eval_splice(kp, 2, seqs, tk, nt, sps, lg, &e), 0);
        memcpy(pg + (size_t)(P - 1) * V, lg + V, (size_t)V * sizeof *lg);
        for (int i = P; i < T; i++) {
            int32_t one = (int32_t)(3 + i) % V;
            const int32_t *tk2[2] = {&one, ids + i};
            int n1[2] = {1, 1};
            CHECK_INT(kv_pool_eval_splice(kp, 2, seqs, tk2, n1, NULL, lg, &e), 0);
            memcpy(pg + (size_t)i * V, lg + V, (size_t)V * sizeof *lg);
        }
        CHECK(check_tensor("paligemma logits (kv_pool, the block deferred to a pass of its own)", pg + (size_t)(P - 1) * V,
                           gwant + (size_t)(P - 1) * V, (size_t)(T - P + 1) * V, 1e-4));
        printf("test_pali --ref: kv_pool, max|diff| %.3g\n",
               maxdiff(pg + (size_t)(P - 1) * V, gwant + (size_t)(P - 1) * V, (size_t)(T - P + 1) * V));
        /* a block on a sequence with cached tokens, or longer than a pass, is refused */
        int nb[1] = {P}, s1[1] = {1};
        const int32_t *tb[1] = {ids};
        const kv_splice *sb[1] = {&ks};
        CHECK_INT(kv_pool_eval_splice(kp, 1, s1, tb, nb, sb, lg, &e), -1);
        CHECK(strstr(e.msg, "must open the sequence") != NULL);
        ks.prefix = P + 4;
        nb[0] = P + 4;
        kv_pool_truncate(kp, 1, 0);
        int32_t big[80];
        for (int i = 0; i < P + 4 && i < 80; i++) big[i] = i < P ? ids[i] : 5;
        int32_t brow[80];
        for (int i = 0; i < P + 4 && i < 80; i++) brow[i] = i < P ? row[i] : -1;
        kv_splice kb = {.embeds = feat, .embed_row = brow, .delta = 1, .prefix = P + 4};
        tb[0] = big;
        sb[0] = &kb;
        CHECK_INT(kv_pool_eval_splice(kp, 1, s1, tb, nb, sb, lg, &e), -1);
        CHECK(strstr(e.msg, "longer than the") != NULL);
        free(lg);
        free(pg);
        kv_pool_free(kp);
    }
    decoder_free(d);
    lora_ref(m, &b, dir);
    free(got); free(feat); free(px); free(want); free(gwant);
    json_decref(a);
    siglip_free(&s);
    model_free(m);
    return check_done();
}

/* ---- --rows BASE DOC ---------------------------------------------------------
 * The training rows dlm builds for DOC's image captions and its Q/As about
 * an image on a PaliGemma base (tokens/dataset.c), one JSON line per row:
 * {"sid", "row", "image", "prefix", "tok": inputs, "tgt": next-token
 * targets (-1 no loss)}; r2102 compares them with PaliGemmaProcessor's. */
static int rows_mode(const char *base, const char *doc_path)
{
    dlm_err e;
    err_clear(&e);
    char p[4200];
    model *m = NULL;
    tok *t = NULL;
    dlm_doc *doc = doc_load(doc_path, &e);
    media_ingest_stats ms;
    ds_image *images = NULL;
    ds_vl vl;
    dataset *d = NULL;
    snprintf(p, sizeof p, "%s/tokenizer.json", base);
    int rc = !doc || model_load(base, &m, &e) || tok_load(p, NULL, &t, &e) || media_ingest_images(doc, NULL, &ms, &e) ||
             vl_grids(doc, &m->cfg, NULL, &images, &vl, &e);
    ds_opts o = {.seq_len = 512, .seed = 42, .val_frac = 0, .vl = &vl};
    if (!rc) rc = dataset_build(doc, NULL, t, chat_dialect_find("chatml"), &o, &d, &e);
    if (rc) {
        fprintf(stderr, "test_pali --rows: %s\n", e.msg);
        return 1;
    }
    for (int i = 0; i < d->n_items; i++) {
        const ds_item *it = &d->items[i];
        printf("{\"sid\": \"%s\", \"row\": %d, \"image\": %d, \"prefix\": %d, \"tok\": [", it->sid, it->row,
               it->image, it->prefix);
        for (int k = 0; k < it->len; k++) printf("%s%d", k ? ", " : "", d->tok[it->off + k]);
        printf("], \"tgt\": [");
        for (int k = 0; k < it->len; k++) printf("%s%d", k ? ", " : "", d->tgt[it->off + k]);
        printf("]}\n");
    }
    dataset_free(d);
    free(images);
    tok_free(t);
    model_free(m);
    doc_free(doc);
    return 0;
}

/* ---- --make DIR ------------------------------------------------------------ */

enum { MK_H = 128, MK_L = 2, MK_NH = 4, MK_KV = 1, MK_HS = 32, MK_F = 256, MK_V = 4097, MK_VD = 32, MK_VL = 2,
       MK_VF = 48, MK_IMG = 28 };

typedef struct mk { st_out t[96]; float *buf[96]; int n; } mk;

static void mk_add(mk *k, const char *name, int64_t r, int64_t c, float sd, float mean)
{
    size_t n = (size_t)r * (size_t)(c ? c : 1);
    float *b = malloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++) b[i] = mean + sd * rng_normal(21, 2101, (uint64_t)k->n, i);
    st_out *o = &k->t[k->n];
    o->name = strdup(name);
    o->dtype = ST_F32;
    o->ndim = c ? 2 : 1;
    o->shape[0] = r;
    o->shape[1] = c;
    o->data = b;
    k->buf[k->n++] = b;
}

static int make_base(const char *dir)
{
    dlm_err e;
    char p[4200], name[160];
    if (fs_mkdir_p(dir, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    mk k = {0};
    const char *tw = "vision_tower.vision_model.";
    int D = MK_VD, np = (MK_IMG / 14) * (MK_IMG / 14);
    snprintf(name, sizeof name, "%sembeddings.patch_embedding.weight", tw);
    mk_add(&k, name, D, 3 * 14 * 14, 0.05f, 0);   /* stored [D][3*14*14]: the same bytes as [D][3][14][14] */
    k.t[k.n - 1].ndim = 4;
    k.t[k.n - 1].shape[1] = 3;
    k.t[k.n - 1].shape[2] = k.t[k.n - 1].shape[3] = 14;
    snprintf(name, sizeof name, "%sembeddings.patch_embedding.bias", tw);
    mk_add(&k, name, D, 0, 0.1f, 0);
    snprintf(name, sizeof name, "%sembeddings.position_embedding.weight", tw);
    mk_add(&k, name, np, D, 0.1f, 0);
    for (int l = 0; l < MK_VL; l++) {
        struct { const char *n; int64_t r, c; float sd, mean; } w[] = {
            {"layer_norm1.weight", D, 0, 0.1f, 1}, {"layer_norm1.bias", D, 0, 0.1f, 0},
            {"self_attn.q_proj.weight", D, D, 0.1f, 0}, {"self_attn.q_proj.bias", D, 0, 0.1f, 0},
            {"self_attn.k_proj.weight", D, D, 0.1f, 0}, {"self_attn.k_proj.bias", D, 0, 0.1f, 0},
            {"self_attn.v_proj.weight", D, D, 0.1f, 0}, {"self_attn.v_proj.bias", D, 0, 0.1f, 0},
            {"self_attn.out_proj.weight", D, D, 0.1f, 0}, {"self_attn.out_proj.bias", D, 0, 0.1f, 0},
            {"layer_norm2.weight", D, 0, 0.1f, 1}, {"layer_norm2.bias", D, 0, 0.1f, 0},
            {"mlp.fc1.weight", MK_VF, D, 0.1f, 0}, {"mlp.fc1.bias", MK_VF, 0, 0.1f, 0},
            {"mlp.fc2.weight", D, MK_VF, 0.1f, 0}, {"mlp.fc2.bias", D, 0, 0.1f, 0}};
        for (size_t i = 0; i < sizeof w / sizeof *w; i++) {
            snprintf(name, sizeof name, "%sencoder.layers.%d.%s", tw, l, w[i].n);
            mk_add(&k, name, w[i].r, w[i].c, w[i].sd, w[i].mean);
        }
    }
    snprintf(name, sizeof name, "%spost_layernorm.weight", tw);
    mk_add(&k, name, D, 0, 0.1f, 1);
    snprintf(name, sizeof name, "%spost_layernorm.bias", tw);
    mk_add(&k, name, D, 0, 0.1f, 0);
    mk_add(&k, "multi_modal_projector.linear.weight", MK_H, D, 0.3f, 0);
    mk_add(&k, "multi_modal_projector.linear.bias", MK_H, 0, 0.3f, 0);
    mk_add(&k, "language_model.model.embed_tokens.weight", MK_V, MK_H, 0.05f, 0);
    for (int l = 0; l < MK_L; l++) {
        /* Gemma's RMSNorm weights are the offsets w of (1 + w) */
        struct { const char *n; int64_t r, c; float sd; } w[] = {
            {"input_layernorm.weight", MK_H, 0, 0.05f}, {"post_attention_layernorm.weight", MK_H, 0, 0.05f},
            {"self_attn.q_proj.weight", MK_NH * MK_HS, MK_H, 0.1f}, {"self_attn.k_proj.weight", MK_KV * MK_HS, MK_H, 0.1f},
            {"self_attn.v_proj.weight", MK_KV * MK_HS, MK_H, 0.1f}, {"self_attn.o_proj.weight", MK_H, MK_NH * MK_HS, 0.1f},
            {"mlp.gate_proj.weight", MK_F, MK_H, 0.1f}, {"mlp.up_proj.weight", MK_F, MK_H, 0.1f},
            {"mlp.down_proj.weight", MK_H, MK_F, 0.1f}};
        for (size_t i = 0; i < sizeof w / sizeof *w; i++) {
            snprintf(name, sizeof name, "language_model.model.layers.%d.%s", l, w[i].n);
            mk_add(&k, name, w[i].r, w[i].c, w[i].sd, 0);
        }
    }
    mk_add(&k, "language_model.model.norm.weight", MK_H, 0, 0.05f, 0);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    const char *meta[] = {"format", "pt", NULL};
    int rc = st_write(p, k.t, k.n, meta, &e);
    for (int i = 0; i < k.n; i++) { free(k.buf[i]); free((char *)k.t[i].name); }
    if (rc) { fprintf(stderr, "%s\n", e.msg); return 1; }
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    if (!f) return 1;
    /* the hub's layout (google/paligemma-3b-mix-224's keys) */
    fprintf(f, "{\"architectures\": [\"PaliGemmaForConditionalGeneration\"], \"model_type\": \"paligemma\",\n"
               " \"bos_token_id\": 4093, \"eos_token_id\": 4095, \"pad_token_id\": 4093, \"hidden_size\": %d,\n"
               " \"image_token_index\": 4096, \"projection_dim\": %d, \"vocab_size\": %d, \"torch_dtype\": \"float32\",\n"
               " \"text_config\": {\"hidden_size\": %d, \"intermediate_size\": %d, \"model_type\": \"gemma\",\n"
               "   \"num_attention_heads\": %d, \"num_hidden_layers\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d,\n"
               "   \"num_image_tokens\": %d, \"vocab_size\": %d, \"max_position_embeddings\": 1024},\n"
               " \"vision_config\": {\"hidden_size\": %d, \"intermediate_size\": %d, \"model_type\": \"siglip_vision_model\",\n"
               "   \"num_attention_heads\": 2, \"num_hidden_layers\": %d, \"image_size\": %d, \"patch_size\": 14,\n"
               "   \"projection_dim\": %d, \"vision_use_head\": false}}\n",
            MK_H, MK_H, MK_V, MK_H, MK_F, MK_NH, MK_L, MK_KV, MK_HS, np, MK_V, D, MK_VF, MK_VL, MK_IMG, MK_H);
    fclose(f);
    /* the tiny tokenizer with <image> (id 4096) */
    json_t *tj = json_load_path(DLM_SOURCE_DIR "/models/tiny-tokenizer/tokenizer.json", 1 << 26, &e);
    json_t *tc = json_load_path(DLM_SOURCE_DIR "/models/tiny-tokenizer/tokenizer_config.json", 1 << 26, &e);
    if (!tj || !tc) { fprintf(stderr, "%s\n", e.msg); return 1; }
    json_array_append_new(json_object_get(tj, "added_tokens"),
                          json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", 4096, "content", "<image>", "single_word",
                                    0, "lstrip", 0, "rstrip", 0, "normalized", 0, "special", 1));
    json_object_set_new(json_object_get(tc, "added_tokens_decoder"), "4096",
                        json_pack("{s:s, s:b, s:b, s:b, s:b, s:b}", "content", "<image>", "lstrip", 0, "normalized", 0,
                                  "rstrip", 0, "single_word", 0, "special", 1));
    snprintf(p, sizeof p, "%s/tokenizer.json", dir);
    rc = json_save_file(p, tj, &e);
    snprintf(p, sizeof p, "%s/tokenizer_config.json", dir);
    if (!rc) rc = json_save_file(p, tc, &e);
    json_decref(tj);
    json_decref(tc);
    if (rc) { fprintf(stderr, "%s\n", e.msg); return 1; }
    return 0;
}

int main(int argc, char **argv)
{
    kern_init(2);
    if (argc == 3 && !strcmp(argv[1], "--ref")) return ref_mode(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "--make")) return make_base(argv[2]);
    if (argc == 4 && !strcmp(argv[1], "--rows")) return rows_mode(argv[2], argv[3]);
    test_pali_attn();
    test_pali_config();
    test_pali_splice();
    return check_done();
}
