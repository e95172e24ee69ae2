/* admix — adapter mixes (see admix.h). All arithmetic of the svd method is
 * in double: the factors are small (rank R = Σ rᵢ columns), and the
 * recorded error must be the true share of the discarded values. */
#include "export/admix.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int admix_method_parse(const char *s)
{
    if (!strcmp(s, "linear")) return ADMIX_LINEAR;
    if (!strcmp(s, "svd")) return ADMIX_SVD;
    return -1;
}

const char *admix_method_name(admix_method m) { return m == ADMIX_SVD ? "svd" : "linear"; }

int admix_parse(const char *text, admix_spec *out, dlm_err *e)
{
    memset(out, 0, sizeof *out);
    const char *p = text;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *colon = NULL;
        for (size_t i = 0; i < len; i++)
            if (p[i] == ':') colon = p + i;   /* the last ':' (a folder may hold one) */
        if (!colon || colon == p || colon + 1 == p + len) {
            err_set(e, "ExportError", "--adapter-mix: '%.*s' is not SOURCE:WEIGHT", (int)len, p);
            return err_hint(e, "write e.g. --adapter-mix v0001:0.7,v0002:0.3 (a version or an adapter folder)");
        }
        if (out->n == ADMIX_MAX) return err_set(e, "ExportError", "--adapter-mix: more than %d adapters", ADMIX_MAX);
        size_t sl = (size_t)(colon - p);
        if (sl >= sizeof out->src[0]) return err_set(e, "ExportError", "--adapter-mix: source name too long");
        memcpy(out->src[out->n], p, sl);
        out->src[out->n][sl] = 0;
        char num[64];
        size_t nl = len - sl - 1;
        if (nl >= sizeof num) nl = sizeof num - 1;
        memcpy(num, colon + 1, nl);
        num[nl] = 0;
        char *ep;
        errno = 0;
        double w = strtod(num, &ep);
        if (ep == num || *ep || errno || !isfinite(w)) {
            err_set(e, "ExportError", "--adapter-mix: weight '%s' of '%s' is not a number", num, out->src[out->n]);
            return err_hint(e, "write e.g. --adapter-mix v0001:0.7,v0002:0.3");
        }
        out->w[out->n++] = w;
        if (!end) break;
        p = end + 1;
    }
    if (out->n == 0) {
        err_set(e, "ExportError", "--adapter-mix: no adapters given");
        return err_hint(e, "write e.g. --adapter-mix v0001:0.7,v0002:0.3");
    }
    return 0;
}

/* Modified Gram–Schmidt, applied twice ("twice is enough"): X [rows, k]
 * row-major becomes Q (orthonormal columns, or zero columns where X is
 * rank-deficient), R [k, k] upper triangular with X = Q R. */
static void qr_mgs(double *X, int rows, int k, double *R)
{
    memset(R, 0, (size_t)k * k * sizeof *R);
    for (int j = 0; j < k; j++) {
        double n0 = 0;
        for (int r = 0; r < rows; r++) n0 += X[(size_t)r * k + j] * X[(size_t)r * k + j];
        n0 = sqrt(n0);
        for (int pass = 0; pass < 2; pass++)
            for (int i = 0; i < j; i++) {
                double d = 0;
                for (int r = 0; r < rows; r++) d += X[(size_t)r * k + i] * X[(size_t)r * k + j];
                for (int r = 0; r < rows; r++) X[(size_t)r * k + j] -= d * X[(size_t)r * k + i];
                R[i * k + j] += d;
            }
        double n = 0;
        for (int r = 0; r < rows; r++) n += X[(size_t)r * k + j] * X[(size_t)r * k + j];
        n = sqrt(n);
        /* a column inside the span of the earlier ones: a zero column of Q
         * and a zero row of R, so Q R is still X */
        if (n <= 1e-13 * (n0 > 0 ? n0 : 1) || n == 0) {
            for (int r = 0; r < rows; r++) X[(size_t)r * k + j] = 0;
            continue;
        }
        R[j * k + j] = n;
        for (int r = 0; r < rows; r++) X[(size_t)r * k + j] /= n;
    }
}

/* One-sided Jacobi (Hestenes): G [k, k] becomes U Σ (orthogonal columns),
 * V [k, k] the rotations, with G_in = (UΣ) Vᵀ. */
static void svd_jacobi(double *G, double *V, int k)
{
    for (int i = 0; i < k * k; i++) V[i] = 0;
    for (int i = 0; i < k; i++) V[i * k + i] = 1;
    for (int sweep = 0; sweep < 60; sweep++) {
        double off = 0;
        for (int p = 0; p < k - 1; p++)
            for (int q = p + 1; q < k; q++) {
                double a = 0, b = 0, c = 0;
                for (int r = 0; r < k; r++) {
                    a += G[r * k + p] * G[r * k + p];
                    b += G[r * k + q] * G[r * k + q];
                    c += G[r * k + p] * G[r * k + q];
                }
                if (c == 0 || fabs(c) <= 1e-15 * sqrt(a * b)) continue;
                off = fmax(off, fabs(c) / sqrt(a * b));
                double zeta = (b - a) / (2 * c);
                double t = (zeta >= 0 ? 1 : -1) / (fabs(zeta) + sqrt(1 + zeta * zeta));
                double cs = 1 / sqrt(1 + t * t), sn = cs * t;
                for (int r = 0; r < k; r++) {
                    double gp = G[r * k + p], gq = G[r * k + q];
                    G[r * k + p] = cs * gp - sn * gq;
                    G[r * k + q] = sn * gp + cs * gq;
                    double vp = V[r * k + p], vq = V[r * k + q];
                    V[r * k + p] = cs * vp - sn * vq;
                    V[r * k + q] = sn * vp + cs * vq;
                }
            }
        if (off < 1e-15) break;
    }
}

typedef struct { double v; int j; } sv_ix;
static int sv_cmp(const void *a, const void *b)
{
    double x = ((const sv_ix *)a)->v, y = ((const sv_ix *)b)->v;
    return x < y ? 1 : x > y ? -1 : ((const sv_ix *)a)->j - ((const sv_ix *)b)->j;
}

/* One module: Bs [out, R] (scaled, stacked), At [in, R] (Aᵀ stacked) →
 * rank-r factors into dst (A [r, in], B [out, r]); returns the error. */
static double svd_module(double *Bs, double *At, int out, int in, int R, int r, float *dA, float *dB, double *work)
{
    double *RB = work, *RA = RB + R * R, *G = RA + R * R, *V = G + R * R;
    qr_mgs(Bs, out, R, RB);
    qr_mgs(At, in, R, RA);
    for (int i = 0; i < R; i++)          /* G = R_B R_Aᵀ */
        for (int j = 0; j < R; j++) {
            double s = 0;
            for (int t = 0; t < R; t++) s += RB[i * R + t] * RA[j * R + t];
            G[i * R + j] = s;
        }
    svd_jacobi(G, V, R);
    sv_ix *ix = malloc((size_t)R * sizeof *ix);
    double total = 0, drop = 0;
    for (int j = 0; j < R; j++) {
        double s = 0;
        for (int i = 0; i < R; i++) s += G[i * R + j] * G[i * R + j];
        ix[j] = (sv_ix){s, j};
        total += s;
    }
    qsort(ix, (size_t)R, sizeof *ix, sv_cmp);
    for (int j = r; j < R; j++) drop += ix[j].v;
    memset(dA, 0, (size_t)r * in * sizeof *dA);
    memset(dB, 0, (size_t)out * r * sizeof *dB);
    for (int k = 0; k < r && k < R; k++) {
        int j = ix[k].j;
        for (int o = 0; o < out; o++) {      /* B'[:, k] = Q_B (UΣ)[:, j] */
            double s = 0;
            for (int t = 0; t < R; t++) s += Bs[(size_t)o * R + t] * G[t * R + j];
            dB[(size_t)o * r + k] = (float)s;
        }
        for (int c = 0; c < in; c++) {       /* A'[k, :] = (Q_A V[:, j])ᵀ */
            double s = 0;
            for (int t = 0; t < R; t++) s += At[(size_t)c * R + t] * V[t * R + j];
            dA[(size_t)k * in + c] = (float)s;
        }
    }
    free(ix);
    return total > 0 ? sqrt(drop / total) : 0;
}

int admix_build(const model *m, lora *const *ls, const double *w, int n, admix_method method, lora **out,
                double **rel_err, dlm_err *e)
{
    *out = NULL;
    if (rel_err) *rel_err = NULL;
    int R = 0, rmax = 0;
    unsigned targets = 0;
    for (int i = 0; i < n; i++) {
        if (ls[i]->cfg.dora) {
            err_set(e, "ExportError", "--adapter-mix: adapter %d is a DoRA adapter; mixes take LoRA adapters only", i + 1);
            return err_hint(e, "export a DoRA adapter on its own with --merged");
        }
        if (ls[i]->embd) { /* modules_to_save (docs/cpt.md): whole matrices, not LoRA deltas */
            err_set(e, "ExportError", "--adapter-mix: adapter %d carries whole embed_tokens / lm_head matrices"
                    " (modules_to_save); mixes take LoRA deltas only", i + 1);
            return err_hint(e, "use that adapter on its own (export it with --merged)");
        }
        if (ls[i]->n_layer != m->cfg.n_layer)
            return err_set(e, "ExportError", "--adapter-mix: adapter %d has %d layers, the base %d", i + 1,
                           ls[i]->n_layer, m->cfg.n_layer);
        R += ls[i]->cfg.rank;
        if (ls[i]->cfg.rank > rmax) rmax = ls[i]->cfg.rank;
        targets |= ls[i]->cfg.targets;
    }
    int rank = method == ADMIX_SVD ? rmax : R;
    lora_config cfg = {.rank = rank, .alpha = (float)rank, .dropout = 0, .targets = targets, .dora = 0};
    lora *l;
    if (lora_create(&m->cfg, &cfg, &l, e)) return -1;
    double *err = NULL, *Bs = NULL, *At = NULL, *work = NULL;
    if (method == ADMIX_SVD) {
        size_t nm = (size_t)l->n_layer * LM_COUNT;
        err = malloc(nm * sizeof *err);
        work = malloc((size_t)4 * R * R * sizeof *work);
        if (!err || !work) goto oom;
        for (size_t i = 0; i < nm; i++) err[i] = -1;
    }
    for (int il = 0; il < l->n_layer; il++)
        for (int mm = 0; mm < LM_COUNT; mm++) {
            const lora_mod *d = lora_mod_at(l, il, mm);
            if (!d) continue;
            int in = d->in, o = d->out;
            if (method == ADMIX_SVD) {
                free(Bs);
                free(At);
                Bs = calloc((size_t)o * R, sizeof *Bs);
                At = calloc((size_t)in * R, sizeof *At);
                if (!Bs || !At) goto oom;
            }
            int c0 = 0;   /* first rank column of adapter i */
            for (int i = 0; i < n; i++) {
                const lora *s = ls[i];
                const lora_mod *sm = lora_mod_at(s, il, mm);
                int ri = s->cfg.rank;
                if (sm) {
                    const float *sa = s->w + sm->off_a, *sb = s->w + sm->off_b;
                    double f = w[i] * (double)s->scale;
                    for (int k = 0; k < ri; k++)
                        for (int c = 0; c < in; c++) {
                            if (method == ADMIX_SVD) At[(size_t)c * R + c0 + k] = sa[(size_t)k * in + c];
                            else l->w[d->off_a + (size_t)(c0 + k) * in + c] = sa[(size_t)k * in + c];
                        }
                    for (int r = 0; r < o; r++)
                        for (int k = 0; k < ri; k++) {
                            double v = f * sb[(size_t)r * ri + k];
                            if (method == ADMIX_SVD) Bs[(size_t)r * R + c0 + k] = v;
                            else l->w[d->off_b + (size_t)r * R + c0 + k] = (float)v;
                        }
                }
                c0 += ri;
            }
            if (method == ADMIX_SVD)
                err[il * LM_COUNT + mm] =
                    svd_module(Bs, At, o, in, R, rank, l->w + d->off_a, l->w + d->off_b, work);
        }
    free(Bs);
    free(At);
    free(work);
    if (rel_err) *rel_err = err;
    else free(err);
    *out = l;
    return 0;
oom:
    free(Bs);
    free(At);
    free(work);
    free(err);
    lora_free(l);
    return err_set(e, "MemoryError", "out of memory");
}
