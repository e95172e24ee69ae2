/* gate_run — see gate_run.h. */
#include "run/gate_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder/session.h"
#include "doc/doc.h"
#include "store/store.h"
#include "tokens/tok.h"
#include "util/fs.h"

#define GATE_PROMPT_CHARS 2048   /* the original's _MAX_PROMPT_CHARS (characters, not bytes) */

static size_t utf8_prefix(const char *s, size_t len, size_t chars)
{
    size_t i = 0, c = 0;
    while (i < len && c < chars) {
        i++;
        while (i < len && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
        c++;
    }
    return i;
}

int gate_embed(const infer_target *t, const char *text, size_t len, float *out, dlm_err *e)
{
    tok_ids ids = {0};
    session *s = NULL;
    int rc = -1;
    if (tok_encode_append(t->t, text, len, TOK_ADD_SPECIAL, &ids, e)) goto done;
    if (!ids.n) { err_set(e, "GateTrainingError", "an empty prompt has no embedding"); goto done; }
    int n = (int)ids.n, ctx = t->m->cfg.max_pos > 0 && t->m->cfg.max_pos < n ? t->m->cfg.max_pos : n;
    if (session_create(t->m, NULL, ctx, ctx < 256 ? ctx : 256, &s, e)) goto done;
    rc = session_embed_mean(s, ids.v, ctx, out, e);
done:
    session_free(s);
    tok_ids_free(&ids);
    return rc;
}

/* The probes of a document: one (prompt, adapter index) per section with a
 * declared `#name` suffix (see gate_run.h); txt/tlen/Y hold
 * doc_nsections entries; per_adapter[k] counts adapter k's. */
static int gate_probes(const dlm_doc *d, const char **txt, size_t *tlen, int *Y, int *per_adapter)
{
    const doc_frontmatter *fm = doc_fm(d);
    int np = 0;
    for (int i = 0; i < doc_nsections(d); i++) {
        const doc_section *s = doc_section_at(d, i);
        int k = s->adapter ? doc_adapter_index(fm, s->adapter) : -1;
        if (k < 0) continue;
        if (s->type == DOC_INSTRUCTION && s->n_pairs) { txt[np] = s->pairs[0].question; tlen[np] = strlen(txt[np]); }
        else if (s->type == DOC_PREFERENCE && s->n_triples) { txt[np] = s->triples[0].prompt; tlen[np] = strlen(txt[np]); }
        else if (s->type == DOC_PROSE) { txt[np] = s->content; tlen[np] = utf8_prefix(s->content, s->content_len, GATE_PROMPT_CHARS); }
        else continue;
        Y[np++] = k;
        per_adapter[k]++;
    }
    return np;
}

int gate_run(const char *doc_path, const char *home, int offline, gate_run_result *r, dlm_err *e)
{
    memset(r, 0, sizeof *r);
    infer_target T;
    target_opts to = {.doc_path = doc_path, .home = home, .use_adapter = 0, .offline = offline};
    if (target_open(&to, &T, e)) return -1;
    const doc_frontmatter *fm = doc_fm(T.doc);
    const doc_training *tr = &fm->training;
    int n = tr->n_adapters, rc = -1, C = T.m->cfg.d_model, np = 0;
    gate *g = NULL;
    float *X = NULL;
    int *Y = NULL;
    store_lock lk = {0};
    if (!tr->gate.enabled || n < 2 || n > GATE_MAX) {
        err_set(e, "GateConfigError", "%s: training.gate needs 2 to %d named adapters and gate.enabled", doc_path, GATE_MAX);
        goto done;
    }
    int cap = doc_nsections(T.doc);
    X = malloc(sizeof(float) * (size_t)(cap ? cap : 1) * C);
    Y = malloc(sizeof(int) * (size_t)(cap ? cap : 1));
    if (!X || !Y) { err_set(e, "MemoryError", "out of memory"); goto done; }
    const char **txt = calloc((size_t)(cap ? cap : 1), sizeof *txt);
    size_t *tlen = calloc((size_t)(cap ? cap : 1), sizeof *tlen);
    if (!txt || !tlen) { free(txt); free(tlen); err_set(e, "MemoryError", "out of memory"); goto done; }
    np = gate_probes(T.doc, txt, tlen, Y, r->per_adapter);
    r->n_samples = np;
    int cold = 0;
    for (int k = 0; k < n; k++) cold |= r->per_adapter[k] < tr->gate.cold_start_floor;
    if (gate_create(C, tr->gate.hidden_proj_dim, n, cold, &g, e)) { free(txt); free(tlen); goto done; }
    g->entropy_lambda = tr->gate.entropy_lambda;
    for (int k = 0; k < n; k++) snprintf(g->names[k], sizeof g->names[0], "%s", tr->adapters[k].name);
    if (!cold) {
        for (int i = 0; i < np; i++)
            if (gate_embed(&T, txt[i], tlen[i], X + (size_t)i * C, e)) { free(txt); free(tlen); goto done; }
        gate_init(g, (uint64_t)tr->seed);
        if (gate_train(g, X, Y, np, tr->gate.steps, tr->gate.lr, tr->gate.entropy_lambda, (uint64_t)tr->seed, &r->tr, e)) {
            free(txt); free(tlen);
            goto done;
        }
        r->trained = 1;
    }
    free(txt);
    free(tlen);
    /* "_gate" can be no adapter's name (names start with a-z) */
    snprintf(r->dir, sizeof r->dir, "%s/adapter/_gate", T.store);
    if (store_lock_acquire(T.store, "train", &lk, e)) goto done;
    rc = gate_save(g, r->dir, e);
    store_lock_release(&lk);
done:
    gate_free(g);
    free(X);
    free(Y);
    target_close(&T);
    return rc;
}

/* The stored gate of t's store, checked against the document's adapters
 * names[0..n) and the base's width. */
static int gate_open_for(const infer_target *t, const char *const *names, int n, gate **out, dlm_err *e)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/adapter/_gate", t->store);
    gate *g;
    if (gate_load(dir, &g, e)) return -1;
    int bad = g->n != n || (!g->uniform && g->in != t->m->cfg.d_model);
    for (int k = 0; k < n && !bad; k++) bad = strcmp(g->names[k], names[k]) != 0;
    if (bad) {
        gate_free(g);
        err_set(e, "GateConfigError", "%s/gate_config.json routes other adapters (or another base) than the document", dir);
        return err_hint(e, "retrain the gate: dlm train %s", doc_path(t->doc));
    }
    *out = g;
    return 0;
}

int gate_weights(const infer_target *t, const char *prompt, const char *const *names, int n, double *w, int *trained,
                 dlm_err *e)
{
    gate *g;
    if (gate_open_for(t, names, n, &g, e)) return -1;
    int rc = -1;
    float *x = NULL, p[GATE_MAX];
    *trained = !g->uniform;
    if (!g->uniform) {
        x = malloc(sizeof(float) * (size_t)g->in);
        if (!x) { err_set(e, "MemoryError", "out of memory"); goto done; }
        if (gate_embed(t, prompt, strlen(prompt), x, e)) goto done;
    }
    gate_forward(g, x, 1, p);
    for (int k = 0; k < n; k++) w[k] = p[k];
    rc = 0;
done:
    free(x);
    gate_free(g);
    return rc;
}

int gate_mean_weights(const infer_target *t, const char *const *names, int n, double *w, int *trained, int *n_probes,
                      dlm_err *e)
{
    gate *g;
    if (gate_open_for(t, names, n, &g, e)) return -1;
    int rc = -1, cap = doc_nsections(t->doc), np = 0, per[GATE_MAX] = {0};
    float *x = NULL, p[GATE_MAX];
    const char **txt = calloc((size_t)(cap ? cap : 1), sizeof *txt);
    size_t *tlen = calloc((size_t)(cap ? cap : 1), sizeof *tlen);
    int *Y = calloc((size_t)(cap ? cap : 1), sizeof *Y);
    if (!txt || !tlen || !Y) { err_set(e, "MemoryError", "out of memory"); goto done; }
    np = gate_probes(t->doc, txt, tlen, Y, per);
    *trained = !g->uniform;
    *n_probes = np;
    for (int k = 0; k < n; k++) w[k] = 1.0 / n;
    if (g->uniform) { rc = 0; goto done; }
    if (!np) {
        err_set(e, "GateConfigError", "%s has no #name sections for the gate's mean weights", doc_path(t->doc));
        err_hint(e, "give --adapter NAME or --adapter-mix");
        goto done;
    }
    if (!(x = malloc(sizeof(float) * (size_t)g->in))) { err_set(e, "MemoryError", "out of memory"); goto done; }
    double acc[GATE_MAX] = {0};
    for (int i = 0; i < np; i++) {
        if (gate_embed(t, txt[i], tlen[i], x, e)) goto done;
        gate_forward(g, x, 1, p);
        for (int k = 0; k < n; k++) acc[k] += p[k];
    }
    for (int k = 0; k < n; k++) w[k] = acc[k] / np;
    rc = 0;
done:
    free(x);
    free(txt);
    free(tlen);
    free(Y);
    gate_free(g);
    return rc;
}
