/* pref_loss — the preference losses over completion log-probabilities, as
 * TRL computes them (DPOTrainer.dpo_loss, ORPOTrainer.odds_ratio_loss).
 *
 * A pass holds pairs as row pairs: row 2i is pair i's chosen sequence, row
 * 2i+1 its rejected one; a completion's log-probability is minus the sum
 * of its rows' target NLL. With z = (πc − πr) − (ρc − ρr) (policy π,
 * frozen reference ρ):
 *   sigmoid  −log σ(β z)          hinge  max(0, 1 − β z)
 *   ipo      (z − 1/(2β))², every log-prob averaged over its completion tokens
 *   orpo     −β log σ(log odds(πc) − log odds(πr)), log-probs averaged,
 *            odds(p) = p/(1 − p), no reference; plus the chosen completion's
 *            mean token NLL (nll_w per token)
 * rewards: chosen β(πc − ρc), rejected β(πr − ρr) (ORPO: β πc, β πr). */
#ifndef DLM_PREF_LOSS_H
#define DLM_PREF_LOSS_H

#include "tokens/batch.h"

typedef enum { PREF_SIGMOID = 0, PREF_HINGE, PREF_IPO, PREF_ORPO } pref_kind;

typedef struct pref_stats {
    double loss;            /* Σ w·loss(pair) + Σ nll_w·nll(chosen token) */
    double chosen, rejected, acc;   /* Σ over pairs of the rewards, and of chosen > rejected */
    int n;                  /* pairs */
} pref_stats;

/* Minus the summed NLL of row r's targets; *count = its targets. */
double pref_row_logp(const token_batch *b, const float *nll, int row, int *count);

/* One pass of n pairs: nll[B·T] from the forward (0 where no target),
 * ref_c/ref_r[n] the reference's summed log-probs (unused for ORPO), w the
 * weight of each pair's loss (1/pairs of the step), nll_w ORPO's weight per
 * chosen token (1/chosen tokens of the step). Writes scale[B·T] = dL/dnll
 * (0 off targets) and adds to *st; logp_c/logp_r[n] (may be NULL) get the
 * policy's summed log-probs. */
void pref_pass(pref_kind kind, double beta, const token_batch *b, const float *nll, int n, const double *ref_c,
               const double *ref_r, double w, double nll_w, float *scale, pref_stats *st, double *logp_c,
               double *logp_r);

#endif
