/* kvpool — one session per slot (see kvpool.h for why the API is batched). */
#include "decoder/kvpool.h"

#include <stdlib.h>

#include "decoder/session.h"

struct kv_pool {
    int n_seq, n_ctx, V;
    session **s;
};

int kv_pool_create(const model *m, const lora *l, int n_seq, int n_ctx, int n_batch, kv_pool **out, dlm_err *e)
{
    *out = NULL;
    if (n_seq < 1 || n_seq > 1024) return err_set(e, NULL, "kv pool: %d sequences (1..1024)", n_seq);
    kv_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->s = calloc((size_t)n_seq, sizeof *p->s))) {
        free(p);
        return err_set(e, "MemoryError", "out of memory");
    }
    p->n_seq = n_seq;
    for (int i = 0; i < n_seq; i++)
        if (session_create(m, l, n_ctx, n_batch, &p->s[i], e)) {
            kv_pool_free(p);
            return -1;
        }
    p->n_ctx = session_n_ctx(p->s[0]);
    p->V = session_vocab(p->s[0]);
    *out = p;
    return 0;
}

void kv_pool_free(kv_pool *p)
{
    if (!p) return;
    for (int i = 0; i < p->n_seq; i++) session_free(p->s[i]);
    free(p->s);
    free(p);
}

int kv_pool_n_seq(const kv_pool *p) { return p->n_seq; }
int kv_pool_n_ctx(const kv_pool *p) { return p->n_ctx; }
int kv_pool_vocab(const kv_pool *p) { return p->V; }
int kv_pool_n_past(const kv_pool *p, int seq) { return session_n_past(p->s[seq]); }

void kv_pool_truncate(kv_pool *p, int seq, int n_past)
{
    session *s = p->s[seq];
    if (n_past <= 0) session_reset(s);
    else if (n_past < session_n_past(s)) session_copy_prefix(s, s, n_past);
}

int kv_pool_copy(kv_pool *p, int dst, int src, int n, dlm_err *e)
{
    if (dst < 0 || src < 0 || dst >= p->n_seq || src >= p->n_seq)
        return err_set(e, NULL, "kv pool: sequence out of range");
    if (session_copy_prefix(p->s[dst], p->s[src], n))
        return err_set(e, NULL, "kv pool: cannot copy %d positions (source holds %d)", n, session_n_past(p->s[src]));
    return 0;
}

int kv_pool_eval(kv_pool *p, int n, const int *seq, const int32_t *const *toks, const int *ntok, float *logits,
                 dlm_err *e)
{
    for (int i = 0; i < n; i++) {
        if (seq[i] < 0 || seq[i] >= p->n_seq) return err_set(e, NULL, "kv pool: sequence %d out of range", seq[i]);
        if (session_eval(p->s[seq[i]], toks[i], ntok[i], logits + (size_t)i * p->V, 0, e)) return -1;
    }
    return 0;
}
