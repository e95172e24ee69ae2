/* tok_encode — text to ids: added-token split, normalization, the
 * pre-tokenizer chain (tok_pre.c), BPE with a bounded per-pre-token cache,
 * post-processor tokens.
 *
 * Nothing here allocates per token: the symbol list, the merge heap, the
 * cache and the normalization buffer live in the tok and only grow. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokens/tok_impl.h"

int tok_ids_push(tok_ids *out, int32_t id)
{
    if (out->n == out->cap) {
        size_t nc = out->cap ? out->cap * 2 : 256;
        int32_t *v = realloc(out->v, nc * sizeof *v);
        if (!v) return -1;
        out->v = v;
        out->cap = nc;
    }
    out->v[out->n++] = id;
    return 0;
}

void tok_ids_free(tok_ids *ids)
{
    free(ids->v);
    memset(ids, 0, sizeof *ids);
}

/* ---- BPE ------------------------------------------------------------------------------- */

static const tok_merge_ent *merge_get(const tok *t, int32_t a, int32_t b)
{
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    uint32_t h = (uint32_t)(key * 0x9E3779B97F4A7C15ull >> 32) & t->mmask;
    for (;; h = (h + 1) & t->mmask) {
        const tok_merge_ent *en = &t->mtab[h];
        if (en->key == key) return en;
        if (!en->key) return NULL;
    }
}

static void heap_push(uint64_t *h, size_t *n, uint64_t v)
{
    size_t i = (*n)++;
    while (i) {
        size_t p = (i - 1) / 2;
        if (h[p] <= v) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n)
{
    uint64_t top = h[0], v = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    if (m) h[i] = v;
    return top;
}

static void push_pair(tok *t, size_t *hn, int32_t pos)
{
    int32_t nx = t->sym[pos].next;
    if (nx < 0) return;
    const tok_merge_ent *m = merge_get(t, t->sym[pos].id, t->sym[nx].id);
    if (m) heap_push(t->heap, hn, ((uint64_t)m->rank << 32) | (uint32_t)pos);
}

/* HF word.rs merge_all: repeatedly apply the adjacent pair of lowest rank,
 * leftmost first. A heap of (rank, position) with stale entries skipped
 * gives the same result in O(n log n). */
static int bpe_merge(tok *t, const char *s, size_t n, tok_ids *out, dlm_err *e)
{
    if (n > INT32_MAX / 4) return err_set(e, "TokenizerError", "pre-token too long");
    if (n > t->sym_cap) {
        size_t nc = t->sym_cap ? t->sym_cap : 64;
        while (nc < n) nc *= 2;
        tok_sym *d = realloc(t->sym, nc * sizeof *d);
        uint64_t *h = realloc(t->heap, 3 * nc * sizeof *h);
        if (d) t->sym = d;
        if (h) t->heap = h;
        if (!d || !h) return err_set(e, "OOMError", "out of memory in BPE");
        t->sym_cap = nc;
    }
    int32_t ns = 0;
#define SYM(v) (t->sym[ns] = (tok_sym){(v), ns - 1, ns + 1, 1}, ns++)
    if (t->spm) {
        /* HF BPE proper: one symbol per char; a char not in the vocabulary
         * becomes its <0xNN> tokens (byte_fallback), else unk, fused with
         * the unk before it under fuse_unk. Byte tokens do not flush a
         * pending unk (HF merge_word's order, kept). */
        int32_t unk = -1;
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            size_t l = tok_utf8_dec((const unsigned char *)s + i, n - i, &cp);
            if (!l) l = 1;
            int32_t id = tok_idmap_get(&t->vocab_raw, &t->vraw, s + i, l);
            if (id >= 0) {
                if (unk >= 0) SYM(unk);
                unk = -1;
                SYM(id);
            } else {
                int fb = t->byte_fallback;
                for (size_t k = 0; k < l && fb; k++) fb = t->byte_tok[(unsigned char)s[i + k]] >= 0;
                if (fb) {
                    for (size_t k = 0; k < l; k++) SYM(t->byte_tok[(unsigned char)s[i + k]]);
                } else if (t->unk_model >= 0) {
                    if (unk >= 0 && !t->fuse_unk) SYM(unk);
                    unk = t->unk_model;
                }
            }
            i += l;
        }
        if (unk >= 0) SYM(unk);
    } else {
        /* Initial symbols: one per byte (its ByteLevel char). A byte whose char is
         * not in the vocabulary becomes unk, or is dropped when there is none. */
        int last_unk = 0;
        for (size_t i = 0; i < n; i++) {
            int32_t id = t->byte_id[(unsigned char)s[i]];
            if (id < 0) {
                if (t->unk_model < 0) continue;
                if (t->fuse_unk && last_unk) continue;
                id = t->unk_model;
                last_unk = 1;
            } else last_unk = 0;
            SYM(id);
        }
    }
#undef SYM
    if (!ns) return 0;
    t->sym[ns - 1].next = -1;
    size_t hn = 0;
    for (int32_t i = 0; i + 1 < ns; i++) push_pair(t, &hn, i);
    while (hn) {
        uint64_t top = heap_pop(t->heap, &hn);
        uint32_t rank = (uint32_t)(top >> 32);
        int32_t pos = (int32_t)(uint32_t)top;
        tok_sym *a = &t->sym[pos];
        if (!a->alive || a->next < 0) continue;
        tok_sym *b = &t->sym[a->next];
        const tok_merge_ent *m = merge_get(t, a->id, b->id);
        if (!m || m->rank != rank) continue; /* stale entry */
        a->id = m->id;
        b->alive = 0;
        a->next = b->next;
        if (b->next >= 0) t->sym[b->next].prev = pos;
        if (a->prev >= 0) push_pair(t, &hn, a->prev);
        push_pair(t, &hn, pos);
    }
    for (int32_t i = 0; i >= 0; i = t->sym[i].next)
        if (tok_ids_push(out, t->sym[i].id)) return err_set(e, "OOMError", "out of memory");
    return 0;
}

/* ---- cache ------------------------------------------------------------------------------ */

static int cache_init(tok *t)
{
    t->cache = calloc(TOK_CACHE_SLOTS, sizeof *t->cache);
    t->cache_keys = malloc(TOK_CACHE_MAX_ENTRIES * (size_t)TOK_CACHE_MAX_KEY);
    t->cache_ids = malloc(TOK_CACHE_BYTES);
    if (!t->cache || !t->cache_keys || !t->cache_ids) {
        free(t->cache);
        free(t->cache_keys);
        free(t->cache_ids);
        t->cache = NULL;
        t->cache_keys = NULL;
        t->cache_ids = NULL;
        return -1;
    }
    return 0;
}

static void cache_put(tok *t, uint64_t h, const char *s, size_t n, const int32_t *ids, size_t nids)
{
    size_t max_ids = TOK_CACHE_BYTES / sizeof(int32_t);
    if (nids > max_ids / 16) return;
    if (t->cache_n >= TOK_CACHE_MAX_ENTRIES || t->cache_ids_len + nids > max_ids) {
        /* Full: start over. Simple and bounded; hot pre-tokens come back fast. */
        memset(t->cache, 0, TOK_CACHE_SLOTS * sizeof *t->cache);
        t->cache_n = t->cache_keys_len = t->cache_ids_len = 0;
    }
    uint32_t i = (uint32_t)h & (TOK_CACHE_SLOTS - 1);
    while (t->cache[i].h) i = (i + 1) & (TOK_CACHE_SLOTS - 1);
    tok_cache_ent *c = &t->cache[i];
    c->h = h;
    c->key_off = (uint32_t)t->cache_keys_len;
    c->key_len = (uint32_t)n;
    memcpy(t->cache_keys + t->cache_keys_len, s, n);
    t->cache_keys_len += n;
    c->ids_off = (uint32_t)t->cache_ids_len;
    c->n_ids = (uint32_t)nids;
    if (nids) memcpy(t->cache_ids + t->cache_ids_len, ids, nids * sizeof *ids);
    t->cache_ids_len += nids;
    t->cache_n++;
}

static int piece_ids(tok *t, const char *s, size_t n, tok_ids *out, dlm_err *e)
{
    return t->spm_scores ? tok_spm_score(t, s, n, out, e) : bpe_merge(t, s, n, out, e);
}

int tok_bpe_piece(tok *t, const char *s, size_t n, tok_ids *out, dlm_err *e)
{
    if (t->ignore_merges && !t->spm_scores) {
        /* Llama-3: a pre-token that is a whole vocabulary entry is not merged. */
        int32_t id = tok_idmap_get(&t->vocab_raw, &t->vraw, s, n);
        if (id >= 0) return tok_ids_push(out, id) ? err_set(e, "OOMError", "out of memory") : 0;
    }
    if (n == 1 && !t->spm_scores && t->byte_id[(unsigned char)s[0]] >= 0)
        return tok_ids_push(out, t->byte_id[(unsigned char)s[0]]) ? err_set(e, "OOMError", "out of memory") : 0;
    uint64_t h = 0;
    if (n <= TOK_CACHE_MAX_KEY) {
        if (!t->cache && cache_init(t)) return piece_ids(t, s, n, out, e);
        h = tok_hash(s, n) | 1;
        for (uint32_t i = (uint32_t)h & (TOK_CACHE_SLOTS - 1); t->cache[i].h; i = (i + 1) & (TOK_CACHE_SLOTS - 1)) {
            const tok_cache_ent *c = &t->cache[i];
            if (c->h == h && c->key_len == n && !memcmp(t->cache_keys + c->key_off, s, n)) {
                for (uint32_t k = 0; k < c->n_ids; k++)
                    if (tok_ids_push(out, t->cache_ids[c->ids_off + k])) return err_set(e, "OOMError", "out of memory");
                return 0;
            }
        }
    }
    size_t before = out->n;
    if (piece_ids(t, s, n, out, e)) return -1;
    /* A piece whose bytes are all unknown (no unk token) yields no ids. */
    if (h) cache_put(t, h, s, n, out->n > before ? out->v + before : NULL, out->n - before);
    return 0;
}

/* ---- added tokens ----------------------------------------------------------------------- */

/* Unicode White_Space (Rust char::is_whitespace, regex \s). */
static int is_ws(uint32_t c)
{
    return (c >= 9 && c <= 13) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

/* regex \w: letters, marks, decimal digits, connector punctuation. */
static int is_word(uint32_t c)
{
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_ME) || k == UTF8PROC_CATEGORY_ND ||
           k == UTF8PROC_CATEGORY_PC || c == 0x200C || c == 0x200D;
}

/* Start of the char that ends at s[end]. */
static size_t prev_char(const char *s, size_t end, uint32_t *cp)
{
    size_t i = end - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80 && end - i < 4) i--;
    if (!tok_utf8_dec((const unsigned char *)s + i, end - i, cp)) *cp = 0xFFFD;
    return i;
}

static int text_piece(tok *t, int stage, const char *s, size_t n, int flags, tok_ids *out, dlm_err *e);

/* HF AddedVocabulary find_matches: leftmost-longest non-overlapping matches
 * over all added tokens of this trie; a special one is skipped (its text
 * stays text) without TOK_PARSE_SPECIAL, as HF's encode_special_tokens. */
static int split_added(tok *t, const tok_trie *tr, int stage, const char *s, size_t n, int flags,
                       tok_ids *out, dlm_err *e)
{
    size_t emitted = 0, start_offset = 0, p = 0;
    while (p < n) {
        if (!tr->first[(unsigned char)s[p]]) {
            p++;
            continue;
        }
        int cur = 0, best = -1;
        size_t best_len = 0;
        for (size_t k = p; k < n; k++) {
            int c = tr->nodes[cur].child;
            while (c >= 0 && tr->nodes[c].byte != (unsigned char)s[k]) c = tr->nodes[c].sibling;
            if (c < 0) break;
            cur = c;
            if (tr->nodes[c].added >= 0) {
                best = tr->nodes[c].added;
                best_len = k + 1 - p;
            }
        }
        if (best < 0) {
            p++;
            continue;
        }
        const tok_added *a = &t->added[best];
        size_t ms = p, me = p + best_len;
        p = me;
        if (a->special && !(flags & TOK_PARSE_SPECIAL)) continue;
        if (a->single_word) {
            uint32_t c;
            int left_ok = ms == 0 || (prev_char(s, ms, &c), !is_word(c));
            int right_ok = me == n || !tok_utf8_dec((const unsigned char *)s + me, n - me, &c) || !is_word(c);
            if (!left_ok || !right_ok) continue;
        }
        if (a->lstrip) {
            size_t ns = ms;
            while (ns > 0) {
                uint32_t c;
                size_t pc = prev_char(s, ns, &c);
                if (!is_ws(c)) break;
                ns = pc;
            }
            ms = ns > start_offset ? ns : start_offset;
        }
        if (a->rstrip) {
            while (me < n) {
                uint32_t c;
                size_t l = tok_utf8_dec((const unsigned char *)s + me, n - me, &c);
                if (!l || !is_ws(c)) break;
                me += l;
            }
            if (me > p) p = me;
        }
        if (emitted) t->piece_at0 = 0;
        if (ms > emitted && text_piece(t, stage, s + emitted, ms - emitted, flags, out, e)) return -1;
        if (tok_ids_push(out, a->id)) return err_set(e, "OOMError", "out of memory");
        emitted = start_offset = me;
    }
    if (emitted) t->piece_at0 = 0;
    if (emitted < n) return text_piece(t, stage, s + emitted, n - emitted, flags, out, e);
    return 0;
}

/* Text between raw added tokens is normalized, then split on the normalized
 * added tokens, then pre-tokenized. */
static int text_piece(tok *t, int stage, const char *s, size_t n, int flags, tok_ids *out, dlm_err *e)
{
    if (stage == 0) {
        const char *ns;
        size_t nn;
        if (tok_normalize(t, s, n, &ns, &nn, e)) return -1;
        if (t->trie_norm.n) return split_added(t, &t->trie_norm, 1, ns, nn, flags, out, e);
        return tok_pretokenize(t, ns, nn, out, e);
    }
    return tok_pretokenize(t, s, n, out, e);
}

static int utf8_check(const char *s, size_t n, dlm_err *e)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t v;
            memcpy(&v, u + i, 8);
            if (!(v & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        uint32_t cp;
        size_t l = tok_utf8_dec(u + i, n - i, &cp);
        if (!l) return err_set(e, "TokenizerError", "text is not valid UTF-8 (byte %zu)", i);
        i += l;
    }
    return 0;
}

int tok_encode_append(tok *t, const char *text, size_t len, int flags, tok_ids *out, dlm_err *e)
{
    size_t n0 = out->n;
    if (utf8_check(text, len, e)) return -1;
    t->piece_at0 = 1;
    if (flags & TOK_ADD_SPECIAL)
        for (size_t i = 0; i < t->n_post_prefix; i++)
            if (tok_ids_push(out, t->post_prefix[i])) goto oom;
    int rc = t->trie_raw.n ? split_added(t, &t->trie_raw, 0, text, len, flags, out, e)
                           : text_piece(t, 0, text, len, flags, out, e);
    if (rc) {
        out->n = n0;
        return -1;
    }
    if (flags & TOK_ADD_SPECIAL)
        for (size_t i = 0; i < t->n_post_suffix; i++)
            if (tok_ids_push(out, t->post_suffix[i])) goto oom;
    return 0;
oom:
    out->n = n0;
    return err_set(e, "OOMError", "out of memory");
}

int tok_encode(tok *t, const char *text, size_t len, int flags, int32_t **ids, size_t *n, dlm_err *e)
{
    tok_ids v = {0, 0, 0};
    *ids = NULL;
    *n = 0;
    if (tok_encode_append(t, text, len, flags, &v, e)) {
        tok_ids_free(&v);
        return -1;
    }
    if (!v.v) {
        v.v = malloc(sizeof *v.v);
        if (!v.v) return err_set(e, "OOMError", "out of memory");
    }
    *ids = v.v;
    *n = v.n;
    return 0;
}
