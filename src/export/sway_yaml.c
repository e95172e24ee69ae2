#include "export/sway_yaml.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "util/fs.h"
#include "util/json.h"
#include "weights/registry.h"

/* autogen's _STYLE_ELICITATION_PROMPTS */
static const char *const STYLE[] = {
    "Write a short paragraph explaining your approach to a difficult problem.",
    "Describe what you find most interesting about a topic you know well.",
    "Summarize an important idea for a curious novice.",
    "Reflect on a small lesson you learned recently.",
    "Explain a concept using a concrete example.",
    "Tell a brief story that illustrates a single point.",
};

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Python's s[a:b].strip() as a new string */
static char *strip_dup(const char *s, size_t n)
{
    size_t a = 0;
    while (a < n && is_space(s[a])) a++;
    while (n > a && is_space(s[n - 1])) n--;
    char *o = malloc(n - a + 2);   /* room for the "." the caller may add */
    if (o) { memcpy(o, s + a, n - a); o[n - a] = 0; }
    return o;
}

/* _auto_paraphrases: prompt.rstrip("?. ") in three fixed frames */
static json_t *paraphrases(const char *q)
{
    size_t n = strlen(q);
    while (n && (q[n - 1] == '?' || q[n - 1] == '.' || q[n - 1] == ' ')) n--;
    char b[3][8192];
    snprintf(b[0], sizeof b[0], "Could you explain: %.*s?", (int)n, q);
    snprintf(b[1], sizeof b[1], "I'd like to know \xe2\x80\x94 %.*s.", (int)n, q);
    snprintf(b[2], sizeof b[2], "Please describe: %.*s.", (int)n, q);
    return json_pack("[s, s, s]", b[0], b[1], b[2]);
}

static json_t *cases(const dlm_doc *d, int max)
{
    json_t *a = json_array();
    int k = 0;
    for (int i = 0; i < doc_nsections(d); i++) {
        const doc_section *s = doc_section_at(d, i);
        for (int j = 0; s->type == DOC_INSTRUCTION && j < s->n_pairs && k < max; j++) {
            const doc_qa *p = &s->pairs[j];
            if (!*p->question || !*p->answer) continue;
            json_array_append_new(a, json_pack("{s:s, s:s, s:o}", "prompt", p->question, "gold", p->answer,
                                               "paraphrases", paraphrases(p->question)));
            k++;
        }
    }
    return a;
}

static json_t *first_n(const json_t *a, size_t n)
{
    json_t *o = json_array();
    for (size_t i = 0; i < n && i < json_array_size(a); i++) json_array_append(o, json_array_get(a, i));
    return o;
}

json_t *sway_spec_build(const dlm_doc *d, const char *doc_abs, const char *adapter_dir)
{
    const doc_frontmatter *fm = doc_fm(d);
    /* the resolver's base: the registry row's HF id; hf:org/name as org/name */
    const char *base = fm->base_model;
    const reg_entry *re = registry_lookup(base);
    if (re && re->hf_id) base = re->hf_id;
    else if (!strncmp(base, "hf:", 3)) base += 3;

    json_t *instr = json_array(), *prose = json_array();
    int has_prose = 0, has_pref = 0, nsec = doc_nsections(d);
    for (int i = 0; i < nsec; i++) {
        const doc_section *s = doc_section_at(d, i);
        if (s->type == DOC_INSTRUCTION) {
            for (int j = 0; j < s->n_pairs; j++)
                if (*s->pairs[j].question && *s->pairs[j].answer)
                    json_array_append_new(instr, json_string(s->pairs[j].question));
        } else if (s->type == DOC_PREFERENCE) {
            if (s->n_triples > 0) has_pref = 1;
        } else {
            /* prose, and media sections (sway's _normalize_kind makes any
             * other kind prose): the leading sentence as a prompt */
            has_prose = 1;
            char *all = strip_dup(s->content, s->content_len);
            if (all && *all) {
                const char *dot = memchr(s->content, '.', s->content_len);
                char *first = strip_dup(s->content, dot ? (size_t)(dot - s->content) : s->content_len);
                if (first && *first) {
                    strcat(first, ".");
                    json_array_append_new(prose, json_string(first));
                }
                free(first);
            }
            free(all);
        }
    }
    json_t *kl = json_array_size(instr) ? first_n(instr, 16) : first_n(prose, 16);
    int has_kl = json_array_size(kl) > 0, has_instr = json_array_size(instr) > 0;

    json_t *suite = json_array();
    json_array_append_new(suite, json_pack("{s:s, s:s, s:i}", "name", "null_baseline", "kind", "null_adapter", "runs", 3));
    if (has_kl)
        json_array_append_new(suite, json_pack("{s:s, s:s, s:O, s:f}", "name", "delta_kl_doc", "kind", "delta_kl", "prompts",
                                               kl, "assert_mean_gte", 0.02));
    if (has_instr)
        json_array_append_new(suite, json_pack("{s:s, s:s, s:o, s:f}", "name", "revert_check", "kind", "adapter_revert",
                                               "cases", cases(d, 8), "assert_revert_rate_lt", 0.3));
    if (has_kl)
        json_array_append_new(suite, json_pack("{s:s, s:s, s:o, s:[i, i, i, i], s:i}", "name", "prompt_collapse", "kind",
                                               "prompt_collapse", "prompts", first_n(kl, 4), "context_lengths", 0, 256,
                                               512, 1024, "assert_half_life_tokens", 300));
    if (nsec >= 2)
        json_array_append_new(suite, json_pack("{s:s, s:s, s:f}", "name", "section_attribution", "kind",
                                               "section_internalization", "per_section_threshold", 0.05));
    if (has_instr)
        json_array_append_new(suite, json_pack("{s:s, s:s, s:o}", "name", "paraphrase_invariance", "kind",
                                               "paraphrase_invariance", "cases", cases(d, 6)));
    if (has_pref)
        json_array_append_new(suite, json_pack("{s:s, s:s, s:f}", "name", "preference_flip", "kind", "preference_flip",
                                               "assert_flip_rate_gte", 0.7));
    json_t *sp = json_array();
    for (size_t i = 0; i < sizeof STYLE / sizeof STYLE[0]; i++) json_array_append_new(sp, json_string(STYLE[i]));
    json_array_append_new(suite, json_pack("{s:s, s:s, s:o}", "name", "style_shift", "kind", "style_fingerprint", "prompts", sp));
    json_array_append_new(suite, json_pack("{s:s, s:s}", "name", "general_knowledge", "kind", "calibration_drift"));
    if (has_prose) {
        json_array_append_new(suite, json_pack("{s:s, s:s, s:s, s:i}", "name", "external_ppl", "kind", "external_perplexity",
                                               "corpus", "public_domain_en", "max_chunks", 8));
        json_array_append_new(suite, json_pack("{s:s, s:s, s:i, s:i}", "name", "verbatim_leak", "kind", "leakage",
                                               "prefix_chars", 128, "continuation_chars", 256));
    }
    /* cluster_kl: every instruction prompt, then the prose prompts, first
     * occurrence of each, when there are at least 20 */
    json_t *pool = json_array();
    for (int pass = 0; pass < 2; pass++) {
        const json_t *src = pass ? prose : instr;
        for (size_t i = 0; i < json_array_size(src); i++) {
            const char *p = json_string_value(json_array_get(src, i));
            int seen = 0;
            for (size_t j = 0; j < json_array_size(pool) && !seen; j++)
                seen = !strcmp(p, json_string_value(json_array_get(pool, j)));
            if (!seen) json_array_append_new(pool, json_string(p));
        }
    }
    if (json_array_size(pool) >= 20)
        json_array_append_new(suite, json_pack("{s:s, s:s, s:o, s:i, s:i}", "name", "cluster_kl_topics", "kind", "cluster_kl",
                                               "prompts", first_n(pool, 64), "num_clusters", 5, "min_prompts", 20));
    json_decref(pool);
    if (has_kl)
        json_array_append_new(suite, json_pack("{s:s, s:s, s:o, s:[f, f, f, f, f, f]}", "name", "adapter_ablation", "kind",
                                               "adapter_ablation", "prompts", first_n(kl, 6), "lambdas", 0.0, 0.25, 0.5,
                                               0.75, 1.0, 1.25));
    json_decref(kl);
    json_decref(instr);
    json_decref(prose);
    return json_pack("{s:i, s:{s:{s:s, s:s}, s:{s:s, s:s, s:o}}, s:{s:i, s:b}, s:o, s:s}", "version", 1, "models", "base",
                     "kind", "hf", "base", base, "ft", "kind", "hf", "base", base, "adapter",
                     adapter_dir ? json_string(adapter_dir) : json_null(), "defaults", "seed", 0, "differential", 1,
                     "suite", suite, "dlm_source", doc_abs);
}

static void scalar(strbuf *out, const json_t *v)
{
    char b[40];
    switch (json_typeof(v)) {
    case JSON_STRING: doc_yaml_scalar(out, json_string_value(v)); break;
    case JSON_INTEGER: sb_printf(out, "%lld", (long long)json_integer_value(v)); break;
    case JSON_REAL: json_fmt_double(json_real_value(v), b, sizeof b), sb_puts(out, b); break;
    case JSON_TRUE: sb_puts(out, "true"); break;
    case JSON_FALSE: sb_puts(out, "false"); break;
    case JSON_NULL: sb_puts(out, "null"); break;
    case JSON_OBJECT: sb_puts(out, "{}"); break;
    case JSON_ARRAY: sb_puts(out, "[]"); break;
    }
}

static int nonempty(const json_t *v)
{
    return (json_is_object(v) && json_object_size(v)) || (json_is_array(v) && json_array_size(v));
}

static void emit(strbuf *out, const json_t *v, int ind, int inline_first);

/* a mapping's entries at indent ind; the first one already placed after
 * "- " when inline_first */
static void emit_map(strbuf *out, const json_t *v, int ind, int inline_first)
{
    const char *k;
    const json_t *x;
    int first = 1;
    json_object_foreach((json_t *)v, k, x) {
        if (!(first && inline_first)) sb_printf(out, "%*s", ind, "");
        first = 0;
        doc_yaml_scalar(out, k);
        sb_putc(out, ':');
        if (!nonempty(x)) {
            sb_putc(out, ' ');
            scalar(out, x);
            sb_putc(out, '\n');
        } else {
            sb_putc(out, '\n');
            emit(out, x, json_is_object(x) ? ind + 2 : ind, 0);   /* PyYAML: a key's sequence at the key's indent */
        }
    }
}

static void emit(strbuf *out, const json_t *v, int ind, int inline_first)
{
    if (json_is_object(v)) {
        emit_map(out, v, ind, inline_first);
        return;
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        const json_t *x = json_array_get(v, i);
        sb_printf(out, "%*s- ", ind, "");
        if (json_is_object(x) && json_object_size(x)) emit_map(out, x, ind + 2, 1);
        else if (nonempty(x)) {
            sb_putc(out, '\n');
            emit(out, x, ind + 2, 0);
        } else {
            scalar(out, x);
            sb_putc(out, '\n');
        }
    }
}

void sway_yaml_emit(strbuf *out, const json_t *v)
{
    emit(out, v, 0, 0);
}

int sway_yaml_write(const char *doc_path, const char *home, const char *export_dir, char *out, size_t cap, dlm_err *e)
{
    char doc_abs[PATH_MAX], store[4096], adir[4300], areal[PATH_MAX], vn[16];
    if (!realpath(doc_path, doc_abs)) return err_sys(e, "cannot resolve '%s'", doc_path);
    dlm_doc *d = doc_load(doc_path, e);
    if (!d) return -1;
    const char *adapter = NULL;
    if (store_dir(home, doc_fm(d)->dlm_id, store, sizeof store, e)) { doc_free(d); return -1; }
    /* the original's resolver: adapter/current.txt of the flat store */
    dlm_err ignore;
    int v = store_current_version(store, &ignore);
    if (v > 0) {
        store_version_name(v, vn, sizeof vn);
        snprintf(adir, sizeof adir, "%s/adapter/versions/%s", store, vn);
        if (realpath(adir, areal)) adapter = areal;
    }
    json_t *spec = sway_spec_build(d, doc_abs, adapter);
    doc_free(d);
    if (!spec) return err_set(e, "MemoryError", "out of memory");
    strbuf y = {0};
    sway_yaml_emit(&y, spec);
    json_decref(spec);
    if (y.oom) { sb_free(&y); return err_set(e, "MemoryError", "out of memory"); }
    snprintf(out, cap, "%s/sway.yaml", export_dir);
    int rc = fs_write_atomic(out, y.buf, y.len, 0644, e);
    sb_free(&y);
    return rc;
}
