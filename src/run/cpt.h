/* cpt — training.cpt, continued pretraining (DAPT), as the original's
 * train/cpt/ (runtime.py, schedule.py, embed_warmup.py) and trainer.py do:
 *
 *   schedule  auto: DAPT when the train split's prose ("text") rows are more
 *             than 70% of its text + Q/A ("messages") rows (tag-weight
 *             copies and replay rows counted, preference triples not);
 *             dapt / sft: forced. DAPT replaces lr_scheduler, warmup_ratio
 *             and min_lr_ratio with transformers' cosine_with_min_lr, a 20%
 *             warmup (ceil(0.2·total) steps) and a floor of 10% of the peak
 *             (dapt_sft_config_overrides). SFT leaves them as written.
 *   embed_warmup_steps N > 0: steps 1..N train the input embedding and
 *             the LM head (one matrix when tied) with the LoRA weights, as
 *             the original's schema describes; they are saved with the
 *             adapter as PEFT's modules_to_save and frozen from step N+1
 *             (run/embed.c, docs/cpt.md). The original's callback flips
 *             requires_grad after transformers built the optimizer, so its
 *             embeddings only enlarge the clip norm and never move: dlm does
 *             what its docstrings say, not that.
 *
 * The preference phase ignores training.cpt (the original's DPO/ORPO
 * configs do not read it). */
#ifndef DLM_CPT_H
#define DLM_CPT_H

#include <stdint.h>
#include "doc/doc.h"
#include "grad/optim.h"
#include "tokens/dataset.h"
#include "util/json.h"

#define CPT_FRACTION_THRESHOLD 0.7   /* runtime.py _CPT_FRACTION_THRESHOLD */
#define CPT_DAPT_WARMUP_RATIO 0.2    /* schedule.py DAPT_WARMUP_RATIO */
#define CPT_DAPT_FLOOR_RATIO 0.1     /* schedule.py DAPT_FLOOR_RATIO (min_lr_rate) */

typedef struct cpt_choice {
    const char *setting;        /* training.cpt.schedule: "auto", "dapt", "sft" */
    int dapt;                   /* the DAPT schedule was chosen */
    double fraction;            /* text / (text + messages) train rows; 0 when there are none */
    int text_rows, msg_rows;
    int64_t embed_warmup_steps;
} cpt_choice;

/* Decide from the document's setting and the dataset's train rows. */
void cpt_choose(const doc_training *tr, const dataset *ds, cpt_choice *c);
/* The SFT phase's optimizer settings for a run of `total` steps: the
 * document's (learning_rate, weight_decay, lr_scheduler, warmup_ratio,
 * min_lr_ratio), then cpt_apply. Train and doctor both call it. */
void cpt_sft_optim(const doc_training *tr, const cpt_choice *c, int64_t total, optim_config *o);
/* DAPT: the schedule's overrides on o (sft: nothing). */
void cpt_apply(const cpt_choice *c, optim_config *o);
/* Do step k's (0-based) gradients include the embeddings'? */
int cpt_embed_step(const cpt_choice *c, int64_t k);
/* {setting, schedule, cpt_fraction, text_rows, messages_rows, lr_scheduler,
 * warmup_ratio, warmup_steps, min_lr_ratio, embed_warmup_steps} with the
 * optimizer's values after cpt_apply. */
json_t *cpt_json(const cpt_choice *c, const optim_config *o);

#endif
