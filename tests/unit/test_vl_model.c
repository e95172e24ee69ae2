/* test_vl_model — a Qwen2-VL base. Without arguments: config.json parsing
 * (the hub's layout and transformers 5's text_config; mrope_section, the
 * special ids, vision_config's defaults and both key spellings) and its
 * refusals. `test_vl_model --ref DIR` (tests/ref/r1601-slow-qwen2vl-hf.sh;
 * DIR from tests/ref/vl/qwen2vl_hf.py): both tensor layouts load, and the
 * whole model's logits over a prompt with two real images — dlm's decoding,
 * processor, tower, splice and M-RoPE decoder — equal transformers'
 * Qwen2VLForConditionalGeneration within 1e-4, and so do the KV-cache
 * session's 8 greedy tokens after it (the M-RoPE delta) and their logits
 * (model.generate's scores). `test_vl_model --make DIR`
 * writes a small random Qwen2-VL base for the CLI tests (hub layout: the
 * embedded tiny tokenizer plus <|vision_start|> <|vision_end|>
 * <|image_pad|> as ids 4096-4098, ChatML, hidden 128, 2 layers, a 2-block
 * tower), made by dlm's own safetensors writer: no Python at test time. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "adapter/adapter.h"
#include "decoder/decoder.h"
#include "decoder/session.h"
#include "grad/backward.h"
#include "grad/optim.h"
#include "kern/kern.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/rng.h"
#include "vision/qwen2vl.h"
#include "weights/safetensors.h"

static const char *HUB = "{\"architectures\": [\"Qwen2VLForConditionalGeneration\"], \"model_type\": \"qwen2_vl\","
    "\"hidden_size\": 1536, \"intermediate_size\": 8960, \"num_hidden_layers\": 28, \"num_attention_heads\": 12,"
    "\"num_key_value_heads\": 2, \"vocab_size\": 151936, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0,"
    "\"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"image_token_id\": 151655,"
    "\"vision_start_token_id\": 151652, \"vision_end_token_id\": 151653, \"use_sliding_window\": false,"
    "\"rope_scaling\": {\"type\": \"mrope\", \"mrope_section\": [16, 24, 24]},"
    "\"vision_config\": {\"depth\": 32, \"embed_dim\": 1280, \"mlp_ratio\": 4, \"num_heads\": 16, \"in_chans\": 3,"
    "\"hidden_size\": 1536, \"patch_size\": 14, \"spatial_merge_size\": 2, \"spatial_patch_size\": 14,"
    "\"temporal_patch_size\": 2}}";

static const char *V5 = "{\"architectures\": [\"Qwen2VLForConditionalGeneration\"], \"model_type\": \"qwen2_vl\","
    "\"dtype\": \"float32\", \"image_token_id\": 97, \"vision_start_token_id\": 95, \"vision_end_token_id\": 96,"
    "\"tie_word_embeddings\": false, \"text_config\": {\"hidden_size\": 64, \"intermediate_size\": 128,"
    "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"vocab_size\": 100,"
    "\"rope_parameters\": {\"rope_type\": \"default\", \"mrope_section\": [2, 3, 3], \"rope_theta\": 10000.0},"
    "\"tie_word_embeddings\": true},"
    "\"vision_config\": {\"depth\": 2, \"embed_dim\": 32, \"hidden_size\": 64, \"num_heads\": 4, \"mlp_ratio\": 2,"
    "\"in_channels\": 3, \"patch_size\": 14, \"hidden_act\": \"quick_gelu\"}}";

static int parse(const char *txt, model_config *c, dlm_err *e)
{
    return model_config_parse(txt, strlen(txt), "config.json", c, e);
}

/* txt with the first `from` replaced by `to`: parse must fail naming `want` */
static void refuse(const char *txt, const char *from, const char *to, const char *want)
{
    char buf[4096];
    const char *at = strstr(txt, from);
    CHECK_MSG(at != NULL, "%s not in the config", from);
    if (!at) return;
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - txt), txt, to, at + strlen(from));
    model_config c;
    dlm_err e;
    CHECK_INT(parse(buf, &c, &e), -1);
    CHECK_MSG(strstr(e.msg, want) != NULL, "'%s' refused as '%s', want '%s'", to, e.msg, want);
}

static void test_config(void)
{
    model_config c;
    dlm_err e;
    CHECK_MSG(parse(HUB, &c, &e) == 0, "%s", e.msg);
    CHECK_INT(c.vl, VL_QWEN2);
    CHECK_INT(c.arch, ARCH_QWEN2);
    CHECK_INT(c.qkv_bias, 1);
    CHECK_INT(c.head_dim, 128);
    CHECK(c.mrope[0] == 16 && c.mrope[1] == 24 && c.mrope[2] == 24);
    CHECK(c.image_id == 151655 && c.vision_start_id == 151652 && c.vision_end_id == 151653);
    CHECK(c.vis.depth == 32 && c.vis.embed_dim == 1280 && c.vis.heads == 16 && c.vis.mlp_ratio == 4);
    CHECK(c.vis.patch == 14 && c.vis.merge == 2 && c.vis.temporal == 2 && c.vis.in_ch == 3 && c.vis.out_dim == 1536);
    CHECK_INT(c.tied, 1);
    CHECK_NEAR(c.rms_eps, 1e-6, 1e-12);
    CHECK_STR(c.src_dtype, "bfloat16");
    CHECK_MSG(parse(V5, &c, &e) == 0, "%s", e.msg);
    CHECK(c.vl == VL_QWEN2 && c.d_model == 64 && c.n_layer == 2 && c.vocab == 100 && c.head_dim == 16);
    CHECK(c.mrope[0] == 2 && c.mrope[1] == 3 && c.mrope[2] == 3);
    CHECK_INT(c.tied, 0);   /* the top level wins (transformers 5 writes it there) */
    CHECK_NEAR(c.rms_eps, 1e-5, 1e-12);   /* Qwen2VLTextConfig's default */
    CHECK(c.vis.depth == 2 && c.vis.embed_dim == 32 && c.vis.temporal == 2 && c.vis.merge == 2);
    CHECK_STR(c.src_dtype, "float32");
    refuse(V5, "[2, 3, 3]", "[2, 3, 4]", "sums to 9, not head_dim/2 = 8");
    refuse(V5, "\"mrope_section\": [2, 3, 3], ", "", "needs rope_scaling.mrope_section");
    refuse(V5, "\"hidden_size\": 64, \"num_heads\"", "\"hidden_size\": 48, \"num_heads\"", "not the text model's");
    refuse(V5, "\"image_token_id\": 97", "\"image_token_id\": 100", "outside the vocabulary");
    refuse(V5, "quick_gelu", "gelu", "hidden_act 'gelu'");
    refuse(HUB, "\"rope_scaling\": {\"type\": \"mrope\", \"mrope_section\": [16, 24, 24]},", "",
           "needs rope_scaling.mrope_section");
}

static int read_text(const char *dir, const char *name, char **out)
{
    char p[4096];
    size_t n;
    dlm_err e;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (fs_read_all(p, 1u << 30, out, &n, &e)) { fprintf(stderr, "%s\n", e.msg); return -1; }
    return 0;
}

/* the features of DIR/images.txt's images, one after the other, with the
 * processor settings of DIR/pix.txt */
static float *dir_features(const char *dir, const model *m, int grid[][3], int *n_images, int *rows)
{
    char *txt = NULL;
    long long mn = 0, mx = 0;
    dlm_err e;
    if (read_text(dir, "pix.txt", &txt) || sscanf(txt, "%lld %lld", &mn, &mx) != 2) { CHECK(0); return NULL; }
    free(txt);
    const model_config *c = &m->cfg;
    qwen2vl_vit v;
    CHECK_MSG(qwen2vl_tower_load(m, &v, &e) == 0, "%s", e.msg);
    proc_cfg pc = qwen2vl_proc(c);
    pc.min_pixels = mn;
    pc.max_pixels = mx;
    float *emb = NULL;
    *rows = 0;
    *n_images = 0;
    CHECK(read_text(dir, "images.txt", &txt) == 0);
    char *save = NULL, *path = strtok_r(txt, "\n", &save);
    for (int i = 0; i < 2 && path; i++, path = strtok_r(NULL, "\n", &save)) {
        char *bytes;
        size_t nb;
        image_rgb im;
        float *f;
        int nr;
        if (fs_read_all(path, 1u << 26, &bytes, &nb, &e) || image_decode((uint8_t *)bytes, nb, &im, &e)) {
            CHECK_MSG(0, "%s", e.msg);
            break;
        }
        free(bytes);
        CHECK_MSG(qwen2vl_image_features(&v, c, &pc, &im, &f, &nr, grid[i], &e) == 0, "%s", e.msg);
        image_free(&im);
        emb = realloc(emb, (size_t)(*rows + nr) * c->d_model * sizeof *emb);
        memcpy(emb + (size_t)*rows * c->d_model, f, (size_t)nr * c->d_model * sizeof *f);
        *rows += nr;
        (*n_images)++;
        free(f);
    }
    free(txt);
    qwen2vl_vit_free(&v);
    return emb;
}

static const st_tensor *need(const st_file *f, const char *name)
{
    const st_tensor *t = st_find(f, name);
    if (!t) { fprintf(stderr, "missing %s\n", name); exit(1); }
    return t;
}

/* --peft DIR (tests/ref/vl/qwen2vl_peft.py): the LoRA gradient of two
 * image rows, then 5 AdamW steps, vs PEFT within 1e-4 */
static void peft_mode(const char *dir)
{
    char p[4096], *txt = NULL;
    dlm_err e;
    snprintf(p, sizeof p, "%s/model", dir);
    model *m = NULL;
    CHECK_MSG(model_load(p, &m, &e) == 0, "%s", e.msg);
    if (!m) return;
    const model_config *c = &m->cfg;
    int grid[2][3], ni = 0, rows = 0;
    float *emb = dir_features(dir, m, grid, &ni, &rows);
    /* the two rows as dlm's dataset lays them: inputs ids[0..n-1), targets
     * the caption (from "\n" on), padded to the longer */
    enum { B = 2, TM = 512 };
    int32_t ids[B][TM];
    int n[B] = {0, 0}, T = 0;
    CHECK(read_text(dir, "rows.txt", &txt) == 0);
    char *save = NULL, *line = strtok_r(txt, "\n", &save);
    for (int b = 0; b < B && line; b++, line = strtok_r(NULL, "\n", &save)) {
        char *end;
        for (char *s = line; n[b] < TM; s = end) {
            long x = strtol(s, &end, 10);
            if (end == s) break;
            ids[b][n[b]++] = (int32_t)x;
        }
        if (n[b] - 1 > T) T = n[b] - 1;
    }
    free(txt);
    int32_t tok[B * TM], tgt[B * TM], pos[B * TM], row[B * TM], pos3[3 * B * TM], p3[3 * TM];
    int k0 = 0;
    for (int b = 0; b < B; b++) {
        int L = n[b] - 1, k = 0;
        while (ids[b][k] == c->image_id) k++;
        int64_t delta;
        CHECK_MSG(qwen2vl_splice(c, ids[b], L, (const int (*)[3])&grid[b], 1, row + b * T, p3, &delta, &e) == 0, "%s",
                  e.msg);
        for (int i = 0; i < T; i++) {
            int at = b * T + i;
            tok[at] = i < L ? ids[b][i] : 0;
            tgt[at] = i < L && i + 1 >= k ? ids[b][i + 1] : -1;
            pos[at] = i;
            if (i >= L) row[at] = -1;
            else if (row[at] >= 0) row[at] += k0;
            for (int q = 0; q < 3; q++) pos3[q * B * T + at] = i < L ? p3[q * L + i] : i;
        }
        k0 += k;
    }
    token_batch bt = {.B = B, .T = T, .tokens = tok, .targets = tgt, .pos = pos, .embeds = emb, .embed_row = row,
                      .n_embeds = rows, .pos3 = pos3};
    CHECK_MSG(decoder_batch_check(c, &bt, &e) == 0, "%s", e.msg);
    snprintf(p, sizeof p, "%s/hp.json", dir);
    json_t *hp = json_load_path(p, 1 << 20, &e);
    st_file *inf = NULL, *gf = NULL, *ff = NULL;
    snprintf(p, sizeof p, "%s/init.safetensors", dir);
    CHECK(st_open(p, &inf, &e) == 0);
    snprintf(p, sizeof p, "%s/grads.safetensors", dir);
    CHECK(st_open(p, &gf, &e) == 0);
    snprintf(p, sizeof p, "%s/final.safetensors", dir);
    CHECK(st_open(p, &ff, &e) == 0);
    if (!hp || !inf || !gf || !ff) return;
    double rank, alpha, want_loss;
    jget_num(hp, "rank", &rank);
    jget_num(hp, "alpha", &alpha);
    jget_num(hp, "loss", &want_loss);
    lora_config lc = {(int)rank, (float)alpha, 0.0f, LM_ATTN, 0};
    lora *l = NULL;
    CHECK_INT(lora_create(c, &lc, &l, &e), 0);
    CHECK_MSG(lora_load_st(l, inf, "init", &e) == 0, "%s", e.msg);
    decoder_opts o = {.B = B, .T = T};
    decoder *d;
    CHECK_INT(decoder_create(m, l, &o, &d, &e), 0);
    float *g = calloc(l->n, 4), *mo = calloc(l->n, 4), *vo = calloc(l->n, 4);
    int64_t nl;
    decoder_loss(d, &bt, NULL, NULL, &nl);
    double sum = backward_step(d, &bt, g, NULL, 1.0f / (float)nl, 0, 0, &nl);
    CHECK_MSG(fabs(sum / (double)nl - want_loss) <= 1e-4 * fabs(want_loss), "loss %.7f, PEFT %.7f", sum / nl, want_loss);
    char name[256];
    int nt = 0;
    for (int layer = 0; layer < l->n_layer; layer++)
        for (int mo_ = 0; mo_ < LM_COUNT; mo_++) {
            const lora_mod *md = lora_mod_at(l, layer, mo_);
            if (!md) continue;
            lora_tensor_name(l, layer, mo_, "lora_A", name, sizeof name);
            CHECK(check_tensor(name, g + md->off_a, need(gf, name)->data, (size_t)l->cfg.rank * md->in, 1e-4));
            lora_tensor_name(l, layer, mo_, "lora_B", name, sizeof name);
            CHECK(check_tensor(name, g + md->off_b, need(gf, name)->data, (size_t)l->cfg.rank * md->out, 1e-4));
            nt += 2;
        }
    CHECK_INT(nt, st_count(gf));
    optim_config oc;
    optim_defaults(&oc);
    double x;
    jget_num(hp, "lr", &x); oc.lr = x;
    jget_num(hp, "weight_decay", &x); oc.weight_decay = x;
    jget_num(hp, "max_grad_norm", &x); oc.max_grad_norm = x;
    jget_num(hp, "warmup_ratio", &x); oc.warmup_ratio = x;
    jget_num(hp, "steps", &x); oc.total_steps = (int64_t)x;
    oc.sched = SCHED_COSINE;
    json_t *sl = json_object_get(hp, "step_losses");
    for (int64_t step = 0; step < oc.total_steps; step++) {
        memset(g, 0, l->n * 4);
        double lo = backward_step(d, &bt, g, NULL, 1.0f / (float)nl, 0, (uint64_t)step, &nl) / (double)nl;
        double want = json_real_value(json_array_get(sl, (size_t)step));
        CHECK_MSG(fabs(lo - want) <= 1e-4 * fabs(want), "step %lld loss %.7f, PEFT %.7f", (long long)step, lo, want);
        optim_clip(g, l->n, oc.max_grad_norm);
        optim_adamw_step(&oc, l->w, g, mo, vo, l->n, optim_lr_at(&oc, step), step + 1);
    }
    double md = 0;
    for (int layer = 0; layer < l->n_layer; layer++)
        for (int mo_ = 0; mo_ < LM_COUNT; mo_++) {
            const lora_mod *q = lora_mod_at(l, layer, mo_);
            if (!q) continue;
            for (int part = 0; part < 2; part++) {
                lora_tensor_name(l, layer, mo_, part ? "lora_B" : "lora_A", name, sizeof name);
                const float *want = need(ff, name)->data, *got = l->w + (part ? q->off_b : q->off_a);
                size_t cnt = (size_t)l->cfg.rank * (part ? q->out : q->in);
                for (size_t i = 0; i < cnt; i++) md = fmax(md, fabs((double)got[i] - want[i]));
            }
        }
    printf("test_vl_model --peft: loss %.6f (PEFT %.6f), %d gradient tensors, 5 AdamW steps: max|w - PEFT| %.3g\n",
           sum / (double)nl, want_loss, nt, md);
    CHECK_MSG(md <= 1e-4, "weights after 5 steps differ from PEFT's by %g", md);
    free(g); free(mo); free(vo);
    decoder_free(d);
    lora_free(l);
    st_close(inf); st_close(gf); st_close(ff);
    json_decref(hp);
    free(emb);
    model_free(m);
}

static void ref_layout(const char *dir, const char *sub)
{
    char p[4096], *txt = NULL, *lg = NULL;
    snprintf(p, sizeof p, "%s/%s", dir, sub);
    model *m = NULL;
    dlm_err e;
    CHECK_MSG(model_load(p, &m, &e) == 0, "%s: %s", sub, e.msg);
    if (!m) return;
    const model_config *c = &m->cfg;
    qwen2vl_vit v;
    CHECK_MSG(qwen2vl_tower_load(m, &v, &e) == 0, "%s: %s", sub, e.msg);
    long long mn = 0, mx = 0;
    if (read_text(dir, "pix.txt", &txt) || sscanf(txt, "%lld %lld", &mn, &mx) != 2) { CHECK(0); return; }
    free(txt);
    proc_cfg pc = qwen2vl_proc(c);
    pc.min_pixels = mn;
    pc.max_pixels = mx;
    /* the two images' features, one after the other */
    float *emb = NULL;
    int grid[2][3], rows = 0;
    CHECK(read_text(dir, "images.txt", &txt) == 0);
    char *save = NULL, *path = strtok_r(txt, "\n", &save);
    for (int i = 0; i < 2 && path; i++, path = strtok_r(NULL, "\n", &save)) {
        char *bytes;
        size_t nb;
        image_rgb im;
        float *f;
        int nr;
        if (fs_read_all(path, 1u << 26, &bytes, &nb, &e) || image_decode((uint8_t *)bytes, nb, &im, &e)) {
            CHECK_MSG(0, "%s", e.msg);
            return;
        }
        free(bytes);
        CHECK_MSG(qwen2vl_image_features(&v, c, &pc, &im, &f, &nr, grid[i], &e) == 0, "%s", e.msg);
        image_free(&im);
        emb = realloc(emb, (size_t)(rows + nr) * c->d_model * sizeof *emb);
        memcpy(emb + (size_t)rows * c->d_model, f, (size_t)nr * c->d_model * sizeof *f);
        rows += nr;
        free(f);
    }
    free(txt);
    int32_t ids[512];
    int n = 0;
    CHECK(read_text(dir, "ids.txt", &txt) == 0);
    for (char *s = txt, *end; n < 512; s = end) {
        long x = strtol(s, &end, 10);
        if (end == s) break;
        ids[n++] = (int32_t)x;
    }
    free(txt);
    int32_t *row = malloc((size_t)n * sizeof *row), *pos3 = malloc((size_t)3 * n * sizeof *pos3);
    int32_t *pos = calloc((size_t)n, sizeof *pos), *tgt = malloc((size_t)n * sizeof *tgt);
    for (int i = 0; i < n; i++) tgt[i] = -1;
    int64_t delta;
    CHECK_MSG(qwen2vl_splice(c, ids, n, (const int (*)[3])grid, 2, row, pos3, &delta, &e) == 0, "%s", e.msg);
    token_batch b = {.B = 1, .T = n, .tokens = ids, .targets = tgt, .pos = pos, .embeds = emb, .embed_row = row,
                     .n_embeds = rows, .pos3 = pos3};
    CHECK_MSG(decoder_batch_check(c, &b, &e) == 0, "%s", e.msg);
    decoder_opts o = {.B = 1, .T = n};
    decoder *d;
    CHECK(decoder_create(m, NULL, &o, &d, &e) == 0);
    float *got = malloc((size_t)n * c->vocab * sizeof *got);
    int64_t nl;
    decoder_loss(d, &b, NULL, got, &nl);
    size_t want_n = 0;
    snprintf(p, sizeof p, "%s/logits.f32", dir);
    CHECK(fs_read_all(p, 1u << 30, &lg, &want_n, &e) == 0);
    CHECK_INT(want_n, (size_t)n * c->vocab * sizeof(float));
    if (want_n == (size_t)n * c->vocab * sizeof(float)) {
        double md = 0;
        for (size_t i = 0; i < (size_t)n * c->vocab; i++) md = fmax(md, fabs((double)got[i] - ((float *)lg)[i]));
        printf("test_vl_model --ref %s: %d tokens (%d image rows), max|diff| %.3g\n", sub, n, rows, md);
        CHECK_MSG(md <= 1e-4, "%s: logits differ by %g", sub, md);
    }
    free(lg);
    /* generation: the KV-cache session fed the spliced prompt, then its own
     * greedy tokens at n + delta, vs model.generate's tokens and scores */
    char *gtxt = NULL;
    size_t sn = 0;
    snprintf(p, sizeof p, "%s/scores.f32", dir);
    float *sc = NULL;
    if (!read_text(dir, "gen.txt", &gtxt) && !fs_read_all(p, 1u << 30, (char **)&sc, &sn, &e)) {
        int32_t want[16];
        int ng = 0;
        for (char *q = gtxt, *end; ng < 16; q = end) {
            long x = strtol(q, &end, 10);
            if (end == q) break;
            want[ng++] = (int32_t)x;
        }
        session *s;
        CHECK(session_create(m, NULL, 256, 64, &s, &e) == 0);
        session_splice spl = {.embeds = emb, .n_embeds = rows, .embed_row = row, .pos3 = pos3, .delta = (int)delta};
        float *one = malloc((size_t)c->vocab * sizeof *one);
        CHECK(session_eval_splice(s, ids, n, &spl, one, 0, &e) == 0);
        double mdg = 0;
        int same = 1;
        for (int k = 0; k < ng && (size_t)(k + 1) * c->vocab * sizeof(float) <= sn; k++) {
            int am = 0;
            for (int w = 0; w < c->vocab; w++) {
                if (one[w] > one[am]) am = w;
                mdg = fmax(mdg, fabs((double)one[w] - sc[(size_t)k * c->vocab + w]));
            }
            same &= am == want[k];
            CHECK(session_eval(s, &am, 1, one, 0, &e) == 0);
        }
        printf("test_vl_model --ref %s: %d generated tokens %s, max|logit - score| %.3g\n", sub, ng,
               same ? "equal" : "DIFFER", mdg);
        CHECK_MSG(same && ng == 8, "%s: the greedy tokens differ from model.generate's", sub);
        CHECK_MSG(mdg <= 1e-4, "%s: generation logits differ by %g", sub, mdg);
        free(one);
        session_free(s);
    } else {
        CHECK_MSG(0, "no gen.txt / scores.f32 in %s", dir);
    }
    free(gtxt);
    free(sc);
    free(got);
    decoder_free(d);
    free(row);
    free(pos3);
    free(pos);
    free(tgt);
    free(emb);
    qwen2vl_vit_free(&v);
    model_free(m);
}

/* ---- --make DIR: a small random Qwen2-VL base ------------------------------ */

enum { MK_H = 128, MK_L = 2, MK_NH = 4, MK_KV = 2, MK_F = 256, MK_V = 4100, MK_VD = 32, MK_VDEPTH = 2 };

typedef struct mk { st_out t[96]; float *buf[96]; int n; uint64_t seed; } mk;

/* one tensor, normal(0, sd) + mean, in dlm's safetensors writer's form */
static void mk_add(mk *k, const char *name, int nd, const int64_t *shape, float sd, float mean)
{
    size_t n = 1;
    for (int i = 0; i < nd; i++) n *= (size_t)shape[i];
    float *b = malloc(n * sizeof *b);
    for (size_t i = 0; i < n; i++) b[i] = mean + sd * rng_normal(k->seed, 1601, (uint64_t)k->n, i);
    st_out *o = &k->t[k->n];
    o->name = strdup(name);
    o->dtype = ST_F32;
    o->ndim = nd;
    memcpy(o->shape, shape, (size_t)nd * sizeof *shape);
    o->data = b;
    k->buf[k->n++] = b;
}
#define MK(k, name, sd, mean, ...) mk_add(k, name, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
                                          (int64_t[]){__VA_ARGS__}, sd, mean)

static int make_base(const char *dir)
{
    dlm_err e;
    char p[4200], name[128];
    if (fs_mkdir_p(dir, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    mk k = {.seed = 16};
    int D = MK_VD, M = 4 * MK_VD;
    MK(&k, "visual.patch_embed.proj.weight", 0.05f, 0, D, 3, 2, 14, 14);
    for (int l = 0; l < MK_VDEPTH; l++) {
        static const char *const V1[] = {"norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias",
                                         "attn.qkv.bias", "attn.proj.bias", "mlp.fc1.bias", "mlp.fc2.bias"};
        const int64_t n1[] = {D, D, D, D, 3 * D, D, 2 * D, D};
        for (int i = 0; i < 8; i++) {
            snprintf(name, sizeof name, "visual.blocks.%d.%s", l, V1[i]);
            mk_add(&k, name, 1, &n1[i], 0.1f, strstr(V1[i], "weight") ? 1.0f : 0.0f);
        }
        snprintf(name, sizeof name, "visual.blocks.%d.attn.qkv.weight", l);
        MK(&k, name, 0.1f, 0, 3 * D, D);
        snprintf(name, sizeof name, "visual.blocks.%d.attn.proj.weight", l);
        MK(&k, name, 0.1f, 0, D, D);
        snprintf(name, sizeof name, "visual.blocks.%d.mlp.fc1.weight", l);
        MK(&k, name, 0.1f, 0, 2 * D, D);
        snprintf(name, sizeof name, "visual.blocks.%d.mlp.fc2.weight", l);
        MK(&k, name, 0.1f, 0, D, 2 * D);
    }
    MK(&k, "visual.merger.ln_q.weight", 0.1f, 1, D);
    MK(&k, "visual.merger.ln_q.bias", 0.1f, 0, D);
    MK(&k, "visual.merger.mlp.0.weight", 0.1f, 0, M, M);
    MK(&k, "visual.merger.mlp.0.bias", 0.1f, 0, M);
    MK(&k, "visual.merger.mlp.2.weight", 0.1f, 0, MK_H, M);
    MK(&k, "visual.merger.mlp.2.bias", 0.1f, 0, MK_H);
    int HS = MK_H / MK_NH;
    MK(&k, "model.embed_tokens.weight", 0.5f, 0, MK_V, MK_H);
    for (int l = 0; l < MK_L; l++) {
        struct { const char *n; int64_t r, c; float sd, mean; } w[] = {
            {"input_layernorm.weight", MK_H, 0, 0.05f, 1}, {"post_attention_layernorm.weight", MK_H, 0, 0.05f, 1},
            {"self_attn.q_proj.weight", MK_NH * HS, MK_H, 0.1f, 0}, {"self_attn.q_proj.bias", MK_NH * HS, 0, 0.1f, 0},
            {"self_attn.k_proj.weight", MK_KV * HS, MK_H, 0.1f, 0}, {"self_attn.k_proj.bias", MK_KV * HS, 0, 0.1f, 0},
            {"self_attn.v_proj.weight", MK_KV * HS, MK_H, 0.1f, 0}, {"self_attn.v_proj.bias", MK_KV * HS, 0, 0.1f, 0},
            {"self_attn.o_proj.weight", MK_H, MK_NH * HS, 0.1f, 0}, {"mlp.gate_proj.weight", MK_F, MK_H, 0.1f, 0},
            {"mlp.up_proj.weight", MK_F, MK_H, 0.1f, 0}, {"mlp.down_proj.weight", MK_H, MK_F, 0.1f, 0}};
        for (size_t i = 0; i < sizeof w / sizeof *w; i++) {
            snprintf(name, sizeof name, "model.layers.%d.%s", l, w[i].n);
            int64_t sh[2] = {w[i].r, w[i].c};
            mk_add(&k, name, w[i].c ? 2 : 1, sh, w[i].sd, w[i].mean);
        }
    }
    MK(&k, "model.norm.weight", 0.05f, 1, MK_H);
    MK(&k, "lm_head.weight", 0.1f, 0, MK_V, MK_H);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    const char *meta[] = {"format", "pt", NULL};
    int rc = st_write(p, k.t, k.n, meta, &e);
    for (int i = 0; i < k.n; i++) { free(k.buf[i]); free((char *)k.t[i].name); }
    if (rc) { fprintf(stderr, "%s\n", e.msg); return 1; }
    /* config.json, the hub's layout */
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    if (!f) return 1;
    fprintf(f, "{\"architectures\": [\"Qwen2VLForConditionalGeneration\"], \"model_type\": \"qwen2_vl\",\n"
               " \"hidden_size\": %d, \"intermediate_size\": %d, \"num_hidden_layers\": %d,\n"
               " \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"vocab_size\": %d,\n"
               " \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000.0, \"max_position_embeddings\": 4096,\n"
               " \"hidden_act\": \"silu\", \"tie_word_embeddings\": false, \"torch_dtype\": \"float32\",\n"
               " \"bos_token_id\": null, \"eos_token_id\": 4095, \"image_token_id\": 4098,\n"
               " \"vision_start_token_id\": 4096, \"vision_end_token_id\": 4097, \"use_sliding_window\": false,\n"
               " \"rope_scaling\": {\"type\": \"mrope\", \"mrope_section\": [%d, %d, %d]},\n"
               " \"vision_config\": {\"depth\": %d, \"embed_dim\": %d, \"hidden_size\": %d, \"num_heads\": 4,\n"
               "   \"mlp_ratio\": 2, \"in_chans\": 3, \"patch_size\": 14, \"spatial_merge_size\": 2,\n"
               "   \"temporal_patch_size\": 2}}\n",
            MK_H, MK_F, MK_L, MK_NH, MK_KV, MK_V, HS / 8, 3 * HS / 16, 3 * HS / 16, MK_VDEPTH, MK_VD, MK_H);
    fclose(f);
    /* the tiny tokenizer with Qwen2-VL's three vision tokens */
    static const char *const ADD[3] = {"<|vision_start|>", "<|vision_end|>", "<|image_pad|>"};
    json_t *tj = json_load_path(DLM_SOURCE_DIR "/models/tiny-tokenizer/tokenizer.json", 1 << 26, &e);
    json_t *tc = json_load_path(DLM_SOURCE_DIR "/models/tiny-tokenizer/tokenizer_config.json", 1 << 26, &e);
    if (!tj || !tc) { fprintf(stderr, "%s\n", e.msg); return 1; }
    json_t *added = json_object_get(tj, "added_tokens"), *dec = json_object_get(tc, "added_tokens_decoder");
    for (int i = 0; i < 3; i++) {
        json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", 4096 + i, "content",
                                               ADD[i], "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0,
                                               "special", 1));
        char id[16];
        snprintf(id, sizeof id, "%d", 4096 + i);
        json_object_set_new(dec, id, json_pack("{s:s, s:b, s:b, s:b, s:b, s:b}", "content", ADD[i], "lstrip", 0,
                                               "normalized", 0, "rstrip", 0, "single_word", 0, "special", 1));
    }
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
    kern_init(1);
    if (argc == 3 && !strcmp(argv[1], "--make")) return make_base(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "--peft")) {
        peft_mode(argv[2]);
        return check_done();
    }
    if (argc == 3 && !strcmp(argv[1], "--ref")) {
        ref_layout(argv[2], "v5");
        ref_layout(argv[2], "hub");
        return check_done();
    }
    test_config();
    return check_done();
}
