/* test_audio_base — a Qwen2-Audio base as a whole (docs/audio.md):
 *
 *   (no arguments) the config: Qwen2-Audio-7B-Instruct's config.json as
 *     the hub has it (text_config keeps only what differs from Qwen2Config)
 *     gives the 7B's language model with Qwen2Config's defaults filled in,
 *     audio_token_index and transformers 5's audio_token_id; a text_config
 *     of another model_type is refused; the processor's placeholder counts
 *     (Python's floor division: 0 for 1-2 mel frames, 750 for 30 s)
 *   --ref DIR  (r1701) the logits of DIR/base on DIR/ids.json with the
 *     clips DIR/a.wav and DIR/b.wav spliced at their <|AUDIO|> runs, vs
 *     transformers' Qwen2AudioForConditionalGeneration (DIR/logits.f32),
 *     within 1e-4; each clip's token count equals the processor's.
 *   --lora DIR  (r1702) LoRA (rank 4, alpha 8, q/k/v/o of the language
 *     model) on one audio row, the clip DIR/a.wav spliced: the loss, every
 *     LoRA gradient and 5 AdamW steps (warmup, cosine, clipping, weight
 *     decay: the step losses, the final loss and weights) vs PEFT 0.21
 *     (DIR/lora.*), within 1e-4 relative; then the same gradient from a
 *     batch of the row twice, packed, and from 1 and 2 threads is bit for
 *     bit the same where it must be (determinism); and dlm's dataset row of
 *     the section (DIR/doc.dlm) is the processor's ids with the loss on the
 *     transcript's tokens, spliced at the clip's rows (dataset_fill_audio). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter/adapter.h"
#include "check.h"
#include "decoder/decoder.h"
#include "decoder/lora.h"
#include "decoder/session.h"
#include "grad/backward.h"
#include "grad/optim.h"
#include "tokens/dataset.h"
#include "kern/kern.h"
#include "media/audio.h"
#include "util/fs.h"
#include "util/json.h"
#include "vision/audio_feat.h"
#include "weights/model.h"
#include "weights/registry.h"
#include "weights/safetensors.h"

/* Qwen/Qwen2-Audio-7B-Instruct's config.json (revision 0a09522), its keys
 * that matter here, as the hub stores them */
static const char *HUB_7B =
    "{\"architectures\": [\"Qwen2AudioForConditionalGeneration\"],"
    " \"audio_config\": {\"model_type\": \"qwen2_audio_encoder\", \"d_model\": 1280, \"encoder_layers\": 32,"
    "   \"encoder_attention_heads\": 20, \"encoder_ffn_dim\": 5120, \"num_mel_bins\": 128, \"max_source_positions\": 1500},"
    " \"audio_token_index\": 151646, \"ignore_index\": -100, \"model_type\": \"qwen2_audio\","
    " \"text_config\": {\"bos_token_id\": 151643, \"eos_token_id\": 151645, \"intermediate_size\": 11008,"
    "   \"max_position_embeddings\": 8192, \"model_type\": \"qwen2\", \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000,"
    "   \"sliding_window\": 32768, \"torch_dtype\": \"bfloat16\", \"use_mrope\": false, \"vocab_size\": 156032},"
    " \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.45.0.dev0\", \"vocab_size\": 156032}";

static void test_config(void)
{
    model_config c;
    dlm_err e;
    CHECK(model_config_parse(HUB_7B, strlen(HUB_7B), "config.json", &c, &e) == 0);
    CHECK_INT(c.arch, ARCH_QWEN2);
    CHECK_INT(c.audio, 1);
    CHECK_INT(c.audio_token, 151646);
    /* Qwen2Config's defaults where the hub's text_config is silent */
    CHECK_INT(c.d_model, 4096);
    CHECK_INT(c.n_layer, 32);
    CHECK_INT(c.n_head, 32);
    CHECK_INT(c.n_kv_head, 32);
    CHECK_INT(c.n_ff, 11008);
    CHECK_INT(c.vocab, 156032);
    CHECK_INT(c.max_pos, 8192);
    CHECK_INT(c.tied, 0);
    CHECK_INT(c.qkv_bias, 1);
    CHECK_INT(c.eos_id, 151645);
    CHECK_NEAR(c.rms_eps, 1e-5, 1e-12);
    CHECK_NEAR(c.rope_theta, 10000, 0);
    CHECK_STR(c.src_dtype, "bfloat16");
    /* transformers 5 writes audio_token_id */
    const char *v5 = "{\"model_type\": \"qwen2_audio\", \"audio_token_id\": 299, \"text_config\": {\"hidden_size\": 40,"
                     " \"intermediate_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 2,"
                     " \"num_key_value_heads\": 1, \"vocab_size\": 300}}";
    CHECK(model_config_parse(v5, strlen(v5), "config.json", &c, &e) == 0);
    CHECK_INT(c.audio_token, 299);
    CHECK_INT(c.d_model, 40);
    CHECK_INT(c.n_kv_head, 1);
    const char *bad = "{\"model_type\": \"qwen2_audio\", \"text_config\": {\"model_type\": \"llama\"}}";
    CHECK(model_config_parse(bad, strlen(bad), "config.json", &c, &e) == -1);
    CHECK_MSG(strstr(e.msg, "text_config.model_type is 'llama'") != NULL, "%s", e.msg);
    /* a text base is not an audio one */
    const char *txt = "{\"architectures\": [\"Qwen2ForCausalLM\"], \"hidden_size\": 40, \"intermediate_size\": 64,"
                      " \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"vocab_size\": 300}";
    CHECK(model_config_parse(txt, strlen(txt), "config.json", &c, &e) == 0);
    CHECK_INT(c.audio, 0);
    /* the audio row runs (resolves); a vision row is still refused */
    base_ref b;
    CHECK(registry_parse_base("qwen2-audio-7b-instruct", &b, &e) == 0);
    CHECK_INT(registry_check_trainable(&b, &e), 0);
}

static void test_counts(void)
{
    audio_feat a;
    memset(&a, 0, sizeof a);
    dlm_err e;
    CHECK(whisper_fe_init(&a.fe, 128, 400, 160, 16000, 30, &e) == 0);
    /* Qwen2AudioProcessor: f = ceil(n / 160) valid frames (feature_attention_mask.sum),
     * tokens = ((f - 1) // 2 + 1 - 2) // 2 + 1 */
    static const struct { size_t n; int f, tok; } K[] = {
        {480000, 3000, 750}, {496000, 3000, 750}, {47200, 295, 74}, {320, 2, 0}, {321, 3, 1}, {160, 1, 0},
        {161, 2, 0}, {16000, 100, 25}, {479999, 3000, 750}, {1000, 7, 2},
    };
    for (size_t i = 0; i < sizeof K / sizeof *K; i++) {
        CHECK_INT(audio_feat_frames(&a, K[i].n), K[i].f);
        CHECK_INT(audio_feat_tokens(&a, K[i].n), K[i].tok);
    }
    CHECK_INT(AUDIO_MIN_SAMPLES, 321);
    whisper_fe_free(&a.fe);
}

/* ---- --ref DIR ---------------------------------------------------------------------- */

static int ref_mode(const char *dir)
{
    char p[4096];
    dlm_err e;
    model *m = NULL;
    snprintf(p, sizeof p, "%s/base", dir);
    CHECK_MSG(model_load(p, &m, &e) == 0, "%s", e.msg);
    if (!m) return check_done();
    audio_feat af;
    CHECK_MSG(audio_feat_open(&af, p, &e) == 0, "%s", e.msg);
    CHECK_INT(af.audio_token, m->cfg.audio_token);
    /* the clips' rows, in order */
    const char *clips[2] = {"a.wav", "b.wav"};
    float *rows[2] = {NULL, NULL};
    int ntok[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s/%s", dir, clips[k]);
        audio_wave w;
        CHECK_MSG(audio_load(p, AUDIO_RATE, AUDIO_MAX_SECONDS, 0, &w, &e) == 0, "%s", e.msg);
        CHECK_MSG(audio_feat_embed(&af, w.x, w.n, &rows[k], &ntok[k], &e) == 0, "%s", e.msg);
        audio_wave_free(&w);
    }
    snprintf(p, sizeof p, "%s/ids.json", dir);
    json_t *a = json_load_path(p, 1 << 22, &e);
    int T = (int)json_array_size(a), V = m->cfg.vocab, C = m->cfg.d_model;
    int32_t *ids = malloc((size_t)T * sizeof *ids), *er = malloc((size_t)T * sizeof *er);
    float *emb = malloc((size_t)(ntok[0] + ntok[1]) * C * sizeof *emb);
    memcpy(emb, rows[0], (size_t)ntok[0] * C * sizeof *emb);
    memcpy(emb + (size_t)ntok[0] * C, rows[1], (size_t)ntok[1] * C * sizeof *emb);
    int k = 0;
    for (int i = 0; i < T; i++) {
        ids[i] = (int32_t)json_integer_value(json_array_get(a, (size_t)i));
        er[i] = ids[i] == af.audio_token ? k++ : -1;
    }
    json_decref(a);
    /* the processor's runs of placeholders are dlm's counts */
    snprintf(p, sizeof p, "%s/counts.txt", dir);
    FILE *f = fopen(p, "r");
    int c0 = -1, c1 = -1;
    CHECK(f && fscanf(f, "%d %d", &c0, &c1) == 2);
    if (f) fclose(f);
    CHECK_INT(ntok[0], c0);
    CHECK_INT(ntok[1], c1);
    CHECK_INT(k, ntok[0] + ntok[1]);
    char *lg;
    size_t ll;
    snprintf(p, sizeof p, "%s/logits.f32", dir);
    CHECK(fs_read_all(p, 1u << 30, &lg, &ll, &e) == 0);
    CHECK_INT((int64_t)ll, (int64_t)T * V * 4);
    float *out = calloc((size_t)T * V, sizeof *out);
    session *s = NULL;
    CHECK_MSG(session_create(m, NULL, T, 64, &s, &e) == 0, "%s", e.msg);
    session_splice sp = {.embeds = emb, .n_embeds = k, .embed_row = er};
    /* the prompt in two calls, cut inside the long clip's run: the second
     * call's rows still index the one embeds table */
    int half = T / 2;
    CHECK_MSG(session_eval_splice(s, ids, half, &sp, out, 1, &e) == 0, "%s", e.msg);
    session_splice sp2 = {.embeds = emb, .n_embeds = k, .embed_row = er + half};
    CHECK_MSG(session_eval_splice(s, ids + half, T - half, &sp2, out + (size_t)half * V, 1, &e) == 0, "%s", e.msg);
    const float *want = (const float *)lg;
    double mx = 0;
    for (size_t i = 0; i < (size_t)T * V; i++) mx = fmax(mx, fabs((double)out[i] - want[i]));
    CHECK_MSG(mx <= 1e-4, "logits max abs err %.3g > 1e-4", mx);
    printf("qwen2-audio logits: %d positions (%d + %d audio tokens), max abs err %.3g\n", T, ntok[0], ntok[1], mx);
    session_free(s);
    free(out); free(lg); free(ids); free(er); free(emb); free(rows[0]); free(rows[1]);
    audio_feat_close(&af);
    model_free(m);
    return check_done();
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

/* the LoRA gradient of the batch, summed NLL scaled by 1/n_loss */
static double grad_of(const model *m, lora *l, const token_batch *b, float *g, int64_t *nl)
{
    decoder_opts o = {.B = b->B, .T = b->T};
    decoder *f = NULL;
    dlm_err e;
    if (decoder_create(m, l, &o, &f, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    memset(g, 0, l->n * sizeof *g);
    backward_step(f, b, g, NULL, 0, 0, 0, nl);   /* the count first */
    memset(g, 0, l->n * sizeof *g);
    double s = backward_step(f, b, g, NULL, 1.0f / (float)*nl, 0, 0, nl);
    decoder_free(f);
    return s;
}

static int lora_mode(const char *dir)
{
    char p[4096];
    dlm_err e;
    model *m = NULL;
    snprintf(p, sizeof p, "%s/base", dir);
    CHECK_MSG(model_load(p, &m, &e) == 0, "%s", e.msg);
    if (!m) return check_done();
    audio_feat af;
    CHECK_MSG(audio_feat_open(&af, p, &e) == 0, "%s", e.msg);
    snprintf(p, sizeof p, "%s/a.wav", dir);
    audio_wave w;
    float *emb = NULL;
    int ntok = 0;
    CHECK_MSG(audio_load(p, AUDIO_RATE, AUDIO_MAX_SECONDS, 0, &w, &e) == 0, "%s", e.msg);
    CHECK_MSG(audio_feat_embed(&af, w.x, w.n, &emb, &ntok, &e) == 0, "%s", e.msg);
    audio_wave_free(&w);
    snprintf(p, sizeof p, "%s/batch.json", dir);
    json_t *bj = json_load_path(p, 1 << 22, &e);
    const json_t *ji = json_object_get(bj, "input_ids"), *jt = json_object_get(bj, "targets");
    int T = (int)json_array_size(ji);
    /* the same row twice: packed into one sequence of 2T (segments 0 and 1),
     * and alone in the first T */
    int32_t *tk = malloc(2 * (size_t)T * 4), *tg = malloc(2 * (size_t)T * 4), *ps = malloc(2 * (size_t)T * 4),
            *sg = malloc(2 * (size_t)T * 4), *er = malloc(2 * (size_t)T * 4);
    int k = 0;
    for (int i = 0; i < T; i++) {
        tk[i] = tk[T + i] = (int32_t)json_integer_value(json_array_get(ji, (size_t)i));
        tg[i] = tg[T + i] = (int32_t)json_integer_value(json_array_get(jt, (size_t)i));
        ps[i] = ps[T + i] = i;
        sg[i] = 0;
        sg[T + i] = 1;
        er[i] = er[T + i] = tk[i] == af.audio_token ? k++ : -1;
    }
    json_decref(bj);
    CHECK_INT(k, ntok);
    /* the dataset's row of the same section: the same inputs and targets */
    {
        snprintf(p, sizeof p, "%s/doc.dlm", dir);
        dlm_doc *doc = doc_load(p, &e);
        CHECK_MSG(doc != NULL, "%s", e.msg);
        tok *tk0 = NULL;
        snprintf(p, sizeof p, "%s/base/tokenizer.json", dir);
        CHECK_MSG(tok_load(p, NULL, &tk0, &e) == 0, "%s", e.msg);
        int32_t an[8] = {0};
        int ai = -1;
        for (int i = 0; doc && i < doc_nsections(doc) && i < 8; i++)
            if (doc_section_at(doc, i)->type == DOC_AUDIO) { an[i] = ntok; ai = i; }
        CHECK(ai >= 0);
        ds_opts dso = {.seq_len = 2048, .seed = 1, .val_frac = 0, .audio_ntok = an, .audio_token = af.audio_token};
        dataset *ds = NULL;
        if (doc && tk0) CHECK_MSG(dataset_build(doc, NULL, tk0, chat_dialect_find("chatml"), &dso, &ds, &e) == 0, "%s", e.msg);
        if (ds) {
            CHECK_INT(ds->n_items, 1);
            const ds_item *it = &ds->items[0];
            CHECK_INT(it->len, T);
            CHECK_INT(it->n_emb, ntok);
            CHECK_INT(it->emb_off, 0);
            CHECK(!memcmp(ds->tok + it->off, tk, (size_t)T * 4));
            CHECK(!memcmp(ds->tgt + it->off, tg, (size_t)T * 4));
            int item = 0;
            int32_t bt[4096], bg[4096], bp[4096], bs[4096], be[4096];
            token_batch db;
            int64_t dnl;
            CHECK(T <= 4096 && dataset_fill(ds, &item, 1, 0, 1, T, bt, bg, bp, bs, &db, &dnl) == 0);
            CHECK_INT(dataset_fill_audio(ds, &item, 1, emb, ntok, be, &db), ntok);
            CHECK(!memcmp(be, er, (size_t)T * 4));
            dataset_free(ds);
        }
        tok_free(tk0);
        doc_free(doc);
    }
    token_batch b = {.B = 1, .T = T, .tokens = tk, .targets = tg, .pos = ps, .seg = sg, .embeds = emb,
                     .n_embeds = ntok, .embed_row = er};
    CHECK_MSG(decoder_batch_check(&m->cfg, &b, &e) == 0, "%s", e.msg);
    snprintf(p, sizeof p, "%s/lora.json", dir);
    json_t *hp = json_load_path(p, 1 << 20, &e);
    double rank, alpha, d;
    jget_num(hp, "rank", &rank);
    jget_num(hp, "alpha", &alpha);
    lora_config lc = {(int)rank, (float)alpha, 0.0f, 0xFu, 0};
    lora *l = NULL;
    CHECK_INT(lora_create(&m->cfg, &lc, &l, &e), 0);
    st_file *inf, *gf, *ff;
    snprintf(p, sizeof p, "%s/lora.init.safetensors", dir);
    CHECK(st_open(p, &inf, &e) == 0);
    snprintf(p, sizeof p, "%s/lora.grads.safetensors", dir);
    CHECK(st_open(p, &gf, &e) == 0);
    snprintf(p, sizeof p, "%s/lora.final.safetensors", dir);
    CHECK(st_open(p, &ff, &e) == 0);
    CHECK_MSG(lora_load_st(l, inf, "init", &e) == 0, "%s", e.msg);
    size_t n = l->n;
    float *g = calloc(n, 4), *g2 = calloc(n, 4), *w0 = malloc(n * 4);
    memcpy(w0, l->w, n * 4);
    int64_t nl;
    double sum = grad_of(m, l, &b, g, &nl), want;
    jget_num(hp, "loss", &want);
    CHECK_MSG(fabs(sum / (double)nl - want) <= 1e-4 * fabs(want), "loss %.7f want %.7f", sum / (double)nl, want);
    char name[256];
    int nt = 0;
    for (int layer = 0; layer < l->n_layer; layer++)
        for (int mo = 0; mo < LM_COUNT; mo++) {
            const lora_mod *md = lora_mod_at(l, layer, mo);
            if (!md) continue;
            lora_tensor_name(l, layer, mo, "lora_A", name, sizeof name);
            check_tensor(name, g + md->off_a, need(gf, name)->data, (size_t)l->cfg.rank * md->in, 1e-4);
            lora_tensor_name(l, layer, mo, "lora_B", name, sizeof name);
            check_tensor(name, g + md->off_b, need(gf, name)->data, (size_t)l->cfg.rank * md->out, 1e-4);
            nt += 2;
        }
    CHECK_INT(nt, st_count(gf));
    /* determinism: the row twice, packed, gives the same gradient (the mean
     * over twice the targets); 2 threads give 1 thread's bits */
    token_batch b2 = b;
    b2.T = 2 * T;
    CHECK_MSG(decoder_batch_check(&m->cfg, &b2, &e) == 0, "%s", e.msg);
    int64_t nl2;
    grad_of(m, l, &b2, g2, &nl2);
    CHECK_INT(nl2, 2 * nl);
    double mx = 0, gm = 0;
    for (size_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs((double)g2[i] - g[i]));
        gm = fmax(gm, fabs((double)g[i]));
    }
    /* the same sums in another order: float rounding, relative to the gradient's scale */
    CHECK_MSG(mx <= 1e-5 * gm, "packed twice: gradient differs by %.3g (max |g| %.3g)", mx, gm);
    kern_init(2);
    grad_of(m, l, &b, g2, &nl2);
    CHECK_MSG(!memcmp(g, g2, n * 4), "2 threads: the gradient's bits differ from 1 thread's");
    kern_init(1);
    /* 5 AdamW steps as the trainer runs them */
    optim_config oc;
    optim_defaults(&oc);
    jget_num(hp, "lr", &d); oc.lr = d;
    jget_num(hp, "weight_decay", &d); oc.weight_decay = d;
    jget_num(hp, "max_grad_norm", &d); oc.max_grad_norm = d;
    jget_num(hp, "warmup_ratio", &d); oc.warmup_ratio = d;
    jget_num(hp, "steps", &d); oc.total_steps = (int64_t)d;
    oc.sched = SCHED_COSINE;
    const json_t *sl = json_object_get(hp, "step_losses");
    float *mo = calloc(n, 4), *vo = calloc(n, 4);
    for (int64_t step = 0; step < oc.total_steps; step++) {
        double s = grad_of(m, l, &b, g, &nl) / (double)nl, ws = json_real_value(json_array_get(sl, (size_t)step));
        CHECK_MSG(fabs(s - ws) <= 1e-4 * fabs(ws), "step %lld loss %.7f want %.7f", (long long)step, s, ws);
        optim_clip(g, n, oc.max_grad_norm);
        optim_adamw_step(&oc, l->w, g, mo, vo, n, optim_lr_at(&oc, step), step + 1);
    }
    double fin = grad_of(m, l, &b, g, &nl) / (double)nl, wf;
    jget_num(hp, "final_loss", &wf);
    CHECK_MSG(fabs(fin - wf) <= 1e-4 * fabs(wf), "final loss %.7f want %.7f", fin, wf);
    for (int layer = 0; layer < l->n_layer; layer++)
        for (int mi = 0; mi < LM_COUNT; mi++) {
            const lora_mod *md = lora_mod_at(l, layer, mi);
            if (!md) continue;
            lora_tensor_name(l, layer, mi, "lora_A", name, sizeof name);
            check_tensor(name, l->w + md->off_a, need(ff, name)->data, (size_t)l->cfg.rank * md->in, 1e-4);
            lora_tensor_name(l, layer, mi, "lora_B", name, sizeof name);
            check_tensor(name, l->w + md->off_b, need(ff, name)->data, (size_t)l->cfg.rank * md->out, 1e-4);
        }
    printf("qwen2-audio LoRA: %d positions (%d audio), loss %.6f, %d gradient tensors, 5 AdamW steps -> %.6f (PEFT %.6f)\n",
           T, ntok, sum / (double)nl, nt, fin, wf);
    st_close(inf); st_close(gf); st_close(ff);
    json_decref(hp);
    free(mo); free(vo); free(g); free(g2); free(w0); free(tk); free(tg); free(ps); free(sg); free(er); free(emb);
    lora_free(l);
    audio_feat_close(&af);
    model_free(m);
    return check_done();
}

int main(int argc, char **argv)
{
    kern_init(1);
    if (argc == 3 && !strcmp(argv[1], "--ref")) return ref_mode(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "--lora")) return lora_mode(argv[2]);
    test_config();
    test_counts();
    return check_done();
}
