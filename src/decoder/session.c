/* session — KV-cached inference over one growing sequence: the decoder's
 * forward (decoder/forward.c) with a cache of n_ctx positions, fed the
 * prompt in batches of up to n_batch tokens and then one token at a time. */
#include "decoder/session.h"

#include <stdlib.h>

#include "decoder/decoder.h"

struct session {
    decoder *d;
    int n_ctx, n_batch, n_past, vocab, d_model;
    int delta;          /* M-RoPE: rotary position − cache position of every later token */
    const model_config *cfg;
    int32_t *pos3;      /* [3][n_batch] one batch's slice of a spliced call's pos3 */
};

static decoder_opts session_opts(int n_ctx, int n_batch)
{
    return (decoder_opts){.B = 1, .T = n_batch, .n_ctx = n_ctx};
}

size_t session_plan_bytes(const model_config *c, int n_ctx, int n_batch)
{
    if (n_batch > n_ctx) n_batch = n_ctx;
    decoder_opts o = session_opts(n_ctx, n_batch);
    return decoder_plan_bytes(c, NULL, &o);
}

int session_create(const model *m, const lora *l, int n_ctx, int n_batch, session **out, dlm_err *e)
{
    *out = NULL;
    if (n_ctx < 1 || n_batch < 1) return err_set(e, NULL, "bad session size");
    if (n_batch > n_ctx) n_batch = n_ctx;
    session *s = calloc(1, sizeof *s);
    if (!s) return err_set(e, "MemoryError", "out of memory");
    decoder_opts o = session_opts(n_ctx, n_batch);
    if (decoder_create(m, l, &o, &s->d, e)) {
        free(s);
        return -1;
    }
    s->n_ctx = n_ctx;
    s->n_batch = n_batch;
    s->cfg = &m->cfg;
    s->pos3 = malloc((size_t)3 * n_batch * sizeof *s->pos3);
    if (!s->pos3) {
        session_free(s);
        return err_set(e, "MemoryError", "out of memory");
    }
    s->vocab = m->cfg.vocab;
    s->d_model = m->cfg.d_model;
    *out = s;
    return 0;
}

void session_free(session *s)
{
    if (!s) return;
    decoder_free(s->d);
    free(s->pos3);
    free(s);
}

void session_reset(session *s) { s->n_past = s->delta = 0; }
int session_n_past(const session *s) { return s->n_past; }
int session_n_ctx(const session *s) { return s->n_ctx; }
int session_vocab(const session *s) { return s->vocab; }

/* tokens[0..n) in batches of n_batch; sp (or NULL) as session.h says */
static int eval_rows(session *s, const int32_t *tokens, int n, const session_splice *sp, float *logits,
                     int all_logits, dlm_err *e)
{
    if (n <= 0) return err_set(e, NULL, "nothing to evaluate");
    if (s->n_past + n > s->n_ctx)
        return err_set(e, "ContextError", "context full: %d + %d tokens exceed the %d-token context",
                       s->n_past, n, s->n_ctx);
    for (int i = 0; i < n; i++)
        if ((!sp || !sp->embed_row || sp->embed_row[i] < 0) && (tokens[i] < 0 || tokens[i] >= s->vocab))
            return err_set(e, NULL, "token id %d outside the vocabulary (%d)", tokens[i], s->vocab);
    if (sp) {
        token_batch b = {.B = 1, .T = n, .tokens = tokens, .embeds = sp->embeds, .embed_row = sp->embed_row,
                         .n_embeds = sp->n_embeds, .pos3 = sp->pos3};
        if (decoder_batch_check(s->cfg, &b, e)) return -1;
        if (sp->prefix < 0 || sp->prefix > n)
            return err_set(e, NULL, "a prefix-LM block of %d rows in a %d-row call", sp->prefix, n);
        if (sp->prefix > s->n_batch)
            return err_set(e, "ContextError", "the image + prompt block (%d tokens) is longer than the %d-token batch",
                           sp->prefix, s->n_batch);
        if (sp->prefix > 0 && s->n_past > 0)
            return err_set(e, NULL, "a prefix-LM block must open the sequence (%d tokens are cached)", s->n_past);
        if (sp->prefix > 0) s->delta = sp->delta;   /* paligemma: positions from 1 */
    }
    for (int done = 0; done < n;) {
        int b = n - done < s->n_batch ? n - done : s->n_batch;
        /* A non-final batch of a last-logits call writes its last row into
         * the caller's [V] buffer too; the final batch overwrites it. */
        float *lg = all_logits ? logits + (size_t)done * s->vocab : logits;
        dec_group g = {.row0 = 0, .n = b, .seq = 0, .n_past = s->n_past, .pos_off = s->delta,
                       .prefix = sp && done == 0 ? sp->prefix : 0};   /* the block is all in the first piece */
        dec_splice ds = {0};
        if (sp) {
            ds.embeds = sp->embeds;
            ds.embed_row = sp->embed_row ? sp->embed_row + done : NULL;
            if (sp->pos3) {
                for (int k = 0; k < 3; k++)
                    for (int i = 0; i < b; i++) s->pos3[k * b + i] = sp->pos3[(size_t)k * n + done + i];
                ds.pos3 = s->pos3;
            }
        }
        decoder_eval_splice(s->d, tokens + done, &g, 1, sp ? &ds : NULL, lg, all_logits);
        s->n_past += b;
        done += b;
    }
    if (sp && sp->pos3) s->delta = sp->delta;
    return 0;
}

int session_eval(session *s, const int32_t *tokens, int n, float *logits, int all_logits, dlm_err *e)
{
    return eval_rows(s, tokens, n, NULL, logits, all_logits, e);
}

int session_eval_splice(session *s, const int32_t *tokens, int n, const session_splice *sp, float *logits,
                        int all_logits, dlm_err *e)
{
    return eval_rows(s, tokens, n, sp, logits, all_logits, e);
}

int session_delta(const session *s) { return s->delta; }

int session_embed_mean(session *s, const int32_t *tokens, int n, float *out, dlm_err *e)
{
    session_reset(s);
    int C = s->d_model;
    float *lg = malloc((size_t)s->vocab * sizeof(float));
    double *acc = calloc((size_t)C, sizeof(double));
    int rc = -1;
    if (!lg || !acc) { err_set(e, "MemoryError", "out of memory"); goto done; }
    for (int done = 0; done < n;) {
        int b = n - done < s->n_batch ? n - done : s->n_batch;
        if (session_eval(s, tokens + done, b, lg, 0, e)) goto done;
        const float *h = decoder_hidden(s->d);
        for (int i = 0; i < b; i++)
            for (int c = 0; c < C; c++) acc[c] += h[(size_t)i * C + c];
        done += b;
    }
    for (int c = 0; c < C; c++) out[c] = (float)(acc[c] / n);
    rc = 0;
done:
    free(lg);
    free(acc);
    session_reset(s);
    return rc;
}

int session_copy_prefix(session *dst, const session *src, int n)
{
    if (n < 0 || n > src->n_past || n > dst->n_ctx || dst->n_ctx != src->n_ctx || dst->vocab != src->vocab) return -1;
    if (dst != src) decoder_cache_copy_from(dst->d, 0, src->d, 0, n);
    dst->n_past = n;
    /* the prefix keeps its image's offset (a cut before the image leaves
     * the text's 0: the repl rewinds to text turns only) */
    dst->delta = src->delta;
    return 0;
}
