/* training.cpt (run/cpt.h) and tag weights (tokens/dataset.h).
 *
 * - dataset_row_copies against values from Python's hashlib.blake2b
 *   (digest_size=8) over f"{seed}:{section_id}", with the original's
 *   expand_rows_by_weight arithmetic (data/weighted_rows.py).
 * - cpt_choose: auto picks DAPT only above 0.7 (7/10 stays SFT), dapt/sft
 *   are forced, no rows → SFT.
 * - cpt_apply + optim_lr_at against transformers'
 *   get_cosine_with_min_lr_schedule_with_warmup (min_lr_rate 0.1, warmup
 *   ceil(0.2·total)) evaluated in Python for lr 2e-4, 10 and 7 steps.
 * - the embed warm-up's gradients: a LoRA backward with head_grad on gives
 *   the LoRA gradient byte for byte as without it, and embedding / LM-head
 *   gradients equal to the full-parameter backward's (which
 *   tests/ref/r0401-engine-torch.sh checks against PyTorch), on a tied
 *   (qwen2) and an untied (llama) fixture; 1 vs 3 threads give the same
 *   bytes. */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decoder/decoder.h"
#include "decoder/lora.h"
#include "grad/backward.h"
#include "grad/full.h"
#include "grad/optim.h"
#include "kern/kern.h"
#include "run/cpt.h"
#include "tokens/dataset.h"
#include "util/rng.h"
#include "weights/model.h"

#define FIX "tests/ref/model/fixtures/"

static void test_row_copies(void)
{
    /* (seed, sid, weight, copies) — the u64/2^64 rolls were 0.7028, 0.4028,
     * 0.9467, 0.4602, 0.4602, 0.5302, 0.5302, 0.5744 */
    static const struct { uint64_t seed; const char *sid; double w; int want; } v[] = {
        {42, "0123456789abcdef", 0.5, 0}, {42, "fedcba9876543210", 0.5, 1}, {7, "a1b2c3d4e5f60718", 2.5, 2},
        {42, "0000000000000000", 1.0, 1}, {42, "0000000000000000", 0.0, 0}, {1, "5555aaaa5555aaaa", 0.25, 0},
        {1, "5555aaaa5555aaaa", 0.75, 1}, {123456789, "deadbeefdeadbeef", 3.3, 3},
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        CHECK_MSG(dataset_row_copies(v[i].seed, v[i].sid, v[i].w) == v[i].want, "copies(%llu, %s, %g) = %d, want %d",
                  (unsigned long long)v[i].seed, v[i].sid, v[i].w, dataset_row_copies(v[i].seed, v[i].sid, v[i].w),
                  v[i].want);
    CHECK_INT(dataset_row_copies(42, "0123456789abcdef", -1.0), 0);
    CHECK_INT(dataset_row_copies(42, "0123456789abcdef", 4.0), 4);
}

static void test_choose(void)
{
    doc_training tr;
    doc_training_defaults(&tr);
    dataset ds;
    memset(&ds, 0, sizeof ds);
    cpt_choice c;
    ds.train_text_rows = 7;
    ds.train_msg_rows = 3;
    cpt_choose(&tr, &ds, &c);
    CHECK(!c.dapt);                          /* 0.7 is not > 0.7 */
    CHECK_NEAR(c.fraction, 0.7, 0);
    CHECK_STR(c.setting, "auto");
    ds.train_text_rows = 8;
    ds.train_msg_rows = 2;
    cpt_choose(&tr, &ds, &c);
    CHECK(c.dapt);
    tr.cpt.schedule = DOC_CPT_SFT;
    cpt_choose(&tr, &ds, &c);
    CHECK(!c.dapt);
    tr.cpt.schedule = DOC_CPT_DAPT;
    ds.train_text_rows = 0;
    cpt_choose(&tr, &ds, &c);
    CHECK(c.dapt);
    CHECK_NEAR(c.fraction, 0.0, 0);
    tr.cpt.schedule = DOC_CPT_AUTO;
    ds.train_msg_rows = 0;
    cpt_choose(&tr, &ds, &c);                /* nothing to decide on */
    CHECK(!c.dapt);
    tr.cpt.embed_warmup_steps = 3;
    cpt_choose(&tr, NULL, &c);
    CHECK(cpt_embed_step(&c, 0) && cpt_embed_step(&c, 2) && !cpt_embed_step(&c, 3));
}

static void test_dapt_lr(void)
{
    static const double want10[] = {0.0, 0.0001, 0.0002, 0.00019314915792601581, 0.00017363961030678927,
                                    0.00014444150891285807, 0.00011000000000000002, 7.555849108714192e-05,
                                    4.6360389693210735e-05, 2.6850842073984196e-05};
    static const double want7[] = {0.0, 0.0001, 0.0002, 0.00018281152949374527, 0.00013781152949374526,
                                   8.218847050625476e-05, 3.718847050625475e-05};
    cpt_choice c = {.setting = "dapt", .dapt = 1};
    for (int t = 0; t < 2; t++) {
        optim_config o;
        optim_defaults(&o);
        o.lr = 2e-4;
        o.total_steps = t ? 7 : 10;
        cpt_apply(&c, &o);
        CHECK_INT(optim_warmup_steps(&o), 2);
        const double *w = t ? want7 : want10;
        for (int k = 0; k < o.total_steps; k++)
            CHECK_MSG(fabs(optim_lr_at(&o, k) - w[k]) <= 1e-15 * (fabs(w[k]) + 1e-30) + 1e-20,
                      "total %lld step %d: lr %.17g, want %.17g", (long long)o.total_steps, k, optim_lr_at(&o, k), w[k]);
    }
    /* sft leaves the document's schedule alone */
    optim_config o;
    optim_defaults(&o);
    cpt_choice s = {.setting = "sft"};
    cpt_apply(&s, &o);
    CHECK(o.sched == SCHED_COSINE && o.warmup_ratio == 0.1);
}

static void embed_case(const char *path)
{
    dlm_err e;
    model *m = NULL;
    CHECK_MSG(model_load(path, &m, &e) == 0, "%s: %s", path, e.msg);
    if (!m) return;
    const model_config *c = &m->cfg;
    lora_config lc = {4, 8.0f, 0.0f, LM_ALL, 0};
    lora *l;
    CHECK_INT(lora_create(c, &lc, &l, &e), 0);
    CHECK_INT(lora_init(l, m, 3, &e), 0);   /* B = 0: the forward is the base's, as in full mode */
    enum { B = 2, T = 9 };
    int32_t ids[B * T], tgt[B * T], pos[B * T], seg[B * T];
    for (int i = 0; i < B * T; i++) {
        ids[i] = (int32_t)(rng_u64(5, 1, 0, (uint64_t)i) % (uint64_t)c->vocab);
        tgt[i] = i % 4 ? (int32_t)(rng_u64(5, 2, 0, (uint64_t)i) % (uint64_t)c->vocab) : -1;
        pos[i] = i % T;
        seg[i] = 0;
    }
    ids[3] = ids[11];   /* a repeated token: its embedding row sums two positions */
    token_batch b = {.B = B, .T = T, .tokens = ids, .targets = tgt, .pos = pos, .seg = seg};
    size_t nv = (size_t)c->vocab * (size_t)c->d_model;
    float *g0 = calloc(l->n, 4), *g1 = calloc(l->n, 4), *g3 = calloc(l->n, 4);
    float *emb = calloc(nv, 4), *head = c->tied ? NULL : calloc(nv, 4);
    float *emb3 = calloc(nv, 4), *head3 = c->tied ? NULL : calloc(nv, 4);
    int64_t nl;
    /* plain LoRA backward */
    decoder_opts o = {.B = B, .T = T};
    decoder *d;
    CHECK_INT(decoder_create(m, l, &o, &d, &e), 0);
    kern_init(1);
    double l0 = backward_step(d, &b, g0, NULL, 0.05f, 9, 0, &nl);
    decoder_free(d);
    /* with the head's gradient and the embeddings' */
    decoder_opts oh = {.B = B, .T = T, .head_grad = 1};
    CHECK_INT(decoder_create(m, l, &oh, &d, &e), 0);
    full_grads eg = {.tok_embd = emb, .output = head};
    double l1 = backward_step(d, &b, g1, &eg, 0.05f, 9, 0, &nl);
    kern_init(3);
    full_grads eg3 = {.tok_embd = emb3, .output = head3};
    double l3 = backward_step(d, &b, g3, &eg3, 0.05f, 9, 0, &nl);
    decoder_free(d);
    CHECK_MSG(l0 == l1 && !memcmp(g0, g1, l->n * 4), "%s: head_grad changed the LoRA gradient or the loss", path);
    CHECK_MSG(l1 == l3 && !memcmp(g1, g3, l->n * 4) && !memcmp(emb, emb3, nv * 4) &&
              (!head || !memcmp(head, head3, nv * 4)), "%s: 1 vs 3 threads changed the embed gradients", path);
    /* the full-parameter backward's embedding / head gradients */
    full_model *fm = NULL;
    CHECK_INT(full_model_from(m, &fm, &e), 0);
    float *fgs = calloc(fm->n, 4);
    layer_grads *lay = calloc((size_t)c->n_layer, sizeof *lay);
    full_grads fg = {.layers = lay};
    full_grads_carve(c, fgs, &fg);
    decoder_opts of = {.B = B, .T = T, .full = 1};
    kern_init(1);
    CHECK_INT(decoder_create(&fm->m, NULL, &of, &d, &e), 0);
    double lf = backward_step(d, &b, NULL, &fg, 0.05f, 9, 0, &nl);
    decoder_free(d);
    CHECK_NEAR(lf, l1, 1e-4 * fabs(l1));
    double n2 = 0;
    for (size_t i = 0; i < nv; i++) n2 += (double)emb[i] * emb[i];
    CHECK_MSG(n2 > 0, "%s: no embedding gradient", path);
    check_tensor("embedding gradient vs full mode", emb, fg.tok_embd, nv, 1e-3);
    if (head) check_tensor("LM-head gradient vs full mode", head, fg.output, nv, 1e-3);
    CHECK_MSG(c->tied == (head == NULL), "%s: tied %d", path, c->tied);
    free(fgs);
    free(lay);
    full_model_free(fm);
    free(g0); free(g1); free(g3); free(emb); free(head); free(emb3); free(head3);
    lora_free(l);
    model_free(m);
}

int main(void)
{
    test_row_copies();
    test_choose();
    test_dapt_lr();
    embed_case(FIX "qwen2-f32");
    embed_case(FIX "llama-bf16");
    return check_done();
}
