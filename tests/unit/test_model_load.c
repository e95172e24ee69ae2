/* model_load: HF folder vs GGUF of the same model give the same config and
 * the same weights, and bad models are refused with clear errors.
 *
 *   test_model_load                 the committed fixtures (tests/ref/model/
 *                                   fixtures, made by tests/ref/make_model.py)
 *                                   plus malformed variants built from them
 *   test_model_load HF_DIR GGUF     compare one pair (tests/ref/r0202 runs
 *                                   this on freshly generated models)
 *   test_model_load --pattern GGUF TYPE   quantized types (see pattern())
 *
 * The HF and GGUF files are written by two independent Python writers (one
 * per format, the GGUF one applying llama's Q/K permutation), so agreement
 * after dequantizing both sides checks the readers, the name mapping and the
 * un-permutation. Dequantization here is this file's own (F16/BF16/Q8_0). */
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "weights/gguf.h"
#include "weights/model.h"
#include "weights/safetensors.h"
#include "util/fs.h"
#include "util/hash.h"

static dlm_err E;

/* ---- private dequantization -------------------------------------------------- */

static float half_to_f32(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
    float v;
    if (exp == 0) v = ldexpf((float)man, -24);
    else if (exp == 31) v = man ? NAN : INFINITY;
    else v = ldexpf((float)(man + 1024), exp - 25);
    return sign ? -v : v;
}

static float bf16_to_f32_(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Row r of w as f32 into out[cols]. Returns 0, or -1 for a type this test
 * cannot decode. */
static int deq_row(const wmat *w, int64_t r, float *out)
{
    const unsigned char *p = (const unsigned char *)w->data + (size_t)r * w->row_bytes;
    for (int64_t i = 0; i < w->cols; i++) {
        uint16_t h;
        switch (w->type) {
        case DT_F32: memcpy(&out[i], p + 4 * i, 4); break;
        case DT_F16: memcpy(&h, p + 2 * i, 2); out[i] = half_to_f32(h); break;
        case DT_BF16: memcpy(&h, p + 2 * i, 2); out[i] = bf16_to_f32_(h); break;
        case DT_Q8_0: {
            const unsigned char *b = p + (i / 32) * 34;
            memcpy(&h, b, 2);
            out[i] = half_to_f32(h) * (float)(int8_t)b[2 + i % 32];
            break;
        }
        default: return -1;
        }
    }
    return 0;
}

static float *deq(const wmat *w)
{
    float *v = malloc((size_t)(w->rows * w->cols) * sizeof *v);
    for (int64_t r = 0; r < w->rows; r++)
        if (deq_row(w, r, v + r * w->cols)) { free(v); return NULL; }
    return v;
}

/* Tolerance of a GGUF weight of type gt made from an HF weight of type ht. */
static double tol_for(dtype gt, dtype ht)
{
    if (gt == DT_F32 || gt == ht) return 0;         /* exact */
    if (gt == DT_BF16) return 1.0 / 128;
    if (gt == DT_F16) return 2e-3;
    return 1.0 / 127 * 0.55 + 1e-3;                 /* Q8_0: half a step of amax/127 */
}

static int cmp_mat(const char *what, int il, const wmat *h, const wmat *g)
{
    char label[128];
    snprintf(label, sizeof label, "%s[%d]", what, il);
    CHECK_MSG(h->rows == g->rows && h->cols == g->cols, "%s: shape %lldx%lld vs %lldx%lld", label,
              (long long)h->rows, (long long)h->cols, (long long)g->rows, (long long)g->cols);
    if (h->rows != g->rows || h->cols != g->cols) return 0;
    float *a = deq(h), *b = deq(g);
    CHECK_MSG(a && b, "%s: cannot dequantize %s / %s", label, dtype_name(h->type), dtype_name(g->type));
    int ok = 0;
    if (a && b) {
        double tol = tol_for(g->type, h->type);
        if (tol == 0) {
            ok = !memcmp(a, b, (size_t)(h->rows * h->cols) * sizeof *a);
            CHECK_MSG(ok, "%s: not bit-identical (%s vs %s)", label, dtype_name(h->type), dtype_name(g->type));
        } else {
            /* per row, relative to the row's max |x| (Q8_0 blocks are per row) */
            ok = 1;
            for (int64_t r = 0; r < h->rows && ok; r++) {
                double mx = 0, md = 0;
                for (int64_t c = 0; c < h->cols; c++) {
                    double x = a[r * h->cols + c], d = fabs(x - b[r * h->cols + c]);
                    if (fabs(x) > mx) mx = fabs(x);
                    if (d > md) md = d;
                }
                ok = md <= tol * mx + 1e-7;
                CHECK_MSG(ok, "%s row %lld: max diff %g > %g * max %g", label, (long long)r, md, tol, mx);
            }
        }
    }
    free(a);
    free(b);
    return ok;
}

static void cmp_vec(const char *what, int il, const float *a, const float *b, int n)
{
    CHECK_MSG((a == NULL) == (b == NULL), "%s[%d]: present in one model only", what, il);
    if (a && b) CHECK_MSG(!memcmp(a, b, (size_t)n * sizeof *a), "%s[%d]: differs", what, il);
}

/* Load both, compare config and every weight. */
static void compare(const char *hf_dir, const char *gguf_path)
{
    model *h = NULL, *g = NULL;
    CHECK_MSG(model_load(hf_dir, &h, &E) == 0, "load %s: %s", hf_dir, E.msg);
    CHECK_MSG(model_load(gguf_path, &g, &E) == 0, "load %s: %s", gguf_path, E.msg);
    if (!h || !g) { model_free(h); model_free(g); return; }
    const model_config *a = &h->cfg, *b = &g->cfg;
    CHECK_INT(h->from_gguf, 0);
    CHECK_INT(g->from_gguf, 1);
    CHECK_INT(b->arch, a->arch);
    CHECK_INT(b->n_layer, a->n_layer);
    CHECK_INT(b->d_model, a->d_model);
    CHECK_INT(b->n_ff, a->n_ff);
    CHECK_INT(b->n_head, a->n_head);
    CHECK_INT(b->n_kv_head, a->n_kv_head);
    CHECK_INT(b->head_dim, a->head_dim);
    CHECK_INT(b->vocab, a->vocab);
    CHECK_INT(b->max_pos, a->max_pos);
    CHECK(b->rms_eps == a->rms_eps);
    CHECK(b->rope_theta == a->rope_theta);
    CHECK_INT(b->tied, a->tied);
    CHECK_INT(b->qkv_bias, a->qkv_bias);
    CHECK_INT(b->bos_id, a->bos_id);
    CHECK_INT(b->eos_id, a->eos_id);
    CHECK_INT(b->rope_llama3, a->rope_llama3);
    if (a->rope_llama3) CHECK_NEAR(b->rope_factor, a->rope_factor, 1e-6);
    for (int i = 0; i < a->head_dim / 2; i++)
        CHECK_NEAR(g->rope_inv_freq[i], h->rope_inv_freq[i], 2e-7 * h->rope_inv_freq[i]);

    cmp_mat("tok_embd", 0, &h->tok_embd, &g->tok_embd);
    cmp_mat("output", 0, &h->output, &g->output);
    if (a->tied) {
        CHECK(h->output.data == h->tok_embd.data);
        CHECK(g->output.data == g->tok_embd.data);
    }
    cmp_vec("out_norm", 0, h->out_norm, g->out_norm, a->d_model);
    int QD = a->n_head * a->head_dim, KD = a->n_kv_head * a->head_dim;
    for (int il = 0; il < a->n_layer; il++) {
        const layer_weights *x = &h->layers[il], *y = &g->layers[il];
        cmp_vec("attn_norm", il, x->attn_norm, y->attn_norm, a->d_model);
        cmp_vec("ffn_norm", il, x->ffn_norm, y->ffn_norm, a->d_model);
        cmp_mat("wq", il, &x->wq, &y->wq);
        cmp_mat("wk", il, &x->wk, &y->wk);
        cmp_mat("wv", il, &x->wv, &y->wv);
        cmp_mat("wo", il, &x->wo, &y->wo);
        cmp_mat("w_gate", il, &x->w_gate, &y->w_gate);
        cmp_mat("w_up", il, &x->w_up, &y->w_up);
        cmp_mat("w_down", il, &x->w_down, &y->w_down);
        cmp_vec("bq", il, x->bq, y->bq, QD);
        cmp_vec("bk", il, x->bk, y->bk, KD);
        cmp_vec("bv", il, x->bv, y->bv, KD);
    }
    /* enumeration: every HF tensor maps to a GGUF tensor of the same shape */
    for (int i = 0; i < model_tensor_count(h); i++) {
        const model_tensor *t = model_tensor_at(h, i);
        CHECK_MSG(t->gguf_name[0], "no GGUF name for '%s'", t->name);
        const model_tensor *u = NULL;
        for (int j = 0; j < model_tensor_count(g); j++)
            if (!strcmp(model_tensor_at(g, j)->name, t->gguf_name)) u = model_tensor_at(g, j);
        CHECK_MSG(u != NULL, "'%s' (%s) not in the GGUF", t->name, t->gguf_name);
        if (u) {
            CHECK_STR(u->hf_name, t->name);
            CHECK(u->n_dims == t->n_dims && !memcmp(u->ne, t->ne, sizeof u->ne));
        }
    }
    int extra = model_tensor_count(g) - model_tensor_count(h);
    CHECK_INT(extra, b->rope_custom ? 1 : 0);   /* only rope_freqs.weight has no HF twin */
    model_free(h);
    model_free(g);
}

/* ---- quantized types: pattern blocks ------------------------------------------------
 * make_model.py --gguf-type q4_0..q6_k fills HF row r of every weight with
 * bytes (7r + j) & 0xff (then permutes llama Q/K rows). Loading must keep
 * the type and row size, point into the file, and restore the HF row order. */
static void check_pattern(const char *what, int il, const wmat *w, dtype want)
{
    CHECK_MSG(w->type == want, "%s[%d]: type %s, expected %s", what, il, dtype_name(w->type), dtype_name(want));
    CHECK_MSG(w->row_bytes == dtype_row_bytes(want, w->cols), "%s[%d]: row_bytes %zu", what, il, w->row_bytes);
    int bad = 0;
    for (int64_t r = 0; r < w->rows && !bad; r++) {
        const unsigned char *p = (const unsigned char *)w->data + (size_t)r * w->row_bytes;
        for (size_t j = 0; j < w->row_bytes && !bad; j++)
            bad = p[j] != (unsigned char)((7 * r + (int64_t)j) & 0xff);
    }
    CHECK_MSG(!bad, "%s[%d]: rows out of order or altered", what, il);
}

static void pattern(const char *gguf_path, const char *type)
{
    dtype want;
    CHECK_MSG(dtype_from_name(type, &want) == 0, "unknown type %s", type);
    model *m = NULL;
    CHECK_MSG(model_load(gguf_path, &m, &E) == 0, "load %s: %s", gguf_path, E.msg);
    if (!m) return;
    check_pattern("tok_embd", 0, &m->tok_embd, want);
    if (!m->cfg.tied) check_pattern("output", 0, &m->output, want);
    for (int il = 0; il < m->cfg.n_layer; il++) {
        const layer_weights *w = &m->layers[il];
        check_pattern("wq", il, &w->wq, want);
        check_pattern("wk", il, &w->wk, want);
        check_pattern("wv", il, &w->wv, want);
        check_pattern("wo", il, &w->wo, want);
        check_pattern("w_gate", il, &w->w_gate, want);
        check_pattern("w_up", il, &w->w_up, want);
        check_pattern("w_down", il, &w->w_down, want);
    }
    model_free(m);
}

/* ---- malformed variants ----------------------------------------------------------- */

#define FIX "tests/ref/model/fixtures"

static void copy_dir(const char *from, const char *to)
{
    char **names;
    int n = fs_list_dir(from, &names, &E);
    fs_mkdir_p(to, &E);
    char a[4096], b[4096];
    for (int i = 0; i < n; i++) {
        fs_join(a, sizeof a, from, names[i]);
        fs_join(b, sizeof b, to, names[i]);
        fs_copy_file(a, b, &E);
    }
    fs_free_list(names, n);
}

static void expect_fail(const char *path, const char *want)
{
    model *m = NULL;
    err_clear(&E);
    int r = model_load(path, &m, &E);
    CHECK_MSG(r == -1 && m == NULL, "loaded %s (want '%s')", path, want);
    CHECK_MSG(strstr(E.msg, want) != NULL, "'%s' lacks '%s'", E.msg, want);
    model_free(m);
}

/* Rewrite dir/model.safetensors from src with one tensor changed. mode:
 * 0 drop it, 1 wrong shape, 2 dtype I8. */
static void rewrite(const char *dir, const st_file *src, const char *victim, int mode)
{
    int n = st_count(src), k = 0;
    st_out *o = calloc((size_t)n, sizeof *o);
    for (int i = 0; i < n; i++) {
        const st_tensor *t = st_at(src, i);
        if (!strcmp(t->name, victim) && mode == 0) continue;
        o[k].name = t->name;
        o[k].dtype = t->dtype;
        o[k].ndim = t->ndim;
        memcpy(o[k].shape, t->shape, sizeof o[k].shape);
        o[k].data = t->data;
        if (!strcmp(t->name, victim) && mode == 1) o[k].shape[0] /= 2;
        if (!strcmp(t->name, victim) && mode == 2) { o[k].dtype = ST_I8; o[k].shape[1] *= 2; }
        k++;
    }
    char p[4096];
    fs_join(p, sizeof p, dir, "model.safetensors");
    CHECK_INT(st_write(p, o, k, NULL, &E), 0);
    free(o);
}

static void test_hf_malformed(void)
{
    const char *dir = check_tmpdir("test_model_load_hf");
    copy_dir(FIX "/llama-bf16", dir);
    char p[4096];
    fs_join(p, sizeof p, dir, "model.safetensors");
    st_file *src;
    if (st_open(FIX "/llama-bf16/model.safetensors", &src, &E)) { CHECK_MSG(0, "%s", E.msg); return; }
    rewrite(dir, src, "model.layers.1.mlp.up_proj.weight", 0);
    expect_fail(dir, "missing tensor 'model.layers.1.mlp.up_proj.weight'");
    rewrite(dir, src, "model.layers.1.mlp.up_proj.weight", 1);
    expect_fail(dir, "tensor 'model.layers.1.mlp.up_proj.weight' has shape [32, 32], expected [64, 32]");
    rewrite(dir, src, "model.layers.0.self_attn.k_proj.weight", 2);
    expect_fail(dir, "has type I8");
    rewrite(dir, src, "none", 0);
    model *m = NULL;
    CHECK_MSG(model_load(dir, &m, &E) == 0, "%s", E.msg);
    model_free(m);
    /* untied config without lm_head */
    char cfgp[4096], *txt;
    size_t len;
    fs_join(cfgp, sizeof cfgp, dir, "config.json");
    fs_read_all(cfgp, 1 << 20, &txt, &len, &E);
    char *t = strstr(txt, "\"tie_word_embeddings\": true");
    CHECK(t != NULL);
    if (t) {
        memcpy(t, "\"tie_word_embeddings\":false", 27);
        fs_write_atomic(cfgp, txt, len, 0644, &E);
        expect_fail(dir, "lm_head.weight");
        memcpy(t, "\"tie_word_embeddings\": true", 27);
        fs_write_atomic(cfgp, txt, len, 0644, &E);
    }
    /* config disagreeing with the weights */
    t = strstr(txt, "\"hidden_size\": 32");
    CHECK(t != NULL);
    if (t) {
        memcpy(t, "\"hidden_size\": 64", 17);
        fs_write_atomic(cfgp, txt, len, 0644, &E);
        expect_fail(dir, "'model.embed_tokens.weight' has shape [320, 32], expected [320, 64]");
        memcpy(t, "\"hidden_size\": 32", 17);
        fs_write_atomic(cfgp, txt, len, 0644, &E);
    }
    free(txt);
    /* truncated weights */
    fs_read_all(p, 1 << 24, &txt, &len, &E);
    fs_write_atomic(p, txt, len / 2, 0644, &E);
    expect_fail(dir, "truncated");
    free(txt);
    st_close(src);
    /* not a model */
    expect_fail(p, "weights file");
    fs_remove_tree(p, &E);
    expect_fail(dir, "neither model.safetensors");
    fs_remove_tree(cfgp, &E);
    expect_fail(dir, "no config.json");
    expect_fail("/nonexistent/model.gguf", "does not exist");
}

/* Offset of the tensor info for name in a GGUF image (just past the name). */
static size_t find_info(const unsigned char *b, size_t n, const char *name)
{
    size_t L = strlen(name);
    for (size_t i = 8; i + L < n; i++)
        if (b[i - 8] == L && !memcmp(b + i, name, L) && b[i - 7] == 0) return i + L;
    return 0;
}

static void test_gguf_malformed(void)
{
    const char *dir = check_tmpdir("test_model_load_gguf");
    char p[4096], *img;
    size_t n;
    fs_join(p, sizeof p, dir, "m.gguf");
    if (fs_read_all(FIX "/llama-bf16.q8_0.gguf", 1 << 24, &img, &n, &E)) { CHECK_MSG(0, "%s", E.msg); return; }
    unsigned char *b = (unsigned char *)img;
    /* type of blk.0.attn_q.weight Q8_0 -> IQ4_NL (smaller, still in range; dlm has no IQ kernels) */
    size_t q = find_info(b, n, "blk.0.attn_q.weight");
    CHECK(q != 0);
    size_t type_at = q + 4 + 2 * 8;
    CHECK_INT(b[type_at], 8);
    b[type_at] = 20;
    fs_write_atomic(p, b, n, 0644, &E);
    expect_fail(p, "tensor 'blk.0.attn_q.weight' has type IQ4_NL");
    b[type_at] = 8;
    /* ne[1] of blk.1.ffn_up.weight 64 -> 32 */
    size_t u = find_info(b, n, "blk.1.ffn_up.weight");
    CHECK(u != 0 && b[u + 4 + 8] == 64);
    b[u + 4 + 8] = 32;
    fs_write_atomic(p, b, n, 0644, &E);
    expect_fail(p, "tensor 'blk.1.ffn_up.weight' has shape ne [32, 32], expected ne [32, 64]");
    b[u + 4 + 8] = 64;
    /* an architecture dlm does not know */
    char *arch = memmem(img, n, "llama", 5);
    CHECK(arch != NULL);
    if (arch) {
        memcpy(arch, "mamba", 5);
        fs_write_atomic(p, b, n, 0644, &E);
        expect_fail(p, "unsupported GGUF architecture 'mamba'");
        memcpy(arch, "llama", 5);
    }
    /* truncated */
    fs_write_atomic(p, b, n - 100, 0644, &E);
    expect_fail(p, "past the end");
    fs_write_atomic(p, b, 20, 0644, &E);
    expect_fail(p, "truncated");
    /* restored: loads; Q8_0 stays Q8_0 and Q/K are owned (un-permuted) */
    fs_write_atomic(p, b, n, 0644, &E);
    model *m = NULL;
    CHECK_MSG(model_load(p, &m, &E) == 0, "%s", E.msg);
    if (m) {
        CHECK_INT(m->layers[0].wq.type, DT_Q8_0);
        CHECK_INT(m->layers[0].wq.row_bytes, 34);
        CHECK_INT(m->layers[0].w_up.type, DT_Q8_0);
        const model_tensor *t = NULL;
        for (int i = 0; i < model_tensor_count(m); i++)
            if (!strcmp(model_tensor_at(m, i)->name, "blk.0.ffn_up.weight")) t = model_tensor_at(m, i);
        CHECK(t && t->data == m->layers[0].w_up.data);      /* in the mapping, not copied */
        CHECK(t && !strcmp(t->hf_name, "model.layers.0.mlp.up_proj.weight"));
        for (int i = 0; i < model_tensor_count(m); i++)
            if (!strcmp(model_tensor_at(m, i)->name, "blk.0.attn_q.weight")) t = model_tensor_at(m, i);
        CHECK(t && t->data != m->layers[0].wq.data);        /* un-permuted copy */
        CHECK_INT(m->cfg.rope_custom, 1);
        model_free(m);
    }
    free(img);
}

static void test_names(void)
{
    char b[256];
    CHECK_INT(model_name_to_gguf("model.layers.12.self_attn.k_proj.bias", b, sizeof b), 0);
    CHECK_STR(b, "blk.12.attn_k.bias");
    CHECK_INT(model_name_to_hf("blk.0.ffn_down.weight", b, sizeof b), 0);
    CHECK_STR(b, "model.layers.0.mlp.down_proj.weight");
    CHECK_INT(model_name_to_hf("output.weight", b, sizeof b), 0);
    CHECK_STR(b, "lm_head.weight");
    CHECK_INT(model_name_to_hf("rope_freqs.weight", b, sizeof b), -1);
    CHECK_INT(model_name_to_gguf("model.layers.x.mlp.up_proj.weight", b, sizeof b), -1);
    CHECK_INT(model_name_to_gguf("model.layers.01.mlp.up_proj.weight", b, sizeof b), -1);
    CHECK_INT(model_name_to_gguf("model.layers.1.mlp.up_proj.weightx", b, sizeof b), -1);
}

int main(int argc, char **argv)
{
    hash_init();
    if (argc == 4 && !strcmp(argv[1], "--pattern")) {
        pattern(argv[2], argv[3]);
        return check_done();
    }
    if (argc == 3) {
        compare(argv[1], argv[2]);
        return check_done();
    }
    test_names();
    compare(FIX "/llama-bf16", FIX "/llama-bf16.q8_0.gguf");
    compare(FIX "/qwen2-f32", FIX "/qwen2-f32.f16.gguf");
    compare(FIX "/llama-bf16/config.json", FIX "/llama-bf16.q8_0.gguf");
    test_hf_malformed();
    test_gguf_malformed();
    return check_done();
}
