/* The multimodal splice of the decoder (tokens/batch.h, decoder.h,
 * session.h) on the committed qwen2 fixture:
 *  - rows spliced from embeds equal to the token table's rows give the
 *    text pass's logits and LoRA gradients bit for bit, whatever the token
 *    id at those rows (so the id is not read);
 *  - full training: no gradient reaches the embedding row of a token that
 *    only appears at spliced rows (the towers are frozen);
 *  - M-RoPE with three equal streams gives the 1-D pass's bits;
 *  - a KV-cache session fed a spliced prompt (M-RoPE positions from
 *    qwen2vl_rope_index, in batches that cut the image run) and then
 *    generated tokens (the session's delta) gives the training forward's
 *    logits over the whole sequence;
 *  - a kv_pool (the server's batching) feeding the same spliced prompt in
 *    two steps beside a text sequence, then decode steps, gives the
 *    session's logits (to rounding: the pool's rows go through the GEMM);
 *  - decoder_batch_check refuses a prefix-LM block longer than its rows, pos3 on a 1-D model,
 *    spliced rows past the embeddings.
 * The whole model against transformers' Qwen2VLForConditionalGeneration is
 * tests/ref/r1601-slow-qwen2vl-hf.sh. */
#include "check.h"

#include <stdlib.h>
#include <string.h>

#include "decoder/decoder.h"
#include "decoder/kvpool.h"
#include "decoder/session.h"
#include "grad/backward.h"
#include "grad/full.h"
#include "kern/kern.h"
#include "util/rng.h"
#include "vision/mrope.h"
#include "weights/model.h"

#define FIX "tests/ref/model/fixtures/qwen2-f32"
enum { B = 2, T = 10, N = B * T };

static model *load(void)
{
    dlm_err e;
    model *m = NULL;
    if (model_load(FIX, &m, &e)) {
        fprintf(stderr, "load: %s\n", e.msg);
        exit(1);
    }
    return m;
}

static lora *make_lora(const model *m)
{
    lora_config lc = {4, 8.0f, 0.0f, LM_ALL, 0};
    lora *l;
    dlm_err e;
    if (lora_create(&m->cfg, &lc, &l, &e) || lora_init(l, m, 9, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    for (int i = 0; i < l->n_layer * LM_COUNT; i++) {
        lora_mod *md = &l->mods[i];
        for (size_t j = 0; j < (size_t)md->out * 4; j++)
            l->w[md->off_b + j] = 0.05f * rng_normal(9, 77, (uint64_t)i, j);
    }
    return l;
}

static decoder *dec(const model *m, const lora *l, int full)
{
    decoder_opts o = {.B = B, .T = T, .full = full, .logit_rows = 7};
    decoder *d;
    dlm_err e;
    if (decoder_create(m, l, &o, &d, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    return d;
}

typedef struct rows { int32_t tok[N], tgt[N], pos[N], row[N], pos3[3 * N]; float emb[N * 64]; } rows;

/* tokens avoid id 7; rows 2..5 of each sequence are spliced with their
 * token's table row (and get id 7 in the spliced batch) */
static void make_rows(rows *r, const model *m, token_batch *text, token_batch *spl)
{
    int V = m->cfg.vocab, C = m->cfg.d_model, ne = 0;
    for (int i = 0; i < N; i++) {
        r->tok[i] = 8 + (int32_t)(rng_u64(3, 99, 0, (uint64_t)i) % (uint64_t)(V - 8));
        r->tgt[i] = i % 5 == 4 ? -1 : (int32_t)(rng_u64(3, 99, 1, (uint64_t)i) % (uint64_t)V);
        r->pos[i] = i % T;
        r->row[i] = -1;
    }
    *text = (token_batch){.B = B, .T = T, .tokens = r->tok, .targets = r->tgt, .pos = r->pos};
    static int32_t stok[N];
    memcpy(stok, r->tok, sizeof stok);
    for (int i = 0; i < N; i++)
        if (i % T >= 2 && i % T <= 5) {
            const wmat *E = &m->tok_embd;
            kern_dequant_row(E->type, (const char *)E->data + (size_t)r->tok[i] * E->row_bytes, r->emb + ne * C, C);
            r->row[i] = ne++;
            stok[i] = 7;
        }
    *spl = *text;
    spl->tokens = stok;
    spl->embeds = r->emb;
    spl->embed_row = r->row;
    spl->n_embeds = ne;
}

static void test_splice_identity(void)
{
    model *m = load();
    lora *l = make_lora(m);
    rows r;
    token_batch tb, sb;
    make_rows(&r, m, &tb, &sb);
    dlm_err e;
    CHECK_INT(decoder_batch_check(&m->cfg, &sb, &e), 0);
    size_t V = (size_t)m->cfg.vocab;
    float *l0 = calloc(N * V, 4), *l1 = calloc(N * V, 4), *g0 = calloc(l->n, 4), *g1 = calloc(l->n, 4);
    decoder *d = dec(m, l, 0);
    int64_t n0, n1;
    double s0 = decoder_loss(d, &tb, NULL, l0, &n0), s1 = decoder_loss(d, &sb, NULL, l1, &n1);
    CHECK_MSG(s0 == s1 && n0 == n1 && !memcmp(l0, l1, N * V * 4), "spliced table rows changed the logits");
    s0 = backward_step(d, &tb, g0, NULL, 0.01f, 5, 1, &n0);
    s1 = backward_step(d, &sb, g1, NULL, 0.01f, 5, 1, &n1);
    CHECK_MSG(s0 == s1 && !memcmp(g0, g1, l->n * 4), "spliced table rows changed the LoRA gradient");
    decoder_free(d);
    free(l0);
    free(l1);
    free(g0);
    free(g1);
    lora_free(l);
    model_free(m);
}

/* full mode: token 7 appears only at spliced rows, so its embedding row
 * gets no gradient; the same batch with token 7 embedded from the table
 * gives it one */
static void test_gradient_stops(void)
{
    model *m = load();
    rows r;
    token_batch tb, sb;
    make_rows(&r, m, &tb, &sb);
    full_model *fm;
    dlm_err e;
    if (full_model_from(m, &fm, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    int C = m->cfg.d_model;
    for (int spliced = 0; spliced < 2; spliced++) {
        float *g = calloc(fm->n, 4);
        layer_grads *lay = calloc((size_t)m->cfg.n_layer, sizeof *lay);
        full_grads fg = {.layers = lay};
        full_grads_carve(&m->cfg, g, &fg);
        decoder *d = dec(&fm->m, NULL, 1);
        token_batch b = sb;
        if (!spliced) b.embed_row = NULL;   /* the same ids, 7 from the table */
        int64_t n;
        backward_step(d, &b, NULL, &fg, 0.01f, 5, 1, &n);
        float mx = 0;
        for (int i = 0; i < C; i++) mx = fg.tok_embd[7 * C + i] != 0 ? 1 : mx;
        CHECK_MSG(mx == (spliced ? 0 : 1), "token 7's embedding gradient (spliced %d)", spliced);
        decoder_free(d);
        free(lay);
        free(g);
    }
    full_model_free(fm);
    model_free(m);
}

static void test_mrope_equal_streams(void)
{
    model *m = load();
    int half = m->cfg.head_dim / 2;
    m->cfg.mrope[0] = half / 2;
    m->cfg.mrope[1] = m->cfg.mrope[2] = (half - half / 2) / 2;
    m->cfg.mrope[0] += half - m->cfg.mrope[0] - 2 * m->cfg.mrope[1];
    rows r;
    token_batch tb, sb;
    make_rows(&r, m, &tb, &sb);
    for (int s = 0; s < 3; s++) memcpy(r.pos3 + s * N, r.pos, sizeof r.pos);
    token_batch mb = tb;
    mb.pos3 = r.pos3;
    size_t V = (size_t)m->cfg.vocab;
    float *l0 = calloc(N * V, 4), *l1 = calloc(N * V, 4);
    decoder *d = dec(m, NULL, 0);
    int64_t n;
    decoder_loss(d, &tb, NULL, l0, &n);
    decoder_loss(d, &mb, NULL, l1, &n);
    CHECK_MSG(!memcmp(l0, l1, N * V * 4), "M-RoPE with equal streams differs from RoPE");
    decoder_free(d);
    free(l0);
    free(l1);
    model_free(m);
}

/* 3 text tokens, a 2x2 image (grid 1x4x4 patches, merge 2), 2 text tokens
 * of prompt, then 3 generated tokens: the session (spliced prefill in
 * batches of 5, then one token at a time with the delta) against
 * decoder_loss over the 12 rows with qwen2vl_rope_index's positions */
static void test_session_delta(void)
{
    model *m = load();
    m->cfg.mrope[0] = 2;
    m->cfg.mrope[1] = m->cfg.mrope[2] = 1;   /* head_dim 8 */
    lora *l = make_lora(m);
    enum { L = 12, P = 9, IMG = 300 };
    int32_t ids[L], tgt[L], pos[L], row[L], pos3[3 * L];
    int C = m->cfg.d_model, V = m->cfg.vocab;
    float emb[4 * 64];
    for (int i = 0; i < L; i++) {
        ids[i] = i >= 3 && i < 7 ? IMG : 10 + 17 * i;
        tgt[i] = 1;
        pos[i] = i;
        row[i] = i >= 3 && i < 7 ? i - 3 : -1;
    }
    for (int i = 0; i < 4 * C; i++) emb[i] = 0.5f * rng_normal(11, 1, 0, (uint64_t)i);
    int grid[1][3] = {{1, 4, 4}};
    int64_t delta, dfull;
    dlm_err e;
    CHECK_INT(qwen2vl_rope_index(ids, L, IMG, grid, 1, 2, pos3, &dfull, &e), 0);
    int32_t p3[3 * P];
    CHECK_INT(qwen2vl_rope_index(ids, P, IMG, grid, 1, 2, p3, &delta, &e), 0);
    CHECK_INT(delta, -2);
    CHECK_INT(pos3[L - 1], L - 1 + delta);   /* generated tokens continue at n + delta */
    token_batch b = {.B = 1, .T = L, .tokens = ids, .targets = tgt, .pos = pos, .embeds = emb,
                     .embed_row = row, .n_embeds = 4, .pos3 = pos3};
    CHECK_INT(decoder_batch_check(&m->cfg, &b, &e), 0);
    float *full = calloc((size_t)L * V, 4), *one = calloc((size_t)V, 4);
    decoder_opts o = {.B = 1, .T = L};
    decoder *d;
    decoder_create(m, l, &o, &d, &e);
    int64_t n;
    decoder_loss(d, &b, NULL, full, &n);
    decoder_free(d);
    session *s;
    CHECK_INT(session_create(m, l, 32, 5, &s, &e), 0);
    session_splice sp = {.embeds = emb, .n_embeds = 4, .embed_row = row, .pos3 = p3, .delta = (int)delta};
    CHECK_INT(session_eval_splice(s, ids, P, &sp, one, 0, &e), 0);
    CHECK_INT(session_delta(s), -2);
    check_tensor("spliced prompt last", one, full + (size_t)(P - 1) * V, (size_t)V, 1e-5);
    for (int t = P; t < L; t++) {
        CHECK_INT(session_eval(s, ids + t, 1, one, 0, &e), 0);
        check_tensor("step after the image", one, full + (size_t)t * V, (size_t)V, 1e-5);
    }
    session_reset(s);
    CHECK_INT(session_delta(s), 0);
    session_free(s);
    free(full);
    free(one);
    lora_free(l);
    model_free(m);
}

static void test_kvpool_splice(void)
{
    model *m = load();
    m->cfg.mrope[0] = 2;
    m->cfg.mrope[1] = m->cfg.mrope[2] = 1;
    m->cfg.vl = VL_QWEN2;   /* the pool carves its splice buffers for a VL model */
    enum { P = 9, IMG = 300 };
    int32_t ids[P + 3], row[P], p3[3 * P], txt[6] = {5, 6, 7, 8, 9, 10};
    int C = m->cfg.d_model, V = m->cfg.vocab;
    float emb[4 * 64];
    for (int i = 0; i < P + 3; i++) ids[i] = i >= 3 && i < 7 ? IMG : 10 + 17 * i;
    for (int i = 0; i < P; i++) row[i] = i >= 3 && i < 7 ? i - 3 : -1;
    for (int i = 0; i < 4 * C; i++) emb[i] = 0.5f * rng_normal(11, 1, 0, (uint64_t)i);
    int grid[1][3] = {{1, 4, 4}};
    int64_t delta;
    dlm_err e;
    CHECK_INT(qwen2vl_rope_index(ids, P, IMG, grid, 1, 2, p3, &delta, &e), 0);
    /* the session's logits: prompt, then 3 tokens */
    session *s;
    CHECK_INT(session_create(m, NULL, 32, 16, &s, &e), 0);
    session_splice sp = {.embeds = emb, .n_embeds = 4, .embed_row = row, .pos3 = p3, .delta = (int)delta};
    float *want = calloc((size_t)4 * V, 4), *got = calloc((size_t)2 * V, 4);
    CHECK_INT(session_eval_splice(s, ids, P, &sp, want, 0, &e), 0);
    for (int t = 0; t < 3; t++) CHECK_INT(session_eval(s, ids + P + t, 1, want + (size_t)(t + 1) * V, 0, &e), 0);
    kv_pool *kp;
    CHECK_INT(kv_pool_create(m, NULL, 2, 32, 16, &kp, &e), 0);
    /* step 1: 5 rows of the image prompt beside 6 text tokens; step 2: the other 4 */
    kv_splice k1 = {.embeds = emb, .embed_row = row, .pos3 = p3, .pos3_stride = P, .delta = (int)delta};
    kv_splice k2 = {.embeds = emb, .embed_row = row + 5, .pos3 = p3 + 5, .pos3_stride = P, .delta = (int)delta};
    const kv_splice *sp1[2] = {&k1, NULL}, *sp2[1] = {&k2};
    int seq[2] = {0, 1}, nt[2] = {5, 6};
    const int32_t *tk[2] = {ids, txt};
    float *lg2 = calloc((size_t)2 * V, 4);
    CHECK_INT(kv_pool_eval_splice(kp, 2, seq, tk, nt, sp1, lg2, &e), 0);
    tk[0] = ids + 5;
    nt[0] = 4;
    CHECK_INT(kv_pool_eval_splice(kp, 1, seq, tk, nt, sp2, got, &e), 0);
    check_tensor("pool: spliced prompt", got, want, (size_t)V, 1e-4);
    for (int t = 0; t < 3; t++) {
        tk[0] = ids + P + t;
        nt[0] = 1;
        CHECK_INT(kv_pool_eval(kp, 1, seq, tk, nt, got, &e), 0);
        check_tensor("pool: after the image (delta)", got, want + (size_t)(t + 1) * V, (size_t)V, 1e-4);
    }
    kv_pool_truncate(kp, 0, 0);   /* the delta goes with the cache */
    kv_pool_free(kp);
    session_free(s);
    free(want);
    free(got);
    free(lg2);
    model_free(m);
}

static void test_refusals(void)
{
    model *m = load();
    rows r;
    token_batch tb, sb;
    make_rows(&r, m, &tb, &sb);
    dlm_err e;
    int32_t pre[B] = {3, T + 1};
    token_batch b = tb;
    b.prefix = pre;
    CHECK_INT(decoder_batch_check(&m->cfg, &b, &e), -1);
    CHECK(strstr(e.msg, "prefix-LM") != NULL);
    pre[1] = T;   /* a whole sequence bidirectional is a valid block */
    CHECK_INT(decoder_batch_check(&m->cfg, &b, &e), 0);
    b = tb;
    b.pos3 = r.pos3;
    CHECK_INT(decoder_batch_check(&m->cfg, &b, &e), -1);
    CHECK(strstr(e.msg, "mrope_section") != NULL);
    b = sb;
    b.n_embeds = 2;
    CHECK_INT(decoder_batch_check(&m->cfg, &b, &e), -1);
    CHECK_INT(decoder_batch_check(&m->cfg, &tb, &e), 0);
    session *s;
    CHECK_INT(session_create(m, NULL, 16, 4, &s, &e), 0);
    session_splice sp = {.pos3 = r.pos3};
    float *lg = calloc((size_t)m->cfg.vocab, 4);
    CHECK_INT(session_eval_splice(s, r.tok, 4, &sp, lg, 0, &e), -1);
    CHECK_INT(session_n_past(s), 0);
    free(lg);
    session_free(s);
    model_free(m);
}

int main(void)
{
    kern_init(1);
    test_splice_identity();
    test_gradient_stops();
    test_mrope_equal_streams();
    test_session_delta();
    test_kvpool_splice();
    test_refusals();
    return check_done();
}
