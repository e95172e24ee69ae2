/* kvpool — see kvpool.h. One decoder with n_seq caches; a step packs the
 * sequences' new tokens into one batch of rows (decoder_eval_groups). */
#include "decoder/kvpool.h"

#include <stdlib.h>
#include <string.h>

#include "decoder/decoder.h"

struct kv_pool {
    decoder *d;
    int n_seq, n_ctx, n_batch, vocab;
    int *n_past;            /* [n_seq] */
    int32_t *rows;          /* [n_batch] tokens of one pass */
    dec_group *groups;      /* [n_seq] */
    int *done;              /* [n_seq] tokens of each request already fed this step */
    int *slot;              /* [n_seq] group index → request index */
    float *lg;              /* [n_seq, V] logits of one pass */
    /* a vision-language model (cfg.vl): each sequence's M-RoPE offset, and
     * one pass's spliced rows gathered (kv_pool_eval_splice) */
    int *delta;             /* [n_seq] */
    float *emb;             /* [n_batch, d_model] */
    int32_t *erow, *pos3;   /* [n_batch], [3, n_batch] */
    int C;
};

int kv_pool_create(const model *m, const lora *l, int n_seq, int n_ctx, int n_batch, kv_pool **out, dlm_err *e)
{
    *out = NULL;
    if (n_seq < 1 || n_ctx < 1 || n_batch < 1) return err_set(e, NULL, "bad pool size");
    if (n_batch < n_seq) n_batch = n_seq;   /* a decode step of every sequence fits one pass */
    kv_pool *p = calloc(1, sizeof *p);
    if (!p) return err_set(e, "MemoryError", "out of memory");
    p->n_seq = n_seq;
    p->n_ctx = n_ctx;
    p->n_batch = n_batch;
    p->vocab = m->cfg.vocab;
    p->n_past = calloc((size_t)n_seq, sizeof *p->n_past);
    p->rows = calloc((size_t)n_batch, sizeof *p->rows);
    p->groups = calloc((size_t)n_seq, sizeof *p->groups);
    p->done = calloc((size_t)n_seq, sizeof *p->done);
    p->slot = calloc((size_t)n_seq, sizeof *p->slot);
    p->lg = malloc((size_t)n_seq * (size_t)p->vocab * sizeof *p->lg);
    p->C = m->cfg.d_model;
    p->delta = calloc((size_t)n_seq, sizeof *p->delta);
    if (m->cfg.vl || m->cfg.audio) {   /* Qwen2-Audio: spliced rows, 1-D positions (no pos3) */
        p->emb = malloc((size_t)n_batch * (size_t)p->C * sizeof *p->emb);
        p->erow = malloc((size_t)n_batch * sizeof *p->erow);
        int mrope = m->cfg.vl == VL_QWEN2;   /* PaliGemma's positions are 1-D */
        p->pos3 = mrope ? malloc((size_t)3 * n_batch * sizeof *p->pos3) : NULL;
        if (!p->emb || !p->erow || (mrope && !p->pos3)) {
            kv_pool_free(p);
            return err_set(e, "MemoryError", "out of memory");
        }
    }
    decoder_opts o = {.B = 1, .T = n_batch, .n_ctx = n_ctx, .n_seq = n_seq};
    if (!p->n_past || !p->rows || !p->groups || !p->done || !p->slot || !p->lg || !p->delta) {
        kv_pool_free(p);
        return err_set(e, "MemoryError", "out of memory");
    }
    if (decoder_create(m, l, &o, &p->d, e)) {
        kv_pool_free(p);
        return -1;
    }
    *out = p;
    return 0;
}

void kv_pool_free(kv_pool *p)
{
    if (!p) return;
    decoder_free(p->d);
    free(p->n_past);
    free(p->rows);
    free(p->groups);
    free(p->done);
    free(p->slot);
    free(p->lg);
    free(p->delta);
    free(p->emb);
    free(p->erow);
    free(p->pos3);
    free(p);
}

int kv_pool_n_seq(const kv_pool *p) { return p->n_seq; }
int kv_pool_n_ctx(const kv_pool *p) { return p->n_ctx; }
int kv_pool_vocab(const kv_pool *p) { return p->vocab; }
int kv_pool_n_past(const kv_pool *p, int seq) { return seq >= 0 && seq < p->n_seq ? p->n_past[seq] : 0; }

void kv_pool_truncate(kv_pool *p, int seq, int n_past)
{
    if (seq < 0 || seq >= p->n_seq) return;
    if (n_past < 0) n_past = 0;
    if (n_past < p->n_past[seq]) p->n_past[seq] = n_past;
    if (!n_past) p->delta[seq] = 0;
}

int kv_pool_copy(kv_pool *p, int dst, int src, int n, dlm_err *e)
{
    if (dst < 0 || dst >= p->n_seq || src < 0 || src >= p->n_seq || n < 0 || n > p->n_past[src])
        return err_set(e, NULL, "bad cache copy (%d ← %d, %d positions)", dst, src, n);
    if (dst != src) decoder_cache_copy(p->d, dst, src, n);
    p->n_past[dst] = n;
    p->delta[dst] = p->delta[src];
    return 0;
}

int kv_pool_eval(kv_pool *p, int n, const int *seq, const int32_t *const *toks, const int *ntok, float *logits,
                 dlm_err *e)
{
    return kv_pool_eval_splice(p, n, seq, toks, ntok, NULL, logits, e);
}

int kv_pool_eval_splice(kv_pool *p, int n, const int *seq, const int32_t *const *toks, const int *ntok,
                        const kv_splice *const *sp, float *logits, dlm_err *e)
{
    int any = 0;
    for (int i = 0; sp && i < n; i++) any |= sp[i] != NULL;
    if (any && !p->emb) return err_set(e, "ModalityError", "image or audio rows given to a text model");
    if (n < 1 || n > p->n_seq) return err_set(e, NULL, "bad step: %d sequences", n);
    for (int i = 0; i < n; i++) {
        int s = seq[i];
        if (s < 0 || s >= p->n_seq || ntok[i] < 1) return err_set(e, NULL, "bad step: sequence %d", s);
        for (int j = 0; j < i; j++)
            if (seq[j] == s) return err_set(e, NULL, "sequence %d given twice in one step", s);
        if (p->n_past[s] + ntok[i] > p->n_ctx)
            return err_set(e, "ContextError", "context full: %d + %d tokens exceed the %d-token context",
                           p->n_past[s], ntok[i], p->n_ctx);
        for (int k = 0; k < ntok[i]; k++)
            if ((!sp || !sp[i] || sp[i]->embed_row[k] < 0) && (toks[i][k] < 0 || toks[i][k] >= p->vocab))
                return err_set(e, NULL, "token id %d outside the vocabulary (%d)", toks[i][k], p->vocab);
        int pre = sp && sp[i] ? sp[i]->prefix : 0;
        if (pre < 0 || pre > ntok[i])
            return err_set(e, NULL, "a prefix-LM block of %d rows in a %d-token step", pre, ntok[i]);
        if (pre > p->n_batch)
            return err_set(e, "ContextError", "the image + prompt block (%d tokens) is longer than the %d-token batch",
                           pre, p->n_batch);
        if (pre > 0 && p->n_past[s] > 0)
            return err_set(e, NULL, "a prefix-LM block must open the sequence (%d tokens are cached)", p->n_past[s]);
        p->done[i] = 0;
    }
    /* Passes of at most n_batch rows: every unfinished request gets a
     * share; a request's logits are those of the pass that fed its last
     * token. */
    for (;;) {
        int rows = 0, ng = 0, left = 0;
        for (int i = 0; i < n; i++) left += p->done[i] < ntok[i];
        if (!left) break;
        int share = p->n_batch / left;
        if (share < 1) share = 1;
        for (int i = 0; i < n && rows < p->n_batch; i++) {
            int rest = ntok[i] - p->done[i];
            if (rest <= 0) continue;
            int take = rest < share ? rest : share;
            if (take > p->n_batch - rows) take = p->n_batch - rows;
            int pre = any && sp[i] && p->done[i] == 0 ? sp[i]->prefix : 0;
            if (pre > take) {   /* the block goes whole, in this pass or a later one */
                if (pre > p->n_batch - rows) continue;
                take = pre;
            }
            if (pre > 0) p->delta[seq[i]] = sp[i]->delta;   /* PaliGemma: positions from 1 */
            memcpy(p->rows + rows, toks[i] + p->done[i], (size_t)take * sizeof(int32_t));
            p->groups[ng] = (dec_group){.row0 = rows, .n = take, .seq = seq[i], .n_past = p->n_past[seq[i]],
                                        .pos_off = p->delta[seq[i]], .prefix = pre};
            if (any) {   /* the pass's splice: spliced rows copied, the others' positions as dec_group's */
                const kv_splice *q = sp[i];
                for (int k = 0; k < take; k++) {
                    int r = rows + k, at = p->done[i] + k;
                    int32_t er = q ? q->embed_row[at] : -1;
                    p->erow[r] = er >= 0 ? r : -1;
                    if (er >= 0) memcpy(p->emb + (size_t)r * p->C, q->embeds + (size_t)er * p->C, (size_t)p->C * sizeof(float));
                    for (int st = 0; p->pos3 && st < 3; st++)
                        p->pos3[st * p->n_batch + r] = q && q->pos3 ? q->pos3[(size_t)st * q->pos3_stride + at]
                                                                    : p->n_past[seq[i]] + k + p->delta[seq[i]];
                }
            }
            p->slot[ng++] = i;
            rows += take;
        }
        if (any) {
            /* pos3 rows are [3][n_batch]: decoder_eval_splice reads [3][rows] */
            for (int st = 1; p->pos3 && st < 3; st++)
                memmove(p->pos3 + st * rows, p->pos3 + st * p->n_batch, (size_t)rows * sizeof(int32_t));
            dec_splice ds = {.embeds = p->emb, .embed_row = p->erow, .pos3 = p->pos3};
            decoder_eval_splice(p->d, p->rows, p->groups, ng, &ds, p->lg, 0);
        } else {
            decoder_eval_groups(p->d, p->rows, p->groups, ng, p->lg, 0);
        }
        for (int g = 0; g < ng; g++) {
            int i = p->slot[g];
            p->done[i] += p->groups[g].n;
            p->n_past[seq[i]] += p->groups[g].n;
            if (any && sp[i] && sp[i]->pos3 && p->done[i] == ntok[i]) p->delta[seq[i]] = sp[i]->delta;
            if (p->done[i] == ntok[i])
                memcpy(logits + (size_t)i * p->vocab, p->lg + (size_t)g * p->vocab, (size_t)p->vocab * sizeof(float));
        }
    }
    return 0;
}
