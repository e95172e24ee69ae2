/* tok_core — the tables every tokenizer has, however it was loaded: id
 * tables, string maps, the ByteLevel byte<->char table, merges, added-token
 * tries, and tok_finish(), which derives all lookup structures once the ids
 * are known. Loading (tok_load.c, tok_build.c) only fills raw facts. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokens/tok_impl.h"
#include "util/str.h"

/* ---- hashing ------------------------------------------------------------------ */

uint64_t tok_hash(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ ((uint64_t)n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, s, 8);
        h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        s += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, s, n);
    h = (h ^ v) * 0x94d049bb133111ebull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h;
}

/* ---- string tables and id maps ---------------------------------------------------- */

int tok_strtab_init(tok_strtab *t, size_t n_ids)
{
    memset(t, 0, sizeof *t);
    t->off = malloc((n_ids ? n_ids : 1) * sizeof *t->off);
    t->n = calloc(n_ids ? n_ids : 1, sizeof *t->n);
    if (!t->off || !t->n) return -1;
    for (size_t i = 0; i < n_ids; i++) t->off[i] = UINT32_MAX;
    return 0;
}

int tok_strtab_set(tok_strtab *t, int32_t id, const char *s, size_t n)
{
    if (t->len + n + 1 > UINT32_MAX - 1) return -1;
    if (t->len + n + 1 > t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 4096;
        while (nc < t->len + n + 1) nc *= 2;
        char *d = realloc(t->data, nc);
        if (!d) return -1;
        t->data = d;
        t->cap = nc;
    }
    if (n) memcpy(t->data + t->len, s, n);
    t->data[t->len + n] = 0;
    t->off[id] = (uint32_t)t->len;
    t->n[id] = (uint32_t)n;
    t->len += n + 1;
    return 0;
}

const char *tok_strtab_get(const tok_strtab *t, int32_t id, size_t *n)
{
    if (t->off[id] == UINT32_MAX) return NULL;
    if (n) *n = t->n[id];
    return t->data + t->off[id];
}

void tok_strtab_free(tok_strtab *t)
{
    free(t->data);
    free(t->off);
    free(t->n);
    memset(t, 0, sizeof *t);
}

int tok_idmap_init(tok_idmap *m, size_t n_keys)
{
    size_t cap = 16;
    while (cap < n_keys * 2) cap *= 2;
    m->slot = calloc(cap, sizeof *m->slot);
    m->mask = (uint32_t)(cap - 1);
    return m->slot ? 0 : -1;
}

void tok_idmap_free(tok_idmap *m)
{
    free(m->slot);
    m->slot = NULL;
}

int tok_idmap_put(tok_idmap *m, const tok_strtab *tab, int32_t id, int replace)
{
    size_t n;
    const char *s = tok_strtab_get(tab, id, &n);
    if (!s) return 0;
    uint32_t i = (uint32_t)tok_hash(s, n) & m->mask;
    for (;; i = (i + 1) & m->mask) {
        uint32_t v = m->slot[i];
        if (!v) { m->slot[i] = (uint32_t)id + 1; return 0; }
        size_t kn = 0;
        const char *k = tok_strtab_get(tab, (int32_t)(v - 1), &kn);
        if (kn == n && !memcmp(k, s, n)) {
            if (replace) m->slot[i] = (uint32_t)id + 1;
            return 1;
        }
    }
}

int32_t tok_idmap_get(const tok_idmap *m, const tok_strtab *tab, const char *s, size_t n)
{
    if (!m->slot) return -1;
    uint32_t i = (uint32_t)tok_hash(s, n) & m->mask;
    for (;; i = (i + 1) & m->mask) {
        uint32_t v = m->slot[i];
        if (!v) return -1;
        size_t kn = 0;
        const char *k = tok_strtab_get(tab, (int32_t)(v - 1), &kn);
        if (kn == n && !memcmp(k, s, n)) return (int32_t)(v - 1);
    }
}

/* ---- ByteLevel table (GPT-2 bytes_to_unicode) ------------------------------------------
 * Printable bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF keep their code point; the
 * other 68 bytes, in increasing order, become U+0100 + n. */

uint32_t tok_byte_to_char(unsigned b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
    if (b <= 0x20) return 0x100 + b;
    if (b == 0x7F) return 0x100 + 33;
    if (b <= 0xA0) return 0x100 + 34 + (b - 0x80);
    return 0x100 + 67; /* 0xAD */
}

int tok_char_to_byte(uint32_t c)
{
    if ((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF)) return (int)c;
    if (c < 0x100 || c > 0x143) return -1;
    uint32_t n = c - 0x100;
    if (n <= 32) return (int)n;
    if (n == 33) return 0x7F;
    if (n <= 66) return (int)(0x80 + n - 34);
    return 0xAD;
}

size_t tok_utf8_dec(const unsigned char *s, size_t n, uint32_t *cp)
{
    return str_utf8_dec(s, n, cp);
}

int tok_bytelevel_decode(const char *s, size_t n, char *out, size_t *out_n)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        size_t l = tok_utf8_dec((const unsigned char *)s + i, n - i, &c);
        if (!l) return -1;
        int b = tok_char_to_byte(c);
        if (b < 0) return -1;
        out[o++] = (char)b;
        i += l;
    }
    *out_n = o;
    return 0;
}

/* ---- normalizer -------------------------------------------------------------------- */

/* A char that NFC leaves alone whatever surrounds it, as long as its
 * neighbours are such chars too (a quick check in the spirit of UAX #15's
 * NFC_Quick_Check=Yes with ccc 0): below U+0300; or a starter that is not a
 * mark, not a Hangul jamo (which compose with a syllable before them) and has
 * no canonical decomposition (compatibility ones are NFKC's business).
 * Every char that can be the second of a canonical composition is a mark or
 * a jamo, so a run of these chars composes with nothing; test_tok checks this
 * claim against utf8proc's data for every code point. */
int tok_nfc_quick_stable(uint32_t cp)
{
    if (cp < 0x300) return 1;
    if (cp >= 0x1100 && cp <= 0x11FF) return 0;
    const utf8proc_property_t *p = utf8proc_get_property((utf8proc_int32_t)cp);
    if (p->combining_class) return 0;
    if (p->category == UTF8PROC_CATEGORY_MN || p->category == UTF8PROC_CATEGORY_MC || p->category == UTF8PROC_CATEGORY_ME)
        return 0;
    return p->decomp_seqindex == UINT16_MAX || p->decomp_type != 0;
}

int tok_norm_str(tok *t, int kind, const char *a, size_t an, const char *b, size_t bn, dlm_err *e)
{
    if (t->n_norm >= TOK_NORM_MAX) return err_set(e, "TokenizerError", "too many normalizers");
    if (kind == TOK_NORM_REPLACE && !an) return err_set(e, "TokenizerError", "Replace normalizer with an empty pattern");
    int k = t->n_norm;
    t->norm_a[k] = str_ndup(a, an);
    t->norm_b[k] = str_ndup(b ? b : "", bn);
    if (!t->norm_a[k] || !t->norm_b[k]) return err_set(e, "OOMError", "out of memory");
    t->norm_an[k] = an;
    t->norm_bn[k] = bn;
    t->norm[k] = kind;
    t->n_norm++;
    return 0;
}

/* One Prepend / Replace step (HF normalizers: Prepend leaves an empty
 * string empty; Replace of a String pattern replaces every non-overlapping
 * occurrence, left to right). */
static int norm_str_step(const tok *t, int k, const char *s, size_t n, strbuf *o)
{
    if (t->norm[k] == TOK_NORM_PREPEND) {
        if (n) sb_append(o, t->norm_a[k], t->norm_an[k]);
        sb_append(o, s, n);
        return o->oom ? -1 : 0;
    }
    const char *pat = t->norm_a[k];
    size_t pn = t->norm_an[k], i = 0;
    while (i < n) {
        const char *hit = n - i >= pn ? memmem(s + i, n - i, pat, pn) : NULL;
        if (!hit) break;
        sb_append(o, s + i, (size_t)(hit - (s + i)));
        sb_append(o, t->norm_b[k], t->norm_bn[k]);
        i = (size_t)(hit - s) + pn;
    }
    sb_append(o, s + i, n - i);
    return o->oom ? -1 : 0;
}

int tok_normalize(tok *t, const char *s, size_t n, const char **out, size_t *on, dlm_err *e)
{
    *out = s;
    *on = n;
    if (!t->n_norm) return 0;
    int strops = 0;
    for (int k = 0; k < t->n_norm; k++) strops |= t->norm[k] < 0;
    size_t i = 0;
    if (!strops) {
        /* Pure ASCII is invariant under NFC/NFD/NFKC/NFKD. */
        while (i < n && !((unsigned char)s[i] & 0x80)) i++;
        if (i == n) return 0;
    }
    if (t->n_norm == 1 && t->norm[0] == (UTF8PROC_STABLE | UTF8PROC_COMPOSE)) {
        /* NFC of text made only of quick-stable chars is the text itself. */
        while (i < n) {
            uint32_t cp;
            size_t l = tok_utf8_dec((const unsigned char *)s + i, n - i, &cp);
            if (!l || !tok_nfc_quick_stable(cp)) break;
            i += l;
        }
        if (i == n) return 0;
    }
    const char *cur = s;
    size_t cur_n = n;
    char *res = NULL;
    for (int k = 0; k < t->n_norm; k++) {
        char *d = NULL;
        size_t dn = 0;
        if (t->norm[k] < 0) {
            strbuf o = STRBUF_INIT;
            if (norm_str_step(t, k, cur, cur_n, &o)) {
                sb_free(&o);
                free(res);
                return err_set(e, "OOMError", "out of memory normalizing text");
            }
            if (!o.buf && !(d = calloc(1, 1))) {
                free(res);
                return err_set(e, "OOMError", "out of memory normalizing text");
            }
            if (o.buf) d = sb_detach(&o, &dn);
        } else {
            utf8proc_uint8_t *u = NULL;
            utf8proc_ssize_t r = cur_n ? utf8proc_map((const utf8proc_uint8_t *)cur, (utf8proc_ssize_t)cur_n, &u,
                                                      (utf8proc_option_t)t->norm[k])
                                       : 0;
            if (r < 0) {
                free(u);
                free(res);
                return err_set(e, "TokenizerError", "normalization failed: %s", utf8proc_errmsg(r));
            }
            if (!u && !(u = calloc(1, 1))) {
                free(res);
                return err_set(e, "OOMError", "out of memory normalizing text");
            }
            d = (char *)u;
            dn = (size_t)r;
        }
        free(res);
        res = d;
        cur = d;
        cur_n = dn;
    }
    if (cur_n + 1 > t->nbuf_cap) {
        size_t nc = t->nbuf_cap ? t->nbuf_cap : 256;
        while (nc < cur_n + 1) nc *= 2;
        char *b = realloc(t->nbuf, nc);
        if (!b) {
            free(res);
            return err_set(e, "OOMError", "out of memory normalizing text");
        }
        t->nbuf = b;
        t->nbuf_cap = nc;
    }
    memcpy(t->nbuf, cur, cur_n);
    free(res);
    *out = t->nbuf;
    *on = cur_n;
    return 0;
}

/* ---- added tokens and their tries ---------------------------------------------------- */

int tok_add_added(tok *t, int32_t id, const char *s, size_t n, int special, int single_word,
                  int lstrip, int rstrip, int normalized, dlm_err *e)
{
    if (n == 0) return 0; /* HF never matches an empty token */
    if (n > TOK_MAX_TOKEN_BYTES) return err_set(e, "TokenizerError", "added token %d is longer than %d bytes", id, TOK_MAX_TOKEN_BYTES);
    if (t->n_added == t->added_cap) {
        size_t nc = t->added_cap ? t->added_cap * 2 : 64;
        tok_added *a = realloc(t->added, nc * sizeof *a);
        if (!a) return err_set(e, "OOMError", "out of memory");
        t->added = a;
        t->added_cap = nc;
    }
    if (t->added_text_len + n + 1 > t->added_text_cap) {
        size_t nc = t->added_text_cap ? t->added_text_cap * 2 : 4096;
        while (nc < t->added_text_len + n + 1) nc *= 2;
        char *d = realloc(t->added_text, nc);
        if (!d) return err_set(e, "OOMError", "out of memory");
        t->added_text = d;
        t->added_text_cap = nc;
    }
    tok_added *a = &t->added[t->n_added++];
    a->id = id;
    a->off = (uint32_t)t->added_text_len;
    a->len = (uint32_t)n;
    memcpy(t->added_text + t->added_text_len, s, n);
    t->added_text[t->added_text_len + n] = 0;
    t->added_text_len += n + 1;
    a->special = (uint8_t)!!special;
    a->single_word = (uint8_t)!!single_word;
    a->lstrip = (uint8_t)!!lstrip;
    a->rstrip = (uint8_t)!!rstrip;
    a->normalized = (uint8_t)!!normalized;
    return 0;
}

static int trie_node(tok_trie *tr, uint8_t byte)
{
    if (tr->n == tr->cap) {
        size_t nc = tr->cap ? tr->cap * 2 : 256;
        tok_trie_node *d = realloc(tr->nodes, nc * sizeof *d);
        if (!d) return -1;
        tr->nodes = d;
        tr->cap = nc;
    }
    tok_trie_node *nd = &tr->nodes[tr->n];
    nd->child = nd->sibling = nd->added = -1;
    nd->byte = byte;
    return (int)tr->n++;
}

/* Insert; a later token with the same content replaces the earlier one (HF
 * keeps the last in its content -> id map). */
static int trie_insert(tok_trie *tr, const char *s, size_t n, int32_t added_idx)
{
    if (!tr->n && trie_node(tr, 0) < 0) return -1; /* root */
    int cur = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t b = (uint8_t)s[i];
        int c = tr->nodes[cur].child;
        while (c >= 0 && tr->nodes[c].byte != b) c = tr->nodes[c].sibling;
        if (c < 0) {
            c = trie_node(tr, b);
            if (c < 0) return -1;
            tr->nodes[c].sibling = tr->nodes[cur].child;
            tr->nodes[cur].child = c;
        }
        cur = c;
    }
    tr->nodes[cur].added = added_idx;
    tr->first[(uint8_t)s[0]] = 1;
    return 0;
}

static void trie_free(tok_trie *tr)
{
    free(tr->nodes);
    memset(tr, 0, sizeof *tr);
}

/* ---- token strings --------------------------------------------------------------------- */

const char *tok_str_of(const tok *t, int32_t id, size_t *n)
{
    if (id < 0 || (size_t)id >= t->n_ids) return NULL;
    int32_t a = t->added_of[id];
    if (a >= 0) {
        if (n) *n = t->added[a].len;
        return t->added_text + t->added[a].off;
    }
    return tok_strtab_get(&t->str, id, n);
}

/* llama.cpp's converter: added tokens that look like <|...|> are CONTROL even
 * when not special (docs/reference/formats.md §4.4, does_token_look_special). */
static int looks_special(const char *s, size_t n)
{
    if (n == 5 && !memcmp(s, "<pad>", 5)) return 1;
    if (n == 6 && !memcmp(s, "<mask>", 6)) return 1;
    if (n == 7 && !memcmp(s, "<2mass>", 7)) return 1;
    if (n == 7 && !memcmp(s, "[@BOS@]", 7)) return 1;
    if (n >= 4 && !memcmp(s, "<|", 2) && !memcmp(s + n - 2, "|>", 2)) return 1;
    /* fullwidth vertical line U+FF5C is EF BD 9C */
    if (n >= 8 && !memcmp(s, "<\xEF\xBD\x9C", 4) && !memcmp(s + n - 4, "\xEF\xBD\x9C>", 4)) return 1;
    if (n >= 8 && !memcmp(s, "<unused", 7) && s[n - 1] == '>') return 1;
    return 0;
}

/* ---- finishing --------------------------------------------------------------------------- */

tok *tok_alloc(void)
{
    tok *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->bos = t->eos = t->pad = t->unk = -1;
    t->unk_model = -1;
    return t;
}

static int merges_build(tok *t, const tok_pair_ref *mg, size_t nm, const char *name, dlm_err *e)
{
    size_t cap = 16;
    while (cap < nm * 2) cap *= 2;
    t->mtab = calloc(cap, sizeof *t->mtab);
    t->merges = malloc((nm ? nm : 1) * sizeof *t->merges);
    if (!t->mtab || !t->merges) return err_set(e, "OOMError", "out of memory for %zu merges", nm);
    t->mmask = (uint32_t)(cap - 1);
    t->n_merges = nm;
    char *cat = malloc(2 * TOK_MAX_TOKEN_BYTES + 1);
    if (!cat) return err_set(e, "OOMError", "out of memory");
    for (size_t i = 0; i < nm; i++) {
        int32_t a = tok_idmap_get(&t->vocab_str, &t->str, mg[i].a, mg[i].an);
        int32_t b = tok_idmap_get(&t->vocab_str, &t->str, mg[i].b, mg[i].bn);
        if (a < 0 || b < 0) {
            free(cat);
            return err_set(e, "TokenizerError", "%s: merge %zu (\"%.*s %.*s\") refers to a token not in the vocabulary",
                           name, i, (int)(mg[i].an > 64 ? 64 : mg[i].an), mg[i].a, (int)(mg[i].bn > 64 ? 64 : mg[i].bn), mg[i].b);
        }
        int32_t m = -1;
        if (mg[i].an + mg[i].bn <= 2 * TOK_MAX_TOKEN_BYTES) {
            memcpy(cat, mg[i].a, mg[i].an);
            memcpy(cat + mg[i].an, mg[i].b, mg[i].bn);
            m = tok_idmap_get(&t->vocab_str, &t->str, cat, mg[i].an + mg[i].bn);
        }
        if (m < 0) {
            free(cat);
            return err_set(e, "TokenizerError", "%s: merge %zu produces \"%.*s%.*s\", which is not in the vocabulary",
                           name, i, (int)(mg[i].an > 64 ? 64 : mg[i].an), mg[i].a, (int)(mg[i].bn > 64 ? 64 : mg[i].bn), mg[i].b);
        }
        t->merges[i][0] = a;
        t->merges[i][1] = b;
        uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
        uint32_t h = (uint32_t)(key * 0x9E3779B97F4A7C15ull >> 32) & t->mmask;
        for (;; h = (h + 1) & t->mmask) {
            tok_merge_ent *en = &t->mtab[h];
            if (en->key == 0 || en->key == key) {
                /* A repeated pair keeps the later rank, as HF's HashMap collect does. */
                en->key = key;
                en->rank = (uint32_t)i;
                en->id = m;
                break;
            }
        }
    }
    free(cat);
    return 0;
}

/* "<0xNN>": a byte piece, typed BYTE as llama.cpp's converter types it
 * (gguf-py vocab.py, LlamaHfVocab.get_token_type) */
static int is_byte_piece(const tok *t, int32_t id)
{
    size_t n;
    const char *s = tok_strtab_get(&t->str, id, &n);
    if (!s || n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return 0;
    for (int k = 3; k < 5; k++)
        if (!((s[k] >= '0' && s[k] <= '9') || (s[k] >= 'A' && s[k] <= 'F') || (s[k] >= 'a' && s[k] <= 'f'))) return 0;
    return 1;
}

int tok_finish(tok *t, const tok_pair_ref *mg, size_t nm, const char *name, dlm_err *e)
{
    size_t nv = 0;
    for (size_t i = 0; i < t->n_ids; i++) nv += t->in_vocab[i];

    /* Model vocabulary maps: strings (for merges and lookups) and raw bytes
     * (what BPE on a pre-token's bytes looks up). */
    if (tok_idmap_init(&t->vocab_str, nv) || tok_idmap_init(&t->vocab_raw, nv) ||
        tok_strtab_init(&t->vraw, t->n_ids) || tok_strtab_init(&t->raw, t->n_ids))
        return err_set(e, "OOMError", "out of memory for the vocabulary");
    char *buf = malloc(2 * TOK_MAX_TOKEN_BYTES + 8);
    if (!buf) return err_set(e, "OOMError", "out of memory");
    for (size_t i = 0; i < t->n_ids; i++) {
        if (!t->in_vocab[i]) continue;
        size_t n = 0;
        const char *s = tok_strtab_get(&t->str, (int32_t)i, &n);
        /* The same string twice: HF's map would keep one silently; a file
         * that does this is broken, a GGUF keeps its first id (llama.cpp). */
        if (tok_idmap_put(&t->vocab_str, &t->str, (int32_t)i, 0) && !t->from_spec) {
            free(buf);
            return err_set(e, "TokenizerError", "%s: vocab string \"%.64s\" appears twice", name, s);
        }
        size_t rn;
        if (t->spm) {
            /* SentencePiece vocabularies hold text, not ByteLevel chars. */
            if (tok_strtab_set(&t->vraw, (int32_t)i, s, n)) goto oom;
            tok_idmap_put(&t->vocab_raw, &t->vraw, (int32_t)i, 0);
        } else if (!tok_bytelevel_decode(s, n, buf, &rn)) {
            if (tok_strtab_set(&t->vraw, (int32_t)i, buf, rn)) goto oom;
            tok_idmap_put(&t->vocab_raw, &t->vraw, (int32_t)i, 0);
        }
    }
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        t->byte_id[b] = tok_idmap_get(&t->vocab_raw, &t->vraw, &c, 1);
    }

    /* Added tokens: id table and tries. */
    for (size_t i = 0; i < t->n_added; i++) {
        tok_added *a = &t->added[i];
        if (a->id < 0 || (size_t)a->id >= t->n_ids) {
            free(buf);
            return err_set(e, "TokenizerError", "%s: added token id %d out of range", name, a->id);
        }
        t->added_of[a->id] = (int32_t)i;
        const char *s = t->added_text + a->off;
        size_t n = a->len;
        if (a->normalized && t->n_norm) {
            if (tok_normalize(t, s, n, &s, &n, e)) { free(buf); return -1; }
            if (!n) continue;
        }
        if (trie_insert(a->normalized ? &t->trie_norm : &t->trie_raw, s, n, (int32_t)i)) goto oom;
    }

    /* Decode bytes of every id: HF's ByteLevel decoder maps a token whose
     * chars are all in the table to bytes, any other token to its UTF-8. */
    for (size_t i = 0; i < t->n_ids; i++) {
        size_t n;
        const char *s = tok_str_of(t, (int32_t)i, &n);
        if (!s) continue;
        size_t rn;
        if (t->spm) {
            strbuf rb = STRBUF_INIT;
            int bad = tok_spm_raw(t, s, n, &rb) || tok_strtab_set(&t->raw, (int32_t)i, rb.buf ? rb.buf : "", rb.len);
            sb_free(&rb);
            if (bad) goto oom;
        } else if (n <= 2 * TOK_MAX_TOKEN_BYTES && !tok_bytelevel_decode(s, n, buf, &rn)) {
            if (tok_strtab_set(&t->raw, (int32_t)i, buf, rn)) goto oom;
        } else if (tok_strtab_set(&t->raw, (int32_t)i, s, n)) goto oom;
    }
    free(buf);
    buf = NULL;

    /* GGUF token types (llama.cpp converter rules) unless the spec gave them. */
    if (!t->from_spec) {
        for (size_t i = 0; i < t->n_ids; i++) {
            int32_t a = t->added_of[i];
            if (a >= 0) {
                const tok_added *ad = &t->added[a];
                t->type[i] = (ad->special || looks_special(t->added_text + ad->off, ad->len)) ? TOK_TYPE_CONTROL
                                                                                               : TOK_TYPE_USER_DEFINED;
            } else if (t->in_vocab[i]) t->type[i] = t->spm && is_byte_piece(t, (int32_t)i) ? TOK_TYPE_BYTE : TOK_TYPE_NORMAL;
            else t->type[i] = TOK_TYPE_UNUSED;
        }
    }

    if (merges_build(t, mg, nm, name, e)) return -1;
    if (t->spm && tok_spm_finish(t, e)) return -1;
    return tok_scratch_init(t, e);
oom:
    free(buf);
    return err_set(e, "OOMError", "out of memory building the tokenizer tables");
}

void tok_free(tok *t)
{
    if (!t) return;
    tok_strtab_free(&t->str);
    tok_strtab_free(&t->vraw);
    tok_strtab_free(&t->raw);
    free(t->in_vocab);
    free(t->type);
    free(t->added_of);
    tok_idmap_free(&t->vocab_str);
    tok_idmap_free(&t->vocab_raw);
    free(t->mtab);
    free(t->merges);
    free(t->added);
    free(t->added_text);
    trie_free(&t->trie_raw);
    trie_free(&t->trie_norm);
    for (int i = 0; i < t->n_pt; i++) {
        free(t->pt[i].pattern);
        if (t->pt[i].md) pcre2_match_data_free(t->pt[i].md);
        if (t->pt[i].re) pcre2_code_free(t->pt[i].re);
        free(t->pt[i].scratch);
    }
    free(t->chat_template);
    for (int i = 0; i < t->n_norm; i++) {
        free(t->norm_a[i]);
        free(t->norm_b[i]);
    }
    tok_spm_free(t);
    if (t->mctx) pcre2_match_context_free(t->mctx);
    if (t->jstack) pcre2_jit_stack_free(t->jstack);
    free(t->sym);
    free(t->heap);
    free(t->nbuf);
    free(t->cache);
    free(t->cache_keys);
    free(t->cache_ids);
    free(t);
}
