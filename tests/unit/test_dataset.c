/* Dataset: rows, loss masks, windows, the split rule, batching, packing.
 * Uses the fixture model's real byte-level BPE tokenizer (ChatML specials). */
#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tokens/dataset.h"
#include "kern/kern.h"
#include "weights/model.h"
#include "tokens/tok_gguf.h"
#include "decoder/decoder.h"

#define FIX "tests/ref/model/fixtures/qwen2-f32"

static dlm_doc *parse(const char *text)
{
    dlm_err e;
    dlm_doc *d = doc_parse("t.dlm", text, strlen(text), &e);
    if (!d) { fprintf(stderr, "parse: %s (line %d)\n", e.msg, e.line); exit(1); }
    return d;
}

static const char *HDR = "---\ndlm_id: 01HZZZZZZZZZZZZZZZZZZZZZZZ\nbase_model: tiny\n---\n";

static void test_split_rule(void)
{
    /* Values from Python: int.from_bytes(sha256(f"{seed}\0{sid}\0{row}")[:8], "big") < int(0.1*2**64) */
    CHECK_INT(dataset_is_val(42, "c78031fc5ab5a29a", 0, 0.1), 0);
    int want[] = {10, 27, 42, 46, 49, 52, 53, 70, 71, 79, 89, 91, 100, 107, 110, 111, 123, 130, 137, 138, 153, 161, 166, 181, 196};
    int k = 0, ok = 1;
    for (int i = 0; i < 200; i++) {
        char sid[17];
        snprintf(sid, sizeof sid, "%016x", i);
        int v = dataset_is_val(42, sid, 0, 0.1);
        if (v != (k < 25 && want[k] == i)) ok = 0;
        if (v) k++;
    }
    CHECK(ok);
    CHECK_INT(k, 25);
}

static void test_rows(tok *t, const chat_dialect *dl)
{
    char text[4096];
    snprintf(text, sizeof text, "%s# Notes\n\nSome prose here.\n\n::instruction::\n### Q\nWhat is two plus two?\n### A\nFour.\n", HDR);
    dlm_doc *doc = parse(text);
    ds_opts o = {.seq_len = 2048, .seed = 42, .val_frac = 0.0};
    dataset *d;
    dlm_err e;
    CHECK_MSG(dataset_build(doc, NULL, t, dl, &o, &d, &e) == 0, "%s", e.msg);
    CHECK_INT(d->n_items, 2);
    CHECK_INT(d->rows_prose, 1);
    CHECK_INT(d->rows_instr, 1);
    /* prose: encode(strip(content)) + EOS, every target set */
    const ds_item *p = &d->items[0];
    int32_t *ids;
    size_t n;
    tok_encode(t, "# Notes\n\nSome prose here.", 25, TOK_PARSE_SPECIAL, &ids, &n, &e);
    CHECK_INT(p->len, (int)n);
    CHECK_INT(p->n_loss, (int)n);
    int same = 1;
    for (size_t i = 0; i < n; i++) same &= d->tok[p->off + i] == ids[i] && (i + 1 >= n || d->tgt[p->off + i] == ids[i + 1]);
    CHECK(same);
    CHECK_INT(d->tgt[p->off + n - 1], tok_eos(t));
    free(ids);
    /* instruction: targets only on "Four.<|im_end|>" */
    const ds_item *q = &d->items[1];
    strbuf sb = STRBUF_INIT;
    chat_msg m[2] = {{"user", "What is two plus two?"}, {"assistant", "Four."}};
    chat_span sp;
    size_t ns;
    chat_render(dl, NULL, m, 2, 0, &sb, &sp, &ns, &e);
    int32_t *ans;
    size_t na;
    tok_encode(t, sb.buf + sp.start, sp.turn_end - sp.start, TOK_PARSE_SPECIAL, &ans, &na, &e);
    CHECK_INT(q->n_loss, (int)na);
    int k = 0;
    for (int i = 0; i < q->len; i++)
        if (d->tgt[q->off + i] >= 0) { CHECK(d->tgt[q->off + i] == ans[k]); k++; }
    CHECK_INT(k, (int)na);
    CHECK_INT(ans[na - 1], tok_find(t, "<|im_end|>"));
    free(ans);
    sb_free(&sb);
    dataset_free(d);
    /* loss_on: all trains the prompt too */
    o.loss_on_all = 1;
    dataset_build(doc, NULL, t, dl, &o, &d, &e);
    CHECK_INT(d->items[1].n_loss, d->items[1].len);
    dataset_free(d);
    doc_free(doc);
}

static void test_windows(tok *t, const chat_dialect *dl)
{
    /* A long prose row is split into windows of seq_len inputs that together
     * predict every token of the row exactly once. */
    strbuf sb = STRBUF_INIT;
    sb_puts(&sb, HDR);
    for (int i = 0; i < 60; i++) sb_printf(&sb, "word%d is followed by more words. ", i);
    sb_puts(&sb, "\n");
    dlm_doc *doc = parse(sb.buf);
    ds_opts o = {.seq_len = 64, .seed = 42, .val_frac = 0.0};
    dataset *d;
    dlm_err e;
    CHECK_INT(dataset_build(doc, NULL, t, dl, &o, &d, &e), 0);
    int32_t *ids;
    size_t n;
    const doc_section *s = doc_section_at(doc, 0);
    tok_encode(t, s->content, s->content_len - 1, TOK_PARSE_SPECIAL, &ids, &n, &e); /* content ends in "\n"? */
    int total = 0;
    for (int i = 0; i < d->n_items; i++) {
        CHECK(d->items[i].len <= 64);
        total += d->items[i].n_loss;
    }
    CHECK_INT(d->n_windows_split, 1);
    CHECK(d->n_items > 3);
    CHECK_INT(total, (int)d->n_tok); /* every input predicts its successor */
    CHECK_INT(d->tgt[d->n_tok - 1], tok_eos(t));
    free(ids);
    sb_free(&sb);
    dataset_free(d);
    doc_free(doc);
}

/* Packing changes the layout, never an item's loss: the per-item NLL of a
 * packed batch equals the NLL of each item run alone. */
static void test_packing_loss(tok *t, const chat_dialect *dl)
{
    strbuf sb = STRBUF_INIT;
    sb_puts(&sb, HDR);
    for (int i = 0; i < 6; i++)
        sb_printf(&sb, "::instruction::\n### Q\nQuestion number %d?\n### A\nAnswer %d is short.\n\n", i, i * 7);
    sb_puts(&sb, "::prose::\nA prose paragraph to pack with the rest.\n");
    dlm_doc *doc = parse(sb.buf);
    ds_opts o = {.seq_len = 256, .seed = 42, .val_frac = 0.0};
    dataset *d;
    dlm_err e;
    CHECK_INT(dataset_build(doc, NULL, t, dl, &o, &d, &e), 0);
    model *m;
    CHECK_INT(model_load(FIX, &m, &e), 0);
    int items[16], n = d->n_items;
    for (int i = 0; i < n; i++) items[i] = i;
    int32_t tk[8 * 256], tg[8 * 256], ps[8 * 256], sg[8 * 256];
    token_batch b;
    int64_t nl;
    CHECK_INT(dataset_fill(d, items, n, 1, 8, 256, tk, tg, ps, sg, &b, &nl), 0);
    CHECK(b.B < n); /* items share sequences */
    decoder_opts fo = {.B = 8, .T = 256};
    decoder *f;
    CHECK_INT(decoder_create(m, NULL, &fo, &f, &e), 0);
    static float nll_packed[8 * 256], nll_one[8 * 256]; /* [B*T] of the fill buffers */
    int64_t cnt;
    double packed = decoder_loss(f, &b, nll_packed, NULL, &cnt);
    double alone = 0;
    for (int i = 0; i < n; i++) {
        token_batch b1;
        int64_t nl1;
        dataset_fill(d, &items[i], 1, 1, 8, 256, tk + 256 * 4, tg + 256 * 4, ps + 256 * 4, sg + 256 * 4, &b1, &nl1);
        alone += decoder_loss(f, &b1, nll_one, NULL, &cnt);
    }
    CHECK_NEAR(packed, alone, 1e-4 * fabs(alone));
    CHECK_INT(nl, d->train_loss_tokens + d->val_loss_tokens);
    /* unpacked: one item per sequence, same total */
    CHECK_INT(dataset_fill(d, items, n, 0, 8, 256, tk, tg, ps, sg, &b, &nl), 0);
    CHECK_INT(b.B, n);
    double unpacked = decoder_loss(f, &b, NULL, NULL, &cnt);
    CHECK_NEAR(unpacked, alone, 1e-4 * fabs(alone));
    decoder_free(f);
    model_free(m);
    /* batching: every train item once per epoch, in an order keyed by epoch */
    int seen[16] = {0}, per = dataset_steps_per_epoch(d, 2, 2), got[4];
    for (int s = 0; s < per; s++)
        for (int mi = 0; mi < 2; mi++) {
            int c = dataset_micro_items(d, 42, 0, s, mi, 2, 2, got);
            for (int i = 0; i < c; i++) seen[got[i]]++;
        }
    int once = 1;
    for (int i = 0; i < d->n_train; i++) once &= seen[d->train[i]] == 1;
    CHECK(once);
    int a0[4], a1[4];
    dataset_micro_items(d, 42, 0, 0, 0, 4, 1, a0);
    dataset_micro_items(d, 42, 1, 0, 0, 4, 1, a1);
    CHECK(memcmp(a0, a1, sizeof a0) != 0);
    sb_free(&sb);
    dataset_free(d);
    doc_free(doc);
}

/* training.multi_turn: each training pair also as the last turn of a
 * conversation with 1 + (i + r) % 3 earlier turns drawn from the other
 * training pairs; loss on its answer only; validation pairs neither asked
 * nor drawn; too long a conversation loses its oldest turns. */
static int count_id(const int32_t *v, int n, int32_t id)
{
    int c = 0;
    for (int i = 0; i < n; i++) c += v[i] == id;
    return c;
}

static void test_conversations(tok *t, const chat_dialect *dl)
{
    char text[4096];
    snprintf(text, sizeof text,
             "%s::instruction::\n### Q\nQ zero?\n### A\nA zero.\n\n### Q\nQ one?\n### A\nA one.\n\n"
             "### Q\nQ two?\n### A\nA two.\n\n::instruction::\n### Q\nQ three?\n### A\nA three.\n", HDR);
    dlm_doc *doc = parse(text);
    ds_opts o = {.seq_len = 2048, .seed = 42, .val_frac = 0.0};
    dataset *d0, *d, *d2;
    dlm_err e;
    CHECK_INT(dataset_build(doc, NULL, t, dl, &o, &d0, &e), 0);
    CHECK_INT(d0->n_items, 4);
    CHECK_INT(d0->rows_conv, 0);
    o.multi_turn = 1;
    CHECK_INT(dataset_build(doc, NULL, t, dl, &o, &d, &e), 0);
    CHECK_INT(d->n_items, 8);
    CHECK_INT(d->rows_conv, 4);
    CHECK_INT(d->rows_instr, 4);
    CHECK_INT(d->train_msg_rows, 4);   /* the CPT fraction counts the document's rows only */
    /* the single-turn rows are unchanged, first */
    CHECK_INT(d->n_items > 0 && d0->n_tok <= d->n_tok, 1);
    CHECK(!memcmp(d->tok, d0->tok, (size_t)d0->n_tok * sizeof *d->tok));
    int32_t im = tok_find(t, "<|im_start|>");
    const char *ans[] = {"A zero.", "A one.", "A two.", "A three."}, *qs[] = {"Q zero?", "Q one?", "Q two?", "Q three?"};
    for (int i = 0; i < 4; i++) {
        const ds_item *it = &d->items[4 + i];
        /* turns: 1 + i % 3 earlier pairs, then the pair: two <|im_start|> per pair */
        CHECK_INT(count_id(d->tok + it->off, it->len, im), 2 * (2 + i % 3));
        CHECK_INT(it->val, 0);
        /* targets: this pair's answer and <|im_end|> only */
        strbuf want = STRBUF_INIT, got = STRBUF_INIT, in = STRBUF_INIT;
        sb_printf(&want, "%s<|im_end|>", ans[i]);
        int32_t tg[64];
        int nt = 0;
        for (int k = 0; k < it->len && nt < 64; k++)
            if (d->tgt[it->off + k] >= 0) tg[nt++] = d->tgt[it->off + k];
        tok_decode(t, tg, (size_t)nt, 0, &got);
        CHECK_STR(sb_str(&got), sb_str(&want));
        CHECK_INT(it->n_loss, nt);
        /* the inputs end with this pair's question and the assistant header; the
         * earlier questions are the other pairs' */
        tok_decode(t, d->tok + it->off, (size_t)it->len, 0, &in);
        sb_reset(&want);
        sb_printf(&want, "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n%s", qs[i], ans[i]);
        CHECK(strstr(sb_str(&in), sb_str(&want)) != NULL);
        CHECK(strstr(sb_str(&in), qs[i]) == strstr(sb_str(&in), sb_str(&want)) + strlen("<|im_start|>user\n"));
        sb_free(&want);
        sb_free(&got);
        sb_free(&in);
    }
    /* deterministic from the seed, and another seed draws other turns */
    CHECK_INT(dataset_build(doc, NULL, t, dl, &o, &d2, &e), 0);
    CHECK(d2->n_tok == d->n_tok && !memcmp(d2->tok, d->tok, (size_t)d->n_tok * sizeof *d->tok));
    dataset_free(d2);
    int differs = 0;
    for (uint64_t seed = 1; seed < 6 && !differs; seed++) {
        o.seed = seed;
        CHECK_INT(dataset_build(doc, NULL, t, dl, &o, &d2, &e), 0);
        differs = d2->n_tok != d->n_tok || memcmp(d2->tok, d->tok, (size_t)d->n_tok * sizeof *d->tok);
        dataset_free(d2);
    }
    CHECK(differs);
    o.seed = 42;
    /* three rows per pair: turns 2, 3 and 4 each */
    o.multi_turn = 3;
    CHECK_INT(dataset_build(doc, NULL, t, dl, &o, &d2, &e), 0);
    CHECK_INT(d2->rows_conv, 12);
    int turns[5] = {0};
    for (int k = 4; k < d2->n_items; k++) turns[count_id(d2->tok + d2->items[k].off, d2->items[k].len, im) / 2]++;
    CHECK(turns[2] == 4 && turns[3] == 4 && turns[4] == 4);
    dataset_free(d2);
    /* a short sequence_len: conversations lose their oldest turns, never split */
    o.seq_len = d->items[5].len - 1;   /* item 5 (pair 1) has 2 earlier turns */
    CHECK_INT(dataset_build(doc, NULL, t, dl, &o, &d2, &e), 0);
    CHECK(d2->rows_conv_short >= 1);
    CHECK_INT(d2->n_windows_split, 0);
    for (int k = 4; k < d2->n_items; k++) CHECK(d2->items[k].len <= o.seq_len);
    dataset_free(d2);
    /* validation pairs: no conversation row, never an earlier turn */
    o.seq_len = 2048;
    o.multi_turn = 1;
    o.val_frac = 0.5;
    CHECK_INT(dataset_build(doc, NULL, t, dl, &o, &d2, &e), 0);
    int n_val_pairs = 0;
    for (int k = 0; k < 4; k++) n_val_pairs += d2->items[k].val;
    CHECK(n_val_pairs >= 1 && n_val_pairs <= 2);
    CHECK_INT(d2->rows_conv, 4 - n_val_pairs);
    for (int k = 4; k < d2->n_items; k++) {
        strbuf in = STRBUF_INIT;
        CHECK_INT(d2->items[k].val, 0);
        tok_decode(t, d2->tok + d2->items[k].off, (size_t)d2->items[k].len, 0, &in);
        for (int v = 0; v < 4; v++)
            if (d2->items[v].val) CHECK(strstr(sb_str(&in), qs[v]) == NULL);
        sb_free(&in);
    }
    dataset_free(d2);
    dataset_free(d);
    dataset_free(d0);
    doc_free(doc);
}

int main(void)
{
    kern_init(2);
    tok *t;
    dlm_err e;
    if (tok_load_for_model(FIX, &t, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    const chat_dialect *dl = chat_dialect_find("chatml");
    test_split_rule();
    test_rows(t, dl);
    test_windows(t, dl);
    test_packing_loss(t, dl);
    test_conversations(t, dl);
    tok_free(t);
    return check_done();
}
