/* Unit tests for the importance matrix (src/export/imatrix.c) and the
 * importance-weighted quantizers (src/kern/quant_w.c):
 *
 *  - layer 0's q/k/v/gate/up importance equals Σ x² of rmsnorm(embedding)
 *    computed here in double from the fixture's own tensors, and every
 *    count is the token count (llama.cpp counts rows per weight);
 *  - chunking: max_chunks caps, a text shorter than a chunk is one chunk,
 *    each chunk's first token becomes BOS;
 *  - the same importance for 1 and 2 threads (bit-identical file);
 *  - the GGUF file: llama.cpp's keys and tensor names/shapes read back by
 *    the plain GGUF reader, a round trip, a count of 0 giving importance 1,
 *    and refusals (wrong general.type, unpaired or non-F32 tensors,
 *    non-finite values) with a message;
 *  - weighted quantizers: a NULL importance is the reference quantizer, and
 *    every K type's round trip stays within llama.cpp's error bound.
 *
 * Tool modes for tests/ref/r0505 and r0506:
 *   test_imatrix --quantize TYPE[,TYPE...] N_PER_ROW IN.f32 OUT [QW.f32]   rows of kern_quant_row_w
 *   test_imatrix --collect MODEL TOKENS.i32 CHUNK MAXCHUNKS BOS OUT.gguf [ADAPTER_DIR]
 *   test_imatrix --export MODEL QUANT IMATRIX.gguf|- OUT.gguf [ADAPTER_DIR]  (merged when given) */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "adapter/adapter.h"
#include "export/export_gguf.h"
#include "export/imatrix.h"
#include "kern/kern.h"
#include "tokens/tok_gguf.h"
#include "util/fs.h"
#include "util/hash.h"
#include "weights/gguf.h"

#define FIX DLM_SOURCE_DIR "/tests/ref/model/fixtures"

static const char *tmp(const char *name)
{
    static char buf[4][4096];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 4096, "%s/%s", check_tmpdir("test_imatrix"), name);
    return p;
}

static model *load(const char *path)
{
    model *m = NULL;
    dlm_err e;
    if (model_load(path, &m, &e)) fprintf(stderr, "load %s: %s\n", path, e.msg);
    return m;
}

static const float *entry(const imatrix *im, const char *name, int64_t *ncols, int64_t *nmat, const float **counts)
{
    for (int i = 0; i < imatrix_count(im); i++)
        if (!strcmp(imatrix_name(im, i), name)) {
            const float *s;
            imatrix_entry(im, i, ncols, nmat, &s, counts);
            return s;
        }
    return NULL;
}

/* ---- collecting --------------------------------------------------------------------------- */

static void test_layer0(void)
{
    model *m = load(FIX "/qwen2-f32");
    if (!m) { CHECK(0); return; }
    const int n = 40;
    int32_t toks[40];
    for (int i = 0; i < n; i++) toks[i] = (i * 37 + 11) % m->cfg.vocab;
    imatrix *im = NULL;
    dlm_err e;
    imatrix_opts o = {.chunk_size = 16, .max_chunks = 2, .bos = 3, .dataset = "unit"};
    CHECK_MSG(imatrix_collect(m, NULL, toks, n, &o, &im, &e) == 0, "%s", e.msg);
    if (!im) { model_free(m); return; }
    CHECK_INT(imatrix_chunks(im), 2);          /* 40 / 16 = 2 chunks, the 8 left over unused */
    CHECK_INT(imatrix_chunk_size(im), 16);
    /* 7 projections per layer, none for output.weight (llama-imatrix's default) */
    CHECK_INT(imatrix_count(im), 7 * m->cfg.n_layer);
    int C = m->cfg.d_model;
    double *want = calloc((size_t)C, sizeof *want);
    for (int c = 0; c < 2; c++)
        for (int t = 0; t < 16; t++) {
            int id = t == 0 ? 3 : toks[c * 16 + t];
            const float *x = (const float *)m->tok_embd.data + (size_t)id * C;   /* the F32 fixture */
            double ss = 0;
            for (int j = 0; j < C; j++) ss += (double)x[j] * x[j];
            double r = 1.0 / sqrt(ss / C + m->cfg.rms_eps);
            for (int j = 0; j < C; j++) {
                double v = x[j] * r * m->layers[0].attn_norm[j];
                want[j] += v * v;
            }
        }
    const char *names[] = {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"};
    for (int k = 0; k < 3; k++) {
        int64_t nc = 0, nm = 0;
        const float *cnt = NULL, *s = entry(im, names[k], &nc, &nm, &cnt);
        CHECK_MSG(s != NULL, "%s missing", names[k]);
        if (!s) continue;
        CHECK_INT(nc, C);
        CHECK_INT(nm, 1);
        CHECK_NEAR(cnt[0], 32, 0);
        for (int j = 0; j < C; j++) CHECK_NEAR(s[j], want[j], 2e-5 * want[j] + 1e-7);
        const float *qw = imatrix_weights(im, names[k], C, 1);
        CHECK(qw && fabsf(qw[5] - s[5] / 32.0f) == 0.0f);
        CHECK(imatrix_weights(im, names[k], C + 1, 1) == NULL);   /* another shape */
    }
    int64_t nc, nm;
    const float *cnt;
    CHECK(entry(im, "blk.0.ffn_down.weight", &nc, &nm, &cnt) && nc == m->cfg.n_ff && cnt[0] == 32.0f);
    CHECK(imatrix_weights(im, "output.weight", m->cfg.vocab, 1) == NULL);
    free(want);

    /* the same bits on 1 and 2 threads */
    const char *a = tmp("t2.gguf"), *b = tmp("t1.gguf");
    CHECK_MSG(imatrix_write(im, a, &e) == 0, "%s", e.msg);
    imatrix_free(im);
    kern_init(1);
    im = NULL;
    CHECK(imatrix_collect(m, NULL, toks, n, &o, &im, &e) == 0);
    if (im) CHECK(imatrix_write(im, b, &e) == 0);
    imatrix_free(im);
    kern_init(2);
    char *da = NULL, *db = NULL;
    size_t la = 0, lb = 0;
    CHECK(fs_read_all(a, 1 << 26, &da, &la, &e) == 0 && fs_read_all(b, 1 << 26, &db, &lb, &e) == 0);
    CHECK(da && db && la == lb && !memcmp(da, db, la));
    free(da);
    free(db);

    /* shorter than one chunk: one chunk of everything; no BOS */
    imatrix_opts s = {.chunk_size = 512, .bos = -1};
    im = NULL;
    CHECK(imatrix_collect(m, NULL, toks, 10, &s, &im, &e) == 0);
    if (im) {
        CHECK_INT(imatrix_chunks(im), 1);
        CHECK_INT(imatrix_chunk_size(im), 10);
        const float *c0;
        CHECK(entry(im, "blk.0.attn_q.weight", &nc, &nm, &c0) && c0[0] == 10.0f);
    }
    imatrix_free(im);
    CHECK(imatrix_collect(m, NULL, toks, 0, &s, &im, &e) == -1 && strstr(e.msg, "no calibration tokens"));
    model_free(m);
}

/* ---- the file ------------------------------------------------------------------------------- */

static void test_file(void)
{
    model *m = load(FIX "/qwen2-f32");
    if (!m) { CHECK(0); return; }
    int32_t toks[20];
    for (int i = 0; i < 20; i++) toks[i] = (i * 13 + 5) % m->cfg.vocab;
    imatrix *im = NULL;
    dlm_err e;
    imatrix_opts o = {.chunk_size = 20, .bos = -1, .dataset = "replay:abc"};
    CHECK(imatrix_collect(m, NULL, toks, 20, &o, &im, &e) == 0);
    model_free(m);
    if (!im) return;
    const char *p = tmp("im.gguf");
    CHECK(imatrix_write(im, p, &e) == 0);
    /* llama.cpp's layout, read with the plain GGUF reader */
    gguf_file *g = NULL;
    CHECK_MSG(gguf_open(p, &g, &e) == 0, "%s", e.msg);
    if (g) {
        const char *ty = NULL;
        CHECK(gguf_get_str(g, gguf_find_key(g, "general.type"), &ty, NULL, &e) == 0 && !strcmp(ty, "imatrix"));
        uint32_t v = 0;
        CHECK(gguf_get_u32(g, gguf_find_key(g, "imatrix.chunk_count"), &v, &e) == 0 && v == 1);
        CHECK(gguf_get_u32(g, gguf_find_key(g, "imatrix.chunk_size"), &v, &e) == 0 && v == 20);
        int id = gguf_find_key(g, "imatrix.datasets");
        size_t len = 0;
        CHECK(id >= 0 && gguf_arr_str(g, id, 0, &len) && !strcmp(gguf_arr_str(g, id, 0, &len), "replay:abc"));
        CHECK_INT(gguf_tensor_count(g), 2 * imatrix_count(im));
        const gguf_tensor *t = gguf_find_tensor(g, "blk.0.attn_q.weight.in_sum2");
        const gguf_tensor *c = gguf_find_tensor(g, "blk.0.attn_q.weight.counts");
        CHECK(t && t->type == 0 && t->n_dims == 2 && t->ne[1] == 1);
        CHECK(c && c->type == 0 && c->n_dims == 2 && c->ne[0] == 1 && c->ne[1] == 1 && ((const float *)c->data)[0] == 20.0f);
        /* name order, as llama-imatrix sorts */
        for (int i = 2; i < gguf_tensor_count(g); i += 2)
            CHECK(strcmp(gguf_tensor_at(g, i - 2)->name, gguf_tensor_at(g, i)->name) < 0);
        gguf_close(g);
    }
    imatrix *r = NULL;
    CHECK_MSG(imatrix_read(p, &r, &e) == 0, "%s", e.msg);
    if (r) {
        CHECK_INT(imatrix_count(r), imatrix_count(im));
        CHECK_INT(imatrix_chunks(r), 1);
        for (int i = 0; i < imatrix_count(r); i++) {
            int64_t a0, a1, b0, b1;
            const float *sa, *ca, *sb, *cb;
            imatrix_entry(im, i, &a0, &a1, &sa, &ca);
            imatrix_entry(r, i, &b0, &b1, &sb, &cb);
            CHECK(!strcmp(imatrix_name(im, i), imatrix_name(r, i)) && a0 == b0 && a1 == b1 &&
                  !memcmp(sa, sb, (size_t)(a0 * a1) * 4) && ca[0] == cb[0]);
        }
    }
    imatrix_free(r);
    imatrix_free(im);
}

static int write_pairs(const char *p, const char *type, int f16_counts, float count, float val, int unpaired)
{
    gguf_w *w = gguf_w_new();
    gguf_w_str(w, "general.type", type);
    gguf_w_u32(w, "imatrix.chunk_count", 1);
    static float s[2][64];
    static uint16_t h[2];
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < 64; j++) s[k][j] = j == 7 ? val : (float)(j + 1);
    float cnt[2] = {count, 4};
    int64_t ns[2] = {32, 2}, nc[2] = {1, 2};
    gguf_w_tensor(w, "blk.0.ffn_up_exps.weight.in_sum2", 0, 2, ns, s, NULL, NULL);
    if (f16_counts) gguf_w_tensor(w, "blk.0.ffn_up_exps.weight.counts", 1, 2, nc, h, NULL, NULL);
    else if (!unpaired) gguf_w_tensor(w, "blk.0.ffn_up_exps.weight.counts", 0, 2, nc, cnt, NULL, NULL);
    dlm_err e;
    int rc = gguf_w_write(w, p, &e);
    gguf_w_free(w);
    return rc;
}

static void test_refusals(void)
{
    const char *p = tmp("bad.gguf");
    imatrix *im = NULL;
    dlm_err e;
    /* two experts, one never routed to: importance 1 there (tools/quantize) */
    CHECK(write_pairs(p, "imatrix", 0, 0.0f, 8.0f, 0) == 0);
    CHECK_MSG(imatrix_read(p, &im, &e) == 0, "%s", e.msg);
    if (im) {
        const float *qw = imatrix_weights(im, "blk.0.ffn_up_exps.weight", 32, 2);
        CHECK(qw && qw[0] == 1.0f && qw[7] == 1.0f && qw[32] == 33.0f / 4.0f);
        CHECK(imatrix_weights(im, "blk.0.ffn_up_exps.weight", 32, 1) == NULL);
    }
    imatrix_free(im);
    struct { const char *type; int f16, unpaired; float val; const char *msg; } bad[] = {
        {"model", 0, 0, 1.0f, "not an imatrix file"},
        {"imatrix", 1, 0, 1.0f, "must be F32"},
        {"imatrix", 0, 1, 1.0f, "no matching .counts"},
        {"imatrix", 0, 0, NAN, "non-finite"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        CHECK(write_pairs(p, bad[k].type, bad[k].f16, 2.0f, bad[k].val, bad[k].unpaired) == 0);
        im = NULL;
        CHECK_MSG(imatrix_read(p, &im, &e) == -1 && strstr(e.msg, bad[k].msg), "case %zu: %s", k, im ? "accepted" : e.msg);
        imatrix_free(im);
    }
    CHECK(imatrix_parse("GGUF", 4, "x", &im, &e) == -1);
}

/* ---- weighted quantizers ------------------------------------------------------------------------ */

static void test_quant_w(void)
{
    enum { N = 4096 };
    static float x[N], y[N], qw[N];
    static uint8_t a[N * 2], b[N * 2];
    for (int i = 0; i < N; i++) {
        x[i] = 0.1f + 2 * cosf((float)i);
        qw[i] = 0.5f + (float)((i * 7919) % 101) / 25.0f;
    }
    const dtype T[] = {DT_Q4_0, DT_Q4_1, DT_Q5_0, DT_Q5_1, DT_Q4_K, DT_Q5_K, DT_Q6_K, DT_Q8_0};
    for (size_t k = 0; k < sizeof T / sizeof T[0]; k++) {
        size_t nb = dtype_row_bytes(T[k], N);
        CHECK(kern_quant_row_w(T[k], x, a, N, qw) == nb);
        kern_dequant_row(T[k], a, y, N);
        double s = 0;
        for (int i = 0; i < N; i++) s += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
        CHECK_MSG(sqrt(s) / N < 0.002, "%s %.6f", dtype_name(T[k]), sqrt(s) / N);
        if (T[k] != DT_Q4_1 && T[k] != DT_Q5_1) {   /* kern has no plain Q4_1/Q5_1 (export/quant_mix.c) */
            CHECK(kern_quant_row_w(T[k], x, a, N, NULL) == nb && kern_quant_row(T[k], x, b, N) == nb && !memcmp(a, b, nb));
        }
    }
    CHECK(export_quant_row_w(DT_Q4_1, x, a, N, NULL) == dtype_row_bytes(DT_Q4_1, N));
    CHECK(kern_quant_row_w(DT_Q4_K, x, a, 100, qw) == 0);   /* not a whole block */
}

/* ---- tool modes ------------------------------------------------------------------------------------- */

static void *slurp(const char *p, size_t *len)
{
    char *d = NULL;
    dlm_err e;
    if (fs_read_all(p, (size_t)1 << 31, &d, len, &e)) fprintf(stderr, "%s\n", e.msg);
    return d;
}

/* TYPES is one type, or several "Q4_0,Q4_K,...": then OUT.<TYPE> each
 * (one process for every type: the ASan suite starts fewer). */
static int tool_quantize(char **argv, int argc)
{
    int64_t npr = atoll(argv[3]);
    size_t len = 0, ql = 0;
    float *x = slurp(argv[4], &len), *qw = argc > 6 ? slurp(argv[6], &ql) : NULL;
    if (!x || npr <= 0 || (argc > 6 && (!qw || ql != (size_t)npr * 4))) return 2;
    int64_t rows = (int64_t)(len / 4) / npr;
    int many = strchr(argv[2], ',') != NULL, rc = 0;
    char types[256];
    snprintf(types, sizeof types, "%s", argv[2]);
    for (char *save = NULL, *name = strtok_r(types, ",", &save); name && !rc; name = strtok_r(NULL, ",", &save)) {
        dtype t;
        if (dtype_from_name(name, &t)) return 2;
        size_t rb = dtype_row_bytes(t, npr);
        uint8_t *q = malloc(rb * (size_t)rows + 1);
        for (int64_t r = 0; r < rows && !rc; r++)
            if (export_quant_row_w(t, x + r * npr, q + (size_t)r * rb, npr, qw) != rb) rc = 3;
        char out[4200];
        snprintf(out, sizeof out, many ? "%s.%s" : "%s", argv[5], name);
        dlm_err e;
        if (!rc && fs_write_atomic(out, q, rb * (size_t)rows, 0644, &e)) rc = 1;
        free(q);
    }
    free(x);
    free(qw);
    return rc;
}

static int tool_collect(char **argv, int argc)
{
    model *m = load(argv[2]);
    size_t len = 0;
    int32_t *toks = slurp(argv[3], &len);
    lora *l = NULL;
    dlm_err e;
    if (!m || !toks) return 2;
    if (argc > 8 && adapter_load(argv[8], m, &l, &e)) { fprintf(stderr, "%s\n", e.msg); return 2; }
    kern_init(0);
    imatrix_opts o = {.chunk_size = atoi(argv[4]), .max_chunks = atoi(argv[5]), .bos = atoi(argv[6]), .dataset = "test"};
    imatrix *im = NULL;
    int rc = imatrix_collect(m, l, toks, len / 4, &o, &im, &e) || imatrix_write(im, argv[7], &e);
    if (rc) fprintf(stderr, "%s\n", e.msg);
    imatrix_free(im);
    lora_free(l);
    free(toks);
    model_free(m);
    return rc;
}

static int tool_export(char **argv, int argc)
{
    model *m = load(argv[2]);
    tok *t = NULL;
    lora *l = NULL;
    imatrix *im = NULL;
    dlm_err e;
    const char *pre;
    if (!m || tok_load_for_model(argv[2], &t, &e) || export_pre_name(t, NULL, &pre, &e) ||
        (strcmp(argv[4], "-") && imatrix_read(argv[4], &im, &e)) || (argc > 6 && adapter_load(argv[6], m, &l, &e))) {
        fprintf(stderr, "%s\n", m ? e.msg : "no model");
        return 2;
    }
    kern_init(0);
    export_gguf_opts o = {.mix = export_mix_find(argv[3]), .merge = l, .name = "test", .pre = pre, .chat_template = 1,
                          .add_bos = -1, .add_eos = -1, .imatrix = im};
    export_special_flags(m->source, t, m->cfg.vocab, &o.add_bos, &o.add_eos);
    export_gguf_info info;
    int rc = !o.mix || export_write_model(m, t, &o, argv[5], &info, &e);
    if (rc) fprintf(stderr, "export: %s\n", o.mix ? e.msg : "unknown mix");
    else printf("%d tensors used the imatrix\n", info.n_imatrix);
    imatrix_free(im);
    lora_free(l);
    tok_free(t);
    model_free(m);
    return rc;
}

int main(int argc, char **argv)
{
    hash_init();
    if (argc >= 6 && !strcmp(argv[1], "--quantize")) return tool_quantize(argv, argc);
    if (argc >= 8 && !strcmp(argv[1], "--collect")) return tool_collect(argv, argc);
    if (argc >= 6 && !strcmp(argv[1], "--export")) return tool_export(argv, argc);
    kern_init(2);
    test_layer0();
    test_file();
    test_refusals();
    test_quant_w();
    return check_done();
}
