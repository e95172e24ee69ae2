/* target — what an inference command runs: a base model, its tokenizer and
 * chat dialect, and (for a document) the store's current adapter and the
 * document's system prompt. Shared by prompt, repl, perplexity and export. */
#ifndef DLM_TARGET_H
#define DLM_TARGET_H

#include "tokens/chat.h"
#include "doc/doc.h"
#include "weights/model.h"
#include "weights/registry.h"
#include "tokens/tok.h"
#include "decoder/lora.h"
#include "util/err.h"

typedef struct infer_target {
    dlm_doc *doc;                 /* NULL with --base */
    char store[4096];             /* "" without a document */
    base_ref base;
    char base_spec[4096];
    char model_path[4096];
    model *m;
    tok *t;
    lora *l;                      /* NULL: no adapter (none trained, or --no-adapter) */
    int version;                  /* adapter version in use, 0 = none */
    const char *adapter_name;     /* the named adapter loaded (target_opts.adapter), NULL flat */
    int named;                    /* the document declares training.adapters */
    char adapter_dir[4200];
    const chat_dialect *dialect;  /* NULL when the base has no chat template */
    const char *system_prompt;    /* the document's, or NULL */
} infer_target;

typedef struct target_opts {
    const char *doc_path;         /* or NULL */
    const char *base;             /* --base (overrides the document's) */
    const char *home;
    int use_adapter;              /* 0 = --no-adapter */
    int offline;
    const char *adapter;          /* --adapter NAME: that adapter of training.adapters (its current.txt);
                                   * NULL on a document with named adapters loads none (the caller mixes) */
} target_opts;

int target_open(const target_opts *o, infer_target *t, dlm_err *e);
void target_close(infer_target *t);

#endif
