/* adapters_view — the named adapters of a document (training.adapters) and
 * what the store holds of each: `dlm show` and `dlm doctor` list them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "store/store.h"
#include "util/fs.h"
#include "util/json.h"

json_t *adapters_view_json(const dlm_doc *d, const char *home)
{
    const doc_frontmatter *fm = doc_fm(d);
    const doc_training *t = &fm->training;
    if (!t->adapters) return json_null();
    char store[4096] = "";
    dlm_err e;
    int have_store = home && !store_dir(home, fm->dlm_id, store, sizeof store, &e) && store_exists(store);
    json_t *arr = json_array();
    for (int i = 0; i < t->n_adapters; i++) {
        const doc_adapter_cfg *a = &t->adapters[i];
        int nsec = 0;
        for (int k = 0; k < doc_nsections(d); k++) nsec += doc_section_routes_to(fm, doc_section_at(d, k), a->name);
        json_t *vs = json_array();
        int cur = 0;
        if (have_store) {
            int *v = NULL;
            int n = store_versions_of(store, a->name, &v, &e);
            for (int k = 0; k < n; k++) json_array_append_new(vs, json_integer(v[k]));
            free(v);
            cur = store_current_version_of(store, a->name, &e);
        }
        json_array_append_new(arr, json_pack("{s:s, s:s, s:i, s:I, s:f, s:i, s:o, s:o}", "name", a->name, "adapter",
                                             doc_adapter_kind_names[a->adapter], "lora_r", a->lora_r, "lora_alpha",
                                             (json_int_t)a->lora_alpha, "learning_rate", a->learning_rate, "sections",
                                             nsec, "current_version", cur > 0 ? json_integer(cur) : json_null(),
                                             "versions", vs));
    }
    return arr;
}

json_t *adapters_view_gate_json(const dlm_doc *d, const char *home)
{
    const doc_frontmatter *fm = doc_fm(d);
    const doc_training *t = &fm->training;
    if (!t->adapters) return json_null();
    const char *mode = "off";
    char store[4096], p[4200];
    dlm_err e;
    json_t *cfg = NULL;
    if (t->gate.enabled) {
        mode = "not trained";
        if (home && !store_dir(home, fm->dlm_id, store, sizeof store, &e)) {
            snprintf(p, sizeof p, "%s/adapter/_gate/gate_config.json", store);
            if (fs_is_file(p) && (cfg = json_load_path(p, 1 << 20, &e)) && jget_str(cfg, "mode")) mode = jget_str(cfg, "mode");
        }
    }
    json_t *o = json_pack("{s:b, s:s, s:i, s:i, s:f, s:i, s:f}", "enabled", t->gate.enabled, "mode", mode,
                          "hidden_proj_dim", t->gate.hidden_proj_dim, "steps", t->gate.steps, "lr", t->gate.lr,
                          "cold_start_floor", t->gate.cold_start_floor, "entropy_lambda", t->gate.entropy_lambda);
    json_decref(cfg);
    return o;
}

void adapters_view_print(const json_t *arr, const json_t *gate)
{
    if (!json_is_array(arr)) return;
    printf("\nnamed adapters (training.adapters; docs/adapters.md):\n");
    size_t i;
    json_t *a;
    json_array_foreach(arr, i, a) {
        json_t *cur = json_object_get(a, "current_version"), *vs = json_object_get(a, "versions");
        char cv[32] = "none yet";
        if (json_is_integer(cur)) snprintf(cv, sizeof cv, "v%04lld", (long long)json_integer_value(cur));
        printf("  %-16s %s r %lld, alpha %lld, %lld section(s); current %s (%zu version%s on disk)%s\n",
               json_string_value(json_object_get(a, "name")), json_string_value(json_object_get(a, "adapter")),
               (long long)json_integer_value(json_object_get(a, "lora_r")),
               (long long)json_integer_value(json_object_get(a, "lora_alpha")),
               (long long)json_integer_value(json_object_get(a, "sections")), cv, json_array_size(vs),
               json_array_size(vs) == 1 ? "" : "s", i == 0 ? " [default for unsuffixed Q/A]" : "");
    }
    if (json_is_object(gate))
        printf("  gate             %s (%s)\n", json_is_true(json_object_get(gate, "enabled")) ? "enabled" : "off",
               json_string_value(json_object_get(gate, "mode")));
}
