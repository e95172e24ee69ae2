/* train — the full-parameter training loop of the embedded base (see
 * recipe.h): fb in full mode, global-norm clipping, AdamW per tensor. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "recipe.h"
#include "util/rng.h"

int tiny_trainer_new(full_model *f, int B, int T, tiny_trainer **out, dlm_err *e)
{
    *out = NULL;
    tiny_trainer *t = calloc(1, sizeof *t);
    if (!t) return err_set(e, "MemoryError", "out of memory");
    const model_config *c = &f->m.cfg;
    t->f = f;
    t->B = B;
    t->T = T;
    t->g = calloc(f->n, sizeof(float));
    t->m = calloc(f->n, sizeof(float));
    t->v = calloc(f->n, sizeof(float));
    t->fg.layers = calloc((size_t)c->n_layer, sizeof *t->fg.layers);
    t->ts = calloc((size_t)full_tensor_max(c), sizeof *t->ts);
    size_t bt = (size_t)B * (size_t)T;
    t->tok = calloc(bt, sizeof(int32_t));
    t->tgt = calloc(bt, sizeof(int32_t));
    t->pos = calloc(bt, sizeof(int32_t));
    t->seg = calloc(bt, sizeof(int32_t));
    if (!t->g || !t->m || !t->v || !t->fg.layers || !t->ts || !t->tok || !t->tgt || !t->pos || !t->seg) {
        tiny_trainer_free(t);
        return err_set(e, "MemoryError", "out of memory for the trainer");
    }
    full_grads_carve(c, t->g, &t->fg);
    t->nts = full_tensors(c, &f->p, t->ts);
    decoder_opts o = {.B = B, .T = T, .full = 1};
    if (decoder_create(&f->m, NULL, &o, &t->ctx, e)) {
        tiny_trainer_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

void tiny_trainer_free(tiny_trainer *t)
{
    if (!t) return;
    decoder_free(t->ctx);
    free(t->g);
    free(t->m);
    free(t->v);
    free(t->fg.layers);
    free(t->ts);
    free(t->tok);
    free(t->tgt);
    free(t->pos);
    free(t->seg);
    free(t);
}

void tiny_init_weights(full_model *f, uint64_t seed, double std)
{
    const model_config *c = &f->m.cfg;
    full_tensor *ts = calloc((size_t)full_tensor_max(c), sizeof *ts);
    if (!ts) return;
    int n = full_tensors(c, &f->p, ts);
    double out_std = std / sqrt(2.0 * c->n_layer);
    for (int i = 0; i < n; i++) {
        size_t cnt = (size_t)(ts[i].rows * ts[i].cols);
        if (ts[i].cols == 1) { /* RMSNorm weights */
            for (size_t k = 0; k < cnt; k++) ts[i].p[k] = 1.0f;
            continue;
        }
        /* residual-branch outputs start small so the stream is not swamped */
        double s = (strstr(ts[i].name, "o_proj") || strstr(ts[i].name, "down_proj")) ? out_std : std;
        for (size_t k = 0; k < cnt; k++) ts[i].p[k] = (float)(s * rng_normal(seed, RNG_WEIGHT_INIT, (uint64_t)i, k));
    }
    free(ts);
}

size_t tiny_stream_rows(const tiny_stream *s, int T)
{
    return s->n > 1 ? (s->n - 1) / (size_t)T : 0;
}

void tiny_fill_stream_row(tiny_trainer *t, int b, const tiny_stream *s, size_t r)
{
    size_t o = (size_t)b * (size_t)t->T, base = r * (size_t)t->T;
    for (int j = 0; j < t->T; j++) {
        t->tok[o + j] = s->ids[base + j];
        t->tgt[o + j] = s->ids[base + j + 1];
        t->pos[o + j] = j;
        t->seg[o + j] = 0;
    }
}

static int64_t count_targets(const tiny_trainer *t)
{
    int64_t n = 0;
    for (size_t i = 0; i < (size_t)t->B * (size_t)t->T; i++) n += t->tgt[i] >= 0;
    return n;
}

double tiny_train_step(tiny_trainer *t, const optim_config *oc, double lr, uint64_t seed, double *grad_norm)
{
    full_model *f = t->f;
    memset(t->g, 0, f->n * sizeof(float));
    int64_t want = count_targets(t), nl = 0;
    if (want == 0) return 0;
    token_batch b = {.B = t->B, .T = t->T, .tokens = t->tok, .targets = t->tgt, .pos = t->pos, .seg = t->seg};
    double sum = backward_step(t->ctx, &b, NULL, &t->fg, 1.0f / (float)want, seed, (uint64_t)t->adam_t, &nl);
    double gn = optim_clip(t->g, f->n, oc->max_grad_norm);
    if (grad_norm) *grad_norm = gn;
    t->adam_t++;
    /* decoupled weight decay on matrices only: norms keep their scale */
    optim_config nodecay = *oc;
    nodecay.weight_decay = 0;
    for (int i = 0; i < t->nts; i++) {
        size_t off = (size_t)(t->ts[i].p - f->slab), cnt = (size_t)(t->ts[i].rows * t->ts[i].cols);
        optim_adamw_step(t->ts[i].cols > 1 ? oc : &nodecay, f->slab + off, t->g + off, t->m + off, t->v + off, cnt, lr,
                         t->adam_t);
    }
    return nl ? sum / (double)nl : 0;
}

double tiny_eval(tiny_trainer *t, const tiny_stream *s, int rows, int64_t *n_tok)
{
    size_t avail = tiny_stream_rows(s, t->T);
    if ((size_t)rows > avail) rows = (int)avail;
    double sum = 0;
    int64_t n = 0;
    for (int r0 = 0; r0 < rows; r0 += t->B) {
        int nb = rows - r0 < t->B ? rows - r0 : t->B;
        for (int b = 0; b < nb; b++) tiny_fill_stream_row(t, b, s, (size_t)(r0 + b));
        token_batch bt = {.B = nb, .T = t->T, .tokens = t->tok, .targets = t->tgt, .pos = t->pos, .seg = t->seg};
        int64_t nl = 0;
        sum += decoder_loss(t->ctx, &bt, NULL, NULL, &nl);
        n += nl;
    }
    if (n_tok) *n_tok = n;
    return n ? sum / (double)n : NAN;
}
