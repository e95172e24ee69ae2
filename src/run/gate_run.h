/* gate_run — after the named adapters, the learned gate (training.gate;
 * src/adapter/gate.h has the model, docs/adapters.md the behaviour):
 *
 *   probes: each section with a `#name` suffix gives one (name, prompt):
 *     instruction → its first question, preference → its first prompt,
 *     prose → its first 2048 characters (the original's gate/orchestrator.py)
 *   fewer than cold_start_floor probes for any adapter → mode "uniform"
 *   else: each prompt tokenized as plain text (with the tokenizer's BOS as
 *   HF's tokenizer(prompt)), run through the base without adapters, the
 *   final norm's output mean-pooled → x; the gate trains gate.steps AdamW
 *   steps at gate.lr with entropy_lambda; seed = training.seed
 *   → <store>/adapter/_gate/{gate_config.json, gate.safetensors}. */
#ifndef DLM_GATE_RUN_H
#define DLM_GATE_RUN_H

#include "adapter/gate.h"
#include "infer/target.h"
#include "util/err.h"

typedef struct gate_run_result {
    int trained;                    /* 0: mode uniform */
    int n_samples;
    int per_adapter[GATE_MAX];
    gate_train_result tr;
    char dir[4200];
} gate_run_result;

/* The gate of the document at doc_path (its store under home); the caller
 * holds no store lock (this takes it for the write). */
int gate_run(const char *doc_path, const char *home, int offline, gate_run_result *r, dlm_err *e);

/* The prompt embedding the gate routes on (see above) into out[d_model]. */
int gate_embed(const infer_target *t, const char *text, size_t len, float *out, dlm_err *e);

/* The gate's weights for a prompt: from <store>/adapter/_gate (uniform mode
 * or a trained gate), in the order of names[0..n) (the document's adapters).
 * GateConfigError when the stored gate routes other adapters. */
int gate_weights(const infer_target *t, const char *prompt, const char *const *names, int n, double *w, int *trained,
                 dlm_err *e);

/* The gate's mean weights over the document's own probes (the prompts it
 * trained on): the original's "static_mean" (export/gate_fallback.py:
 * the mean softmax over the training prompts), for consumers that cannot
 * run the gate per prompt (export, the api). A uniform gate gives 1/N.
 * *n_probes gets the prompts averaged. */
int gate_mean_weights(const infer_target *t, const char *const *names, int n, double *w, int *trained, int *n_probes,
                      dlm_err *e);

#endif
