/* pref_loss — see pref_loss.h. Losses and their derivatives in double. */
#include "grad/pref_loss.h"

#include <math.h>
#include <string.h>

double pref_row_logp(const token_batch *b, const float *nll, int row, int *count)
{
    double s = 0;
    int c = 0;
    for (int t = 0; t < b->T; t++) {
        size_t q = (size_t)row * b->T + t;
        if (b->targets[q] >= 0) { s -= nll[q]; c++; }
    }
    *count = c;
    return s;
}

static double log_sigmoid(double x) { return x >= 0 ? -log1p(exp(-x)) : x - log1p(exp(x)); }
static double sigmoid(double x) { return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }

void pref_pass(pref_kind kind, double beta, const token_batch *b, const float *nll, int n, const double *ref_c,
               const double *ref_r, double w, double nll_w, float *scale, pref_stats *st, double *logp_c,
               double *logp_r)
{
    memset(scale, 0, (size_t)b->B * b->T * sizeof(float));
    for (int i = 0; i < n; i++) {
        int nc, nr;
        double lc = pref_row_logp(b, nll, 2 * i, &nc), lr = pref_row_logp(b, nll, 2 * i + 1, &nr);
        if (nc < 1) nc = 1;
        if (nr < 1) nr = 1;
        if (logp_c) logp_c[i] = lc;
        if (logp_r) logp_r[i] = lr;
        double dc, dr, loss, rc, rr, onll = 0;   /* dc, dr: dL/d(summed log-prob) */
        if (kind == PREF_ORPO) {
            double ac = lc / nc, ar = lr / nr;
            /* log(1 − e^a) = log(−expm1(a)), exact near a = 0 */
            double lo = (ac - ar) - (log(-expm1(ac)) - log(-expm1(ar)));
            loss = -beta * log_sigmoid(lo);
            double dlo = -beta * sigmoid(-lo);
            dc = dlo / -expm1(ac) / nc;   /* d lo/d ac = 1/(1 − e^ac) */
            dr = -dlo / -expm1(ar) / nr;
            rc = beta * ac;
            rr = beta * ar;
            onll = nll_w;
        } else {
            double ac = lc, ar = lr, fc = ref_c[i], fr = ref_r[i], ic = 1, ir = 1;
            if (kind == PREF_IPO) { ac /= nc; ar /= nr; fc /= nc; fr /= nr; ic = 1.0 / nc; ir = 1.0 / nr; }
            double z = (ac - fc) - (ar - fr), dz;
            if (kind == PREF_HINGE) {
                loss = 1 - beta * z > 0 ? 1 - beta * z : 0;
                dz = 1 - beta * z > 0 ? -beta : 0;
            } else if (kind == PREF_IPO) {
                double m = z - 1.0 / (2.0 * beta);
                loss = m * m;
                dz = 2 * m;
            } else {
                loss = -log_sigmoid(beta * z);
                dz = -beta * sigmoid(-beta * z);
            }
            dc = dz * ic;
            dr = -dz * ir;
            rc = beta * (ac - fc);
            rr = beta * (ar - fr);
        }
        st->loss += w * loss;
        st->chosen += rc;
        st->rejected += rr;
        st->acc += rc > rr;
        st->n++;
        /* log-prob = −Σ nll, so dL/dnll = −dL/dlogp (+ ORPO's NLL term) */
        for (int t = 0; t < b->T; t++) {
            size_t qc = (size_t)(2 * i) * b->T + t, qr = (size_t)(2 * i + 1) * b->T + t;
            if (b->targets[qc] >= 0) {
                scale[qc] = (float)(-w * dc + onll);
                st->loss += onll * nll[qc];
            }
            if (b->targets[qr] >= 0) scale[qr] = (float)(-w * dr);
        }
    }
}
