/* named_mix — which adapters an inference command applies to a document
 * with training.adapters when it names none (docs/adapters.md), shared by
 * `dlm prompt`, `dlm repl`, `dlm api` and `dlm export`:
 *
 *   --adapter-mix a:w,...    those weights (NMIX_GIVEN)
 *   training.gate trained    the gate's weights for the prompt (NMIX_GATE),
 *                            or its mean over the document's own prompts
 *                            where one fixed adapter is needed (NMIX_GATE_MEAN:
 *                            the original's "static_mean", export/gate_fallback.py)
 *   otherwise, --gate off    1/N over the adapters with a trained version (NMIX_EQUAL)
 *
 * The mix is W + Σ wᵢ·sᵢ·BᵢAᵢ, built exactly by stacking the pairs along
 * the rank (export/admix.h, linear). */
#ifndef DLM_NAMED_MIX_H
#define DLM_NAMED_MIX_H

#include "adapter/gate.h"
#include "export/admix.h"
#include "infer/target.h"
#include "util/err.h"

typedef enum { NMIX_GIVEN, NMIX_EQUAL, NMIX_GATE, NMIX_GATE_MEAN } nmix_mode;

typedef struct named_mix {
    nmix_mode mode;
    int gate_trained;               /* NMIX_GATE / _MEAN: 0 = the gate is uniform (cold start) */
    int n_probes;                   /* NMIX_GATE_MEAN: prompts averaged */
    int n;
    char names[ADMIX_MAX][64];
    double w[ADMIX_MAX];
    int n_left_out;                 /* NMIX_EQUAL: adapters without a trained version */
    char left_out[GATE_MAX][33];
} named_mix;

/* A usage error's message for --gate (NULL when fine): it needs a document
 * with training.gate enabled and none of --adapter/--adapter-mix/--no-adapter
 * (other != 0). gate may be NULL. */
const char *named_mix_gate_usage(const infer_target *t, const char *gate_arg, int other);

/* The mode for t (a document with named adapters, no --adapter): mix given
 * → NMIX_GIVEN; training.gate enabled, gate != "off" and a gate trained →
 * NMIX_GATE (per_prompt) or NMIX_GATE_MEAN; else NMIX_EQUAL, with
 * *gate_missing = 1 when a gate is enabled and wanted but not trained yet. */
nmix_mode named_mix_choose(const infer_target *t, const char *mix, const char *gate_arg, int per_prompt, int *gate_missing);

/* The weights for mode (prompt: NMIX_GATE's query). NMIX_GIVEN parses mix,
 * whose names must be declared (UnknownAdapterError). */
int named_mix_weights(const infer_target *t, nmix_mode mode, const char *mix, const char *prompt, named_mix *m,
                      dlm_err *e);

/* Each adapter's current version stacked with its weight into *out (NULL
 * when m->n is 0). PromptError when one has no trained version. */
int named_mix_build(const infer_target *t, const named_mix *m, lora **out, dlm_err *e);

/* "gate: a 0.700, b 0.300" style line into buf (label, then name weight pairs). */
void named_mix_describe(const named_mix *m, char *buf, size_t cap);

#endif
