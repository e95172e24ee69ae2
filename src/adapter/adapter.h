/* adapter — a PEFT adapter folder: adapter_config.json + adapter_model.safetensors,
 * in PEFT's layout and names so that Python's PEFT loads what dlm trains. */
#ifndef DLM_ADAPTER_H
#define DLM_ADAPTER_H

#include "weights/model.h"
#include "decoder/lora.h"
#include "util/err.h"

typedef struct adapter_meta {
    const char *base_model;       /* base_model_name_or_path: HF id or path */
    const char *revision;         /* NULL = null */
} adapter_meta;

/* PEFT's modules_to_save (training.cpt.embed_warmup_steps): the names
 * get_peft_model_state_dict gives the wrapped modules' weights
 * ("...embed_tokens.modules_to_save.default.weight" without
 * "modules_to_save." and ".default"), and the config list's bits. */
#define ADAPTER_EMBED_KEY "base_model.model.model.embed_tokens.weight"
#define ADAPTER_HEAD_KEY "base_model.model.lm_head.weight"
enum { ADAPTER_SAVES_EMBED = 1, ADAPTER_SAVES_HEAD = 2 };
/* The modules_to_save bits of dir's adapter_config.json (0 = none);
 * AdapterError for any other module name. */
int adapter_modules_to_save(const char *dir, unsigned *mts, dlm_err *e);

/* Write both files into dir (which must exist). With l->embd the
 * safetensors also hold both matrices and the config lists
 * modules_to_save [embed_tokens, lm_head]. */
int adapter_save(const char *dir, const lora *l, const adapter_meta *meta, dlm_err *e);
/* Read adapter_config.json into cfg (rank, alpha, dropout, targets, dora). */
int adapter_read_config(const char *dir, lora_config *cfg, dlm_err *e);
/* Read the config, create the lora for model m and load its tensors; with
 * modules_to_save, l->embd / l->head too (the decoder then uses them in
 * place of the base's). */
int adapter_load(const char *dir, const model *m, lora **out, dlm_err *e);
/* adapter_model.safetensors with PEFT's names and shapes (A [r,in], B
 * [out,r], magnitudes [out]) and metadata {"format": "pt"}. Loading takes
 * every tensor this lora expects (F32, F16 or BF16); a missing tensor, a
 * wrong shape, or an extra lora tensor is an error. */
struct st_file;
int lora_load_st(lora *l, const struct st_file *f, const char *label, dlm_err *e);
int lora_save_st(const lora *l, const char *path, dlm_err *e);
/* Turn a document's target_modules (NULL/auto = q,k,v,o) into a mask. */
int adapter_targets(const char *const *names, int n, int is_auto, unsigned *mask, dlm_err *e);

#endif
