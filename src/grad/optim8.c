/* optim8 — see optim8.h. */
#include "grad/optim8.h"

#include <stdlib.h>
#include <string.h>

#include "kern/kern.h"

/* Visit the adapter's tensors in slab order (decoder/lora.h: per layer, per
 * targeted module in q k v o gate up down order: A [r, in], B [out, r],
 * then the DoRA magnitude [out]). The sizes come from the shape only, so
 * the plan and the allocation agree. */
typedef void (*seg_fn)(void *ctx, size_t len);
static void walk(const model_config *c, const lora_config *l, seg_fn fn, void *ctx)
{
    for (int layer = 0; layer < c->n_layer; layer++)
        for (int m = 0; m < LM_COUNT; m++) {
            if (!(l->targets >> m & 1)) continue;
            int in, out;
            lora_module_dims(c, m, &in, &out);
            fn(ctx, (size_t)l->rank * (size_t)in);
            fn(ctx, (size_t)out * (size_t)l->rank);
            if (l->dora) fn(ctx, (size_t)out);
        }
}

static void count_one(void *ctx, size_t len)
{
    optim8_counts *k = ctx;
    if (len >= OPTIM8_MIN_SIZE) {
        k->n8 += len;
        k->nblk += (len + KERN_Q8_BLOCK - 1) / KERN_Q8_BLOCK;
    } else {
        k->n32 += len;
    }
}

void optim8_plan_counts(const model_config *c, const lora_config *l, optim8_counts *out)
{
    memset(out, 0, sizeof *out);
    walk(c, l, count_one, out);
}

uint64_t optim8_state_bytes(const optim8_counts *k) { return k->n8 * 2 + k->nblk * 8 + k->n32 * 8; }

typedef struct seg_ctx {
    optim8 *o;
    optim8_counts at;
} seg_ctx;

static void add_seg(seg_ctx *s, size_t off, size_t len)
{
    optim8_seg *g = &s->o->seg[s->o->nseg++];
    g->off = off;
    g->len = len;
    g->q8 = len >= OPTIM8_MIN_SIZE;
    g->at = g->q8 ? s->at.n8 : s->at.n32;
    g->blk = s->at.nblk;
    count_one(&s->at, len);
}

int optim8_create(const lora *l, optim8 **out, dlm_err *e)
{
    *out = NULL;
    optim8 *o = calloc(1, sizeof *o);
    if (!o) return err_set(e, "OOMError", "cannot allocate the 8-bit optimizer state");
    o->n = l->n;
    int nseg = 0;
    for (int layer = 0; layer < l->n_layer; layer++)
        for (int m = 0; m < LM_COUNT; m++)
            if (lora_mod_at(l, layer, m)) nseg += l->cfg.dora ? 3 : 2;
    o->seg = calloc((size_t)(nseg ? nseg : 1), sizeof *o->seg);
    if (!o->seg) { optim8_free(o); return err_set(e, "OOMError", "cannot allocate the 8-bit optimizer state"); }
    seg_ctx sc = {.o = o};
    for (int layer = 0; layer < l->n_layer; layer++)
        for (int m = 0; m < LM_COUNT; m++) {
            const lora_mod *md = lora_mod_at(l, layer, m);
            if (!md) continue;
            size_t r = (size_t)l->cfg.rank;
            add_seg(&sc, md->off_a, r * (size_t)md->in);
            add_seg(&sc, md->off_b, (size_t)md->out * r);
            if (l->cfg.dora) add_seg(&sc, md->off_mag, (size_t)md->out);
        }
    o->k = sc.at;
    size_t n8 = o->k.n8, nb = o->k.nblk, n32 = o->k.n32;
    o->c1 = malloc(n8 ? n8 : 1);
    o->c2 = malloc(n8 ? n8 : 1);
    o->a1 = calloc(nb ? nb : 1, sizeof(float));
    o->a2 = calloc(nb ? nb : 1, sizeof(float));
    o->m = calloc(n32 ? n32 : 1, sizeof(float));
    o->v = calloc(n32 ? n32 : 1, sizeof(float));
    if (!o->c1 || !o->c2 || !o->a1 || !o->a2 || !o->m || !o->v) {
        optim8_free(o);
        return err_set(e, "OOMError", "cannot allocate the 8-bit optimizer state");
    }
    /* the code of zero with absmax 0: every moment starts at 0; writing
     * every byte also takes the pages before step 1 */
    memset(o->c1, kern_q8_zero_code(1), n8);
    memset(o->c2, kern_q8_zero_code(0), n8);
    memset(o->a1, 0, nb * sizeof(float));
    memset(o->a2, 0, nb * sizeof(float));
    memset(o->m, 0, n32 * sizeof(float));
    memset(o->v, 0, n32 * sizeof(float));
    *out = o;
    return 0;
}

void optim8_free(optim8 *o)
{
    if (!o) return;
    free(o->seg);
    free(o->c1);
    free(o->c2);
    free(o->a1);
    free(o->a2);
    free(o->m);
    free(o->v);
    free(o);
}

void optim8_step(optim8 *o, const optim_config *c, float *p, const float *g, double lr, int64_t t)
{
    kern_adamw_bnb s;
    kern_adamw_bnb_scalars(&s, lr, c->beta1, c->beta2, c->eps, c->weight_decay, t);
    for (int i = 0; i < o->nseg; i++) {
        const optim8_seg *sg = &o->seg[i];
        if (sg->q8)
            kern_adamw8(p + sg->off, g + sg->off, o->c1 + sg->at, o->c2 + sg->at, o->a1 + sg->blk, o->a2 + sg->blk,
                        (int64_t)sg->len, &s);
        else
            kern_adamw32_bnb(p + sg->off, g + sg->off, o->m + sg->at, o->v + sg->at, (int64_t)sg->len, &s);
    }
}
