/* Preference losses (grad/pref_loss.h) and the row-weighted backward.
 *
 * Always: dL/dnll from pref_pass agrees with central finite differences of
 * its own loss for every kind (sigmoid, hinge, ipo, orpo), and the
 * row-weighted backward equals a plain backward when every weight is the
 * plain one's 1/N.
 *
 * With DLM_PREF_REF=DIR (tests/ref/r0404-pref-torch.sh; DIR made by
 * tests/ref/engine/torch_pref.py): per-pair completion log-probs, the
 * reference log-probs (a second LoRA, or the base), the loss, every LoRA
 * gradient and five AdamW steps' losses against PyTorch written from TRL's
 * formulas, within 1e-4 relative. */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decoder/decoder.h"
#include "decoder/lora.h"
#include "adapter/adapter.h"
#include "grad/backward.h"
#include "grad/optim.h"
#include "grad/pref_loss.h"
#include "kern/kern.h"
#include "run/prepare.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/rng.h"
#include "weights/model.h"
#include "weights/safetensors.h"

#define FIX "tests/ref/model/fixtures/"

static double pass_loss(pref_kind k, double beta, const token_batch *b, const float *nll, int n, const double *rc,
                        const double *rr, double w, double nw, float *scale)
{
    pref_stats st;
    memset(&st, 0, sizeof st);
    pref_pass(k, beta, b, nll, n, rc, rr, w, nw, scale, &st, NULL, NULL);
    return st.loss;
}

static void test_finite_differences(void)
{
    enum { P = 3, T = 6 };
    int32_t tgt[2 * P * T], ids[2 * P * T] = {0}, pos[2 * P * T] = {0};
    float nll[2 * P * T], scale[2 * P * T], tmp[2 * P * T];
    for (int i = 0; i < 2 * P * T; i++) {
        tgt[i] = (i % T) >= 2 && (i % 5) ? 1 : -1;
        nll[i] = tgt[i] >= 0 ? (float)(0.3 + 2.0 * rng_uniform(5, 1, 0, (uint64_t)i)) : 0.0f;
    }
    token_batch b = {.B = 2 * P, .T = T, .tokens = ids, .targets = tgt, .pos = pos, .seg = NULL};
    double rc[P] = {-5.1, -7.3, -4.0}, rr[P] = {-6.0, -6.2, -5.5};
    for (int k = PREF_SIGMOID; k <= PREF_ORPO; k++) {
        double beta = k == PREF_ORPO ? 0.25 : 0.3;
        pass_loss((pref_kind)k, beta, &b, nll, P, rc, rr, 1.0 / P, 0.05, scale);
        for (int i = 0; i < 2 * P * T; i++) {
            if (tgt[i] < 0) { CHECK(scale[i] == 0); continue; }
            double h = 1e-3;
            memcpy(tmp, nll, sizeof nll);
            tmp[i] = nll[i] + (float)h;
            double lp = pass_loss((pref_kind)k, beta, &b, tmp, P, rc, rr, 1.0 / P, 0.05, scale);
            tmp[i] = nll[i] - (float)h;
            double lm = pass_loss((pref_kind)k, beta, &b, tmp, P, rc, rr, 1.0 / P, 0.05, scale);
            pass_loss((pref_kind)k, beta, &b, nll, P, rc, rr, 1.0 / P, 0.05, scale);
            double fd = (lp - lm) / (double)((nll[i] + (float)h) - (nll[i] - (float)h));
            CHECK_MSG(fabs(fd - scale[i]) <= 2e-3 * fmax(1e-2, fabs(fd)), "kind %d pos %d: fd %.6g, got %.6g", k, i,
                      fd, scale[i]);
        }
    }
}

/* rows weighted 1/N each = the plain backward with grad_scale 1/N, bit for
 * bit up to float rounding of the scale */
static void uniform_rows(void *ctx, const token_batch *b, const float *nll, float *scale)
{
    (void)nll;
    float w = *(const float *)ctx;
    for (int i = 0; i < b->B * b->T; i++) scale[i] = b->targets[i] >= 0 ? w : 0;
}

static void test_rows_equal_plain(void)
{
    dlm_err e;
    model *m = NULL;
    CHECK_MSG(model_load(FIX "qwen2-f32", &m, &e) == 0, "%s", e.msg);
    if (!m) return;
    lora_config lc = {4, 8.0f, 0.0f, LM_ALL, 0};
    lora *l;
    CHECK_INT(lora_create(&m->cfg, &lc, &l, &e), 0);
    CHECK_INT(lora_init(l, m, 3, &e), 0);
    for (size_t i = 0; i < l->n; i++) l->w[i] += 0.01f * rng_normal(3, 9, 0, i);
    enum { B = 2, T = 8 };
    int32_t ids[B * T], tgt[B * T], pos[B * T], seg[B * T];
    for (int i = 0; i < B * T; i++) {
        ids[i] = (int32_t)(rng_u64(4, 1, 0, (uint64_t)i) % (uint64_t)m->cfg.vocab);
        tgt[i] = i % 3 ? (int32_t)(rng_u64(4, 2, 0, (uint64_t)i) % (uint64_t)m->cfg.vocab) : -1;
        pos[i] = i % T;
        seg[i] = 0;
    }
    token_batch b = {.B = B, .T = T, .tokens = ids, .targets = tgt, .pos = pos, .seg = seg};
    decoder_opts o = {.B = B, .T = T};
    decoder *d;
    CHECK_INT(decoder_create(m, l, &o, &d, &e), 0);
    float *g1 = calloc(l->n, 4), *g2 = calloc(l->n, 4), nll[B * T], sc[B * T];
    int64_t nl;
    backward_step(d, &b, g1, NULL, 1.0f, 0, 0, &nl);
    memset(g1, 0, l->n * 4);
    float w = 1.0f / (float)nl;
    backward_step(d, &b, g1, NULL, w, 0, 0, &nl);
    bwd_rows rw = {.fn = uniform_rows, .ctx = &w, .nll = nll, .scale = sc};
    backward_step_rows(d, &b, g2, 0, 0, &rw, &nl);
    check_tensor("rows vs plain", g2, g1, l->n, 1e-6);
    free(g1);
    free(g2);
    decoder_free(d);
    lora_free(l);
    model_free(m);
}

/* A pair's chosen sequence is the Q/A row of the same prompt and answer,
 * token for token and mask for mask (the dialect's rendering is checked
 * against the Jinja templates by tests/ref/r0102); the rejected one differs
 * only after the prompt; a pair too long for sequence_len is cut. */
static void test_pairs_render_as_qa(void)
{
    const char *dir = check_tmpdir("pref_pairs");
    char path[4096];
    snprintf(path, sizeof path, "%s/p.dlm", dir);
    const char *text = "---\ndlm_id: 01JD0000000000000000000000\ndlm_version: 15\nbase_model: tiny\n"
                       "system_prompt: Be brief.\n---\n::instruction::\n### Q\nWhat is a noun?\n### A\n"
                       "A noun is a word for a thing.\n\n::preference::\n### Prompt\nWhat is a noun?\n"
                       "### Chosen\nA noun is a word for a thing.\n### Rejected\nNo idea.\n";
    dlm_err e;
    CHECK_INT(fs_write_atomic(path, text, strlen(text), 0644, &e), 0);
    dlm_doc *doc = doc_load(path, &e);
    CHECK_MSG(doc != NULL, "%s", e.msg);
    prep P;
    memset(&P, 0, sizeof P);
    CHECK_MSG(prep_base(&P, "models/tiny.gguf", NULL, &e) == 0, "%s", e.msg);
    if (!doc || !P.tok) return;
    P.data.dialect = P.dialect;
    ds_opts o = {.seq_len = 256, .seed = 1, .system_prompt = "Be brief.", .val_frac = 0.0};
    dataset *ds;
    pref_set *ps;
    CHECK_INT(dataset_build(doc, NULL, P.tok, P.dialect, &o, &ds, &e), 0);
    CHECK_INT(prep_pref(&P, doc, 1, 0, &ps, &e), 0);
    CHECK_INT(ps->n_pairs, 1);
    CHECK_INT(ds->n_items, 1);
    const pref_pair *pp = &ps->pairs[0];
    const ds_item *it = &ds->items[0];
    CHECK_INT(pp->c.len, it->len);
    CHECK_INT(pp->c.n_loss, it->n_loss);
    CHECK(!memcmp(ps->tok + pp->c.off, ds->tok + it->off, (size_t)it->len * 4));
    CHECK(!memcmp(ps->tgt + pp->c.off, ds->tgt + it->off, (size_t)it->len * 4));
    int first_c = 0, first_r = 0;   /* the first target position: where the assistant turn starts */
    while (ps->tgt[pp->c.off + first_c] < 0) first_c++;
    while (ps->tgt[pp->r.off + first_r] < 0) first_r++;
    CHECK_INT(first_c, first_r);
    CHECK(!memcmp(ps->tok + pp->c.off, ps->tok + pp->r.off, (size_t)first_c * 4));
    pref_free(ps);
    /* sequence_len = prompt + 3: the completion is cut, and counted */
    ds_opts o2 = o;
    o2.seq_len = first_c + 3;
    CHECK_INT(pref_build(doc, P.tok, P.dialect, &o2, &ps, &e), 0);
    CHECK_INT(ps->pairs[0].c.len, first_c + 3);
    CHECK_INT(ps->n_truncated, 1);
    pref_free(ps);
    /* a prompt that fills sequence_len: an error at the prompt's line */
    o2.seq_len = 4;
    CHECK_INT(pref_build(doc, P.tok, P.dialect, &o2, &ps, &e), -1);
    CHECK_STR(e.kind, "DatasetError");
    CHECK_INT(e.line, 14);   /* the ### Prompt line */
    dataset_free(ds);
    prep_free(&P);
    doc_free(doc);
}

static const st_tensor *need(const st_file *f, const char *name)
{
    const st_tensor *t = st_find(f, name);
    if (!t) { fprintf(stderr, "reference lacks %s\n", name); exit(1); }
    return t;
}

static st_file *open_st(const char *dir, const char *name)
{
    char p[4096];
    dlm_err e;
    st_file *f;
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (st_open(p, &f, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    return f;
}

static double rel(double a, double b) { return fabs(a - b) / fmax(fabs(b), 1e-6); }

/* summed completion log-probs of every row under the decoder's current adapter */
static void row_logps(decoder *d, const token_batch *b, float *nll, double *lp)
{
    int64_t nl;
    decoder_loss(d, b, nll, NULL, &nl);
    for (int r = 0; r < b->B; r++) {
        int c;
        lp[r] = pref_row_logp(b, nll, r, &c);
    }
}

typedef struct { pref_kind k; double beta, w, nw; double *rc, *rr; pref_stats st; } pref_test_ctx;
static void pref_test_rows(void *c, const token_batch *bb, const float *nl, float *s)
{
    pref_test_ctx *x = c;
    pref_pass(x->k, x->beta, bb, nl, bb->B / 2, x->rc, x->rr, x->w, x->nw, s, &x->st, NULL, NULL);
}

static void ref_case(const char *dir, const char *name)
{
    char p[4096];
    dlm_err e;
    snprintf(p, sizeof p, "%s/model", dir);
    model *m = NULL;
    if (model_load(p, &m, &e)) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    snprintf(p, sizeof p, "%s/%s.json", dir, name);
    json_t *hp = json_load_path(p, 1 << 20, &e);
    if (!hp) { fprintf(stderr, "%s\n", e.msg); exit(1); }
    st_file *bf = open_st(dir, "pref_batch.safetensors"), *inf = open_st(dir, "policy.init.safetensors");
    st_file *rf = open_st(dir, "ref_pre.safetensors");
    snprintf(p, sizeof p, "%s.grads.safetensors", name);
    st_file *gf = open_st(dir, p);
    const st_tensor *tt = need(bf, "tokens");
    int B = (int)tt->shape[0], T = (int)tt->shape[1], P = B / 2;
    token_batch b = {.B = B, .T = T, .tokens = tt->data, .targets = need(bf, "targets")->data, .pos = need(bf, "pos")->data, .seg = need(bf, "seg")->data};
    double rank, alpha, beta, lr0, steps;
    jget_num(hp, "rank", &rank);
    jget_num(hp, "alpha", &alpha);
    jget_num(hp, "beta", &beta);
    jget_num(hp, "lr", &lr0);
    jget_num(hp, "steps", &steps);
    const char *kind = jget_str(hp, "kind"), *refname = jget_str(hp, "reference");
    pref_kind k = !strcmp(kind, "orpo") ? PREF_ORPO : !strcmp(kind, "hinge") ? PREF_HINGE
                : !strcmp(kind, "ipo") ? PREF_IPO : PREF_SIGMOID;
    lora_config lc = {(int)rank, (float)alpha, 0.0f, LM_ALL, 0};
    lora *l;
    CHECK_INT(lora_create(&m->cfg, &lc, &l, &e), 0);
    decoder_opts o = {.B = B, .T = T};
    decoder *d;
    CHECK_INT(decoder_create(m, l, &o, &d, &e), 0);
    float *nll = calloc((size_t)B * T, 4), *sc = calloc((size_t)B * T, 4);
    double *lp = calloc((size_t)B, 8), *rc = calloc((size_t)P, 8), *rr = calloc((size_t)P, 8);
    /* the frozen reference: a second adapter, or the base (an adapter of zeros adds nothing) */
    if (refname) {
        if (!strcmp(refname, "pre")) CHECK_MSG(lora_load_st(l, rf, "ref", &e) == 0, "%s", e.msg);
        else memset(l->w, 0, l->n * 4);
        row_logps(d, &b, nll, lp);
        json_t *want = json_object_get(hp, "ref_logps");
        for (int r = 0; r < B; r++) {
            double wv = json_number_value(json_array_get(want, (size_t)r));
            CHECK_MSG(rel(lp[r], wv) <= 1e-4, "%s reference logp row %d: %.7f want %.7f", name, r, lp[r], wv);
        }
        for (int i = 0; i < P; i++) { rc[i] = lp[2 * i]; rr[i] = lp[2 * i + 1]; }
    }
    CHECK_MSG(lora_load_st(l, inf, "policy", &e) == 0, "%s", e.msg);
    /* the policy's log-probs and the loss */
    int64_t chosen = 0;
    for (int i = 0; i < T * B; i++) chosen += (i / T) % 2 == 0 && b.targets[i] >= 0;
    row_logps(d, &b, nll, lp);
    json_t *wl = json_object_get(hp, "policy_logps");
    for (int r = 0; r < B; r++) {
        double wv = json_number_value(json_array_get(wl, (size_t)r));
        CHECK_MSG(rel(lp[r], wv) <= 1e-4, "%s policy logp row %d: %.7f want %.7f", name, r, lp[r], wv);
    }
    float *g = calloc(l->n, 4), *mo = calloc(l->n, 4), *vo = calloc(l->n, 4);
    /* one pass: forward for the NLL, the losses' dL/dnll, the weighted backward */
    pref_test_ctx cx = {.k = k, .beta = beta, .w = 1.0 / P, .nw = 1.0 / (double)chosen, .rc = rc, .rr = rr};
    bwd_rows rw = {.fn = pref_test_rows, .ctx = &cx, .nll = nll, .scale = sc};
    int64_t nl;
    backward_step_rows(d, &b, g, 0, 0, &rw, &nl);
    double want_loss, got_loss = cx.st.loss;
    jget_num(hp, "loss", &want_loss);
    CHECK_MSG(rel(cx.st.loss, want_loss) <= 1e-4, "%s loss %.7f want %.7f", name, cx.st.loss, want_loss);
    json_t *wc = json_object_get(hp, "rewards_chosen"), *wr = json_object_get(hp, "rewards_rejected");
    double sc_c = 0, sc_r = 0;
    for (int i = 0; i < P; i++) {
        sc_c += json_number_value(json_array_get(wc, (size_t)i));
        sc_r += json_number_value(json_array_get(wr, (size_t)i));
    }
    CHECK_MSG(fabs(cx.st.chosen - sc_c) <= 1e-4 * fmax(1e-3, fabs(sc_c)), "%s rewards/chosen %.7g want %.7g", name,
              cx.st.chosen, sc_c);
    CHECK_MSG(fabs(cx.st.rejected - sc_r) <= 1e-4 * fmax(1e-3, fabs(sc_r)), "%s rewards/rejected %.7g want %.7g",
              name, cx.st.rejected, sc_r);
    char tn[256];
    int ntens = 0;
    for (int layer = 0; layer < l->n_layer; layer++)
        for (int mm = 0; mm < LM_COUNT; mm++) {
            const lora_mod *md = lora_mod_at(l, layer, mm);
            lora_tensor_name(l, layer, mm, "lora_A", tn, sizeof tn);
            check_tensor(tn, g + md->off_a, need(gf, tn)->data, (size_t)l->cfg.rank * md->in, 1e-4);
            lora_tensor_name(l, layer, mm, "lora_B", tn, sizeof tn);
            check_tensor(tn, g + md->off_b, need(gf, tn)->data, (size_t)l->cfg.rank * md->out, 1e-4);
            ntens += 2;
        }
    CHECK_INT(ntens, st_count(gf));
    /* five AdamW steps: TRL's defaults (linear decay, no warmup, no weight decay, clip 1) */
    optim_config oc;
    optim_defaults(&oc);
    oc.lr = lr0;
    oc.weight_decay = 0;
    oc.warmup_ratio = 0;
    oc.max_grad_norm = 1.0;
    oc.total_steps = (int64_t)steps;
    oc.sched = SCHED_LINEAR;
    json_t *sl = json_object_get(hp, "step_losses");
    double last = 0;
    for (int64_t s = 0; s < oc.total_steps; s++) {
        memset(g, 0, l->n * 4);
        memset(&cx.st, 0, sizeof cx.st);
        backward_step_rows(d, &b, g, 0, (uint64_t)s, &rw, &nl);
        double want = json_number_value(json_array_get(sl, (size_t)s));
        CHECK_MSG(rel(cx.st.loss, want) <= 1e-4, "%s step %lld loss %.7f want %.7f", name, (long long)s, cx.st.loss,
                  want);
        last = cx.st.loss;
        optim_clip(g, l->n, oc.max_grad_norm);
        optim_adamw_step(&oc, l->w, g, mo, vo, l->n, optim_lr_at(&oc, s), s + 1);
    }
    printf("ref %s %s: loss %.6f (torch %.6f), %d gradient tensors, step 5 loss %.6f\n", dir, name, got_loss,
           want_loss, ntens, last);
    free(g); free(mo); free(vo); free(nll); free(sc); free(lp); free(rc); free(rr);
    decoder_free(d);
    lora_free(l);
    st_close(bf); st_close(inf); st_close(rf); st_close(gf);
    json_decref(hp);
    model_free(m);
}

/* Measurement (tests/cli/t0503-...: behaviour on the embedded base): the mean
 * chosen-minus-rejected completion log-prob margin, and the share of pairs
 * with chosen > rejected, of DOC's preference pairs under MODEL (+ ADAPTER,
 * a version folder, when given), rendered exactly as the preference phase
 * renders them. Prints "margin M accuracy A pairs N". */
static int margin_tool(const char *docp, const char *modelp, const char *adapter)
{
    dlm_err e;
    prep P;
    memset(&P, 0, sizeof P);
    dlm_doc *doc = doc_load(docp, &e);
    model *m = NULL;
    lora *l = NULL;
    pref_set *ps = NULL;
    decoder *d = NULL;
    if (!doc || prep_base(&P, modelp, NULL, &e) || model_load(modelp, &m, &e)) goto fail;
    P.data.dialect = P.dialect;
    if (prep_pref(&P, doc, 42, 0, &ps, &e)) goto fail;
    if (adapter && *adapter && adapter_load(adapter, m, &l, &e)) goto fail;
    decoder_opts o = {.B = 2, .T = ps->max_len};
    if (decoder_create(m, l, &o, &d, &e)) goto fail;
    size_t bt = (size_t)2 * ps->max_len;
    int32_t *tk = malloc(bt * 4), *tg = malloc(bt * 4), *po = malloc(bt * 4), *sg = malloc(bt * 4);
    float *nll = malloc(bt * 4);
    double sum = 0;
    int acc = 0;
    for (int i = 0; i < ps->n_pairs; i++) {
        token_batch b;
        int64_t nl;
        int c;
        pref_fill(ps, &i, 1, ps->max_len, tk, tg, po, sg, &b);
        decoder_loss(d, &b, nll, NULL, &nl);
        double mg = pref_row_logp(&b, nll, 0, &c) - pref_row_logp(&b, nll, 1, &c);
        sum += mg;
        acc += mg > 0;
    }
    printf("margin %.4f accuracy %.3f pairs %d\n", sum / ps->n_pairs, (double)acc / ps->n_pairs, ps->n_pairs);
    free(tk); free(tg); free(po); free(sg); free(nll);
    decoder_free(d);
    pref_free(ps);
    lora_free(l);
    model_free(m);
    prep_free(&P);
    doc_free(doc);
    return 0;
fail:
    fprintf(stderr, "margin: %s\n", e.msg);
    return 1;
}

int main(void)
{
    kern_init(2);
    if (getenv("DLM_PREF_MARGIN_DOC"))
        return margin_tool(getenv("DLM_PREF_MARGIN_DOC"), getenv("DLM_PREF_MARGIN_MODEL"),
                           getenv("DLM_PREF_MARGIN_ADAPTER"));
    const char *ref = getenv("DLM_PREF_REF");
    if (ref && *ref) {
        const char *cases[] = {"sigmoid_pre", "sigmoid_base", "hinge_pre", "hinge_base", "ipo_pre", "ipo_base",
                               "orpo"};
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) ref_case(ref, cases[i]);
        return check_done();
    }
    test_finite_differences();
    test_rows_equal_plain();
    test_pairs_render_as_qa();
    return check_done();
}
