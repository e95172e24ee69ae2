/* fm_emit — frontmatter → YAML text, for migrations that rewrite data.
 *
 * Keys in schema order; a field equal to its default is left out unless
 * the original document spelled it out (its dotted path is "forced"), as
 * the original's serializer does. Strings are written plain only when YAML
 * 1.1 reads them back as the same string; otherwise double-quoted. Floats
 * are Python's repr. The caller re-parses the result and compares. */
#include "doc/doc_internal.h"

#include <math.h>
#include <string.h>

#include "util/json.h"

typedef struct emitter {
    strbuf *out;
    strbuf forced;      /* "\n" + "path\n" for each forced dotted path */
} emitter;

static void collect(emitter *em, const ynode *n, const char *prefix, int depth)
{
    if (!n || depth > 8) return;
    if (n->kind == YN_SEQ) {
        for (size_t i = 0; i < n->n; i++)
            if (n->vals[i]->kind == YN_MAP) collect(em, n->vals[i], prefix, depth + 1);
        return;
    }
    if (n->kind != YN_MAP) return;
    for (size_t i = 0; i < n->n; i++) {
        if (n->keys[i]->kind != YN_STR) continue;
        strbuf p = STRBUF_INIT;
        if (*prefix) sb_printf(&p, "%s.", prefix);
        sb_append(&p, n->keys[i]->text, n->keys[i]->len);
        sb_printf(&em->forced, "%s\n", sb_str(&p));
        collect(em, n->vals[i], sb_str(&p), depth + 1);
        sb_free(&p);
    }
}

static int forced(const emitter *em, const char *path)
{
    char want[512];
    snprintf(want, sizeof want, "\n%s\n", path);
    return strstr(sb_str(&em->forced), want) != NULL;
}

void doc_yaml_scalar(strbuf *out, const char *s)
{
    size_t n = strlen(s);
    int plain = n > 0 && ynode_plain_is_str(s, n);
    for (size_t i = 0; plain && i < n; i++) {
        char c = s[i];
        /* ':' is plain-safe inside a space-free scalar unless it ends it */
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '.' || c == '/' || c == '@' || c == '+' || (c == '-' && i > 0) || (c == ':' && i > 0 && i + 1 < n)))
            plain = 0;
    }
    if (plain) { sb_puts(out, s); return; }
    sb_putc(out, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') { sb_putc(out, '\\'); sb_putc(out, (char)c); }
        else if (c == '\n') sb_puts(out, "\\n");
        else if (c == '\t') sb_puts(out, "\\t");
        else if (c < 0x20 || c == 0x7f) sb_printf(out, "\\x%02x", c);
        else sb_putc(out, (char)c);
    }
    sb_putc(out, '"');
}

static void put_float(strbuf *out, double d)
{
    char b[40];
    if (isnan(d)) { sb_puts(out, ".nan"); return; }
    if (isinf(d)) { sb_puts(out, d > 0 ? ".inf" : "-.inf"); return; }
    json_fmt_double(d, b, sizeof b);
    sb_puts(out, b);
}

static void put_list(strbuf *out, const doc_strlist *l)
{
    sb_putc(out, '[');
    for (int i = 0; i < l->n; i++) {
        if (i) sb_puts(out, ", ");
        doc_yaml_scalar(out, l->v[i]);
    }
    sb_putc(out, ']');
}

/* One "key: value" line when the value differs from the default or the
 * path is forced. The value is rendered by the caller into val. */
static void field(emitter *em, strbuf *blk, int indent, const char *parent, const char *key, int is_default,
                  const char *val)
{
    char path[512];
    snprintf(path, sizeof path, "%s%s%s", parent, *parent ? "." : "", key);
    if (is_default && !forced(em, path)) return;
    sb_printf(blk, "%*s%s: %s\n", indent, "", key, val);
}

#define RENDER(expr) (sb_reset(&v), (expr), sb_str(&v))

static void block(emitter *em, strbuf *out, int indent, const char *parent, const char *key, strbuf *inner)
{
    (void)em;
    if (!inner->len) return;
    sb_printf(out, "%*s%s:\n", indent, "", key);
    sb_append(out, inner->buf, inner->len);
}

static void emit_adapter_fields(emitter *em, strbuf *o, int ind, const char *p, doc_adapter_kind ad, int r,
                                int64_t alpha, double drop, int tm_auto, const doc_strlist *tm, double lr)
{
    strbuf v = STRBUF_INIT;
    field(em, o, ind, p, "adapter", ad == DOC_ADAPTER_LORA, doc_adapter_kind_names[ad]);
    field(em, o, ind, p, "lora_r", r == 8, RENDER(sb_printf(&v, "%d", r)));
    field(em, o, ind, p, "lora_alpha", alpha == 16, RENDER(sb_printf(&v, "%lld", (long long)alpha)));
    field(em, o, ind, p, "lora_dropout", drop == 0.05, RENDER(put_float(&v, drop)));
    field(em, o, ind, p, "target_modules", tm_auto, tm_auto ? "auto" : RENDER(put_list(&v, tm)));
    field(em, o, ind, p, "learning_rate", lr == 2e-4, RENDER(put_float(&v, lr)));
    sb_free(&v);
}

static void emit_training(emitter *em, const doc_training *t, strbuf *o)
{
    doc_training d;
    doc_training_defaults(&d);
    strbuf v = STRBUF_INIT, sub = STRBUF_INIT, sub2 = STRBUF_INIT;
    const char *P = "training";
    /* The flat adapter keys are interleaved with others: written by hand. */
    field(em, o, 2, P, "adapter", t->adapter == d.adapter, doc_adapter_kind_names[t->adapter]);
    field(em, o, 2, P, "lora_r", t->lora_r == d.lora_r, RENDER(sb_printf(&v, "%d", t->lora_r)));
    field(em, o, 2, P, "lora_alpha", t->lora_alpha == d.lora_alpha, RENDER(sb_printf(&v, "%lld", (long long)t->lora_alpha)));
    field(em, o, 2, P, "lora_dropout", t->lora_dropout == d.lora_dropout, RENDER(put_float(&v, t->lora_dropout)));
    field(em, o, 2, P, "target_modules", t->target_modules_auto,
          t->target_modules_auto ? "auto" : RENDER(put_list(&v, &t->target_modules)));
    field(em, o, 2, P, "sequence_len", t->sequence_len == d.sequence_len, RENDER(sb_printf(&v, "%d", t->sequence_len)));
    field(em, o, 2, P, "micro_batch_size", !t->micro_batch_size,
          t->micro_batch_size ? RENDER(sb_printf(&v, "%lld", (long long)t->micro_batch_size)) : "auto");
    field(em, o, 2, P, "grad_accum", !t->grad_accum,
          t->grad_accum ? RENDER(sb_printf(&v, "%lld", (long long)t->grad_accum)) : "auto");
    field(em, o, 2, P, "learning_rate", t->learning_rate == d.learning_rate, RENDER(put_float(&v, t->learning_rate)));
    field(em, o, 2, P, "num_epochs", t->num_epochs == d.num_epochs, RENDER(sb_printf(&v, "%lld", (long long)t->num_epochs)));
    field(em, o, 2, P, "optimizer", t->optimizer == d.optimizer, doc_optimizer_names[t->optimizer]);
    field(em, o, 2, P, "lr_scheduler", t->lr_scheduler == d.lr_scheduler, doc_lr_scheduler_names[t->lr_scheduler]);
    field(em, o, 2, P, "warmup_ratio", t->warmup_ratio == d.warmup_ratio, RENDER(put_float(&v, t->warmup_ratio)));
    field(em, o, 2, P, "precision", !t->precision, t->precision ? doc_precision_names[t->precision] : "null");
    field(em, o, 2, P, "seed", t->seed == d.seed, RENDER(sb_printf(&v, "%lld", (long long)t->seed)));

    /* preference */
    sb_reset(&sub);
    const char *PP = "training.preference";
    field(em, &sub, 4, PP, "enabled", t->preference.enabled == 0, t->preference.enabled ? "true" : "false");
    field(em, &sub, 4, PP, "method", t->preference.method == 0, doc_pref_method_names[t->preference.method]);
    sb_reset(&sub2);
    const char *PH = "training.preference.hyperparams";
    field(em, &sub2, 6, PH, "beta", t->preference.hyperparams.beta == 0.1, RENDER(put_float(&v, t->preference.hyperparams.beta)));
    field(em, &sub2, 6, PH, "alpha", t->preference.hyperparams.alpha == 0.1, RENDER(put_float(&v, t->preference.hyperparams.alpha)));
    field(em, &sub2, 6, PH, "learning_rate", t->preference.hyperparams.learning_rate == 5e-6,
          RENDER(put_float(&v, t->preference.hyperparams.learning_rate)));
    field(em, &sub2, 6, PH, "num_epochs", t->preference.hyperparams.num_epochs == 1,
          RENDER(sb_printf(&v, "%lld", (long long)t->preference.hyperparams.num_epochs)));
    block(em, &sub, 4, PP, "hyperparams", &sub2);
    field(em, &sub, 4, PP, "loss_type", t->preference.loss_type == 0, doc_pref_loss_names[t->preference.loss_type]);
    field(em, &sub, 4, PP, "reference", t->preference.reference == 0, doc_pref_reference_names[t->preference.reference]);
    block(em, o, 2, P, "preference", &sub);

    sb_reset(&sub);
    field(em, &sub, 4, "training.cpt", "schedule", t->cpt.schedule == 0, doc_cpt_schedule_names[t->cpt.schedule]);
    field(em, &sub, 4, "training.cpt", "embed_warmup_steps", t->cpt.embed_warmup_steps == 0,
          RENDER(sb_printf(&v, "%lld", (long long)t->cpt.embed_warmup_steps)));
    block(em, o, 2, P, "cpt", &sub);

    sb_reset(&sub);
    const char *PG = "training.gate";
    field(em, &sub, 4, PG, "enabled", !t->gate.enabled, t->gate.enabled ? "true" : "false");
    field(em, &sub, 4, PG, "hidden_proj_dim", t->gate.hidden_proj_dim == 64, RENDER(sb_printf(&v, "%d", t->gate.hidden_proj_dim)));
    field(em, &sub, 4, PG, "steps", t->gate.steps == 200, RENDER(sb_printf(&v, "%d", t->gate.steps)));
    field(em, &sub, 4, PG, "lr", t->gate.lr == 3e-4, RENDER(put_float(&v, t->gate.lr)));
    field(em, &sub, 4, PG, "cold_start_floor", t->gate.cold_start_floor == 4, RENDER(sb_printf(&v, "%d", t->gate.cold_start_floor)));
    field(em, &sub, 4, PG, "entropy_lambda", t->gate.entropy_lambda == 0.01, RENDER(put_float(&v, t->gate.entropy_lambda)));
    block(em, o, 2, P, "gate", &sub);

    sb_reset(&sub);
    const char *PC = "training.cache";
    field(em, &sub, 4, PC, "enabled", t->cache.enabled == 1, t->cache.enabled ? "true" : "false");
    field(em, &sub, 4, PC, "max_bytes", t->cache.max_bytes == d.cache.max_bytes, RENDER(sb_printf(&v, "%lld", (long long)t->cache.max_bytes)));
    field(em, &sub, 4, PC, "prune_older_than_days", t->cache.prune_older_than_days == 90,
          RENDER(sb_printf(&v, "%lld", (long long)t->cache.prune_older_than_days)));
    block(em, o, 2, P, "cache", &sub);

    sb_reset(&sub);
    field(em, &sub, 4, "training.audio", "auto_resample", !t->audio.auto_resample, t->audio.auto_resample ? "true" : "false");
    block(em, o, 2, P, "audio", &sub);

    if (t->adapters) {
        sb_printf(o, "  adapters:\n");
        for (int i = 0; i < t->n_adapters; i++) {
            const doc_adapter_cfg *a = &t->adapters[i];
            char ap[256];
            snprintf(ap, sizeof ap, "training.adapters.%s", a->name);
            sb_reset(&sub);
            emit_adapter_fields(em, &sub, 6, ap, a->adapter, a->lora_r, a->lora_alpha, a->lora_dropout,
                                a->target_modules_auto, &a->target_modules, a->learning_rate);
            if (sub.len) {
                sb_printf(o, "    %s:\n", a->name);
                sb_append(o, sub.buf, sub.len);
            } else sb_printf(o, "    %s: {}\n", a->name);
        }
    }
    if (t->sources_set) {
        if (!t->n_sources) sb_puts(o, "  sources: []\n");
        else sb_puts(o, "  sources:\n");
        for (int i = 0; i < t->n_sources; i++) {
            const doc_source *s = &t->sources[i];
            sb_reset(&sub);
            const char *PS = "training.sources";
            sb_reset(&v);
            doc_yaml_scalar(&v, s->path);
            sb_printf(&sub, "      path: %s\n", sb_str(&v));
            int inc_default = s->include.n == 1 && !strcmp(s->include.v[0], "**/*");
            field(em, &sub, 6, PS, "include", inc_default, RENDER(put_list(&v, &s->include)));
            field(em, &sub, 6, PS, "exclude", s->exclude.n == 0, RENDER(put_list(&v, &s->exclude)));
            field(em, &sub, 6, PS, "max_bytes_per_file", !s->max_bytes_per_file,
                  s->max_bytes_per_file ? RENDER(sb_printf(&v, "%lld", (long long)s->max_bytes_per_file)) : "null");
            field(em, &sub, 6, PS, "max_files", !s->max_files,
                  s->max_files ? RENDER(sb_printf(&v, "%lld", (long long)s->max_files)) : "null");
            /* first line "      path: ..." becomes "    - path: ..." */
            sb_puts(o, "    - ");
            sb_append(o, sub.buf + 6, sub.len - 6);
        }
    }
    field(em, o, 2, P, "sources_policy", t->sources_policy == 0, doc_sources_policy_names[t->sources_policy]);

    /* dlm extensions */
    field(em, o, 2, P, "loss_on", t->loss_on == 0, doc_loss_on_names[t->loss_on]);
    field(em, o, 2, P, "packing", t->packing == 1, t->packing ? "true" : "false");
    field(em, o, 2, P, "save_steps", !t->save_steps,
          t->save_steps ? RENDER(sb_printf(&v, "%lld", (long long)t->save_steps)) : "null");
    field(em, o, 2, P, "weight_decay", t->weight_decay == 0.0, RENDER(put_float(&v, t->weight_decay)));
    field(em, o, 2, P, "min_lr_ratio", t->min_lr_ratio == 0.1, RENDER(put_float(&v, t->min_lr_ratio)));
    sb_reset(&sub);
    field(em, &sub, 4, "training.replay", "max_bytes", t->replay.max_bytes == d.replay.max_bytes,
          RENDER(sb_printf(&v, "%lld", (long long)t->replay.max_bytes)));
    field(em, &sub, 4, "training.replay", "enabled", t->replay.enabled == 1, t->replay.enabled ? "true" : "false");
    block(em, o, 2, P, "replay", &sub);
    field(em, o, 2, P, "recompute", t->recompute == 0, doc_recompute_names[t->recompute]);
    field(em, o, 2, P, "threads", !t->threads, t->threads ? RENDER(sb_printf(&v, "%lld", (long long)t->threads)) : "auto");
    field(em, o, 2, P, "val_frac", t->val_frac < 0, t->val_frac < 0 ? "null" : RENDER(put_float(&v, t->val_frac)));
    field(em, o, 2, P, "multi_turn", t->multi_turn == DOC_MULTI_TURN_DEFAULT,
          RENDER(sb_printf(&v, "%lld", (long long)t->multi_turn)));
    sb_free(&v);
    sb_free(&sub);
    sb_free(&sub2);
}

/* system_prompt: a block scalar when it spans lines (with the chomping
 * indicator that keeps its trailing newlines exact), else a scalar. */
static void emit_system_prompt(strbuf *out, const char *s)
{
    size_t n = strlen(s);
    int multiline = strchr(s, '\n') != NULL, simple = 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) simple = 0;
    }
    if (!multiline || !simple || s[0] == ' ' || s[0] == '\n' || s[0] == '\t') {
        sb_puts(out, "system_prompt: ");
        doc_yaml_scalar(out, s);
        sb_putc(out, '\n');
        return;
    }
    size_t trail = 0;
    while (trail < n && s[n - 1 - trail] == '\n') trail++;
    sb_printf(out, "system_prompt: |%s\n", trail == 0 ? "-" : trail == 1 ? "" : "+");
    const char *p = s, *end = s + n - (trail ? 1 : 0);
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        if (le > p) sb_puts(out, "  ");
        sb_append(out, p, (size_t)(le - p));
        sb_putc(out, '\n');
        if (!nl) break;
        p = nl + 1;
    }
}

int doc_fm_emit(const doc_frontmatter *fm, const ynode *orig_root, strbuf *out)
{
    emitter em;
    memset(&em, 0, sizeof em);
    em.out = out;
    sb_putc(&em.forced, '\n');
    collect(&em, orig_root, "", 0);
    sb_printf(out, "dlm_id: %s\n", fm->dlm_id);
    sb_printf(out, "dlm_version: %d\n", DOC_SCHEMA_VERSION);
    sb_puts(out, "base_model: ");
    doc_yaml_scalar(out, fm->base_model ? fm->base_model : "");
    sb_putc(out, '\n');
    strbuf blk = STRBUF_INIT, v = STRBUF_INIT;
    emit_training(&em, &fm->training, &blk);
    block(&em, out, 0, "", "training", &blk);
    sb_reset(&blk);
    field(&em, &blk, 2, "export", "default_quant", fm->export.default_quant == 0, doc_quant_names[fm->export.default_quant]);
    field(&em, &blk, 2, "export", "default_temperature", !fm->export.has_temperature,
          fm->export.has_temperature ? RENDER(put_float(&v, fm->export.default_temperature)) : "null");
    field(&em, &blk, 2, "export", "default_top_p", !fm->export.has_top_p,
          fm->export.has_top_p ? RENDER(put_float(&v, fm->export.default_top_p)) : "null");
    block(&em, out, 0, "", "export", &blk);
    if (fm->system_prompt) emit_system_prompt(out, fm->system_prompt);
    sb_free(&blk);
    sb_free(&v);
    int oom = out->oom || em.forced.oom;
    sb_free(&em.forced);
    return oom ? -1 : 0;
}
