/* gate — see gate.h. Plain loops in double accumulators: the gate is tiny
 * (in·hid + hid·n parameters) next to one forward pass of the base. */
#include "adapter/gate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <jansson.h>

#include "util/fs.h"
#include "util/json.h"
#include "util/rng.h"
#include "weights/safetensors.h"

#define W1(g) ((g)->w)
#define B1(g) ((g)->w + (size_t)(g)->hid * (g)->in)
#define W2(g) (B1(g) + (g)->hid)
#define B2(g) (W2(g) + (size_t)(g)->n * (g)->hid)

int gate_create(int in, int hid, int n, int uniform, gate **out, dlm_err *e)
{
    *out = NULL;
    if (in < 1 || hid < 1 || n < 2 || n > GATE_MAX)
        return err_set(e, "GateConfigError", "bad gate shape: input_dim %d, hidden_proj_dim %d, %d adapters", in, hid, n);
    gate *g = calloc(1, sizeof *g);
    if (!g) return err_set(e, "MemoryError", "out of memory");
    g->in = in;
    g->hid = hid;
    g->n = n;
    g->uniform = uniform;
    g->entropy_lambda = 0.01;
    g->nw = (size_t)hid * in + hid + (size_t)n * hid + n;
    if (!uniform && !(g->w = calloc(g->nw, sizeof(float)))) {
        free(g);
        return err_set(e, "MemoryError", "out of memory");
    }
    *out = g;
    return 0;
}

void gate_free(gate *g)
{
    if (!g) return;
    free(g->w);
    free(g);
}

void gate_init(gate *g, uint64_t seed)
{
    if (g->uniform) return;
    double b1 = 1.0 / sqrt((double)g->in), b2 = 1.0 / sqrt((double)g->hid);
    size_t n1 = (size_t)g->hid * g->in + g->hid;
    for (size_t i = 0; i < g->nw; i++) {
        double b = i < n1 ? b1 : b2;
        g->w[i] = (float)((2.0 * rng_uniform_d(seed, RNG_GATE, 0, i) - 1.0) * b);
    }
}

static double gelu(double u) { return 0.5 * u * (1.0 + erf(u / sqrt(2.0))); }
static double gelu_d(double u) { return 0.5 * (1.0 + erf(u / sqrt(2.0))) + u * exp(-0.5 * u * u) / sqrt(2.0 * M_PI); }

/* one row: pre-activations u [hid], activations a [hid], probs p [n] */
static void row_fwd(const gate *g, const float *x, double *u, double *a, double *z, double *p)
{
    for (int h = 0; h < g->hid; h++) {
        const float *w = W1(g) + (size_t)h * g->in;
        double s = B1(g)[h];
        for (int i = 0; i < g->in; i++) s += (double)w[i] * x[i];
        u[h] = s;
        a[h] = gelu(s);
    }
    double mx = -INFINITY;
    for (int k = 0; k < g->n; k++) {
        const float *w = W2(g) + (size_t)k * g->hid;
        double s = B2(g)[k];
        for (int h = 0; h < g->hid; h++) s += (double)w[h] * a[h];
        z[k] = s;
        if (s > mx) mx = s;
    }
    double sum = 0;
    for (int k = 0; k < g->n; k++) sum += (p[k] = exp(z[k] - mx));
    for (int k = 0; k < g->n; k++) p[k] /= sum;
}

void gate_forward(const gate *g, const float *x, int B, float *probs)
{
    if (g->uniform) {
        for (int i = 0; i < B * g->n; i++) probs[i] = 1.0f / (float)g->n;
        return;
    }
    double *u = malloc(sizeof(double) * (size_t)(2 * g->hid + 2 * g->n));
    if (!u) return;
    double *a = u + g->hid, *z = a + g->hid, *p = z + g->n;
    for (int b = 0; b < B; b++) {
        row_fwd(g, x + (size_t)b * g->in, u, a, z, p);
        for (int k = 0; k < g->n; k++) probs[(size_t)b * g->n + k] = (float)p[k];
    }
    free(u);
}

double gate_loss(const gate *g, const float *x, const int *y, int B, double lambda, float *grad, double *ce_out,
                 double *ent_out)
{
    double *u = malloc(sizeof(double) * (size_t)(3 * g->hid + 4 * g->n));
    double *gw = grad ? calloc(g->nw, sizeof(double)) : NULL;
    if (!u || (grad && !gw)) { free(u); free(gw); return NAN; }
    double *a = u + g->hid, *z = a + g->hid, *p = z + g->n, *hd = p + g->n, *dz = hd + g->n, *da = dz + g->n;
    double ce = 0, ent = 0;
    for (int b = 0; b < B; b++) {
        const float *xr = x + (size_t)b * g->in;
        row_fwd(g, xr, u, a, z, p);
        ce -= log(p[y[b]]);
        double ph = 0;
        for (int k = 0; k < g->n; k++) {
            double lp = log(p[k] + GATE_ENTROPY_EPS);
            ent -= p[k] * lp;
            hd[k] = -(lp + p[k] / (p[k] + GATE_ENTROPY_EPS));   /* dH/dp_k */
            ph += p[k] * hd[k];
        }
        if (!gw) continue;
        /* d(CE − λH)/dz_k = (p_k − [k = y])/B − λ/B · p_k (h_k − Σ p_j h_j) */
        for (int k = 0; k < g->n; k++)
            dz[k] = (p[k] - (k == y[b])) / B - lambda / B * p[k] * (hd[k] - ph);
        double *gW1 = gw, *gb1 = gw + (size_t)g->hid * g->in, *gW2 = gb1 + g->hid, *gb2 = gW2 + (size_t)g->n * g->hid;
        for (int h = 0; h < g->hid; h++) da[h] = 0;
        for (int k = 0; k < g->n; k++) {
            const float *w = W2(g) + (size_t)k * g->hid;
            gb2[k] += dz[k];
            for (int h = 0; h < g->hid; h++) {
                gW2[(size_t)k * g->hid + h] += dz[k] * a[h];
                da[h] += dz[k] * w[h];
            }
        }
        for (int h = 0; h < g->hid; h++) {
            double du = da[h] * gelu_d(u[h]);
            gb1[h] += du;
            double *gr = gW1 + (size_t)h * g->in;
            for (int i = 0; i < g->in; i++) gr[i] += du * xr[i];
        }
    }
    ce /= B;
    ent /= B;
    if (grad)
        for (size_t i = 0; i < g->nw; i++) grad[i] = (float)gw[i];
    free(gw);
    free(u);
    if (ce_out) *ce_out = ce;
    if (ent_out) *ent_out = ent;
    return ce - lambda * ent;
}

int gate_adamw_init(gate_adamw *o, const gate *g, double lr, dlm_err *e)
{
    memset(o, 0, sizeof *o);
    o->lr = lr;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->weight_decay = 0.01;   /* torch.optim.AdamW's default, which the original keeps */
    o->m = calloc(g->nw, sizeof(float));
    o->v = calloc(g->nw, sizeof(float));
    if (!o->m || !o->v) { gate_adamw_free(o); return err_set(e, "MemoryError", "out of memory"); }
    return 0;
}

void gate_adamw_step(gate_adamw *o, gate *g, const float *grad)
{
    o->t++;
    double bc1 = 1.0 - pow(o->beta1, (double)o->t), bc2 = 1.0 - pow(o->beta2, (double)o->t);
    double step = o->lr / bc1, sbc2 = sqrt(bc2);
    for (size_t i = 0; i < g->nw; i++) {
        float p = g->w[i] * (float)(1.0 - o->lr * o->weight_decay);
        o->m[i] = (float)(o->beta1 * o->m[i] + (1.0 - o->beta1) * grad[i]);
        o->v[i] = (float)(o->beta2 * o->v[i] + (1.0 - o->beta2) * (double)grad[i] * grad[i]);
        double denom = sqrt((double)o->v[i]) / sbc2 + o->eps;
        g->w[i] = (float)(p - step * o->m[i] / denom);
    }
}

void gate_adamw_free(gate_adamw *o)
{
    free(o->m);
    free(o->v);
    o->m = o->v = NULL;
}

int gate_train(gate *g, const float *X, const int *Y, int N, int steps, double lr, double lambda, uint64_t seed,
               gate_train_result *r, dlm_err *e)
{
    memset(r, 0, sizeof *r);
    if (N < 1) return err_set(e, "GateTrainingError", "no samples to train the gate on");
    int B = N < 16 ? N : 16, cursor = N;
    int64_t pass = 0;
    int *perm = malloc(sizeof(int) * (size_t)N), *yb = malloc(sizeof(int) * (size_t)B);
    float *xb = malloc(sizeof(float) * (size_t)B * g->in), *grad = malloc(sizeof(float) * g->nw);
    gate_adamw o;
    int rc = -1;
    if (!perm || !yb || !xb || !grad || gate_adamw_init(&o, g, lr, e)) {
        if (perm && yb && xb && grad) goto out_nopt;
        err_set(e, "MemoryError", "out of memory");
        goto out_nopt;
    }
    double ewl = NAN, ewe = NAN;
    for (int s = 0; s < steps; s++) {
        if (cursor + B > N) {   /* a fresh permutation (Fisher–Yates) */
            for (int i = 0; i < N; i++) perm[i] = i;
            for (int i = N - 1; i > 0; i--) {
                int j = (int)(rng_u64(seed, RNG_GATE, 1 + (uint64_t)pass, (uint64_t)i) % (uint64_t)(i + 1));
                int t = perm[i]; perm[i] = perm[j]; perm[j] = t;
            }
            pass++;
            cursor = 0;
        }
        for (int b = 0; b < B; b++) {
            memcpy(xb + (size_t)b * g->in, X + (size_t)perm[cursor + b] * g->in, sizeof(float) * (size_t)g->in);
            yb[b] = Y[perm[cursor + b]];
        }
        cursor += B;
        double ent;
        double loss = gate_loss(g, xb, yb, B, lambda, grad, NULL, &ent);
        if (!isfinite(loss)) {
            err_set(e, "GateTrainingError", "gate loss diverged to non-finite at step %d", s);
            goto out;
        }
        gate_adamw_step(&o, g, grad);
        ewl = isnan(ewl) ? loss : 0.9 * ewl + 0.1 * loss;
        ewe = isnan(ewe) ? ent : 0.9 * ewe + 0.1 * ent;
    }
    r->final_loss = ewl;
    r->final_entropy = ewe;
    float *p = malloc(sizeof(float) * (size_t)g->n);
    if (p) {
        for (int i = 0; i < N; i++) {
            gate_forward(g, X + (size_t)i * g->in, 1, p);
            for (int k = 0; k < g->n; k++) r->mean_weight[k] += p[k] / (double)N;
        }
        free(p);
    }
    rc = 0;
out:
    gate_adamw_free(&o);
out_nopt:
    free(perm); free(yb); free(xb); free(grad);
    return rc;
}

int gate_save(const gate *g, const char *dir, dlm_err *e)
{
    if (fs_mkdir_p(dir, e)) return -1;
    char p[4300];
    snprintf(p, sizeof p, "%s/gate.safetensors", dir);
    if (!g->uniform) {
        st_out t[4] = {
            {"0.weight", ST_F32, 2, {g->hid, g->in}, W1(g)},
            {"0.bias", ST_F32, 1, {g->hid}, B1(g)},
            {"2.weight", ST_F32, 2, {g->n, g->hid}, W2(g)},
            {"2.bias", ST_F32, 1, {g->n}, B2(g)},
        };
        const char *meta[] = {"format", "pt", NULL};
        if (st_write(p, t, 4, meta, e)) return -1;
    } else if (fs_exists(p)) {
        unlink(p);
    }
    json_t *names = json_array();
    for (int k = 0; k < g->n; k++) json_array_append_new(names, json_string(g->names[k]));
    json_t *c = json_pack("{s:i, s:i, s:o, s:s, s:f}", "input_dim", g->in, "hidden_proj_dim", g->hid, "adapter_names",
                          names, "mode", g->uniform ? "uniform" : "trained", "entropy_lambda", g->entropy_lambda);
    snprintf(p, sizeof p, "%s/gate_config.json", dir);
    int rc = c ? json_save_file(p, c, e) : err_set(e, "MemoryError", "out of memory");
    json_decref(c);
    return rc;
}

int gate_load(const char *dir, gate **out, dlm_err *e)
{
    *out = NULL;
    char p[4300];
    snprintf(p, sizeof p, "%s/gate_config.json", dir);
    json_t *c = json_load_path(p, 1 << 20, e);
    if (!c) return -1;
    json_t *names = json_object_get(c, "adapter_names");
    const char *mode = jget_str(c, "mode");
    json_t *in = json_object_get(c, "input_dim"), *hid = json_object_get(c, "hidden_proj_dim");
    int rc = -1;
    if (!json_is_integer(in) || !json_is_integer(hid) || !json_is_array(names) || !mode ||
        (strcmp(mode, "trained") && strcmp(mode, "uniform")) || json_integer_value(in) < 1 ||
        json_integer_value(in) > (1 << 20) || json_integer_value(hid) < 1 || json_integer_value(hid) > (1 << 16)) {
        err_at(e, "GateConfigError", p, 0, 0, "needs integer input_dim and hidden_proj_dim, adapter_names and mode"
                                              " trained|uniform");
        goto done;
    }
    int n = (int)json_array_size(names);
    gate *g;
    if (gate_create((int)json_integer_value(in), (int)json_integer_value(hid), n, !strcmp(mode, "uniform"), &g, e)) {
        err_prefix(e, "%s", p);
        goto done;
    }
    json_t *lam = json_object_get(c, "entropy_lambda");
    if (json_is_number(lam)) g->entropy_lambda = json_number_value(lam);
    for (int k = 0; k < n; k++) {
        const char *s = json_string_value(json_array_get(names, (size_t)k));
        if (!s || strlen(s) >= sizeof g->names[0]) {
            gate_free(g);
            err_at(e, "GateConfigError", p, 0, 0, "adapter_names must be short strings");
            goto done;
        }
        snprintf(g->names[k], sizeof g->names[0], "%s", s);
    }
    if (!g->uniform) {
        snprintf(p, sizeof p, "%s/gate.safetensors", dir);
        st_file *f;
        if (st_open(p, &f, e)) { gate_free(g); goto done; }
        const char *tn[4] = {"0.weight", "0.bias", "2.weight", "2.bias"};
        size_t sz[4] = {(size_t)g->hid * g->in, (size_t)g->hid, (size_t)g->n * g->hid, (size_t)g->n};
        float *dst[4] = {W1(g), B1(g), W2(g), B2(g)};
        for (int i = 0; i < 4; i++) {
            const st_tensor *t = st_find(f, tn[i]);
            if (!t || t->dtype != ST_F32 || t->nbytes != sz[i] * sizeof(float)) {
                st_close(f);
                gate_free(g);
                err_at(e, "GateConfigError", p, 0, 0, "tensor %s is missing or not F32 of %zu values", tn[i], sz[i]);
                goto done;
            }
            memcpy(dst[i], t->data, t->nbytes);
        }
        st_close(f);
    }
    *out = g;
    rc = 0;
done:
    json_decref(c);
    return rc;
}
