/* tok_spm — what SentencePiece-style vocabularies add to the byte-level
 * tokenizer (Llama 2, Mistral/Mixtral, Phi-3, Gemma):
 *
 *   - llama.cpp's `llama` GGUF vocabulary, tokenized the way its
 *     llm_tokenizer_spm does: the piece's UTF-8 chars are the symbols, the
 *     adjacent pair whose concatenation is a token with the highest score
 *     merges first (leftmost on ties), symbols left that are not tokens
 *     become <0xNN> byte tokens;
 *   - HF decoders other than ByteLevel: Replace, ByteFallback, Fuse, Strip
 *     and Metaspace, run as HF's decode_chain runs them (a list of token
 *     strings through each step, joined at the end).
 *
 * HF's char-level BPE with byte_fallback (tokenizer.json) shares the merge
 * loop of tok_encode.c; only its initial symbols differ (see there). */
#include <stdlib.h>
#include <string.h>

#include "tokens/tok_impl.h"

#define TERR "TokenizerError"

/* ---- tables ------------------------------------------------------------------------------ */

static int32_t lookup_all(const tok *t, const char *s, size_t n)
{
    return t->spm_scores ? tok_idmap_get(&t->all_map, &t->all, s, n) : tok_idmap_get(&t->vocab_raw, &t->vraw, s, n);
}

int tok_spm_finish(tok *t, dlm_err *e)
{
    if (t->spm_scores) {
        size_t n = 0;
        for (size_t i = 0; i < t->n_ids; i++) n += tok_strtab_get(&t->all, (int32_t)i, NULL) != NULL;
        if (tok_idmap_init(&t->all_map, n)) return err_set(e, "OOMError", "out of memory");
        /* llama.cpp fills token_to_id in id order: a repeated text keeps the last id. */
        for (size_t i = 0; i < t->n_ids; i++)
            if (tok_strtab_get(&t->all, (int32_t)i, NULL)) tok_idmap_put(&t->all_map, &t->all, (int32_t)i, 1);
    }
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        char nm[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
        t->byte_tok[b] = lookup_all(t, nm, 6);
    }
    return 0;
}

void tok_spm_free(tok *t)
{
    for (int i = 0; i < t->n_dec; i++) {
        free(t->dec[i].a);
        free(t->dec[i].b);
    }
    t->n_dec = 0;
    free(t->scores);
    t->scores = NULL;
    tok_strtab_free(&t->all);
    tok_idmap_free(&t->all_map);
}

/* ---- llama.cpp SPM: merge by score ----------------------------------------------------------- */

typedef struct spm_sym {
    uint32_t off, n;
    int32_t prev, next;
} spm_sym;

typedef struct spm_bigram {
    float score;
    int32_t left, right;
    uint32_t size;
} spm_bigram;

/* Max-heap order: higher score first, then the leftmost pair. */
static int bg_before(const spm_bigram *a, const spm_bigram *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

typedef struct spm_state {
    const tok *t;
    const char *s;
    spm_sym *sym;
    spm_bigram *heap;
    size_t hn, hcap;
} spm_state;

static int bg_push(spm_state *st, spm_bigram v)
{
    if (st->hn == st->hcap) {
        size_t nc = st->hcap ? st->hcap * 2 : 64;
        spm_bigram *h = realloc(st->heap, nc * sizeof *h);
        if (!h) return -1;
        st->heap = h;
        st->hcap = nc;
    }
    size_t i = st->hn++;
    while (i) {
        size_t p = (i - 1) / 2;
        if (!bg_before(&v, &st->heap[p])) break;
        st->heap[i] = st->heap[p];
        i = p;
    }
    st->heap[i] = v;
    return 0;
}

static spm_bigram bg_pop(spm_state *st)
{
    spm_bigram top = st->heap[0], v = st->heap[--st->hn];
    size_t i = 0, m = st->hn;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= m) break;
        if (c + 1 < m && bg_before(&st->heap[c + 1], &st->heap[c])) c++;
        if (!bg_before(&st->heap[c], &v)) break;
        st->heap[i] = st->heap[c];
        i = c;
    }
    if (m) st->heap[i] = v;
    return top;
}

static int try_bigram(spm_state *st, int32_t left, int32_t right)
{
    if (left < 0 || right < 0) return 0;
    const spm_sym *l = &st->sym[left], *r = &st->sym[right];
    int32_t id = lookup_all(st->t, st->s + l->off, l->n + r->n);
    if (id < 0) return 0;
    spm_bigram b = {st->t->scores[id], left, right, l->n + r->n};
    return bg_push(st, b);
}

static int push_bytes(const tok *t, const char *s, size_t n, tok_ids *out, dlm_err *e)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int32_t id = t->byte_tok[c];
        if (id < 0) {
            char one = (char)c;
            id = lookup_all(t, &one, 1);
        }
        if (id < 0) id = t->unk;
        if (id < 0)
            return err_set(e, TERR, "byte 0x%02X has no <0x%02X> token and the vocabulary has no unknown token", c, c);
        if (tok_ids_push(out, id)) return err_set(e, "OOMError", "out of memory");
    }
    return 0;
}

int tok_spm_score(tok *t, const char *s, size_t n, tok_ids *out, dlm_err *e)
{
    if (n > INT32_MAX / 4) return err_set(e, TERR, "piece too long");
    spm_state st = {t, s, malloc((n ? n : 1) * sizeof(spm_sym)), NULL, 0, 0};
    if (!st.sym) return err_set(e, "OOMError", "out of memory");
    int32_t ns = 0;
    for (size_t off = 0; off < n; ns++) {
        /* llama.cpp's unicode_len_utf8: the length from the lead byte alone. */
        static const uint8_t len_of[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
        size_t l = len_of[(unsigned char)s[off] >> 4];
        if (l > n - off) l = n - off;
        st.sym[ns] = (spm_sym){(uint32_t)off, (uint32_t)l, ns - 1, off + l == n ? -1 : ns + 1};
        off += l;
    }
    int rc = 0;
    for (int32_t i = 1; i < ns && !rc; i++) rc = try_bigram(&st, i - 1, i);
    while (st.hn && !rc) {
        spm_bigram b = bg_pop(&st);
        spm_sym *l = &st.sym[b.left], *r = &st.sym[b.right];
        /* One side already merged into something else: stale. */
        if (!l->n || !r->n || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) st.sym[r->next].prev = b.left;
        rc = try_bigram(&st, l->prev, b.left);
        if (!rc) rc = try_bigram(&st, b.left, l->next);
    }
    if (rc) err_set(e, "OOMError", "out of memory");
    for (int32_t i = ns ? 0 : -1; i >= 0 && !rc; i = st.sym[i].next) {
        /* Every merged symbol is a token; what is left unknown are single
         * chars, written as their bytes. */
        int32_t id = lookup_all(t, s + st.sym[i].off, st.sym[i].n);
        if (id >= 0) rc = tok_ids_push(out, id) ? err_set(e, "OOMError", "out of memory") : 0;
        else rc = push_bytes(t, s + st.sym[i].off, st.sym[i].n, out, e);
    }
    free(st.sym);
    free(st.heap);
    return rc;
}

/* ---- decoding ---------------------------------------------------------------------------- */

int tok_dec_add(tok *t, int kind, const char *a, size_t an, const char *b, size_t bn, dlm_err *e)
{
    if (t->n_dec >= TOK_DEC_MAX) return err_set(e, TERR, "more than %d decoder steps", TOK_DEC_MAX);
    tok_dec *d = &t->dec[t->n_dec];
    memset(d, 0, sizeof *d);
    d->kind = kind;
    d->a = str_ndup(a ? a : "", an);
    d->b = str_ndup(b ? b : "", bn);
    if (!d->a || !d->b) {
        free(d->a);
        free(d->b);
        return err_set(e, "OOMError", "out of memory");
    }
    d->an = an;
    d->bn = bn;
    t->n_dec++;
    return 0;
}

static void replace_all(strbuf *o, const char *s, size_t n, const char *a, size_t an, const char *b, size_t bn)
{
    size_t i = 0;
    while (an && i < n) {
        const char *hit = n - i >= an ? memmem(s + i, n - i, a, an) : NULL;
        if (!hit) break;
        sb_append(o, s + i, (size_t)(hit - (s + i)));
        sb_append(o, b, bn);
        i = (size_t)(hit - s) + an;
    }
    sb_append(o, s + i, n - i);
}

/* "<0xNN>" (HF ByteFallback accepts either case of hex digits). */
static int byte_token(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

int tok_spm_raw(const tok *t, const char *s, size_t n, strbuf *out)
{
    int b = t->byte_fallback || t->spm_scores ? byte_token(s, n) : -1;
    if (b >= 0) {
        char c = (char)b;
        sb_append(out, &c, 1);
        return out->oom ? -1 : 0;
    }
    strbuf cur = STRBUF_INIT;
    sb_append(&cur, s, n);
    for (int k = 0; k < t->n_dec; k++) {
        const tok_dec *d = &t->dec[k];
        if (d->kind != DEC_REPLACE && d->kind != DEC_METASPACE) continue;
        strbuf nx = STRBUF_INIT;
        if (d->kind == DEC_REPLACE) replace_all(&nx, cur.buf ? cur.buf : "", cur.len, d->a, d->an, d->b, d->bn);
        else replace_all(&nx, cur.buf ? cur.buf : "", cur.len, d->a, d->an, " ", 1);
        sb_free(&cur);
        cur = nx;
    }
    sb_append(out, cur.buf ? cur.buf : "", cur.len);
    sb_free(&cur);
    return out->oom || cur.oom ? -1 : 0;
}

/* A token list: strings in one buffer, each (off, len). */
typedef struct dlist {
    strbuf buf;
    size_t *off, *len;
    size_t n;
} dlist;

static int dec_step(const tok_dec *d, const dlist *in, dlist *o)
{
    size_t cap = in->n ? in->n : 1;
    o->off = malloc(cap * sizeof *o->off);
    o->len = malloc(cap * sizeof *o->len);
    if (!o->off || !o->len) return -1;
    o->n = 0;
#define ITEM(i) (sb_str(&in->buf) + in->off[i])
#define BEGIN() (o->off[o->n] = o->buf.len)
#define END() (o->len[o->n] = o->buf.len - o->off[o->n], o->n++)
    if (d->kind == DEC_FUSE) {
        BEGIN();
        for (size_t i = 0; i < in->n; i++) sb_append(&o->buf, ITEM(i), in->len[i]);
        END();
    } else if (d->kind == DEC_BYTEFALLBACK) {
        size_t i = 0;
        while (i < in->n) {
            if (byte_token(ITEM(i), in->len[i]) < 0) {
                BEGIN();
                sb_append(&o->buf, ITEM(i), in->len[i]);
                END();
                i++;
                continue;
            }
            size_t j = i;
            char bytes[256];
            strbuf run = STRBUF_INIT;
            for (; j < in->n && byte_token(ITEM(j), in->len[j]) >= 0; j++) {
                bytes[0] = (char)byte_token(ITEM(j), in->len[j]);
                sb_append(&run, bytes, 1);
            }
            /* Valid UTF-8 as a whole: one string; else one U+FFFD per byte. */
            int ok = 1;
            for (size_t k = 0; k < run.len && ok;) {
                uint32_t cp;
                size_t l = tok_utf8_dec((const unsigned char *)run.buf + k, run.len - k, &cp);
                if (!l) ok = 0;
                k += l;
            }
            if (ok) {
                BEGIN();
                sb_append(&o->buf, run.buf, run.len);
                END();
            } else {
                /* cap grows: one entry per byte */
                size_t need = o->n + (j - i) + (in->n - j);
                if (need > cap) {
                    size_t *no = realloc(o->off, need * sizeof *no);
                    if (no) o->off = no;
                    size_t *nl = realloc(o->len, need * sizeof *nl);
                    if (nl) o->len = nl;
                    if (!no || !nl) {
                        sb_free(&run);
                        return -1;
                    }
                    cap = need;
                }
                for (size_t k = i; k < j; k++) {
                    BEGIN();
                    sb_puts(&o->buf, "\xEF\xBF\xBD");
                    END();
                }
            }
            sb_free(&run);
            i = j;
        }
    } else {
        for (size_t i = 0; i < in->n; i++) {
            const char *s = ITEM(i);
            size_t n = in->len[i];
            BEGIN();
            if (d->kind == DEC_REPLACE) {
                replace_all(&o->buf, s, n, d->a, d->an, d->b, d->bn);
            } else if (d->kind == DEC_METASPACE) {
                /* HF: the replacement char becomes a space, except in the
                 * first token, where it is dropped unless prepend_scheme is
                 * never. */
                if (i == 0 && d->prepend) replace_all(&o->buf, s, n, d->a, d->an, "", 0);
                else replace_all(&o->buf, s, n, d->a, d->an, " ", 1);
            } else if (d->kind == DEC_STRIP) {
                size_t a = 0, b = n;
                for (int k = 0; k < d->start && a < n && n - a >= d->an && !memcmp(s + a, d->a, d->an); k++) a += d->an;
                for (int k = 0; k < d->stop && b > a && b - a >= d->an && !memcmp(s + b - d->an, d->a, d->an); k++)
                    b -= d->an;
                sb_append(&o->buf, s + a, b - a);
            } else {
                sb_append(&o->buf, s, n);
            }
            END();
        }
    }
#undef ITEM
#undef BEGIN
#undef END
    return o->buf.oom ? -1 : 0;
}

static void dlist_free(dlist *l)
{
    sb_free(&l->buf);
    free(l->off);
    free(l->len);
    memset(l, 0, sizeof *l);
}

int tok_spm_decode(const tok *t, const int32_t *ids, size_t n, int skip_special, strbuf *out)
{
    dlist cur = {STRBUF_INIT, malloc((n ? n : 1) * sizeof(size_t)), malloc((n ? n : 1) * sizeof(size_t)), 0};
    int rc = -1;
    if (!cur.off || !cur.len) goto done;
    for (size_t i = 0; i < n; i++) {
        if (skip_special && tok_is_special(t, ids[i])) continue;
        size_t l;
        const char *s = tok_str_of(t, ids[i], &l);
        if (!s) continue;
        cur.off[cur.n] = cur.buf.len;
        sb_append(&cur.buf, s, l);
        cur.len[cur.n++] = l;
    }
    if (cur.buf.oom) goto done;
    for (int k = 0; k < t->n_dec; k++) {
        dlist nx = {STRBUF_INIT, NULL, NULL, 0};
        if (dec_step(&t->dec[k], &cur, &nx)) {
            dlist_free(&nx);
            goto done;
        }
        dlist_free(&cur);
        cur = nx;
    }
    /* HF joins the decoded strings; without a decoder, with spaces. */
    for (size_t i = 0; i < cur.n; i++) {
        if (i && !t->n_dec) sb_putc(out, ' ');
        sb_append(out, sb_str(&cur.buf) + cur.off[i], cur.len[i]);
    }
    rc = out->oom ? -1 : 0;
done:
    dlist_free(&cur);
    return rc;
}
