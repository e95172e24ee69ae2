/* bpe — see bpe.h. The merge loop is the usual incremental one: pair counts
 * live in a hash table, each pair remembers the words it ever occurred in,
 * and a max-heap with lazy deletion yields the next pair; a merge touches
 * only the words that hold the pair. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "bpe.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

/* GPT-2's pre-tokenizer regex with \s / \S written as White_Space
 * properties: Oniguruma's (HF's) \s is exactly White_Space, and src/tok
 * rewrites the pattern the same way, so trainer and encoder cut alike. */
static const char RE_GPT2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\p{White_Space}\\p{L}\\p{N}]+"
    "|\\p{White_Space}+(?!\\P{White_Space})|\\p{White_Space}+";

typedef struct word {
    uint32_t off, len;     /* raw bytes in the arena */
    int64_t count;
    int32_t *sym;          /* current symbols (after training: final ids) */
    int n_sym;
} word;

typedef struct pair {
    uint64_t key;          /* left << 32 | right */
    int64_t count;
    int32_t *where;        /* words that held this pair at some point */
    int n_where;
    size_t cap_where;
    int32_t last_word;     /* stamp: the word this pair was last seen in */
    int32_t touched;       /* stamp: the merge that last changed its count */
} pair;

typedef struct heap_ent {
    int64_t count;
    int32_t pair;          /* index into pairs */
} heap_ent;

struct bpe_trainer {
    pcre2_code *re;
    pcre2_match_data *md;
    /* distinct words */
    char *arena;
    size_t arena_len, arena_cap;
    word *words;
    size_t n_words, cap_words;
    uint32_t *wtab;        /* open addressing: word index + 1, 0 = empty */
    size_t wtab_cap;       /* power of two */
    /* tokens */
    char **tok;            /* raw bytes per id */
    uint32_t *tok_len;
    int n_tok;
    int32_t (*merges)[2];
    int n_merges;
    /* pairs */
    pair *pairs;
    size_t n_pairs, cap_pairs;
    uint32_t *ptab;        /* pair index + 1 */
    size_t ptab_cap;
    heap_ent *heap;
    size_t n_heap, cap_heap;
    int trained;
};

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

int bpe_new(bpe_trainer **out, dlm_err *e)
{
    *out = NULL;
    bpe_trainer *t = calloc(1, sizeof *t);
    if (!t) return err_set(e, "MemoryError", "out of memory");
    int ec;
    PCRE2_SIZE eo;
    t->re = pcre2_compile((PCRE2_SPTR)RE_GPT2, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    if (!t->re) {
        bpe_free(t);
        return err_set(e, "TokenizerError", "the GPT-2 regex does not compile (error %d at %zu)", ec, (size_t)eo);
    }
    pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE);
    t->md = pcre2_match_data_create_from_pattern(t->re, NULL);
    t->wtab_cap = 1 << 16;
    t->wtab = calloc(t->wtab_cap, sizeof *t->wtab);
    if (!t->md || !t->wtab) {
        bpe_free(t);
        return err_set(e, "MemoryError", "out of memory");
    }
    *out = t;
    return 0;
}

void bpe_free(bpe_trainer *t)
{
    if (!t) return;
    if (t->md) pcre2_match_data_free(t->md);
    if (t->re) pcre2_code_free(t->re);
    for (size_t i = 0; i < t->n_words; i++) free(t->words[i].sym);
    for (size_t i = 0; i < t->n_pairs; i++) free(t->pairs[i].where);
    for (int i = 0; i < t->n_tok; i++) free(t->tok[i]);
    free(t->arena);
    free(t->words);
    free(t->wtab);
    free(t->tok);
    free(t->tok_len);
    free(t->merges);
    free(t->pairs);
    free(t->ptab);
    free(t->heap);
    free(t);
}

size_t bpe_n_words(const bpe_trainer *t) { return t->n_words; }

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, nc * elem);
    if (!q) return -1;
    *p = q;
    *cap = nc;
    return 0;
}

static int wtab_rehash(bpe_trainer *t)
{
    size_t nc = t->wtab_cap * 2;
    uint32_t *nt = calloc(nc, sizeof *nt);
    if (!nt) return -1;
    for (size_t i = 0; i < t->n_words; i++) {
        const word *w = &t->words[i];
        size_t h = hash_bytes(t->arena + w->off, w->len) & (nc - 1);
        while (nt[h]) h = (h + 1) & (nc - 1);
        nt[h] = (uint32_t)i + 1;
    }
    free(t->wtab);
    t->wtab = nt;
    t->wtab_cap = nc;
    return 0;
}

/* Index of the word with these bytes, or -1; with add, created if missing. */
static long word_find(bpe_trainer *t, const char *s, size_t n, int add)
{
    size_t h = hash_bytes(s, n) & (t->wtab_cap - 1);
    for (;;) {
        uint32_t v = t->wtab[h];
        if (!v) break;
        const word *w = &t->words[v - 1];
        if (w->len == n && !memcmp(t->arena + w->off, s, n)) return (long)v - 1;
        h = (h + 1) & (t->wtab_cap - 1);
    }
    if (!add) return -1;
    if (t->n_words >= BPE_MAX_WORDS) return -2;
    if (grow((void **)&t->arena, &t->arena_cap, t->arena_len + n, 1) ||
        grow((void **)&t->words, &t->cap_words, t->n_words + 1, sizeof *t->words))
        return -3;
    memcpy(t->arena + t->arena_len, s, n);
    word *w = &t->words[t->n_words];
    memset(w, 0, sizeof *w);
    w->off = (uint32_t)t->arena_len;
    w->len = (uint32_t)n;
    t->arena_len += n;
    t->wtab[h] = (uint32_t)++t->n_words;
    if (t->n_words * 2 > t->wtab_cap && wtab_rehash(t)) return -3;
    return (long)t->n_words - 1;
}

int bpe_add_text(bpe_trainer *t, const char *text, size_t len, dlm_err *e)
{
    if (t->trained) return err_set(e, "TokenizerError", "bpe_add_text after bpe_train");
    if (t->arena_len > (size_t)UINT32_MAX - (1u << 20)) return err_set(e, "TokenizerError", "training text too large");
    size_t pos = 0;
    /* The first match checks the whole text is UTF-8; the others skip the
     * check (repeating it per match would be quadratic in the text). */
    uint32_t opts = 0;
    while (pos < len) {
        int rc = pcre2_match(t->re, (PCRE2_SPTR)text, len, pos, opts, t->md, NULL);
        opts = PCRE2_NO_UTF_CHECK;
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return err_set(e, "TokenizerError", "pre-tokenizing failed at byte %zu: %s", pos, (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(t->md);
        size_t a = ov[0], b = ov[1];
        if (b <= a) { /* the pattern cannot match empty, but never loop */
            pos = a + 1;
            continue;
        }
        /* Very long pre-tokens (runs of spaces, long numbers) are rare and
         * teach nothing a shorter one would not: left out of the counts. */
        if (b - a <= BPE_MAX_WORD_BYTES) {
            long w = word_find(t, text + a, b - a, 1);
            if (w == -2) return err_set(e, "TokenizerError", "more than %d distinct pre-tokens", BPE_MAX_WORDS);
            if (w < 0) return err_set(e, "MemoryError", "out of memory counting pre-tokens");
            t->words[w].count++;
        }
        pos = b;
    }
    return 0;
}

/* ---- pairs ----------------------------------------------------------------- */

static int ptab_rehash(bpe_trainer *t)
{
    size_t nc = t->ptab_cap ? t->ptab_cap * 2 : (1 << 16);
    uint32_t *nt = calloc(nc, sizeof *nt);
    if (!nt) return -1;
    for (size_t i = 0; i < t->n_pairs; i++) {
        size_t h = hash_u64(t->pairs[i].key) & (nc - 1);
        while (nt[h]) h = (h + 1) & (nc - 1);
        nt[h] = (uint32_t)i + 1;
    }
    free(t->ptab);
    t->ptab = nt;
    t->ptab_cap = nc;
    return 0;
}

static long pair_get(bpe_trainer *t, int32_t a, int32_t b)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    size_t h = hash_u64(key) & (t->ptab_cap - 1);
    for (;;) {
        uint32_t v = t->ptab[h];
        if (!v) break;
        if (t->pairs[v - 1].key == key) return (long)v - 1;
        h = (h + 1) & (t->ptab_cap - 1);
    }
    if (grow((void **)&t->pairs, &t->cap_pairs, t->n_pairs + 1, sizeof *t->pairs)) return -1;
    pair *p = &t->pairs[t->n_pairs];
    memset(p, 0, sizeof *p);
    p->key = key;
    p->last_word = -1;
    p->touched = -1;
    t->ptab[h] = (uint32_t)++t->n_pairs;
    if (t->n_pairs * 2 > t->ptab_cap && ptab_rehash(t)) return -1;
    return (long)t->n_pairs - 1;
}

/* Heap order: larger count first; equal counts: the pair whose left token's
 * bytes, then right token's bytes, sort first (memcmp, shorter first on a
 * common prefix). */
static int tok_cmp(const bpe_trainer *t, int32_t x, int32_t y)
{
    if (x == y) return 0;
    uint32_t lx = t->tok_len[x], ly = t->tok_len[y];
    int c = memcmp(t->tok[x], t->tok[y], lx < ly ? lx : ly);
    if (c) return c;
    return lx < ly ? -1 : lx > ly ? 1 : 0;
}

static int heap_before(const bpe_trainer *t, const heap_ent *x, const heap_ent *y)
{
    if (x->count != y->count) return x->count > y->count;
    const pair *px = &t->pairs[x->pair], *py = &t->pairs[y->pair];
    int32_t xa = (int32_t)(px->key >> 32), xb = (int32_t)(uint32_t)px->key;
    int32_t ya = (int32_t)(py->key >> 32), yb = (int32_t)(uint32_t)py->key;
    int c = tok_cmp(t, xa, ya);
    if (c) return c < 0;
    return tok_cmp(t, xb, yb) < 0;
}

static int heap_push(bpe_trainer *t, int32_t p)
{
    if (grow((void **)&t->heap, &t->cap_heap, t->n_heap + 1, sizeof *t->heap)) return -1;
    size_t i = t->n_heap++;
    heap_ent x = {t->pairs[p].count, p};
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!heap_before(t, &x, &t->heap[up])) break;
        t->heap[i] = t->heap[up];
        i = up;
    }
    t->heap[i] = x;
    return 0;
}

static heap_ent heap_pop(bpe_trainer *t)
{
    heap_ent top = t->heap[0], x = t->heap[--t->n_heap];
    size_t i = 0, n = t->n_heap;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const heap_ent *best = &x;
        if (l < n && heap_before(t, &t->heap[l], best)) { m = l; best = &t->heap[l]; }
        if (r < n && heap_before(t, &t->heap[r], best)) m = r;
        if (m == i) break;
        t->heap[i] = t->heap[m];
        i = m;
    }
    if (n) t->heap[i] = x;
    return top;
}

/* Add delta × count for every adjacent pair of word w; pairs first seen in
 * this word record it; changed pairs are stamped with merge number stamp
 * and listed in *touched for a heap push. */
static int count_pairs(bpe_trainer *t, int32_t wi, int64_t delta, int32_t stamp, int32_t **touched, size_t *n_touched,
                       size_t *cap_touched)
{
    word *w = &t->words[wi];
    for (int i = 0; i + 1 < w->n_sym; i++) {
        long p = pair_get(t, w->sym[i], w->sym[i + 1]);
        if (p < 0) return -1;
        pair *pp = &t->pairs[p];
        pp->count += delta * w->count;
        if (delta > 0 && pp->last_word != wi) {
            pp->last_word = wi;
            if (grow((void **)&pp->where, &pp->cap_where, (size_t)pp->n_where + 1, sizeof *pp->where))
                return -1;
            pp->where[pp->n_where++] = wi;
        }
        if (pp->touched != stamp) {
            pp->touched = stamp;
            if (grow((void **)touched, cap_touched, *n_touched + 1, sizeof **touched)) return -1;
            (*touched)[(*n_touched)++] = (int32_t)p;
        }
    }
    return 0;
}

static int add_token(bpe_trainer *t, const char *s, size_t n)
{
    char *c = malloc(n ? n : 1);
    if (!c) return -1;
    memcpy(c, s, n);
    t->tok[t->n_tok] = c;
    t->tok_len[t->n_tok] = (uint32_t)n;
    t->n_tok++;
    return 0;
}

int bpe_train(bpe_trainer *t, int n_vocab, int64_t min_count, dlm_err *e)
{
    if (t->trained) return err_set(e, "TokenizerError", "bpe_train called twice");
    if (n_vocab < 256 || n_vocab > BPE_MAX_VOCAB)
        return err_set(e, "TokenizerError", "vocabulary size %d is outside 256..%d", n_vocab, BPE_MAX_VOCAB);
    if (min_count < 1) min_count = 1;
    t->trained = 1;
    int32_t *touched = NULL;
    size_t n_touched = 0, cap_touched = 0;
    int rc = -1;
    t->tok = calloc((size_t)n_vocab, sizeof *t->tok);
    t->tok_len = calloc((size_t)n_vocab, sizeof *t->tok_len);
    t->merges = calloc((size_t)n_vocab, sizeof *t->merges);
    if (!t->tok || !t->tok_len || !t->merges || ptab_rehash(t)) goto oom;
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        if (add_token(t, &c, 1)) goto oom;
    }
    for (size_t i = 0; i < t->n_words; i++) {
        word *w = &t->words[i];
        w->sym = malloc(w->len * sizeof *w->sym);
        if (!w->sym) goto oom;
        for (uint32_t k = 0; k < w->len; k++) w->sym[k] = (unsigned char)t->arena[w->off + k];
        w->n_sym = (int)w->len;
        if (count_pairs(t, (int32_t)i, 1, -2, &touched, &n_touched, &cap_touched)) goto oom;
    }
    for (size_t i = 0; i < n_touched; i++)
        if (heap_push(t, touched[i])) goto oom;
    while (t->n_tok < n_vocab && t->n_heap) {
        heap_ent top = heap_pop(t);
        pair *pp = &t->pairs[top.pair];
        if (top.count != pp->count) continue; /* stale: a fresher entry exists */
        if (pp->count < min_count) break;
        int32_t a = (int32_t)(pp->key >> 32), b = (int32_t)(uint32_t)pp->key, id = t->n_tok;
        /* the new token's bytes */
        size_t la = t->tok_len[a], lb = t->tok_len[b];
        char *nb = malloc(la + lb);
        if (!nb) goto oom;
        memcpy(nb, t->tok[a], la);
        memcpy(nb + la, t->tok[b], lb);
        t->tok[id] = nb;
        t->tok_len[id] = (uint32_t)(la + lb);
        t->merges[t->n_merges][0] = a;
        t->merges[t->n_merges][1] = b;
        t->n_merges++;
        t->n_tok++;
        int32_t stamp = t->n_merges;
        n_touched = 0;
        /* pp->where may grow while we walk it (a merged word can gain the
         * same pair again, e.g. "aaaa"): walk by index over the count at
         * the start; the word is rewritten whole anyway. */
        int nw = pp->n_where;
        for (int k = 0; k < nw; k++) {
            int32_t wi = t->pairs[top.pair].where[k];
            word *w = &t->words[wi];
            int has = 0;
            for (int i = 0; i + 1 < w->n_sym && !has; i++) has = w->sym[i] == a && w->sym[i + 1] == b;
            if (!has) continue;
            if (count_pairs(t, wi, -1, stamp, &touched, &n_touched, &cap_touched)) goto oom;
            int o = 0;
            for (int i = 0; i < w->n_sym;) {
                if (i + 1 < w->n_sym && w->sym[i] == a && w->sym[i + 1] == b) {
                    w->sym[o++] = id;
                    i += 2;
                } else {
                    w->sym[o++] = w->sym[i++];
                }
            }
            w->n_sym = o;
            if (count_pairs(t, wi, 1, stamp, &touched, &n_touched, &cap_touched)) goto oom;
        }
        for (size_t i = 0; i < n_touched; i++)
            if (t->pairs[touched[i]].count > 0 && heap_push(t, touched[i])) goto oom;
    }
    rc = 0;
    goto done;
oom:
    err_set(e, "MemoryError", "out of memory training the tokenizer");
done:
    free(touched);
    return rc;
}

int bpe_vocab_size(const bpe_trainer *t) { return t->n_tok; }

const char *bpe_token(const bpe_trainer *t, int id, size_t *len)
{
    if (id < 0 || id >= t->n_tok) return NULL;
    if (len) *len = t->tok_len[id];
    return t->tok[id];
}

int bpe_n_merges(const bpe_trainer *t) { return t->n_merges; }

void bpe_merge(const bpe_trainer *t, int i, int *left, int *right)
{
    *left = *right = -1;
    if (i < 0 || i >= t->n_merges) return;
    *left = t->merges[i][0];
    *right = t->merges[i][1];
}

int bpe_word_ids(const bpe_trainer *t, const char *s, size_t n, int32_t *ids, int cap)
{
    long w = word_find((bpe_trainer *)t, s, n, 0);
    if (w < 0 || !t->trained) return -1;
    const word *wd = &t->words[w];
    for (int i = 0; i < wd->n_sym && i < cap; i++) ids[i] = wd->sym[i];
    return wd->n_sym;
}

/* GPT-2 bytes_to_unicode: printable Latin-1 bytes keep their code point,
 * the other 68 bytes map, in byte order, to U+0100.. */
static unsigned byte_cp(unsigned char b)
{
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
    unsigned n = 0;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) n++;
    return 256 + n;
}

int bpe_byte_level(const char *raw, size_t len, strbuf *out)
{
    for (size_t i = 0; i < len; i++) {
        unsigned cp = byte_cp((unsigned char)raw[i]);
        char u[2];
        if (cp < 0x80) {
            sb_putc(out, (char)cp);
        } else {
            u[0] = (char)(0xC0 | (cp >> 6));
            u[1] = (char)(0x80 | (cp & 0x3F));
            sb_append(out, u, 2);
        }
    }
    return out->oom ? -1 : 0;
}
