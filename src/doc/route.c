/* route — which sections train which named adapter (docs/reference/
 * original-spec.md §3.9; the original's multi_adapter/router.py):
 *
 *   prose, no suffix                    → every declared adapter
 *   prose `#name`                       → that one
 *   instruction/preference, no suffix   → the first declared adapter
 *   instruction/preference `#name`      → that one
 *   a suffix training.adapters does not declare → UnknownAdapterError
 *
 * The last rule is checked when the document is parsed (doc_check_routes,
 * called by doc.c's parse_text), so `dlm show`, `dlm doctor` and `dlm
 * train` all stop at the section's file:line. A document without
 * training.adapters trains one flat adapter over every section, suffixes
 * included, as the original's `dlm train` does. */
#include "doc/doc_internal.h"

#include <stdlib.h>
#include <string.h>

int doc_adapter_index(const doc_frontmatter *fm, const char *name)
{
    const doc_training *t = &fm->training;
    for (int i = 0; name && i < t->n_adapters; i++)
        if (!strcmp(t->adapters[i].name, name)) return i;
    return -1;
}

int doc_section_routes_to(const doc_frontmatter *fm, const doc_section *s, const char *name)
{
    const doc_training *t = &fm->training;
    if (!t->adapters) return 1;
    if (s->adapter) return !strcmp(s->adapter, name);
    if (s->type == DOC_PROSE) return doc_adapter_index(fm, name) >= 0;
    return t->n_adapters > 0 && !strcmp(t->adapters[0].name, name);
}

/* "['a', 'b']" as Python prints sorted(declared). */
static void declared_list(const doc_training *t, strbuf *out)
{
    int n = t->n_adapters;
    const char **v = calloc((size_t)(n ? n : 1), sizeof *v);
    if (!v) return;
    for (int i = 0; i < n; i++) {
        int j = i;
        while (j > 0 && strcmp(v[j - 1], t->adapters[i].name) > 0) { v[j] = v[j - 1]; j--; }
        v[j] = t->adapters[i].name;
    }
    sb_append(out, "[", 1);
    for (int i = 0; i < n; i++) sb_printf(out, "%s'%s'", i ? ", " : "", v[i]);
    sb_append(out, "]", 1);
    free(v);
}

int doc_check_route(const char *path, const doc_frontmatter *fm, const doc_section *s, dlm_err *e)
{
    const doc_training *t = &fm->training;
    if (!t->adapters || !s->adapter || doc_adapter_index(fm, s->adapter) >= 0) return 0;
    strbuf decl = STRBUF_INIT;
    declared_list(t, &decl);
    if (s->line > 0)
        err_at(e, "UnknownAdapterError", path, s->line, 1,
               "section at line %d routes to adapter '#%s' which is not declared in training.adapters (declared: %s)",
               s->line, s->adapter, sb_str(&decl));
    else   /* a section being appended has no line yet */
        err_at(e, "UnknownAdapterError", path, 0, 0,
               "the new section routes to adapter '#%s' which is not declared in training.adapters (declared: %s)",
               s->adapter, sb_str(&decl));
    err_hint(e, "declare '%s' under training.adapters, or change the fence suffix to one of %s", s->adapter,
             sb_str(&decl));
    sb_free(&decl);
    return -1;
}

int doc_check_routes(const dlm_doc *d, dlm_err *e)
{
    for (int i = 0; i < d->n; i++)
        if (doc_check_route(d->path, &d->fm, &d->sections[i], e)) return -1;
    return 0;
}

static int copy_strlist(doc_strlist *dst, const doc_strlist *src)
{
    dst->v = calloc((size_t)(src->n ? src->n : 1), sizeof *dst->v);
    dst->n = 0;
    if (!dst->v) return -1;
    for (int i = 0; i < src->n; i++) {
        if (!(dst->v[i] = strdup(src->v[i]))) return -1;
        dst->n++;
    }
    return 0;
}

int doc_scope_adapter(dlm_doc *d, const char *name, dlm_err *e)
{
    doc_training *t = &d->fm.training;
    int ai = doc_adapter_index(&d->fm, name);
    if (ai < 0) {
        strbuf decl = STRBUF_INIT;
        declared_list(t, &decl);
        if (!t->adapters)
            err_set(e, "UnknownAdapterError", "%s declares no training.adapters, so there is no adapter '%s'", d->path, name);
        else
            err_set(e, "UnknownAdapterError", "adapter '%s' not declared (declared: %s)", name, sb_str(&decl));
        err_hint(e, "%s", t->adapters ? "name one of the adapters under training.adapters"
                                      : "leave out --adapter: the document trains one adapter");
        sb_free(&decl);
        return -1;
    }
    if (d->scoped) return strcmp(d->scoped, name) ? err_set(e, "DocError", "already scoped to adapter '%s'", d->scoped) : 0;
    int k = 0;
    for (int i = 0; i < d->n; i++) {
        if (doc_section_routes_to(&d->fm, &d->sections[i], name)) d->sections[k++] = d->sections[i];
        else doc_section_clear(&d->sections[i]);
    }
    d->n = k;
    /* the flat fields stay at their defaults when adapters are declared
     * (schema.c refuses anything else): the adapter's own values take
     * their place, so everything downstream reads one LoRA config */
    const doc_adapter_cfg *a = &t->adapters[ai];
    t->adapter = a->adapter;
    t->lora_r = a->lora_r;
    t->lora_alpha = a->lora_alpha;
    t->lora_dropout = a->lora_dropout;
    t->learning_rate = a->learning_rate;
    t->target_modules_auto = a->target_modules_auto;
    for (int i = 0; i < t->target_modules.n; i++) free(t->target_modules.v[i]);
    free(t->target_modules.v);
    t->target_modules.v = NULL;
    t->target_modules.n = 0;
    if (copy_strlist(&t->target_modules, &a->target_modules) || !(d->scoped = strdup(name)))
        return err_set(e, "MemoryError", "out of memory");
    d->dirty = 1;
    return 0;
}

const char *doc_scoped_adapter(const dlm_doc *d) { return d->scoped; }
