#include "infer/target.h"

#include <stdio.h>
#include <string.h>

#include "weights/base.h"
#include "store/store.h"
#include "tokens/pipeline.h"
#include "tokens/tok_gguf.h"
#include "adapter/adapter.h"
#include "util/fs.h"

int target_open(const target_opts *o, infer_target *t, dlm_err *e)
{
    memset(t, 0, sizeof *t);
    const char *spec = o->base;
    if (o->doc_path) {
        t->doc = doc_load(o->doc_path, e);
        if (!t->doc) return -1;
        const doc_frontmatter *fm = doc_fm(t->doc);
        if (!spec) spec = fm->base_model;
        t->system_prompt = fm->system_prompt;
        if (store_dir(o->home, fm->dlm_id, t->store, sizeof t->store, e)) goto fail;
    }
    if (!spec) { err_set(e, NULL, "no base model: give a document or --base"); goto fail; }
    snprintf(t->base_spec, sizeof t->base_spec, "%s", spec);
    hub_opts ho;
    if (hub_opts_init(&ho, e)) goto fail;
    if (o->offline) ho.offline = 1;
    if (base_resolve(spec, &ho, &t->base, t->model_path, sizeof t->model_path, e)) goto fail;
    if (model_load(t->model_path, &t->m, e) || tok_load_for_model(t->model_path, &t->t, e)) goto fail;
    t->dialect = chat_dialect_resolve(t->t, t->base.entry);
    if (t->doc) {
        const doc_frontmatter *fm = doc_fm(t->doc);
        t->named = fm->training.adapters != NULL;
        /* --adapter names one of training.adapters (spec §5); the scope
         * call gives the UnknownAdapterError with the declared names */
        if (o->adapter && doc_adapter_index(fm, o->adapter) < 0) {
            (void)doc_scope_adapter(t->doc, o->adapter, e);
            goto fail;
        }
        if (o->adapter) t->adapter_name = fm->training.adapters[doc_adapter_index(fm, o->adapter)].name;
    }
    if (t->doc && o->use_adapter && store_exists(t->store) && (!t->named || t->adapter_name)) {
        int v = store_current_version_of(t->store, t->adapter_name, e);
        if (v < 0) goto fail;
        if (v > 0) {
            char vn[16], ad[4200];
            store_version_name(v, vn, sizeof vn);
            if (store_adapter_dir(t->store, t->adapter_name, ad, sizeof ad, e)) goto fail;
            snprintf(t->adapter_dir, sizeof t->adapter_dir, "%s/versions/%s", ad, vn);
            if (adapter_load(t->adapter_dir, t->m, &t->l, e)) {
                err_prefix(e, "adapter %s%s%s", t->adapter_name ? t->adapter_name : "", t->adapter_name ? " " : "", vn);
                goto fail;
            }
            t->version = v;
        }
    }
    return 0;
fail:
    target_close(t);
    return -1;
}

void target_close(infer_target *t)
{
    lora_free(t->l);
    tok_free(t->t);
    model_free(t->m);
    doc_free(t->doc);
    memset(t, 0, sizeof *t);
}
