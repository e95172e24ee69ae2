/* session — KV-cached inference forward. Same math as train/fb.c's forward
 * (and checked against it and against PyTorch in the tests), but for one
 * sequence and keeping K/V of every past position:
 *   kcache, vcache [L, n_ctx, KVH·HS]   (K after RoPE) */
#include "decoder/session.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"

struct session {
    const model *m;
    const lora *l;
    int n_ctx, n_batch, n_past;
    int C, Q, K, F, V, maxIO;
    float *kcache, *vcache;
    float *x, *xn, *q, *k, *v, *att, *tmp, *g, *u;  /* [n_batch, ·] */
    float *U, *L;                                   /* adapter scratch */
    float *dora_g, *dora_scratch;                   /* [L*7*maxIO], [maxIO + r] */
    int32_t *pos;
    float *rope_cs, *rope_sn;                       /* [n_batch, HS/2] RoPE table of a batch */
    float *rstd;                                    /* [n_batch] (unused output) */
    float *attn_scratch;
    void *slab;
};

typedef struct carver { char *base; size_t off; } carver;
static void *carve(carver *cv, size_t bytes)
{
    size_t at = (cv->off + 63) & ~(size_t)63;
    cv->off = at + bytes;
    return cv->base ? cv->base + at : NULL;
}
#define CARVE_F(cv, n) ((float *)carve((cv), (size_t)(n) * sizeof(float)))

static void carve_all(session *s, carver *cv, const model_config *c, int r, int dora)
{
    size_t nb = (size_t)s->n_batch, L = (size_t)c->n_layer;
    s->kcache = CARVE_F(cv, L * s->n_ctx * s->K);
    s->vcache = CARVE_F(cv, L * s->n_ctx * s->K);
    s->x = CARVE_F(cv, nb * s->C);
    s->xn = CARVE_F(cv, nb * s->C);
    s->q = CARVE_F(cv, nb * s->Q);
    s->k = CARVE_F(cv, nb * s->K);
    s->v = CARVE_F(cv, nb * s->K);
    s->att = CARVE_F(cv, nb * s->Q);
    s->tmp = CARVE_F(cv, nb * s->maxIO);
    s->g = CARVE_F(cv, nb * s->F);
    s->u = CARVE_F(cv, nb * s->F);
    s->U = CARVE_F(cv, nb * (size_t)(r ? r : 1));
    s->L = CARVE_F(cv, nb * s->maxIO);
    s->dora_g = dora ? CARVE_F(cv, L * LM_COUNT * s->maxIO) : NULL;
    s->dora_scratch = dora ? CARVE_F(cv, (size_t)s->maxIO + r) : NULL;
    s->pos = (int32_t *)carve(cv, nb * sizeof(int32_t));
    s->rope_cs = CARVE_F(cv, nb * (size_t)(c->head_dim / 2));
    s->rope_sn = CARVE_F(cv, nb * (size_t)(c->head_dim / 2));
    s->rstd = CARVE_F(cv, nb);
    attn_shape as = {1, s->n_batch, s->n_ctx, c->n_head, c->n_kv_head, c->head_dim, 0,
                     (int64_t)s->n_ctx * s->K, NULL};
    s->attn_scratch = CARVE_F(cv, kern_attn_scratch(&as));
}

static void set_dims(session *s, const model_config *c)
{
    s->C = c->d_model;
    s->Q = c->n_head * c->head_dim;
    s->K = c->n_kv_head * c->head_dim;
    s->F = c->n_ff;
    s->V = c->vocab;
    int mx = s->C > s->Q ? s->C : s->Q;
    s->maxIO = mx > s->F ? mx : s->F;
}

size_t session_plan_bytes(const model_config *c, int n_ctx, int n_batch)
{
    session s;
    memset(&s, 0, sizeof s);
    s.n_ctx = n_ctx;
    s.n_batch = n_batch;
    set_dims(&s, c);
    carver cv = {NULL, 0};
    carve_all(&s, &cv, c, 64, 0);
    return cv.off + 64;
}

int session_create(const model *m, const lora *l, int n_ctx, int n_batch, session **out, dlm_err *e)
{
    *out = NULL;
    if (n_ctx < 1 || n_batch < 1) return err_set(e, NULL, "bad session size");
    if (n_batch > n_ctx) n_batch = n_ctx;
    session *s = calloc(1, sizeof *s);
    if (!s) return err_set(e, "MemoryError", "out of memory");
    s->m = m;
    s->l = l;
    s->n_ctx = n_ctx;
    s->n_batch = n_batch;
    set_dims(s, &m->cfg);
    int r = l ? l->cfg.rank : 0, dora = l && l->cfg.dora;
    carver cv = {NULL, 0};
    carve_all(s, &cv, &m->cfg, r, dora);
    s->slab = aligned_alloc(64, (cv.off + 127) & ~(size_t)63);
    if (!s->slab) {
        free(s);
        return err_set(e, "OOMError", "cannot allocate %zu MiB for a %d-token context", cv.off >> 20, n_ctx);
    }
    memset(s->slab, 0, cv.off);
    cv.base = s->slab;
    cv.off = 0;
    carve_all(s, &cv, &m->cfg, r, dora);
    if (dora) {
        for (int layer = 0; layer < m->cfg.n_layer; layer++)
            for (int mm = 0; mm < LM_COUNT; mm++) {
                const lora_mod *md = lora_mod_at(l, layer, mm);
                if (!md) continue;
                float *g = s->dora_g + ((size_t)layer * LM_COUNT + mm) * s->maxIO;
                lora_dora_norm(l, m, layer, mm, g, s->dora_scratch);
                const float *mag = l->w + md->off_mag;
                for (int o = 0; o < md->out; o++) g[o] = mag[o] / g[o];
            }
    }
    *out = s;
    return 0;
}

void session_free(session *s)
{
    if (!s) return;
    free(s->slab);
    free(s);
}

void session_reset(session *s) { s->n_past = 0; }
int session_n_past(const session *s) { return s->n_past; }
int session_n_ctx(const session *s) { return s->n_ctx; }
int session_vocab(const session *s) { return s->V; }

static const float *bias_of(const layer_weights *w, int m)
{
    return m == LM_Q ? w->bq : m == LM_K ? w->bk : m == LM_V ? w->bv : NULL;
}

/* y[n,O] = x·Wᵀ + b + adapter (see train/lora.h). */
static void lin(session *s, int layer, int m, const float *x, float *y, int n)
{
    const wmat *W = lora_base_weight(s->m, layer, m);
    const float *bias = bias_of(&s->m->layers[layer], m);
    if (n == 1) kern_matvec(y, x, W, bias);
    else kern_matmul(y, x, W, bias, n, 0);
    const lora_mod *md = s->l ? lora_mod_at(s->l, layer, m) : NULL;
    if (!md) return;
    int r = s->l->cfg.rank, I = md->in, O = md->out;
    float sc = s->l->scale;
    kern_sgemm(0, 1, n, r, I, 1.0f, x, I, s->l->w + md->off_a, I, 0.0f, s->U, r);
    if (!s->l->cfg.dora) {
        kern_sgemm(0, 1, n, O, r, sc, s->U, r, s->l->w + md->off_b, r, 1.0f, y, O);
        return;
    }
    const float *g = s->dora_g + ((size_t)layer * LM_COUNT + m) * s->maxIO;
    kern_sgemm(0, 1, n, O, r, 1.0f, s->U, r, s->l->w + md->off_b, r, 0.0f, s->L, O);
    for (int i = 0; i < n; i++)
        for (int o = 0; o < O; o++) {
            size_t j = (size_t)i * O + o;
            float base = y[j] - (bias ? bias[o] : 0.0f);
            y[j] = y[j] + ((g[o] - 1.0f) * base + g[o] * s->L[j] * sc);
        }
}

static void eval_batch(session *s, const int32_t *tokens, int n, float *logits, int all_logits)
{
    const model *m = s->m;
    const model_config *c = &m->cfg;
    int C = s->C, K = s->K;
    for (int i = 0; i < n; i++) {
        s->pos[i] = s->n_past + i;
        const wmat *E = &m->tok_embd;
        kern_dequant_row(E->type, (const char *)E->data + (size_t)tokens[i] * E->row_bytes, s->x + (size_t)i * C, C);
    }
    attn_shape as = {1, n, s->n_past + n, c->n_head, c->n_kv_head, c->head_dim, s->n_past,
                     (int64_t)s->n_ctx * K, NULL};
    kern_rope_table(s->rope_cs, s->rope_sn, s->pos, n, c->head_dim, m->rope_inv_freq);
    for (int layer = 0; layer < c->n_layer; layer++) {
        const layer_weights *w = &m->layers[layer];
        float *kc = s->kcache + (size_t)layer * s->n_ctx * K, *vc = s->vcache + (size_t)layer * s->n_ctx * K;
        kern_rmsnorm_fwd(s->xn, s->rstd, s->x, w->attn_norm, n, C, c->rms_eps);
        lin(s, layer, LM_Q, s->xn, s->q, n);
        lin(s, layer, LM_K, s->xn, s->k, n);
        lin(s, layer, LM_V, s->xn, s->v, n);
        kern_rope_fwd_t(s->q, s->rope_cs, s->rope_sn, n, c->n_head, c->head_dim);
        kern_rope_fwd_t(s->k, s->rope_cs, s->rope_sn, n, c->n_kv_head, c->head_dim);
        memcpy(kc + (size_t)s->n_past * K, s->k, (size_t)n * K * sizeof(float));
        memcpy(vc + (size_t)s->n_past * K, s->v, (size_t)n * K * sizeof(float));
        kern_attn_fwd(s->att, NULL, s->q, kc, vc, &as, s->attn_scratch);
        lin(s, layer, LM_O, s->att, s->tmp, n);
        for (size_t i = 0; i < (size_t)n * C; i++) s->x[i] += s->tmp[i];
        kern_rmsnorm_fwd(s->xn, s->rstd, s->x, w->ffn_norm, n, C, c->rms_eps);
        lin(s, layer, LM_GATE, s->xn, s->g, n);
        lin(s, layer, LM_UP, s->xn, s->u, n);
        kern_swiglu_fwd(s->g, s->g, s->u, (int64_t)n * s->F);
        lin(s, layer, LM_DOWN, s->g, s->tmp, n);
        for (size_t i = 0; i < (size_t)n * C; i++) s->x[i] += s->tmp[i];
    }
    kern_rmsnorm_fwd(s->xn, s->rstd, s->x, m->out_norm, n, C, c->rms_eps);
    if (all_logits) kern_matmul(logits, s->xn, &m->output, NULL, n, 0);
    else kern_matvec(logits, s->xn + (size_t)(n - 1) * C, &m->output, NULL);
    s->n_past += n;
}

int session_eval(session *s, const int32_t *tokens, int n, float *logits, int all_logits, dlm_err *e)
{
    if (n <= 0) return err_set(e, NULL, "nothing to evaluate");
    if (s->n_past + n > s->n_ctx)
        return err_set(e, "ContextError", "context full: %d + %d tokens exceed the %d-token context",
                       s->n_past, n, s->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->V)
            return err_set(e, NULL, "token id %d outside the vocabulary (%d)", tokens[i], s->V);
    for (int done = 0; done < n;) {
        int b = n - done < s->n_batch ? n - done : s->n_batch;
        int last = done + b == n;
        float *lg = all_logits ? logits + (size_t)done * s->V : logits;
        /* A non-final batch of a last-logits call writes its last row into
         * the caller's [V] buffer too; the final batch overwrites it. */
        eval_batch(s, tokens + done, b, lg, all_logits);
        (void)last;
        done += b;
    }
    return 0;
}

/* ---- prefix copy (for decoder/kvpool.c) ------------------------------------
 * dst's first n positions become src's: K/V rows copied layer by layer,
 * n_past = n. dst == src truncates. Both sessions must come from the same
 * model with the same n_ctx (the pool makes them so). */
int session_copy_prefix(session *dst, const session *src, int n)
{
    if (n < 0 || n > src->n_past || n > dst->n_ctx || dst->n_ctx != src->n_ctx || dst->K != src->K) return -1;
    if (dst != src) {
        size_t row = (size_t)n * dst->K * sizeof(float);
        for (int layer = 0; layer < dst->m->cfg.n_layer; layer++) {
            size_t off = (size_t)layer * dst->n_ctx * dst->K;
            memcpy(dst->kcache + off, src->kcache + off, row);
            memcpy(dst->vcache + off, src->vcache + off, row);
        }
    }
    dst->n_past = n;
    return 0;
}
