/* named_mix — see named_mix.h. */
#include "run/named_mix.h"

#include <stdio.h>
#include <string.h>

#include "adapter/adapter.h"
#include "doc/doc.h"
#include "run/gate_run.h"
#include "store/store.h"
#include "util/fs.h"

const char *named_mix_gate_usage(const infer_target *t, const char *gate_arg, int other)
{
    if (!gate_arg) return NULL;
    if (strcmp(gate_arg, "auto") && strcmp(gate_arg, "off")) return "--gate expects auto or off";
    if (!t->doc || !t->named || !doc_fm(t->doc)->training.gate.enabled || other)
        return "--gate applies to a document with training.gate enabled, without --adapter/--adapter-mix/--no-adapter";
    return NULL;
}

nmix_mode named_mix_choose(const infer_target *t, const char *mix, const char *gate_arg, int per_prompt, int *gate_missing)
{
    *gate_missing = 0;
    if (mix) return NMIX_GIVEN;
    if (doc_fm(t->doc)->training.gate.enabled && (!gate_arg || !strcmp(gate_arg, "auto"))) {
        char gp[4400];
        snprintf(gp, sizeof gp, "%s/adapter/_gate/gate_config.json", t->store);
        if (fs_is_file(gp)) return per_prompt ? NMIX_GATE : NMIX_GATE_MEAN;
        *gate_missing = 1;
    }
    return NMIX_EQUAL;
}

int named_mix_weights(const infer_target *t, nmix_mode mode, const char *mix, const char *prompt, named_mix *m,
                      dlm_err *e)
{
    const doc_training *tr = &doc_fm(t->doc)->training;
    memset(m, 0, sizeof *m);
    m->mode = mode;
    if (mode == NMIX_GIVEN) {
        admix_spec sp;
        if (admix_parse(mix, &sp, e)) return -1;
        for (int i = 0; i < sp.n; i++) {
            if (doc_adapter_index(doc_fm(t->doc), sp.src[i]) < 0)
                return doc_scope_adapter(t->doc, sp.src[i], e);   /* its UnknownAdapterError (the scope fails first) */
            snprintf(m->names[i], sizeof m->names[0], "%s", sp.src[i]);
            m->w[i] = sp.w[i];
        }
        m->n = sp.n;
        return 0;
    }
    if (mode == NMIX_GATE || mode == NMIX_GATE_MEAN) {
        const char *names[GATE_MAX];
        if (tr->n_adapters > ADMIX_MAX) return err_set(e, "PromptError", "more than %d adapters: use --adapter-mix", ADMIX_MAX);
        for (int i = 0; i < tr->n_adapters; i++) {
            names[i] = tr->adapters[i].name;
            snprintf(m->names[i], sizeof m->names[0], "%s", names[i]);
        }
        m->n = tr->n_adapters;
        return mode == NMIX_GATE ? gate_weights(t, prompt, names, m->n, m->w, &m->gate_trained, e)
                                 : gate_mean_weights(t, names, m->n, m->w, &m->gate_trained, &m->n_probes, e);
    }
    for (int i = 0; i < tr->n_adapters; i++) {
        int v = store_current_version_of(t->store, tr->adapters[i].name, NULL);
        if (v <= 0) {
            if (m->n_left_out < GATE_MAX) snprintf(m->left_out[m->n_left_out++], sizeof m->left_out[0], "%s", tr->adapters[i].name);
            continue;
        }
        if (m->n == ADMIX_MAX) return err_set(e, "PromptError", "more than %d trained adapters: use --adapter-mix", ADMIX_MAX);
        snprintf(m->names[m->n++], sizeof m->names[0], "%s", tr->adapters[i].name);
    }
    for (int i = 0; i < m->n; i++) m->w[i] = 1.0 / m->n;
    return 0;
}

int named_mix_build(const infer_target *t, const named_mix *m, lora **out, dlm_err *e)
{
    *out = NULL;
    if (!m->n) return 0;
    lora *ls[ADMIX_MAX] = {0};
    int rc = -1;
    for (int i = 0; i < m->n; i++) {
        char ad[4200], dir[4300], vn[16];
        int v = store_current_version_of(t->store, m->names[i], e);
        if (v < 0) goto done;
        if (!v) {
            err_set(e, "PromptError", "adapter %s has no trained version", m->names[i]);
            err_hint(e, "train it: dlm train %s --adapter %s", doc_path(t->doc), m->names[i]);
            goto done;
        }
        store_version_name(v, vn, sizeof vn);
        if (store_adapter_dir(t->store, m->names[i], ad, sizeof ad, e)) goto done;
        snprintf(dir, sizeof dir, "%s/versions/%s", ad, vn);
        if (adapter_load(dir, t->m, &ls[i], e)) goto done;
    }
    rc = admix_build(t->m, ls, m->w, m->n, ADMIX_LINEAR, out, NULL, e);
done:
    for (int i = 0; i < m->n; i++) lora_free(ls[i]);
    return rc;
}

void named_mix_describe(const named_mix *m, char *buf, size_t cap)
{
    static const char *const label[] = {"mix", "mix", "gate", "gate (mean)"};
    size_t k = (size_t)snprintf(buf, cap, "%s:", label[m->mode]);
    for (int i = 0; i < m->n && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s %s %.3f", i ? "," : "", m->names[i], m->w[i]);
}
