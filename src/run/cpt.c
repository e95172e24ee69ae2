/* cpt — see cpt.h. */
#include "run/cpt.h"

#include <string.h>

void cpt_choose(const doc_training *tr, const dataset *ds, cpt_choice *c)
{
    memset(c, 0, sizeof *c);
    c->setting = doc_cpt_schedule_names[tr->cpt.schedule];
    c->text_rows = ds ? ds->train_text_rows : 0;
    c->msg_rows = ds ? ds->train_msg_rows : 0;
    int total = c->text_rows + c->msg_rows;
    /* runtime.py cpt_row_fraction: a Python float division */
    c->fraction = total ? (double)c->text_rows / (double)total : 0.0;
    switch (tr->cpt.schedule) {
    case DOC_CPT_DAPT: c->dapt = 1; break;
    case DOC_CPT_SFT: c->dapt = 0; break;
    default: c->dapt = c->fraction > CPT_FRACTION_THRESHOLD;
    }
    c->embed_warmup_steps = tr->cpt.embed_warmup_steps;
}

void cpt_sft_optim(const doc_training *tr, const cpt_choice *c, int64_t total, optim_config *o)
{
    optim_defaults(o);
    o->lr = tr->learning_rate;
    o->weight_decay = tr->weight_decay;
    o->warmup_ratio = tr->warmup_ratio;
    o->min_lr_ratio = tr->min_lr_ratio;
    o->total_steps = total;
    o->sched = tr->lr_scheduler == DOC_SCHED_LINEAR ? SCHED_LINEAR
             : tr->lr_scheduler == DOC_SCHED_CONSTANT ? SCHED_CONSTANT
             : tr->lr_scheduler == DOC_SCHED_COSINE_MIN_LR ? SCHED_COSINE_MIN_LR : SCHED_COSINE;
    cpt_apply(c, o);
}

void cpt_apply(const cpt_choice *c, optim_config *o)
{
    if (!c->dapt) return;
    o->sched = SCHED_COSINE_MIN_LR;
    o->warmup_ratio = CPT_DAPT_WARMUP_RATIO;
    o->min_lr_ratio = CPT_DAPT_FLOOR_RATIO;
}

int cpt_embed_step(const cpt_choice *c, int64_t k)
{
    return k >= 0 && k < c->embed_warmup_steps;
}

json_t *cpt_json(const cpt_choice *c, const optim_config *o)
{
    static const char *const sched[] = {"constant", "linear", "cosine", "cosine_with_min_lr"};
    json_t *j = json_pack("{s:s, s:s, s:f, s:i, s:i, s:s, s:f, s:I, s:f, s:I}", "setting", c->setting, "schedule",
                          c->dapt ? "dapt" : "sft", "cpt_fraction", c->fraction, "text_rows", c->text_rows,
                          "messages_rows", c->msg_rows, "lr_scheduler", sched[o->sched], "warmup_ratio",
                          o->warmup_ratio, "warmup_steps", (json_int_t)optim_warmup_steps(o), "min_lr_ratio",
                          o->sched == SCHED_COSINE_MIN_LR ? o->min_lr_ratio : 0.0, "embed_warmup_steps",
                          (json_int_t)c->embed_warmup_steps);
    return j;
}
