/* test_vlexp_gguf — the multimodal export's tensor surgery on a tiny
 * synthetic Qwen2-VL checkpoint (export/mm_gguf.h): the mmproj's qkv split
 * into q/k/v rows and bias elements, the Conv3d patch kernel split into its
 * two temporal planes, the merger names, the clip keys; the adapter's pairs
 * by layer and projection, and the refusals (a vision-tower pair, DoRA,
 * PaliGemma). tests/ref/r1901 compares whole files with llama.cpp's
 * converter; this pins the index arithmetic on values chosen here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "export/mm_gguf.h"
#include "weights/gguf.h"
#include "weights/safetensors.h"
#include "util/fs.h"

static float *seq(int n, float base)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int i = 0; i < n; i++) v[i] = base + (float)i;
    return v;
}

static int put(const char *dir, const char *name, const char *text)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return fs_write_atomic(p, text, strlen(text), 0644, NULL);
}

/* depth 1, embed 4 (2 heads), patch 2, temporal 2, text width 8, 1 layer */
static void make_base(const char *dir)
{
    put(dir, "config.json",
        "{\"architectures\": [\"Qwen2VLForConditionalGeneration\"], \"model_type\": \"qwen2_vl\", \"rms_norm_eps\": 1e-06,"
        " \"text_config\": {\"hidden_size\": 8, \"num_hidden_layers\": 1, \"vocab_size\": 16, \"num_attention_heads\": 2,"
        " \"intermediate_size\": 16, \"rope_parameters\": {\"mrope_section\": [1, 1, 0]}},"
        " \"vision_config\": {\"depth\": 1, \"embed_dim\": 4, \"hidden_size\": 8, \"num_heads\": 2, \"patch_size\": 2,"
        " \"temporal_patch_size\": 2}}");
    put(dir, "preprocessor_config.json", "{\"image_mean\": [0.25, 0.5, 0.75], \"image_std\": [1, 2, 3]}");
    float *patch = seq(4 * 3 * 2 * 2 * 2, 0), *qkvw = seq(12 * 4, 100), *qkvb = seq(12, 500), *proj = seq(16, 0),
          *v4 = seq(4, 1), *fc1 = seq(32, 0), *b8 = seq(8, 0), *fc2 = seq(32, 0), *m0 = seq(256, 0), *b16 = seq(16, 0),
          *m2 = seq(128, 0), *q = seq(64, 0);
    st_out t[] = {
        {"visual.patch_embed.proj.weight", ST_F32, 5, {4, 3, 2, 2, 2}, patch},
        {"visual.blocks.0.attn.qkv.weight", ST_F32, 2, {12, 4}, qkvw},
        {"visual.blocks.0.attn.qkv.bias", ST_F32, 1, {12}, qkvb},
        {"visual.blocks.0.attn.proj.weight", ST_F32, 2, {4, 4}, proj},
        {"visual.blocks.0.attn.proj.bias", ST_F32, 1, {4}, v4},
        {"visual.blocks.0.norm1.weight", ST_F32, 1, {4}, v4},
        {"visual.blocks.0.norm1.bias", ST_F32, 1, {4}, v4},
        {"visual.blocks.0.norm2.weight", ST_F32, 1, {4}, v4},
        {"visual.blocks.0.norm2.bias", ST_F32, 1, {4}, v4},
        {"visual.blocks.0.mlp.fc1.weight", ST_F32, 2, {8, 4}, fc1},
        {"visual.blocks.0.mlp.fc1.bias", ST_F32, 1, {8}, b8},
        {"visual.blocks.0.mlp.fc2.weight", ST_F32, 2, {4, 8}, fc2},
        {"visual.blocks.0.mlp.fc2.bias", ST_F32, 1, {4}, v4},
        {"visual.merger.ln_q.weight", ST_F32, 1, {4}, v4},
        {"visual.merger.ln_q.bias", ST_F32, 1, {4}, v4},
        {"visual.merger.mlp.0.weight", ST_F32, 2, {16, 16}, m0},
        {"visual.merger.mlp.0.bias", ST_F32, 1, {16}, b16},
        {"visual.merger.mlp.2.weight", ST_F32, 2, {8, 16}, m2},
        {"visual.merger.mlp.2.bias", ST_F32, 1, {8}, b8},
        {"model.layers.0.self_attn.q_proj.weight", ST_F32, 2, {8, 8}, q},
    };
    char p[4200];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK(st_write(p, t, (int)(sizeof t / sizeof t[0]), NULL, NULL) == 0);
    free(patch); free(qkvw); free(qkvb); free(proj); free(v4); free(fc1); free(b8); free(fc2); free(m0); free(b16);
    free(m2); free(q);
}

static const float *tdata(const gguf_file *g, const char *name, int64_t ne0, int64_t ne1)
{
    const gguf_tensor *t = gguf_find_tensor(g, name);
    CHECK_MSG(t != NULL, "%s missing", name);
    if (!t) return NULL;
    CHECK_INT(t->type, 0);   /* F32 */
    CHECK_INT(t->ne[0], ne0);
    CHECK_INT(t->ne[1], ne1);
    return t->data;
}

static void test_mmproj(const char *dir)
{
    mm_base b;
    dlm_err e;
    err_clear(&e);
    CHECK(mm_open(dir, &b, &e) == 0);
    if (!b.st) return;
    char p[4200];
    snprintf(p, sizeof p, "%s/mmproj.gguf", dir);
    int n = 0;
    CHECK(mm_write_mmproj(&b, export_mix_find("F32"), "t", p, &n, &e) == 0);
    CHECK_INT(n, 24);   /* 19 tower tensors: qkv weight and bias as 3 each, the patch kernel as 2 */
    gguf_file *g = NULL;
    CHECK(gguf_open(p, &g, &e) == 0);
    if (!g) { mm_close(&b); return; }
    const float *k = tdata(g, "v.blk.0.attn_k.weight", 4, 4), *kb = tdata(g, "v.blk.0.attn_v.bias", 4, 1);
    if (k) CHECK(k[0] == 116.0f && k[15] == 131.0f);    /* rows 4..7 of qkv: elements 16..31, from 100 */
    if (kb) CHECK(kb[0] == 508.0f && kb[3] == 511.0f);  /* elements 8..11, from 500 */
    /* [C 4][3][t 2][2][2]: plane t of (c, ch) starts at ((c·3 + ch)·2 + t)·4 */
    const gguf_tensor *p0 = gguf_find_tensor(g, "v.patch_embd.weight"), *p1 = gguf_find_tensor(g, "v.patch_embd.weight.1");
    CHECK(p0 && p1);
    if (p0 && p1) {
        CHECK(p0->n_dims == 4 && p0->ne[0] == 2 && p0->ne[1] == 2 && p0->ne[2] == 3 && p0->ne[3] == 4);
        const float *a = p0->data, *c = p1->data;
        for (int cc = 0; cc < 12; cc++)
            for (int i = 0; i < 4; i++) {
                CHECK(a[cc * 4 + i] == (float)((cc * 2 + 0) * 4 + i));
                CHECK(c[cc * 4 + i] == (float)((cc * 2 + 1) * 4 + i));
            }
    }
    CHECK(gguf_find_tensor(g, "mm.0.weight") && gguf_find_tensor(g, "mm.2.bias") && gguf_find_tensor(g, "v.post_ln.weight"));
    CHECK(gguf_find_tensor(g, "v.blk.0.ffn_up.weight") && gguf_find_tensor(g, "v.blk.0.ln2.bias"));
    CHECK(!gguf_find_tensor(g, "blk.0.attn_q.weight"));   /* the language model stays out */
    const char *s;
    size_t len;
    uint32_t u;
    CHECK(gguf_get_str(g, gguf_find_key(g, "clip.projector_type"), &s, &len, &e) == 0 && !strcmp(s, "qwen2vl_merger"));
    CHECK(gguf_get_str(g, gguf_find_key(g, "general.type"), &s, &len, &e) == 0 && !strcmp(s, "mmproj"));
    CHECK(gguf_get_u32(g, gguf_find_key(g, "clip.vision.projection_dim"), &u, &e) == 0 && u == 8);
    CHECK(gguf_get_u32(g, gguf_find_key(g, "clip.vision.feed_forward_length"), &u, &e) == 0 && u == 8);
    CHECK(gguf_get_u32(g, gguf_find_key(g, "clip.vision.image_size"), &u, &e) == 0 && u == 560);
    double d;
    CHECK(gguf_arr_num(g, gguf_find_key(g, "clip.vision.image_std"), 2, &d) == 0 && d == 3.0);
    gguf_close(g);
    mm_close(&b);
}

static void write_adapter(const char *dir, const char *cfg, const char *extra_name)
{
    fs_mkdir_p(dir, NULL);
    put(dir, "adapter_config.json", cfg);
    float *a = seq(2 * 8, 0), *bb = seq(8 * 2, 0);
    st_out t[3] = {
        {"base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_A.weight", ST_F32, 2, {2, 8}, a},
        {"base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_B.weight", ST_F32, 2, {8, 2}, bb},
        {extra_name, ST_F32, 2, {2, 8}, a},
    };
    char p[4200];
    snprintf(p, sizeof p, "%s/adapter_model.safetensors", dir);
    CHECK(st_write(p, t, extra_name ? 3 : 2, NULL, NULL) == 0);
    free(a);
    free(bb);
}

static void test_adapter(const char *dir)
{
    mm_base b;
    dlm_err e;
    err_clear(&e);
    if (mm_open(dir, &b, &e)) { CHECK(0); return; }
    char ad[4200], p[4300];
    snprintf(ad, sizeof ad, "%s/ad1", dir);
    write_adapter(ad, "{\"r\": 2, \"lora_alpha\": 4}", NULL);
    mm_lora l;
    CHECK(mm_lora_load(ad, &b, &l, &e) == 0);
    CHECK_INT(l.n, 1);
    if (l.n == 1) CHECK(l.p[0].layer == 0 && l.p[0].proj == 0 && l.p[0].in == 8 && l.p[0].out == 8 && l.scale == 2.0f);
    snprintf(p, sizeof p, "%s/adapter.gguf", dir);
    CHECK(mm_write_adapter(&b, &l, "t", p, &e) == 0);
    gguf_file *g = NULL;
    CHECK(gguf_open(p, &g, &e) == 0);
    if (g) {
        tdata(g, "blk.0.attn_q.weight.lora_a", 8, 2);
        tdata(g, "blk.0.attn_q.weight.lora_b", 2, 8);
        const char *s;
        size_t len;
        CHECK(gguf_get_str(g, gguf_find_key(g, "general.architecture"), &s, &len, &e) == 0 && !strcmp(s, "qwen2vl"));
        gguf_close(g);
    }
    mm_lora_free(&l);
    /* a pair on the vision tower: llama.cpp cannot apply it */
    snprintf(ad, sizeof ad, "%s/ad2", dir);
    write_adapter(ad, "{\"r\": 2, \"lora_alpha\": 4}", "base_model.model.model.visual.blocks.0.attn.qkv.lora_A.weight");
    err_clear(&e);
    CHECK(mm_lora_load(ad, &b, &l, &e) != 0 && strstr(e.msg, "trains the vision tower"));
    snprintf(ad, sizeof ad, "%s/ad3", dir);
    write_adapter(ad, "{\"r\": 2, \"lora_alpha\": 4, \"use_dora\": true}", NULL);
    err_clear(&e);
    CHECK(mm_lora_load(ad, &b, &l, &e) != 0 && strstr(e.msg, "DoRA") && strstr(e.hint, "--merged"));
    snprintf(ad, sizeof ad, "%s/ad4", dir);
    write_adapter(ad, "{\"r\": 2, \"lora_alpha\": 4}", "base_model.model.model.language_model.layers.3.self_attn.q_proj.lora_A.weight");
    err_clear(&e);
    CHECK(mm_lora_load(ad, &b, &l, &e) != 0 && strstr(e.msg, "unexpected adapter tensor"));   /* layer 3 of 1 */
    mm_close(&b);
}

static void test_kinds(const char *dir)
{
    CHECK(mm_kind_of_arch("Qwen2VLForConditionalGeneration") == MM_QWEN2VL);
    CHECK(mm_kind_of_arch("PaliGemmaForConditionalGeneration") == MM_PALIGEMMA);
    CHECK(mm_kind_of_arch("Qwen2AudioForConditionalGeneration") == MM_QWEN2AUDIO);
    CHECK(mm_kind_of_arch("Qwen2ForCausalLM") == MM_NONE && mm_kind_of_arch(NULL) == MM_NONE);
    char pg[4200];
    snprintf(pg, sizeof pg, "%s/pg", dir);
    fs_mkdir_p(pg, NULL);
    put(pg, "config.json", "{\"model_type\": \"paligemma\"}");
    CHECK(mm_kind_of_dir(pg) == MM_PALIGEMMA);
    mm_base b;
    dlm_err e;
    err_clear(&e);
    CHECK(mm_open(pg, &b, &e) != 0 && strstr(e.msg, "cannot run PaliGemma") && strstr(e.hint, "hf-snapshot"));
    CHECK(mm_kind_of_dir("/nonexistent-dir") == MM_NONE);
}

int main(void)
{
    const char *dir = check_tmpdir("vlexp_gguf");
    CHECK(dir != NULL);
    if (!dir) return check_done();
    make_base(dir);
    test_mmproj(dir);
    test_adapter(dir);
    test_kinds(dir);
    return check_done();
}
