/* admix — several LoRA adapters of one base combined into one adapter that
 * llama.cpp (or a merge) applies as Σ wᵢ·sᵢ·BᵢAᵢ (sᵢ = alphaᵢ / rᵢ).
 *
 *   linear  exact: per module the pairs are stacked along the rank,
 *           A = [A₁; A₂; …] and B = [w₁s₁B₁ | w₂s₂B₂ | …], rank R = Σ rᵢ,
 *           alpha = R so that llama.cpp's alpha / rank is 1. A module one
 *           adapter lacks has zero rows / columns there.
 *   svd     the same sum re-factored to rank max rᵢ by truncated SVD,
 *           computed on the low-rank product through the QR factors of the
 *           stacked B and Aᵀ (the d×d matrix is never formed):
 *           B = Q_B R_B, Aᵀ = Q_A R_A, R_B R_Aᵀ = U Σ Vᵀ (one-sided Jacobi),
 *           then B' = Q_B (UΣ)[:, :r], A' = (Q_A V[:, :r])ᵀ, alpha = r.
 *           Each module's relative Frobenius error √(Σ discarded σ²) / √(Σ σ²)
 *           is returned (that is exactly ‖ΔW − ΔW'‖_F / ‖ΔW‖_F). */
#ifndef DLM_ADMIX_H
#define DLM_ADMIX_H

#include "decoder/lora.h"
#include "weights/model.h"
#include "util/err.h"

#define ADMIX_MAX 8

typedef enum { ADMIX_LINEAR = 0, ADMIX_SVD } admix_method;

typedef struct admix_spec {
    int n;
    char src[ADMIX_MAX][256];   /* a version (v0001) or an adapter folder */
    double w[ADMIX_MAX];
} admix_spec;

/* "v0001:0.7,v0002:0.3" → spec. Weights are finite numbers (negative allowed:
 * a difference of adapters); at least one source, at most ADMIX_MAX. */
int admix_parse(const char *text, admix_spec *out, dlm_err *e);
/* "linear" / "svd" → method; -1 if unknown. */
int admix_method_parse(const char *s);
const char *admix_method_name(admix_method m);

/* Combine n adapters (none DoRA, all for m) with weights w. For svd,
 * rel_err (when not NULL) gets a malloc'd [n_layer * LM_COUNT] array of
 * each module's relative error (-1 where the module is not targeted). */
int admix_build(const model *m, lora *const *ls, const double *w, int n, admix_method method, lora **out,
                double **rel_err, dlm_err *e);

#endif
