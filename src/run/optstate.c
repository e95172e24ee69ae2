/* optstate — the optimizer a run trains with (training.optimizer): the
 * 32-bit AdamW of grad/optim.h or the 8-bit block-wise AdamW of
 * grad/optim8.h, its buffers, its step, and its part of training_state.bin
 * (adapter/state.h, kind 0 or 1). trainer.c and pref.c call these; nothing
 * else knows which one runs. */
#include <stdlib.h>
#include <string.h>

#include "adapter/state.h"
#include "grad/optim8.h"
#include "run/run.h"

int run_optim_is8(const doc_training *tr)
{
    return tr->optimizer == DOC_OPT_ADAMW_BNB_8BIT || tr->optimizer == DOC_OPT_PAGED_ADAMW_8BIT;
}

int run_optim_create(run *R, dlm_err *e)
{
    size_t n = R->l->n;
    if (run_optim_is8(&doc_fm(R->doc)->training)) return optim8_create(R->l, &R->o8, e);
    R->mom = calloc(n ? n : 1, sizeof(float));
    R->vel = calloc(n ? n : 1, sizeof(float));
    if (!R->mom || !R->vel) return err_set(e, "OOMError", "cannot allocate the AdamW moments (%zu MiB)", (n * 8) >> 20);
    /* every page taken before step 1 (overcommit) */
    memset(R->mom, 0, n * sizeof(float));
    memset(R->vel, 0, n * sizeof(float));
    return 0;
}

void run_optim_step(run *R, double lr, int64_t t)
{
    if (R->o8) optim8_step(R->o8, &R->optim, R->l->w, R->g, lr, t);
    else optim_adamw_step(&R->optim, R->l->w, R->g, R->mom, R->vel, R->l->n, lr, t);
}

void run_optim_fill_state(const run *R, train_state *s)
{
    if (!R->o8) {
        s->optim_kind = STATE_OPTIM_ADAMW;
        s->m = R->mom;
        s->v = R->vel;
        return;
    }
    const optim8 *o = R->o8;
    s->optim_kind = STATE_OPTIM_ADAMW8;
    s->n8 = o->k.n8;
    s->nblk = o->k.nblk;
    s->n32 = o->k.n32;
    s->c1 = o->c1;
    s->c2 = o->c2;
    s->a1 = o->a1;
    s->a2 = o->a2;
    s->m = o->m;
    s->v = o->v;
}

static const char *kind_name(uint32_t k)
{
    return k == STATE_OPTIM_ADAMW8 ? "8-bit AdamW moments (adamw_bnb_8bit / paged_adamw_8bit)"
                                   : "32-bit AdamW moments (adamw_torch)";
}

int run_optim_restore(run *R, const train_state *st, const char *path, dlm_err *e)
{
    uint32_t want = R->o8 ? STATE_OPTIM_ADAMW8 : STATE_OPTIM_ADAMW;
    const char *opt = doc_optimizer_names[doc_fm(R->doc)->training.optimizer];
    if (st->optim_kind != want) {
        err_set(e, "ResumeIntegrityError", "%s holds %s; this document trains with training.optimizer: %s", path,
                kind_name(st->optim_kind), opt);
        return err_hint(e, "set training.optimizer back to %s to continue, or start over with 'dlm train %s --fresh'",
                        st->optim_kind == STATE_OPTIM_ADAMW8 ? "adamw_bnb_8bit" : "adamw_torch", R->o->doc_path);
    }
    size_t n = R->l->n;
    if (!R->o8) {
        memcpy(R->mom, st->m, n * 4);
        memcpy(R->vel, st->v, n * 4);
        return 0;
    }
    optim8 *o = R->o8;
    if (st->n8 != o->k.n8 || st->nblk != o->k.nblk || st->n32 != o->k.n32) {
        err_set(e, "ResumeIntegrityError", "%s holds 8-bit optimizer state for another adapter layout", path);
        return err_hint(e, "the adapter settings changed; start over with 'dlm train %s --fresh'", R->o->doc_path);
    }
    memcpy(o->c1, st->c1, (size_t)st->n8);
    memcpy(o->c2, st->c2, (size_t)st->n8);
    memcpy(o->a1, st->a1, (size_t)st->nblk * 4);
    memcpy(o->a2, st->a2, (size_t)st->nblk * 4);
    memcpy(o->m, st->m, (size_t)st->n32 * 4);
    memcpy(o->v, st->v, (size_t)st->n32 * 4);
    return 0;
}

size_t run_optim_state_bytes(const run *R)
{
    train_state s;
    memset(&s, 0, sizeof s);
    s.n = R->l->n;
    s.best = R->best;
    run_optim_fill_state(R, &s);
    return state_size(&s);
}

void run_optim_free(run *R)
{
    optim8_free(R->o8);
    R->o8 = NULL;
}
