/* fm_json — the frontmatter as JSON with every default filled in, shaped
 * like the original's `DlmFrontmatter.model_dump(mode="json")` (what
 * `dlm show --json` prints under "frontmatter"). */
#include "doc/doc_internal.h"

static json_t *strlist(const doc_strlist *l)
{
    json_t *a = json_array();
    for (int i = 0; a && i < l->n; i++) json_array_append_new(a, json_string(l->v[i]));
    return a;
}

static json_t *auto_or_list(int is_auto, const doc_strlist *l)
{
    return is_auto ? json_string("auto") : strlist(l);
}

static json_t *auto_or_int(int64_t v)
{
    return v ? json_integer(v) : json_string("auto");
}

static json_t *int_or_null(int64_t v)
{
    return v ? json_integer(v) : json_null();
}

static json_t *training_json(const doc_training *t)
{
    json_t *o = json_object();
    json_object_set_new(o, "adapter", json_string(doc_adapter_kind_names[t->adapter]));
    json_object_set_new(o, "lora_r", json_integer(t->lora_r));
    json_object_set_new(o, "lora_alpha", json_integer(t->lora_alpha));
    json_object_set_new(o, "lora_dropout", json_real(t->lora_dropout));
    json_object_set_new(o, "target_modules", auto_or_list(t->target_modules_auto, &t->target_modules));
    json_object_set_new(o, "sequence_len", json_integer(t->sequence_len));
    json_object_set_new(o, "micro_batch_size", auto_or_int(t->micro_batch_size));
    json_object_set_new(o, "grad_accum", auto_or_int(t->grad_accum));
    json_object_set_new(o, "learning_rate", json_real(t->learning_rate));
    json_object_set_new(o, "num_epochs", json_integer(t->num_epochs));
    json_object_set_new(o, "optimizer", json_string(doc_optimizer_names[t->optimizer]));
    json_object_set_new(o, "lr_scheduler", json_string(doc_lr_scheduler_names[t->lr_scheduler]));
    json_object_set_new(o, "warmup_ratio", json_real(t->warmup_ratio));
    json_object_set_new(o, "precision", t->precision ? json_string(doc_precision_names[t->precision]) : json_null());
    json_object_set_new(o, "seed", json_integer(t->seed));

    json_t *h = json_object();
    json_object_set_new(h, "beta", json_real(t->preference.hyperparams.beta));
    json_object_set_new(h, "alpha", json_real(t->preference.hyperparams.alpha));
    json_object_set_new(h, "learning_rate", json_real(t->preference.hyperparams.learning_rate));
    json_object_set_new(h, "num_epochs", json_integer(t->preference.hyperparams.num_epochs));
    json_t *p = json_object();
    json_object_set_new(p, "enabled", json_boolean(t->preference.enabled));
    json_object_set_new(p, "method", json_string(doc_pref_method_names[t->preference.method]));
    json_object_set_new(p, "hyperparams", h);
    json_object_set_new(p, "loss_type", json_string(doc_pref_loss_names[t->preference.loss_type]));
    json_object_set_new(p, "reference", json_string(doc_pref_reference_names[t->preference.reference]));
    json_object_set_new(o, "preference", p);

    json_t *c = json_object();
    json_object_set_new(c, "schedule", json_string(doc_cpt_schedule_names[t->cpt.schedule]));
    json_object_set_new(c, "embed_warmup_steps", json_integer(t->cpt.embed_warmup_steps));
    json_object_set_new(o, "cpt", c);

    json_t *g = json_object();
    json_object_set_new(g, "enabled", json_boolean(t->gate.enabled));
    json_object_set_new(g, "hidden_proj_dim", json_integer(t->gate.hidden_proj_dim));
    json_object_set_new(g, "steps", json_integer(t->gate.steps));
    json_object_set_new(g, "lr", json_real(t->gate.lr));
    json_object_set_new(g, "cold_start_floor", json_integer(t->gate.cold_start_floor));
    json_object_set_new(g, "entropy_lambda", json_real(t->gate.entropy_lambda));
    json_object_set_new(o, "gate", g);

    json_t *ca = json_object();
    json_object_set_new(ca, "enabled", json_boolean(t->cache.enabled));
    json_object_set_new(ca, "max_bytes", json_integer(t->cache.max_bytes));
    json_object_set_new(ca, "prune_older_than_days", json_integer(t->cache.prune_older_than_days));
    json_object_set_new(o, "cache", ca);

    json_t *au = json_object();
    json_object_set_new(au, "auto_resample", json_boolean(t->audio.auto_resample));
    json_object_set_new(o, "audio", au);

    if (t->adapters) {
        json_t *ad = json_object();
        for (int i = 0; i < t->n_adapters; i++) {
            const doc_adapter_cfg *a = &t->adapters[i];
            json_t *x = json_object();
            json_object_set_new(x, "adapter", json_string(doc_adapter_kind_names[a->adapter]));
            json_object_set_new(x, "lora_r", json_integer(a->lora_r));
            json_object_set_new(x, "lora_alpha", json_integer(a->lora_alpha));
            json_object_set_new(x, "lora_dropout", json_real(a->lora_dropout));
            json_object_set_new(x, "target_modules", auto_or_list(a->target_modules_auto, &a->target_modules));
            json_object_set_new(x, "learning_rate", json_real(a->learning_rate));
            json_object_set_new(ad, a->name ? a->name : "", x);
        }
        json_object_set_new(o, "adapters", ad);
    } else json_object_set_new(o, "adapters", json_null());

    if (t->sources_set) {
        json_t *sa = json_array();
        for (int i = 0; i < t->n_sources; i++) {
            const doc_source *s = &t->sources[i];
            json_t *x = json_object();
            json_object_set_new(x, "path", json_string(s->path ? s->path : ""));
            json_object_set_new(x, "include", strlist(&s->include));
            json_object_set_new(x, "exclude", strlist(&s->exclude));
            json_object_set_new(x, "max_bytes_per_file", int_or_null(s->max_bytes_per_file));
            json_object_set_new(x, "max_files", int_or_null(s->max_files));
            json_array_append_new(sa, x);
        }
        json_object_set_new(o, "sources", sa);
    } else json_object_set_new(o, "sources", json_null());
    json_object_set_new(o, "sources_policy", json_string(doc_sources_policy_names[t->sources_policy]));

    /* dlm extensions */
    json_object_set_new(o, "loss_on", json_string(doc_loss_on_names[t->loss_on]));
    json_object_set_new(o, "packing", json_boolean(t->packing));
    json_object_set_new(o, "save_steps", int_or_null(t->save_steps));
    json_object_set_new(o, "weight_decay", json_real(t->weight_decay));
    json_object_set_new(o, "min_lr_ratio", json_real(t->min_lr_ratio));
    json_t *r = json_object();
    json_object_set_new(r, "max_bytes", json_integer(t->replay.max_bytes));
    json_object_set_new(r, "enabled", json_boolean(t->replay.enabled));
    json_object_set_new(o, "replay", r);
    json_object_set_new(o, "recompute", json_string(doc_recompute_names[t->recompute]));
    json_object_set_new(o, "threads", auto_or_int(t->threads));
    json_object_set_new(o, "val_frac", t->val_frac < 0 ? json_null() : json_real(t->val_frac));
    json_object_set_new(o, "multi_turn", json_integer(t->multi_turn));
    return o;
}

json_t *doc_frontmatter_json(const dlm_doc *d)
{
    const doc_frontmatter *fm = &d->fm;
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "dlm_id", json_string(fm->dlm_id));
    json_object_set_new(o, "dlm_version", json_integer(fm->dlm_version));
    json_object_set_new(o, "base_model", json_string(fm->base_model ? fm->base_model : ""));
    json_object_set_new(o, "training", training_json(&fm->training));
    json_t *x = json_object();
    json_object_set_new(x, "default_quant", json_string(doc_quant_names[fm->export.default_quant]));
    json_object_set_new(x, "default_temperature",
                        fm->export.has_temperature ? json_real(fm->export.default_temperature) : json_null());
    json_object_set_new(x, "default_top_p", fm->export.has_top_p ? json_real(fm->export.default_top_p) : json_null());
    json_object_set_new(o, "export", x);
    json_object_set_new(o, "system_prompt", fm->system_prompt ? json_string(fm->system_prompt) : json_null());
    return o;
}
