/* tok_load — an HF tokenizer.json (+ tokenizer_config.json) into a tok.
 *
 * Only what byte-level BPE needs is accepted; anything else (another model
 * type, byte fallback, a normalizer or pre-tokenizer we do not implement)
 * is refused with a message naming it, never half-supported: a tokenizer
 * that loads must give HF's ids. Every id, count and length is checked
 * before it is used (the fuzz target feeds this file garbage). */
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include <utf8proc.h>

#include "tok/tok_impl.h"
#include "util/fs.h"
#include "util/json.h"

#define TERR "TokenizerError"

static int get_bool(const json_t *o, const char *key, int def)
{
    const json_t *v = json_object_get(o, key);
    if (json_is_boolean(v)) return json_is_true(v);
    return def;
}

/* tokenizer_config special tokens are a string or {"content": ...}. */
static const char *str_or_content(const json_t *v)
{
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_object(v)) return jget_str(v, "content");
    return NULL;
}

static const char *type_of(const json_t *o)
{
    const char *s = jget_str(o, "type");
    return s ? s : "";
}

/* ---- normalizer ----------------------------------------------------------------------- */

static int load_normalizer(tok *t, const json_t *n, const char *name, dlm_err *e)
{
    if (!n || json_is_null(n)) return 0;
    if (!json_is_object(n)) return err_set(e, TERR, "%s: normalizer must be an object", name);
    const char *ty = type_of(n);
    if (!strcmp(ty, "Sequence")) {
        const json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list)) return err_set(e, TERR, "%s: Sequence normalizer without a list", name);
        size_t i;
        const json_t *it;
        json_array_foreach(list, i, it) if (load_normalizer(t, it, name, e)) return -1;
        return 0;
    }
    int opt;
    if (!strcmp(ty, "NFC")) opt = UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    else if (!strcmp(ty, "NFD")) opt = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
    else if (!strcmp(ty, "NFKC")) opt = UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    else if (!strcmp(ty, "NFKD")) opt = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
    else
        return err_set(e, TERR, "%s: normalizer '%s' is not supported (byte-level BPE needs none, NFC, NFD, NFKC or NFKD)",
                       name, ty);
    if (t->n_norm >= TOK_NORM_MAX) return err_set(e, TERR, "%s: too many normalizers", name);
    t->norm[t->n_norm++] = opt;
    return 0;
}

/* ---- pre-tokenizer -------------------------------------------------------------------- */

static int behavior_of(const char *s)
{
    if (!s) return 0;
    if (!strcmp(s, "Removed")) return SPLIT_REMOVED;
    if (!strcmp(s, "Isolated")) return SPLIT_ISOLATED;
    if (!strcmp(s, "MergedWithPrevious")) return SPLIT_MERGED_PREV;
    if (!strcmp(s, "MergedWithNext")) return SPLIT_MERGED_NEXT;
    if (!strcmp(s, "Contiguous")) return SPLIT_CONTIGUOUS;
    return 0;
}

static int load_pre(tok *t, const json_t *p, const char *name, int depth, dlm_err *e)
{
    if (!p || json_is_null(p)) return 0;
    if (!json_is_object(p) || depth > 4) return err_set(e, TERR, "%s: malformed pre_tokenizer", name);
    const char *ty = type_of(p);
    if (!strcmp(ty, "Sequence")) {
        const json_t *list = json_object_get(p, "pretokenizers");
        if (!json_is_array(list)) return err_set(e, TERR, "%s: Sequence pre_tokenizer without a list", name);
        size_t i;
        const json_t *it;
        json_array_foreach(list, i, it) if (load_pre(t, it, name, depth + 1, e)) return -1;
        return 0;
    }
    if (!strcmp(ty, "ByteLevel"))
        return tok_pt_bytelevel(t, get_bool(p, "add_prefix_space", 1), get_bool(p, "use_regex", 1), e);
    if (!strcmp(ty, "Digits")) return tok_pt_digits(t, get_bool(p, "individual_digits", 0), e);
    if (!strcmp(ty, "Split")) {
        const json_t *pat = json_object_get(p, "pattern");
        const json_t *re = json_object_get(pat, "Regex");
        const json_t *lit = json_object_get(pat, "String");
        const json_t *s = json_is_string(re) ? re : lit;
        int behavior = behavior_of(jget_str(p, "behavior"));
        if (!json_is_string(s) || !behavior)
            return err_set(e, TERR, "%s: Split pre_tokenizer needs a Regex or String pattern and a behavior", name);
        if (tok_pt_split(t, json_string_value(s), json_string_length(s), s == re, behavior, get_bool(p, "invert", 0), e)) {
            err_prefix(e, "%s", name);
            return -1;
        }
        return 0;
    }
    return err_set(e, TERR, "%s: pre_tokenizer '%s' is not supported (byte-level BPE uses Split, Digits and ByteLevel)",
                   name, ty);
}

/* ---- post-processor -------------------------------------------------------------------- */

static int post_push(tok *t, int suffix, int32_t id, const char *name, dlm_err *e)
{
    if (id < 0 || (size_t)id >= t->n_ids) return err_set(e, TERR, "%s: post_processor token id %d out of range", name, id);
    int32_t *arr = suffix ? t->post_suffix : t->post_prefix;
    size_t *n = suffix ? &t->n_post_suffix : &t->n_post_prefix;
    if (*n >= 8) return err_set(e, TERR, "%s: post_processor adds too many tokens", name);
    arr[(*n)++] = id;
    return 0;
}

static int load_post(tok *t, const json_t *p, const char *name, int depth, dlm_err *e)
{
    if (!p || json_is_null(p)) return 0;
    if (!json_is_object(p) || depth > 4) return err_set(e, TERR, "%s: malformed post_processor", name);
    const char *ty = type_of(p);
    if (!strcmp(ty, "ByteLevel")) return 0; /* offsets only */
    if (!strcmp(ty, "Sequence")) {
        const json_t *list = json_object_get(p, "processors");
        if (!json_is_array(list)) return err_set(e, TERR, "%s: Sequence post_processor without a list", name);
        size_t i;
        const json_t *it;
        json_array_foreach(list, i, it) if (load_post(t, it, name, depth + 1, e)) return -1;
        return 0;
    }
    if (!strcmp(ty, "TemplateProcessing")) {
        const json_t *single = json_object_get(p, "single");
        const json_t *specials = json_object_get(p, "special_tokens");
        if (!json_is_array(single)) return err_set(e, TERR, "%s: TemplateProcessing without 'single'", name);
        int seen_a = 0;
        size_t i;
        const json_t *it;
        json_array_foreach(single, i, it) {
            if (json_object_get(it, "Sequence")) {
                seen_a = 1;
                continue;
            }
            const char *sid = jget_str(json_object_get(it, "SpecialToken"), "id");
            const json_t *ids = json_object_get(json_object_get(specials, sid ? sid : ""), "ids");
            if (!sid || !json_is_array(ids))
                return err_set(e, TERR, "%s: TemplateProcessing names special token '%s' it does not define", name,
                               sid ? sid : "?");
            size_t k;
            const json_t *v;
            json_array_foreach(ids, k, v) {
                if (!json_is_integer(v)) return err_set(e, TERR, "%s: TemplateProcessing id is not an integer", name);
                json_int_t id = json_integer_value(v);
                if (post_push(t, seen_a, id < 0 || id > INT32_MAX ? -1 : (int32_t)id, name, e)) return -1;
            }
        }
        return 0;
    }
    if (!strcmp(ty, "RobertaProcessing") || !strcmp(ty, "BertProcessing")) {
        const json_t *cls = json_object_get(p, "cls"), *sep = json_object_get(p, "sep");
        const json_t *ci = json_array_get(cls, 1), *si = json_array_get(sep, 1);
        if (!json_is_integer(ci) || !json_is_integer(si))
            return err_set(e, TERR, "%s: %s needs [token, id] pairs for cls and sep", name, ty);
        json_int_t c = json_integer_value(ci), s = json_integer_value(si);
        if (post_push(t, 0, c < 0 || c > INT32_MAX ? -1 : (int32_t)c, name, e)) return -1;
        return post_push(t, 1, s < 0 || s > INT32_MAX ? -1 : (int32_t)s, name, e);
    }
    return err_set(e, TERR, "%s: post_processor '%s' is not supported", name, ty);
}

static int check_decoder(const json_t *d, const char *name, int depth, dlm_err *e)
{
    if (!d || json_is_null(d)) return 0;
    if (!json_is_object(d) || depth > 4) return err_set(e, TERR, "%s: malformed decoder", name);
    const char *ty = type_of(d);
    if (!strcmp(ty, "ByteLevel")) return 0;
    if (!strcmp(ty, "Sequence")) {
        const json_t *list = json_object_get(d, "decoders");
        size_t i;
        const json_t *it;
        if (!json_is_array(list)) return err_set(e, TERR, "%s: Sequence decoder without a list", name);
        json_array_foreach(list, i, it) if (check_decoder(it, name, depth + 1, e)) return -1;
        return 0;
    }
    return err_set(e, TERR, "%s: decoder '%s' is not supported (byte-level BPE decodes with ByteLevel)", name, ty);
}

/* ---- model ------------------------------------------------------------------------------- */

static int id_of(const json_t *v, int32_t *id)
{
    if (!json_is_integer(v)) return -1;
    json_int_t x = json_integer_value(v);
    if (x < 0 || x >= TOK_MAX_VOCAB) return -1;
    *id = (int32_t)x;
    return 0;
}

static int check_model_options(const json_t *m, const char *name, dlm_err *e)
{
    const char *ty = jget_str(m, "type");
    if (ty && strcmp(ty, "BPE"))
        return err_set(e, TERR, "%s: model type '%s' is not supported (dlm reads byte-level BPE)", name, ty);
    if (get_bool(m, "byte_fallback", 0))
        return err_set(e, TERR, "%s: byte_fallback BPE (SentencePiece style) is not supported", name);
    const json_t *d = json_object_get(m, "dropout");
    if (d && !json_is_null(d) && !(json_is_number(d) && json_number_value(d) == 0.0))
        return err_set(e, TERR, "%s: BPE dropout is not supported (encoding would not be deterministic)", name);
    const char *keys[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const json_t *v = json_object_get(m, keys[i]);
        if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0))
            return err_set(e, TERR, "%s: BPE %s is not supported", name, keys[i]);
    }
    return 0;
}

/* Split a legacy "a b" merge on its one space (HF: exactly two parts). */
static int merge_ref(const json_t *m, tok_pair_ref *r)
{
    if (json_is_string(m)) {
        const char *s = json_string_value(m);
        size_t n = json_string_length(m);
        const char *sp = memchr(s, ' ', n);
        if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s))) return -1;
        r->a = s;
        r->an = (size_t)(sp - s);
        r->b = sp + 1;
        r->bn = n - r->an - 1;
        return 0;
    }
    if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
        json_is_string(json_array_get(m, 1))) {
        r->a = json_string_value(json_array_get(m, 0));
        r->an = json_string_length(json_array_get(m, 0));
        r->b = json_string_value(json_array_get(m, 1));
        r->bn = json_string_length(json_array_get(m, 1));
        return 0;
    }
    return -1;
}

/* Every pre-tokenizer we run maps bytes through the ByteLevel table at the
 * end; a chain without it (or with steps after it) is another algorithm. */
static int check_pipeline(const tok *t, const char *name, dlm_err *e)
{
    for (int i = 0; i < t->n_pt; i++)
        if (t->pt[i].kind == PT_BYTELEVEL && i != t->n_pt - 1)
            return err_set(e, TERR, "%s: steps after the ByteLevel pre-tokenizer are not supported", name);
    if (!t->n_pt || t->pt[t->n_pt - 1].kind != PT_BYTELEVEL)
        return err_set(e, TERR, "%s: not a byte-level BPE tokenizer (no ByteLevel pre-tokenizer)", name);
    return 0;
}

static int load_config(tok *t, const json_t *cfg, const char *name, dlm_err *e)
{
    if (!cfg) return 0;
    if (!json_is_object(cfg)) return err_set(e, TERR, "%s: tokenizer_config must be a JSON object", name);
    struct { const char *key; int32_t *dst; } sp[] = {
        {"bos_token", &t->bos}, {"eos_token", &t->eos}, {"pad_token", &t->pad}, {"unk_token", &t->unk}};
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) {
        const char *s = str_or_content(json_object_get(cfg, sp[i].key));
        if (s) *sp[i].dst = tok_find(t, s);
    }
    const json_t *ab = json_object_get(cfg, "add_bos_token"), *ae = json_object_get(cfg, "add_eos_token");
    if (json_is_boolean(ab)) t->add_bos = json_is_true(ab);
    if (json_is_boolean(ae)) t->add_eos = json_is_true(ae);
    const json_t *ct = json_object_get(cfg, "chat_template");
    const char *tmpl = NULL;
    if (json_is_string(ct)) tmpl = json_string_value(ct);
    else if (json_is_array(ct)) {
        /* Named templates: "default" wins, else the first. */
        size_t i;
        const json_t *it;
        json_array_foreach(ct, i, it) {
            const char *nm = jget_str(it, "name"), *tx = jget_str(it, "template");
            if (!tx) continue;
            if (!tmpl || (nm && !strcmp(nm, "default"))) tmpl = tx;
        }
    }
    if (tmpl && !(t->chat_template = strdup(tmpl))) return err_set(e, "OOMError", "out of memory");
    return 0;
}

static int load_root(tok *t, const json_t *root, const json_t *cfg, const char *name, dlm_err *e)
{
    if (!json_is_object(root)) return err_set(e, TERR, "%s: tokenizer.json must be a JSON object", name);
    const json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) return err_set(e, TERR, "%s: no 'model' object", name);
    if (check_model_options(model, name, e)) return -1;
    const json_t *vocab = json_object_get(model, "vocab");
    const json_t *merges = json_object_get(model, "merges");
    const json_t *added = json_object_get(root, "added_tokens");
    if (!json_is_object(vocab)) return err_set(e, TERR, "%s: model.vocab must be an object", name);
    if (merges && !json_is_array(merges)) return err_set(e, TERR, "%s: model.merges must be a list", name);
    if (added && !json_is_null(added) && !json_is_array(added))
        return err_set(e, TERR, "%s: added_tokens must be a list", name);
    if (json_object_size(vocab) > TOK_MAX_VOCAB) return err_set(e, TERR, "%s: vocabulary too large", name);
    if (json_array_size(merges) > TOK_MAX_MERGES) return err_set(e, TERR, "%s: too many merges", name);

    /* Id space: max id over vocab and added tokens. */
    int32_t max_id = -1, id;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)vocab, key, v) {
        if (id_of(v, &id)) return err_set(e, TERR, "%s: vocab entry \"%.64s\" has a bad id", name, key);
        if (id > max_id) max_id = id;
    }
    size_t i;
    const json_t *it;
    json_array_foreach(added, i, it) {
        if (!json_is_object(it) || id_of(json_object_get(it, "id"), &id) || !json_is_string(json_object_get(it, "content")))
            return err_set(e, TERR, "%s: added_tokens[%zu] needs an id in range and a content string", name, i);
        if (id > max_id) max_id = id;
    }
    if (max_id < 0) return err_set(e, TERR, "%s: empty vocabulary", name);
    t->n_ids = (size_t)max_id + 1;
    t->in_vocab = calloc(t->n_ids, 1);
    t->type = calloc(t->n_ids, 1);
    t->added_of = malloc(t->n_ids * sizeof *t->added_of);
    if (!t->in_vocab || !t->type || !t->added_of || tok_strtab_init(&t->str, t->n_ids))
        return err_set(e, "OOMError", "out of memory for %zu tokens", t->n_ids);
    for (size_t k = 0; k < t->n_ids; k++) t->added_of[k] = -1;
    void *iter = json_object_iter((json_t *)vocab);
    while (iter) {
        key = json_object_iter_key(iter);
        size_t kn = json_object_iter_key_len(iter);
        id_of(json_object_iter_value(iter), &id);
        if (t->in_vocab[id]) return err_set(e, TERR, "%s: two vocab entries share id %d", name, id);
        if (kn == 0 || kn > TOK_MAX_TOKEN_BYTES) return err_set(e, TERR, "%s: vocab entry %d is empty or too long", name, id);
        if (tok_strtab_set(&t->str, id, key, kn)) return err_set(e, "OOMError", "out of memory");
        t->in_vocab[id] = 1;
        iter = json_object_iter_next((json_t *)vocab, iter);
    }
    json_array_foreach(added, i, it) {
        const json_t *c = json_object_get(it, "content");
        id_of(json_object_get(it, "id"), &id);
        if (tok_add_added(t, id, json_string_value(c), json_string_length(c), get_bool(it, "special", 0),
                          get_bool(it, "single_word", 0), get_bool(it, "lstrip", 0), get_bool(it, "rstrip", 0),
                          get_bool(it, "normalized", 0), e)) {
            err_prefix(e, "%s", name);
            return -1;
        }
    }

    t->ignore_merges = get_bool(model, "ignore_merges", 0);
    t->fuse_unk = get_bool(model, "fuse_unk", 0);
    const char *unk = jget_str(model, "unk_token");
    if (unk) {
        const json_t *uv = json_object_get(vocab, unk);
        if (id_of(uv, &t->unk_model)) return err_set(e, TERR, "%s: unk_token '%.64s' is not in the vocabulary", name, unk);
    }

    if (load_normalizer(t, json_object_get(root, "normalizer"), name, e)) return -1;
    if (load_pre(t, json_object_get(root, "pre_tokenizer"), name, 0, e)) return -1;
    if (check_pipeline(t, name, e)) return -1;
    if (check_decoder(json_object_get(root, "decoder"), name, 0, e)) return -1;
    if (load_post(t, json_object_get(root, "post_processor"), name, 0, e)) return -1;

    size_t nm = json_array_size(merges);
    tok_pair_ref *refs = malloc((nm ? nm : 1) * sizeof *refs);
    if (!refs) return err_set(e, "OOMError", "out of memory for merges");
    size_t nr = 0;
    json_array_foreach(merges, i, it) {
        if (json_is_string(it) && !strncmp(json_string_value(it), "#version", 8)) continue;
        if (merge_ref(it, &refs[nr])) {
            free(refs);
            return err_set(e, TERR, "%s: merges[%zu] is not \"a b\" or [\"a\", \"b\"]", name, i);
        }
        nr++;
    }
    int rc = tok_finish(t, refs, nr, name, e);
    free(refs);
    if (rc) return -1;

    /* add_bos/add_eos as llama.cpp's converter derives them: the post
     * processor's template, overridden by tokenizer_config booleans. */
    t->add_bos = t->n_post_prefix > 0;
    t->add_eos = t->n_post_suffix > 0;
    if (t->unk_model >= 0) t->unk = t->unk_model;
    if (load_config(t, cfg, name, e)) return -1;
    if (t->bos < 0 && t->n_post_prefix == 1) t->bos = t->post_prefix[0];
    return 0;
}

int tok_load_mem(const char *json, size_t json_len, const char *config, size_t config_len,
                 const char *name, tok **out, dlm_err *e)
{
    *out = NULL;
    if (!name) name = "tokenizer.json";
    if (json_len > TOK_MAX_FILE_BYTES) return err_set(e, TERR, "%s: file too large", name);
    json_error_t je;
    json_t *root = json_loadb(json, json_len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return err_at(e, "JSONError", name, je.line > 0 ? je.line : 0, je.column > 0 ? je.column : 0,
                      "invalid JSON: %s", je.text);
    json_t *cfg = NULL;
    if (config) {
        cfg = json_loadb(config, config_len, JSON_DECODE_INT_AS_REAL, &je);
        if (!cfg) {
            json_decref(root);
            return err_at(e, "JSONError", "tokenizer_config.json", je.line > 0 ? je.line : 0,
                          je.column > 0 ? je.column : 0, "invalid JSON: %s", je.text);
        }
    }
    tok *t = tok_alloc();
    int rc = t ? load_root(t, root, cfg, name, e) : err_set(e, "OOMError", "out of memory");
    json_decref(root);
    json_decref(cfg);
    if (rc) {
        tok_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

int tok_load(const char *path, const char *config_path, tok **out, dlm_err *e)
{
    *out = NULL;
    char *buf = NULL, *cbuf = NULL;
    size_t len = 0, clen = 0;
    char cpath[4096];
    if (fs_read_all(path, TOK_MAX_FILE_BYTES, &buf, &len, e)) return -1;
    if (!config_path) {
        char dir[4096];
        fs_dirname(dir, sizeof dir, path);
        if (fs_join(cpath, sizeof cpath, dir, "tokenizer_config.json") && fs_is_file(cpath)) config_path = cpath;
    }
    if (config_path && fs_read_all(config_path, 64u << 20, &cbuf, &clen, e)) {
        free(buf);
        return -1;
    }
    int rc = tok_load_mem(buf, len, cbuf, clen, path, out, e);
    free(buf);
    free(cbuf);
    return rc;
}
