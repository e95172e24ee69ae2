/* gate — the learned router over a document's named adapters
 * (training.gate, docs/reference/original-spec.md §3.9; docs/adapters.md):
 *
 *   x (mean-pooled base hidden state of a prompt, [in])
 *   → Linear(in → hid) → GELU (erf) → Linear(hid → n) → softmax → wᵢ
 *
 * trained with AdamW (torch's defaults: betas 0.9/0.999, eps 1e-8,
 * weight_decay 0.01) on loss = CE(z, label) − λ·H(p), H = −Σ p log(p + 1e-9),
 * both means over the batch, as the original's gate/trainer.py. Stored as
 * <store>/adapter/_gate/gate_config.json {input_dim, hidden_proj_dim,
 * adapter_names, mode, entropy_lambda} + gate.safetensors with
 * nn.Sequential's names (0.weight, 0.bias, 2.weight, 2.bias); mode
 * "uniform" (cold start) has no weights file and gives 1/N each. */
#ifndef DLM_GATE_H
#define DLM_GATE_H

#include <stddef.h>
#include <stdint.h>
#include "util/err.h"

#define GATE_MAX 64             /* adapters one gate routes between */
#define GATE_ENTROPY_EPS 1e-9

typedef struct gate {
    int in, hid, n;
    int uniform;                /* mode "uniform": no weights */
    double entropy_lambda;
    char names[GATE_MAX][33];
    float *w;                   /* W1 [hid, in], b1 [hid], W2 [n, hid], b2 [n] */
    size_t nw;
} gate;

int gate_create(int in, int hid, int n, int uniform, gate **out, dlm_err *e);
void gate_free(gate *g);
/* torch nn.Linear's default init: weights and biases U(−1/√fan_in, 1/√fan_in) */
void gate_init(gate *g, uint64_t seed);
/* probs [B, n] of x [B, in] (uniform gate: 1/n each). */
void gate_forward(const gate *g, const float *x, int B, float *probs);
/* loss = CE − λ·H over rows x [B, in] with labels y [B]; the gradient
 * into grad [nw] when not NULL; ce and ent (may be NULL) get the parts. */
double gate_loss(const gate *g, const float *x, const int *y, int B, double lambda, float *grad, double *ce,
                 double *ent);

typedef struct gate_adamw {
    double lr, beta1, beta2, eps, weight_decay;
    int64_t t;
    float *m, *v;
} gate_adamw;

int gate_adamw_init(gate_adamw *o, const gate *g, double lr, dlm_err *e);
/* One torch.optim.AdamW step with grad. */
void gate_adamw_step(gate_adamw *o, gate *g, const float *grad);
void gate_adamw_free(gate_adamw *o);

typedef struct gate_train_result {
    double final_loss, final_entropy;   /* EWMA (alpha 0.9), as the original reports */
    double mean_weight[GATE_MAX];       /* mean softmax over the training rows */
} gate_train_result;

/* steps AdamW steps on X [N, in], Y [N], batches of min(16, N) rows drawn
 * without replacement (a fresh permutation when one is used up). */
int gate_train(gate *g, const float *X, const int *Y, int N, int steps, double lr, double lambda, uint64_t seed,
               gate_train_result *r, dlm_err *e);

/* Write dir/gate_config.json (+ gate.safetensors when trained; a uniform
 * gate removes a stale one). */
int gate_save(const gate *g, const char *dir, dlm_err *e);
/* Read them back; GateConfigError on a malformed or inconsistent file. */
int gate_load(const char *dir, gate **out, dlm_err *e);

#endif
