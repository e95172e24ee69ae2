/* tok_load — an HF tokenizer.json (+ tokenizer_config.json) into a tok.
 *
 * Only what byte-level BPE needs is accepted; anything else (another model
 * type, byte fallback, a normalizer or pre-tokenizer we do not implement)
 * is refused with a message naming it, never half-supported: a tokenizer
 * that loads must give HF's ids. Every id, count and length is checked
 * before it is used (the fuzz target feeds this file garbage). JSON is read
 * with tok_json (fast, flat) rather than jansson: see tok_json.h. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokens/tok_impl.h"
#include "tokens/tok_json.h"
#include "util/fs.h"

#define TERR "TokenizerError"

typedef struct loader {
    tok *t;
    const tj_doc *d;
    const char *name;
    dlm_err *e;
} loader;

static int get_bool(const loader *L, uint32_t o, const char *key, int def)
{
    return tj_bool(L->d, tj_get(L->d, o, key), def);
}

static const char *get_str(const loader *L, uint32_t o, const char *key)
{
    return tj_str(L->d, tj_get(L->d, o, key), NULL);
}

static const char *type_of(const loader *L, uint32_t o)
{
    const char *s = get_str(L, o, "type");
    return s ? s : "";
}

static int is_null(const loader *L, uint32_t i)
{
    return tj_type(L->d, i) == TJ_NONE || tj_type(L->d, i) == TJ_NULL;
}

/* ---- normalizer ----------------------------------------------------------------------- */

static int load_normalizer(loader *L, uint32_t n, int depth)
{
    tok *t = L->t;
    if (is_null(L, n)) return 0;
    if (tj_type(L->d, n) != TJ_OBJ || depth > 4) return err_set(L->e, TERR, "%s: malformed normalizer", L->name);
    const char *ty = type_of(L, n);
    if (!strcmp(ty, "Sequence")) {
        uint32_t list = tj_get(L->d, n, "normalizers");
        if (tj_type(L->d, list) != TJ_ARR) return err_set(L->e, TERR, "%s: Sequence normalizer without a list", L->name);
        for (uint32_t it = tj_first(L->d, list); it; it = tj_next(L->d, it))
            if (load_normalizer(L, it, depth + 1)) return -1;
        return 0;
    }
    if (!strcmp(ty, "Prepend") || !strcmp(ty, "Replace")) {
        /* SentencePiece style: "▁" before the text, spaces as "▁". */
        size_t an = 0, bn = 0;
        const char *a, *b = NULL;
        if (!strcmp(ty, "Prepend")) {
            a = tj_str(L->d, tj_get(L->d, n, "prepend"), &an);
            if (!a) return err_set(L->e, TERR, "%s: Prepend normalizer without a 'prepend' string", L->name);
            return tok_norm_str(t, TOK_NORM_PREPEND, a, an, NULL, 0, L->e) ? (err_prefix(L->e, "%s", L->name), -1) : 0;
        }
        uint32_t pat = tj_get(L->d, n, "pattern");
        a = tj_str(L->d, tj_get(L->d, pat, "String"), &an);
        b = tj_str(L->d, tj_get(L->d, n, "content"), &bn);
        if (!a || !b || !an)
            return err_set(L->e, TERR, "%s: Replace normalizer needs a non-empty String pattern and a content string "
                                       "(Regex patterns are not supported)", L->name);
        return tok_norm_str(t, TOK_NORM_REPLACE, a, an, b, bn, L->e) ? (err_prefix(L->e, "%s", L->name), -1) : 0;
    }
    int opt;
    if (!strcmp(ty, "NFC")) opt = UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    else if (!strcmp(ty, "NFD")) opt = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
    else if (!strcmp(ty, "NFKC")) opt = UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    else if (!strcmp(ty, "NFKD")) opt = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
    else
        return err_set(L->e, TERR, "%s: normalizer '%.64s' is not supported (dlm knows NFC, NFD, NFKC, NFKD, Prepend, "
                                   "Replace and Sequence)", L->name, ty);
    if (t->n_norm >= TOK_NORM_MAX) return err_set(L->e, TERR, "%s: too many normalizers", L->name);
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

/* Metaspace's prepend_scheme, or the older add_prefix_space flag. */
static int metaspace_opts(loader *L, uint32_t p, int *scheme)
{
    const char *ps = get_str(L, p, "prepend_scheme");
    *scheme = get_bool(L, p, "add_prefix_space", 1) ? MS_ALWAYS : MS_NEVER;
    if (!ps) return 0;
    if (!strcmp(ps, "always")) *scheme = MS_ALWAYS;
    else if (!strcmp(ps, "first")) *scheme = MS_FIRST;
    else if (!strcmp(ps, "never")) *scheme = MS_NEVER;
    else return err_set(L->e, TERR, "%s: Metaspace prepend_scheme '%.32s' is unknown", L->name, ps);
    return 0;
}

static int load_pre(loader *L, uint32_t p, int depth)
{
    tok *t = L->t;
    if (is_null(L, p)) return 0;
    if (tj_type(L->d, p) != TJ_OBJ || depth > 4) return err_set(L->e, TERR, "%s: malformed pre_tokenizer", L->name);
    const char *ty = type_of(L, p);
    if (!strcmp(ty, "Sequence")) {
        uint32_t list = tj_get(L->d, p, "pretokenizers");
        if (tj_type(L->d, list) != TJ_ARR) return err_set(L->e, TERR, "%s: Sequence pre_tokenizer without a list", L->name);
        for (uint32_t it = tj_first(L->d, list); it; it = tj_next(L->d, it))
            if (load_pre(L, it, depth + 1)) return -1;
        return 0;
    }
    /* HF's defaults when a flag is missing: add_prefix_space and use_regex true. */
    if (!strcmp(ty, "ByteLevel"))
        return tok_pt_bytelevel(t, get_bool(L, p, "add_prefix_space", 1), get_bool(L, p, "use_regex", 1), L->e);
    if (!strcmp(ty, "Metaspace")) {
        size_t rn = 0;
        const char *r = tj_str(L->d, tj_get(L->d, p, "replacement"), &rn);
        int scheme;
        if (metaspace_opts(L, p, &scheme)) return -1;
        if (tok_pt_metaspace(t, r ? r : "\xE2\x96\x81", r ? rn : 3, scheme, get_bool(L, p, "split", 1), L->e)) {
            err_prefix(L->e, "%s", L->name);
            return -1;
        }
        return 0;
    }
    if (!strcmp(ty, "Digits")) return tok_pt_digits(t, get_bool(L, p, "individual_digits", 0), L->e);
    if (!strcmp(ty, "Split")) {
        uint32_t pat = tj_get(L->d, p, "pattern");
        uint32_t re = tj_get(L->d, pat, "Regex"), lit = tj_get(L->d, pat, "String");
        uint32_t s = tj_type(L->d, re) == TJ_STR ? re : lit;
        int behavior = behavior_of(get_str(L, p, "behavior"));
        size_t sn;
        const char *sv = tj_str(L->d, s, &sn);
        if (!sv || !behavior)
            return err_set(L->e, TERR, "%s: Split pre_tokenizer needs a Regex or String pattern and a behavior", L->name);
        if (tok_pt_split(t, sv, sn, s == re, behavior, get_bool(L, p, "invert", 0), L->e)) {
            err_prefix(L->e, "%s", L->name);
            return -1;
        }
        return 0;
    }
    return err_set(L->e, TERR, "%s: pre_tokenizer '%.64s' is not supported (dlm knows Split, Digits, ByteLevel and Metaspace)",
                   L->name, ty);
}

/* ---- post-processor -------------------------------------------------------------------- */

static int post_push(loader *L, int suffix, int64_t id)
{
    tok *t = L->t;
    if (id < 0 || (uint64_t)id >= t->n_ids)
        return err_set(L->e, TERR, "%s: post_processor token id %lld out of range", L->name, (long long)id);
    int32_t *arr = suffix ? t->post_suffix : t->post_prefix;
    size_t *n = suffix ? &t->n_post_suffix : &t->n_post_prefix;
    if (*n >= 8) return err_set(L->e, TERR, "%s: post_processor adds too many tokens", L->name);
    arr[(*n)++] = (int32_t)id;
    return 0;
}

static int load_post(loader *L, uint32_t p, int depth)
{
    const tj_doc *d = L->d;
    if (is_null(L, p)) return 0;
    if (tj_type(d, p) != TJ_OBJ || depth > 4) return err_set(L->e, TERR, "%s: malformed post_processor", L->name);
    const char *ty = type_of(L, p);
    if (!strcmp(ty, "ByteLevel")) return 0; /* offsets only */
    if (!strcmp(ty, "Sequence")) {
        uint32_t list = tj_get(d, p, "processors");
        if (tj_type(d, list) != TJ_ARR) return err_set(L->e, TERR, "%s: Sequence post_processor without a list", L->name);
        for (uint32_t it = tj_first(d, list); it; it = tj_next(d, it))
            if (load_post(L, it, depth + 1)) return -1;
        return 0;
    }
    if (!strcmp(ty, "TemplateProcessing")) {
        uint32_t single = tj_get(d, p, "single"), specials = tj_get(d, p, "special_tokens");
        if (tj_type(d, single) != TJ_ARR) return err_set(L->e, TERR, "%s: TemplateProcessing without 'single'", L->name);
        int seen_a = 0;
        for (uint32_t it = tj_first(d, single); it; it = tj_next(d, it)) {
            if (tj_get(d, it, "Sequence")) {
                seen_a = 1;
                continue;
            }
            const char *sid = get_str(L, tj_get(d, it, "SpecialToken"), "id");
            uint32_t ids = tj_get(d, tj_get(d, specials, sid ? sid : ""), "ids");
            if (!sid || tj_type(d, ids) != TJ_ARR)
                return err_set(L->e, TERR, "%s: TemplateProcessing names special token '%.64s' it does not define", L->name,
                               sid ? sid : "?");
            for (uint32_t v = tj_first(d, ids); v; v = tj_next(d, v)) {
                int64_t id;
                if (tj_int(d, v, &id)) return err_set(L->e, TERR, "%s: TemplateProcessing id is not an integer", L->name);
                if (post_push(L, seen_a, id)) return -1;
            }
        }
        return 0;
    }
    if (!strcmp(ty, "RobertaProcessing") || !strcmp(ty, "BertProcessing")) {
        int64_t c, s;
        if (tj_int(d, tj_at(d, tj_get(d, p, "cls"), 1), &c) || tj_int(d, tj_at(d, tj_get(d, p, "sep"), 1), &s))
            return err_set(L->e, TERR, "%s: %s needs [token, id] pairs for cls and sep", L->name, ty);
        if (post_push(L, 0, c)) return -1;
        return post_push(L, 1, s);
    }
    return err_set(L->e, TERR, "%s: post_processor '%.64s' is not supported", L->name, ty);
}

/* The decoder chain. ByteLevel alone (or nothing, for a byte-level
 * tokenizer) is the built-in raw-bytes decode; the SentencePiece steps are
 * kept as a list (tok_spm.c). *bytelevel counts ByteLevel steps. */
static int load_decoder(loader *L, uint32_t dd, int depth, int *bytelevel)
{
    tok *t = L->t;
    if (is_null(L, dd)) return 0;
    if (tj_type(L->d, dd) != TJ_OBJ || depth > 4) return err_set(L->e, TERR, "%s: malformed decoder", L->name);
    const char *ty = type_of(L, dd);
    int rc = 0;
    size_t an = 0, bn = 0;
    const char *a, *b;
    if (!strcmp(ty, "ByteLevel")) {
        ++*bytelevel;
        return 0;
    }
    if (!strcmp(ty, "Sequence")) {
        uint32_t list = tj_get(L->d, dd, "decoders");
        if (tj_type(L->d, list) != TJ_ARR) return err_set(L->e, TERR, "%s: Sequence decoder without a list", L->name);
        for (uint32_t it = tj_first(L->d, list); it; it = tj_next(L->d, it))
            if (load_decoder(L, it, depth + 1, bytelevel)) return -1;
        return 0;
    }
    if (!strcmp(ty, "Replace")) {
        a = tj_str(L->d, tj_get(L->d, tj_get(L->d, dd, "pattern"), "String"), &an);
        b = tj_str(L->d, tj_get(L->d, dd, "content"), &bn);
        if (!a || !b || !an) return err_set(L->e, TERR, "%s: Replace decoder needs a String pattern and a content", L->name);
        rc = tok_dec_add(t, DEC_REPLACE, a, an, b, bn, L->e);
    } else if (!strcmp(ty, "ByteFallback")) rc = tok_dec_add(t, DEC_BYTEFALLBACK, NULL, 0, NULL, 0, L->e);
    else if (!strcmp(ty, "Fuse")) rc = tok_dec_add(t, DEC_FUSE, NULL, 0, NULL, 0, L->e);
    else if (!strcmp(ty, "Strip")) {
        a = tj_str(L->d, tj_get(L->d, dd, "content"), &an);
        int64_t st = 0, sp = 0;
        uint32_t vs = tj_get(L->d, dd, "start"), vp = tj_get(L->d, dd, "stop");
        if (!a || !an || (vs && tj_int(L->d, vs, &st)) || (vp && tj_int(L->d, vp, &sp)) || st < 0 || sp < 0 ||
            st > 1024 || sp > 1024)
            return err_set(L->e, TERR, "%s: Strip decoder needs a content char and small start/stop counts", L->name);
        rc = tok_dec_add(t, DEC_STRIP, a, an, NULL, 0, L->e);
        if (!rc) {
            t->dec[t->n_dec - 1].start = (int)st;
            t->dec[t->n_dec - 1].stop = (int)sp;
        }
    } else if (!strcmp(ty, "Metaspace")) {
        a = tj_str(L->d, tj_get(L->d, dd, "replacement"), &an);
        int scheme;
        if (metaspace_opts(L, dd, &scheme)) return -1;
        rc = tok_dec_add(t, DEC_METASPACE, a ? a : "\xE2\x96\x81", a ? an : 3, NULL, 0, L->e);
        if (!rc) t->dec[t->n_dec - 1].prepend = scheme != MS_NEVER;
    } else
        return err_set(L->e, TERR, "%s: decoder '%.64s' is not supported (dlm knows ByteLevel, Replace, ByteFallback, "
                                   "Fuse, Strip and Metaspace)", L->name, ty);
    if (rc) err_prefix(L->e, "%s", L->name);
    return rc;
}

/* ---- model ------------------------------------------------------------------------------- */

static int id_of(const tj_doc *d, uint32_t v, int32_t *id)
{
    int64_t x;
    if (tj_int(d, v, &x) || x < 0 || x >= TOK_MAX_VOCAB) return -1;
    *id = (int32_t)x;
    return 0;
}

static int check_model_options(loader *L, uint32_t m)
{
    const char *ty = get_str(L, m, "type");
    if (ty && strcmp(ty, "BPE"))
        return err_set(L->e, TERR, "%s: model type '%.64s' is not supported (dlm reads byte-level BPE)", L->name, ty);
    uint32_t dr = tj_get(L->d, m, "dropout");
    double dv;
    if (!is_null(L, dr) && !(tj_num(L->d, dr, &dv) == 0 && dv == 0.0))
        return err_set(L->e, TERR, "%s: BPE dropout is not supported (encoding would not be deterministic)", L->name);
    const char *keys[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        uint32_t v = tj_get(L->d, m, keys[i]);
        size_t n;
        if (!is_null(L, v) && !(tj_str(L->d, v, &n) && n == 0))
            return err_set(L->e, TERR, "%s: BPE %s is not supported", L->name, keys[i]);
    }
    return 0;
}

/* A merge is "a b" (HF legacy: exactly one space) or ["a", "b"]. */
static int merge_ref(const tj_doc *d, uint32_t m, tok_pair_ref *r)
{
    size_t n;
    const char *s = tj_str(d, m, &n);
    if (s) {
        const char *sp = memchr(s, ' ', n);
        if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s))) return -1;
        r->a = s;
        r->an = (size_t)(sp - s);
        r->b = sp + 1;
        r->bn = n - r->an - 1;
        return 0;
    }
    if (tj_type(d, m) == TJ_ARR && d->nodes[m].count == 2) {
        r->a = tj_str(d, tj_at(d, m, 0), &r->an);
        r->b = tj_str(d, tj_at(d, m, 1), &r->bn);
        return r->a && r->b ? 0 : -1;
    }
    return -1;
}

/* A pipeline with a ByteLevel pre-tokenizer maps bytes to chars at its end
 * (byte-level BPE); one without it is HF's char-level BPE, SentencePiece
 * style (spm: ▁ for spaces, byte_fallback). Mixing the two is refused. */
static int check_pipeline(loader *L, uint32_t model, int dec_bytelevel)
{
    tok *t = L->t;
    int bl = 0;
    for (int i = 0; i < t->n_pt; i++)
        if (t->pt[i].kind == PT_BYTELEVEL) {
            bl = 1;
            if (i != t->n_pt - 1)
                return err_set(L->e, TERR, "%s: steps after the ByteLevel pre-tokenizer are not supported", L->name);
        }
    t->byte_fallback = get_bool(L, model, "byte_fallback", 0);
    t->spm = !bl;
    if (bl && (t->byte_fallback || t->n_dec))
        return err_set(L->e, TERR, "%s: a ByteLevel pre-tokenizer with byte_fallback or a SentencePiece decoder is not supported",
                       L->name);
    if (!bl && dec_bytelevel)
        return err_set(L->e, TERR, "%s: a ByteLevel decoder without a ByteLevel pre-tokenizer is not supported", L->name);
    return 0;
}

/* tokenizer_config.json: special tokens (a string or {"content": ...}),
 * add_bos/eos_token, chat_template (a string or named list). */
static int load_config(loader *L, uint32_t cfg)
{
    tok *t = L->t;
    const tj_doc *d = L->d;
    if (!cfg) return 0;
    if (tj_type(d, cfg) != TJ_OBJ) return err_set(L->e, TERR, "tokenizer_config.json must be a JSON object");
    struct { const char *key; int32_t *dst; } sp[] = {
        {"bos_token", &t->bos}, {"eos_token", &t->eos}, {"pad_token", &t->pad}, {"unk_token", &t->unk}};
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++) {
        uint32_t v = tj_get(d, cfg, sp[i].key);
        const char *s = tj_str(d, v, NULL);
        if (!s) s = get_str(L, v, "content");
        if (s) *sp[i].dst = tok_find(t, s);
    }
    uint32_t ab = tj_get(d, cfg, "add_bos_token"), ae = tj_get(d, cfg, "add_eos_token");
    t->add_bos = tj_bool(d, ab, t->add_bos);
    t->add_eos = tj_bool(d, ae, t->add_eos);
    uint32_t ct = tj_get(d, cfg, "chat_template");
    const char *tmpl = tj_str(d, ct, NULL);
    if (tj_type(d, ct) == TJ_ARR) {
        /* Named templates: "default" wins, else the first. */
        for (uint32_t it = tj_first(d, ct); it; it = tj_next(d, it)) {
            const char *nm = get_str(L, it, "name"), *tx = get_str(L, it, "template");
            if (!tx) continue;
            if (!tmpl || (nm && !strcmp(nm, "default"))) tmpl = tx;
        }
    }
    if (tmpl && !(t->chat_template = strdup(tmpl))) return err_set(L->e, "OOMError", "out of memory");
    return 0;
}

static int load_root(loader *L, uint32_t root, const tj_doc *cd, uint32_t cfg)
{
    tok *t = L->t;
    const tj_doc *d = L->d;
    if (tj_type(d, root) != TJ_OBJ) return err_set(L->e, TERR, "%s: tokenizer.json must be a JSON object", L->name);
    uint32_t model = tj_get(d, root, "model");
    if (tj_type(d, model) != TJ_OBJ) return err_set(L->e, TERR, "%s: no 'model' object", L->name);
    if (check_model_options(L, model)) return -1;
    uint32_t vocab = tj_get(d, model, "vocab"), merges = tj_get(d, model, "merges");
    uint32_t added = tj_get(d, root, "added_tokens");
    if (tj_type(d, vocab) != TJ_OBJ) return err_set(L->e, TERR, "%s: model.vocab must be an object", L->name);
    if (merges && tj_type(d, merges) != TJ_ARR) return err_set(L->e, TERR, "%s: model.merges must be a list", L->name);
    if (!is_null(L, added) && tj_type(d, added) != TJ_ARR)
        return err_set(L->e, TERR, "%s: added_tokens must be a list", L->name);
    if (d->nodes[vocab].count > TOK_MAX_VOCAB) return err_set(L->e, TERR, "%s: vocabulary too large", L->name);
    if (merges && d->nodes[merges].count > TOK_MAX_MERGES) return err_set(L->e, TERR, "%s: too many merges", L->name);

    /* Id space: max id over vocab and added tokens. */
    int32_t max_id = -1, id;
    for (uint32_t k = tj_first(d, vocab); k; k = tj_next(d, tj_next(d, k))) {
        if (id_of(d, tj_next(d, k), &id))
            return err_set(L->e, TERR, "%s: vocab entry \"%.64s\" has a bad id", L->name, tj_str(d, k, NULL));
        if (id > max_id) max_id = id;
    }
    size_t i = 0;
    for (uint32_t it = tj_first(d, added); it; it = tj_next(d, it), i++) {
        if (tj_type(d, it) != TJ_OBJ || id_of(d, tj_get(d, it, "id"), &id) || !get_str(L, it, "content"))
            return err_set(L->e, TERR, "%s: added_tokens[%zu] needs an id in range and a content string", L->name, i);
        if (id > max_id) max_id = id;
    }
    if (max_id < 0) return err_set(L->e, TERR, "%s: empty vocabulary", L->name);
    t->n_ids = (size_t)max_id + 1;
    t->in_vocab = calloc(t->n_ids, 1);
    t->type = calloc(t->n_ids, 1);
    t->added_of = malloc(t->n_ids * sizeof *t->added_of);
    if (!t->in_vocab || !t->type || !t->added_of || tok_strtab_init(&t->str, t->n_ids))
        return err_set(L->e, "OOMError", "out of memory for %zu tokens", t->n_ids);
    for (size_t k = 0; k < t->n_ids; k++) t->added_of[k] = -1;
    for (uint32_t k = tj_first(d, vocab); k; k = tj_next(d, tj_next(d, k))) {
        size_t kn;
        const char *key = tj_str(d, k, &kn);
        id_of(d, tj_next(d, k), &id);
        if (t->in_vocab[id]) return err_set(L->e, TERR, "%s: two vocab entries share id %d", L->name, id);
        if (kn == 0 || kn > TOK_MAX_TOKEN_BYTES) return err_set(L->e, TERR, "%s: vocab entry %d is empty or too long", L->name, id);
        if (tok_strtab_set(&t->str, id, key, kn)) return err_set(L->e, "OOMError", "out of memory");
        t->in_vocab[id] = 1;
    }
    for (uint32_t it = tj_first(d, added); it; it = tj_next(d, it)) {
        size_t cn;
        const char *c = tj_str(d, tj_get(d, it, "content"), &cn);
        id_of(d, tj_get(d, it, "id"), &id);
        if (tok_add_added(t, id, c, cn, get_bool(L, it, "special", 0), get_bool(L, it, "single_word", 0),
                          get_bool(L, it, "lstrip", 0), get_bool(L, it, "rstrip", 0), get_bool(L, it, "normalized", 0),
                          L->e)) {
            err_prefix(L->e, "%s", L->name);
            return -1;
        }
    }

    t->ignore_merges = get_bool(L, model, "ignore_merges", 0);
    t->fuse_unk = get_bool(L, model, "fuse_unk", 0);
    const char *unk = get_str(L, model, "unk_token");
    if (unk && id_of(d, tj_get(d, vocab, unk), &t->unk_model))
        return err_set(L->e, TERR, "%s: unk_token '%.64s' is not in the vocabulary", L->name, unk);

    if (load_normalizer(L, tj_get(d, root, "normalizer"), 0)) return -1;
    if (load_pre(L, tj_get(d, root, "pre_tokenizer"), 0)) return -1;
    int dec_bl = 0;
    if (load_decoder(L, tj_get(d, root, "decoder"), 0, &dec_bl)) return -1;
    if (check_pipeline(L, model, dec_bl)) return -1;
    if (load_post(L, tj_get(d, root, "post_processor"), 0)) return -1;

    size_t nm = merges ? d->nodes[merges].count : 0;
    tok_pair_ref *refs = malloc((nm ? nm : 1) * sizeof *refs);
    if (!refs) return err_set(L->e, "OOMError", "out of memory for merges");
    size_t nr = 0;
    i = 0;
    for (uint32_t it = tj_first(d, merges); it; it = tj_next(d, it), i++) {
        const char *s = tj_str(d, it, NULL);
        if (s && !strncmp(s, "#version", 8)) continue;
        if (merge_ref(d, it, &refs[nr])) {
            free(refs);
            return err_set(L->e, TERR, "%s: merges[%zu] is not \"a b\" or [\"a\", \"b\"]", L->name, i);
        }
        nr++;
    }
    int rc = tok_finish(t, refs, nr, L->name, L->e);
    free(refs);
    if (rc) return -1;

    /* add_bos/add_eos as llama.cpp's converter derives them: the post
     * processor's template, overridden by tokenizer_config booleans. */
    t->add_bos = t->n_post_prefix > 0;
    t->add_eos = t->n_post_suffix > 0;
    if (t->unk_model >= 0) t->unk = t->unk_model;
    loader C = {t, cd, "tokenizer_config.json", L->e};
    if (cd && load_config(&C, cfg)) return -1;
    if (t->bos < 0 && t->n_post_prefix == 1) t->bos = t->post_prefix[0];
    return 0;
}

int tok_load_mem(const char *json, size_t json_len, const char *config, size_t config_len,
                 const char *name, tok **out, dlm_err *e)
{
    *out = NULL;
    if (!name) name = "tokenizer.json";
    if (json_len > TOK_MAX_FILE_BYTES) return err_set(e, TERR, "%s: file too large", name);
    tj_doc d, cd;
    if (tj_parse(&d, json, json_len, name, e)) return -1;
    memset(&cd, 0, sizeof cd);
    if (config && tj_parse(&cd, config, config_len, "tokenizer_config.json", e)) {
        tj_free(&d);
        return -1;
    }
    tok *t = tok_alloc();
    loader L = {t, &d, name, e};
    int rc = t ? load_root(&L, 1, config ? &cd : NULL, config ? 1 : 0) : err_set(e, "OOMError", "out of memory");
    tj_free(&d);
    tj_free(&cd);
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
