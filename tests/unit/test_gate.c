/* The adapter gate (src/adapter/gate.h).
 * Default: gradients against central differences of the loss, a
 * save/load round trip, the uniform mode, and training that is
 * deterministic and separates two clusters.
 * Reference mode (tests/ref/r1002): DLM_GATE_REF=DIR written by
 * tests/ref/adapters/torch_gate.py — forward, loss (CE, entropy), gradient
 * within 1e-4 relative, and the parameters after its AdamW steps. */
#include "check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adapter/gate.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/log.h"
#include "util/rng.h"

static double rel(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return sqrt(num / (den > 0 ? den : 1));
}

static void test_grad(void)
{
    dlm_err e;
    gate *g;
    CHECK_INT(gate_create(12, 6, 3, 0, &g, &e), 0);
    gate_init(g, 9);
    for (size_t i = 0; i < g->nw; i++) g->w[i] *= 3;
    float x[5 * 12];
    int y[5] = {0, 2, 1, 1, 0};
    for (int i = 0; i < 60; i++) x[i] = rng_normal(4, 1, 0, (uint64_t)i);
    float *gr = malloc(g->nw * sizeof(float)), *fd = malloc(g->nw * sizeof(float));
    double lam = 0.3;
    gate_loss(g, x, y, 5, lam, gr, NULL, NULL);
    for (size_t i = 0; i < g->nw; i++) {
        float w = g->w[i], h = 1e-2f;
        g->w[i] = w + h;
        double lp = gate_loss(g, x, y, 5, lam, NULL, NULL, NULL);
        g->w[i] = w - h;
        double lm = gate_loss(g, x, y, 5, lam, NULL, NULL, NULL);
        g->w[i] = w;
        fd[i] = (float)((lp - lm) / (2.0 * h));
    }
    double r = rel(gr, fd, g->nw);
    CHECK_MSG(r < 1e-3, "gradient vs central differences: relative error %g", r);
    /* the entropy term's sign: with λ > 0 the loss is CE − λH */
    double ce, ent, l = gate_loss(g, x, y, 5, lam, NULL, &ce, &ent);
    CHECK_NEAR(l, ce - lam * ent, 1e-12);
    CHECK(ent > 0 && ent <= log(3.0) + 1e-9);
    free(gr);
    free(fd);
    gate_free(g);
}

static void test_train_save(void)
{
    dlm_err e;
    enum { N = 24, IN = 8 };
    float X[N * IN];
    int Y[N];
    for (int i = 0; i < N; i++) {
        Y[i] = i % 2;
        for (int k = 0; k < IN; k++) X[i * IN + k] = (Y[i] ? 1.5f : -1.5f) * (k < 4) + rng_normal(2, 1, 0, (uint64_t)(i * IN + k));
    }
    gate *a, *b;
    CHECK_INT(gate_create(IN, 8, 2, 0, &a, &e), 0);
    CHECK_INT(gate_create(IN, 8, 2, 0, &b, &e), 0);
    gate_init(a, 3);
    gate_init(b, 3);
    gate_train_result ra, rb;
    CHECK_INT(gate_train(a, X, Y, N, 60, 3e-2, 0.01, 7, &ra, &e), 0);
    CHECK_INT(gate_train(b, X, Y, N, 60, 3e-2, 0.01, 7, &rb, &e), 0);
    CHECK(!memcmp(a->w, b->w, a->nw * sizeof(float)));
    int ok = 0;
    float p[2];
    for (int i = 0; i < N; i++) {
        gate_forward(a, X + i * IN, 1, p);
        ok += (p[1] > p[0]) == (Y[i] == 1);
    }
    CHECK_MSG(ok == N, "train accuracy %d/%d", ok, N);
    CHECK(ra.final_loss < 0.3);
    CHECK_NEAR(ra.mean_weight[0] + ra.mean_weight[1], 1.0, 1e-6);
    /* round trip */
    char dir[] = "/tmp/dlm-gate-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    snprintf(a->names[0], sizeof a->names[0], "sql");
    snprintf(a->names[1], sizeof a->names[1], "tone");
    a->entropy_lambda = 0.25;
    CHECK_INT(gate_save(a, dir, &e), 0);
    gate *c;
    CHECK_MSG(gate_load(dir, &c, &e) == 0, "%s", e.msg);
    if (c) {
        CHECK_INT(c->in, IN);
        CHECK_INT(c->n, 2);
        CHECK_STR(c->names[1], "tone");
        CHECK_NEAR(c->entropy_lambda, 0.25, 0);
        CHECK(!memcmp(a->w, c->w, a->nw * sizeof(float)));
        gate_free(c);
    }
    /* uniform: no weights file, 1/n */
    gate *u;
    CHECK_INT(gate_create(IN, 8, 2, 1, &u, &e), 0);
    snprintf(u->names[0], sizeof u->names[0], "sql");
    snprintf(u->names[1], sizeof u->names[1], "tone");
    CHECK_INT(gate_save(u, dir, &e), 0);
    char p2[256];
    snprintf(p2, sizeof p2, "%s/gate.safetensors", dir);
    CHECK(!fs_exists(p2));
    CHECK_INT(gate_load(dir, &c, &e), 0);
    if (c) {
        CHECK(c->uniform);
        gate_forward(c, NULL, 1, p);
        CHECK_NEAR(p[0], 0.5, 0);
        gate_free(c);
    }
    /* malformed config */
    snprintf(p2, sizeof p2, "%s/gate_config.json", dir);
    CHECK_INT(fs_write_atomic(p2, "{\"mode\": \"bad\"}", 15, 0644, &e), 0);
    CHECK_INT(gate_load(dir, &c, &e), -1);
    CHECK_STR(e.kind, "GateConfigError");
    fs_remove_tree(dir, NULL);
    gate_free(u);
    gate_free(a);
    gate_free(b);
}

static float *rd(const char *dir, const char *name, size_t n)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    char *buf;
    size_t len;
    dlm_err e;
    if (fs_read_all(p, 1 << 26, &buf, &len, &e) || len != n * 4) {
        CHECK_MSG(0, "%s: %zu bytes, want %zu", p, len, n * 4);
        return calloc(n ? n : 1, 4);
    }
    return (float *)buf;
}

static int reference(const char *dir)
{
    dlm_err e;
    char p[4200];
    snprintf(p, sizeof p, "%s/cfg.json", dir);
    json_t *c = json_load_path(p, 1 << 16, &e);
    if (!c) { fprintf(stderr, "%s\n", e.msg); return 1; }
    int in = (int)json_integer_value(json_object_get(c, "in")), hid = (int)json_integer_value(json_object_get(c, "hid"));
    int n = (int)json_integer_value(json_object_get(c, "n")), N = (int)json_integer_value(json_object_get(c, "rows"));
    int B = (int)json_integer_value(json_object_get(c, "batch")), steps = (int)json_integer_value(json_object_get(c, "steps"));
    double lam = json_number_value(json_object_get(c, "lambda")), lr = json_number_value(json_object_get(c, "lr"));
    gate *g;
    if (gate_create(in, hid, n, 0, &g, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    float *x = rd(dir, "x.f32", (size_t)N * in), *w0 = rd(dir, "w0.f32", g->nw), *probs = rd(dir, "probs.f32", (size_t)B * n);
    float *grad = rd(dir, "grad.f32", g->nw), *wf = rd(dir, "w_final.f32", g->nw);
    int *y = (int *)rd(dir, "y.i32", (size_t)N), *bt = (int *)rd(dir, "batches.i32", (size_t)steps * B);
    memcpy(g->w, w0, g->nw * 4);
    float *xb = malloc((size_t)B * in * 4), *pb = malloc((size_t)B * n * 4), *gr = malloc(g->nw * 4);
    int *yb = malloc((size_t)B * sizeof(int));
    gate_adamw o;
    gate_adamw_init(&o, g, lr, &e);
    double loss0 = 0, ce0 = 0, ent0 = 0;
    for (int s = 0; s < steps; s++) {
        for (int b = 0; b < B; b++) {
            memcpy(xb + (size_t)b * in, x + (size_t)bt[s * B + b] * in, (size_t)in * 4);
            yb[b] = y[bt[s * B + b]];
        }
        double ce, ent, l = gate_loss(g, xb, yb, B, lam, gr, &ce, &ent);
        if (s == 0) {
            loss0 = l; ce0 = ce; ent0 = ent;
            gate_forward(g, xb, B, pb);
            double rp = rel(pb, probs, (size_t)B * n), rg = rel(gr, grad, g->nw);
            CHECK_MSG(rp <= 1e-5, "softmax vs torch: relative %g", rp);
            CHECK_MSG(rg <= 1e-4, "gradient vs torch: relative %g", rg);
            printf("gate vs torch: probs rel %.2g, loss %.8f (torch %.8f), ce %.8f, entropy %.8f, gradient rel %.2g\n",
                   rp, l, json_number_value(json_object_get(c, "loss")), ce, ent, rg);
        }
        gate_adamw_step(&o, g, gr);
    }
    CHECK_MSG(fabs(loss0 - json_number_value(json_object_get(c, "loss"))) <= 1e-4 * fabs(loss0), "loss %.8f", loss0);
    CHECK_MSG(fabs(ce0 - json_number_value(json_object_get(c, "ce"))) <= 1e-4 * fabs(ce0), "ce %.8f", ce0);
    CHECK_MSG(fabs(ent0 - json_number_value(json_object_get(c, "entropy"))) <= 1e-4 * fabs(ent0), "entropy %.8f", ent0);
    double rw = rel(g->w, wf, g->nw), rd0 = rel(w0, wf, g->nw);
    CHECK_MSG(rw <= 1e-4, "parameters after %d AdamW steps vs torch: relative %g", steps, rw);
    CHECK_MSG(rd0 > 1e-3, "the steps moved the parameters (%g)", rd0);
    printf("gate vs torch: %d AdamW steps, parameters rel %.2g (moved %.2g)\n", steps, rw, rd0);
    gate_adamw_free(&o);
    free(x); free(w0); free(probs); free(grad); free(wf); free(y); free(bt); free(xb); free(pb); free(gr); free(yb);
    gate_free(g);
    json_decref(c);
    return check_done();
}

int main(void)
{
    log_set_level(LOG_QUIET);
    if (getenv("DLM_GATE_REF")) return reference(getenv("DLM_GATE_REF"));
    test_grad();
    test_train_save();
    return check_done();
}
