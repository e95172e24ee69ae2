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
 *     within 1e-4; each clip's token count equals the processor's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "decoder/session.h"
#include "kern/kern.h"
#include "media/audio.h"
#include "util/fs.h"
#include "util/json.h"
#include "vision/audio_feat.h"
#include "weights/model.h"
#include "weights/registry.h"

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

int main(int argc, char **argv)
{
    kern_init(1);
    if (argc == 3 && !strcmp(argv[1], "--ref")) return ref_mode(argv[2]);
    test_config();
    test_counts();
    return check_done();
}
