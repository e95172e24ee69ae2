/* tok_access — ids back to text, and the read-only accessors (special ids,
 * token strings and types, merges) that the GGUF writer and the CLI use. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokens/tok_impl.h"

const char *tok_token_bytes(const tok *t, int32_t id, size_t *len)
{
    if (id < 0 || (size_t)id >= t->n_ids) return NULL;
    return tok_strtab_get(&t->raw, id, len);
}

int tok_decode(const tok *t, const int32_t *ids, size_t n, int skip_special, strbuf *out)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (size_t)ids[i] >= t->n_ids) return -1;
    if (t->spm || t->n_dec) return tok_spm_decode(t, ids, n, skip_special, out);
    /* Concatenate raw bytes first: a char may span tokens. */
    strbuf raw = STRBUF_INIT;
    for (size_t i = 0; i < n; i++) {
        if (skip_special && tok_is_special(t, ids[i])) continue;
        size_t l;
        const char *b = tok_strtab_get(&t->raw, ids[i], &l);
        if (b && sb_append(&raw, b, l)) break;
    }
    int rc = raw.oom ? -1 : str_utf8_lossy(out, raw.buf ? raw.buf : "", raw.len);
    sb_free(&raw);
    return rc;
}

int32_t tok_find(const tok *t, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = t->n_added; i-- > 0;) {
        const tok_added *a = &t->added[i];
        if (a->len == n && !memcmp(t->added_text + a->off, s, n)) return a->id;
    }
    return tok_idmap_get(&t->vocab_str, &t->str, s, n);
}

int32_t tok_bos(const tok *t) { return t->bos; }
int32_t tok_eos(const tok *t) { return t->eos; }
int32_t tok_pad(const tok *t) { return t->pad; }
int32_t tok_unk(const tok *t) { return t->unk; }
int tok_add_bos(const tok *t) { return t->add_bos; }
int tok_add_eos(const tok *t) { return t->add_eos; }
size_t tok_vocab_size(const tok *t) { return t->n_ids; }
size_t tok_n_merges(const tok *t) { return t->n_merges; }

static uint64_t strtab_bytes(const tok_strtab *s, size_t n_ids)
{
    return (uint64_t)s->cap + (s->off ? (uint64_t)n_ids * 8 : 0);
}

uint64_t tok_mem_bytes(const tok *t)
{
    uint64_t b = sizeof *t;
    b += strtab_bytes(&t->str, t->n_ids) + strtab_bytes(&t->vraw, t->n_ids) + strtab_bytes(&t->raw, t->n_ids) +
         strtab_bytes(&t->all, t->n_ids);
    b += (uint64_t)t->n_ids * (1 + 1 + 4);                        /* in_vocab, type, added_of */
    if (t->scores) b += (uint64_t)t->n_ids * sizeof *t->scores;
    const tok_idmap *maps[] = {&t->vocab_str, &t->vocab_raw, &t->all_map};
    for (size_t i = 0; i < sizeof maps / sizeof maps[0]; i++)
        if (maps[i]->slot) b += ((uint64_t)maps[i]->mask + 1) * sizeof *maps[i]->slot;
    if (t->mtab) b += ((uint64_t)t->mmask + 1) * sizeof *t->mtab;
    b += (uint64_t)t->n_merges * sizeof *t->merges;
    b += (uint64_t)t->added_cap * sizeof *t->added + t->added_text_cap;
    b += (uint64_t)(t->trie_raw.cap + t->trie_norm.cap) * sizeof(tok_trie_node);
    if (t->chat_template) b += strlen(t->chat_template) + 1;
    if (t->cache)
        b += (uint64_t)TOK_CACHE_SLOTS * sizeof *t->cache + (uint64_t)TOK_CACHE_MAX_ENTRIES * TOK_CACHE_MAX_KEY +
             TOK_CACHE_BYTES;
    return b;
}
const char *tok_chat_template(const tok *t) { return t->chat_template; }

int tok_is_special(const tok *t, int32_t id)
{
    if (id < 0 || (size_t)id >= t->n_ids || t->added_of[id] < 0) return 0;
    return t->added[t->added_of[id]].special;
}

const char *tok_token_str(const tok *t, int32_t id, size_t *len)
{
    if (id < 0 || (size_t)id >= t->n_ids) return NULL;
    const char *s = tok_str_of(t, id, len);
    if (s) return s;
    /* A hole in the id space: llama.cpp's converter writes "[PAD<id>]".
     * Per-thread buffer: accessors stay read-only on the tok. */
    static _Thread_local char pad[32];
    int k = snprintf(pad, sizeof pad, "[PAD%d]", (int)id);
    if (len) *len = (size_t)k;
    return pad;
}

int tok_token_type(const tok *t, int32_t id)
{
    if (id < 0 || (size_t)id >= t->n_ids) return TOK_TYPE_UNDEFINED;
    return t->type[id];
}

int tok_merge_str(const tok *t, size_t i, strbuf *out)
{
    sb_reset(out);
    if (i >= t->n_merges) return -1;
    for (int k = 0; k < 2; k++) {
        size_t n;
        const char *s = tok_strtab_get(&t->str, t->merges[i][k], &n);
        if (k) sb_putc(out, ' ');
        for (size_t j = 0; j < n; j++) {
            if (s[j] == ' ') sb_append(out, "\xC4\xA0", 2); /* U+0120 'Ġ' */
            else sb_putc(out, s[j]);
        }
    }
    return out->oom ? -1 : 0;
}

/* ---- SentencePiece-style vocabularies as llama.cpp's `llama` GGUF vocabulary ---------------- */

int tok_is_spm(const tok *t) { return t->spm; }

int tok_add_space_prefix(const tok *t)
{
    if (t->spm_scores) return t->add_space_prefix;
    /* tokenizer.json: a Prepend("▁") normalizer (Llama 2, Mistral v0.1) or a
     * Metaspace pre-tokenizer that prepends (Mistral v0.3, Phi-3) */
    for (int i = 0; i < t->n_norm; i++)
        if (t->norm[i] == TOK_NORM_PREPEND) return 1;
    for (int i = 0; i < t->n_pt; i++)
        if (t->pt[i].kind == PT_METASPACE && t->pt[i].prepend_scheme != MS_NEVER) return 1;
    return 0;
}

/* llama.cpp's SPM tokenizer merges the adjacent pair whose concatenation is
 * the token with the highest score (llm_tokenizer_spm in its
 * src/llama-vocab.cpp); HF's BPE merges the pair of lowest rank. Transformers'
 * LlamaConverter wrote the merges of a SentencePiece model in the order of
 * the merged piece's score, so -rank of the first merge that produces a
 * token gives the same order back (llama.cpp's own converter writes -1000
 * for every token of a tokenizer.json, gguf-py vocab.py LlamaHfVocab: with
 * all scores equal its tokenizer merges leftmost-first, not in HF's
 * order; tests/ref/r0410 checks these scores on a real vocabulary). Pieces no
 * merge produces: 0 for one char, byte pieces and added tokens (never
 * merged), below every merge for longer ones. */
int tok_spm_scores(const tok *t, float *out, size_t n)
{
    if (t->spm_scores) {
        for (size_t i = 0; i < n; i++) out[i] = i < t->n_ids && t->scores ? t->scores[i] : 0.0f;
        return 0;
    }
    uint32_t *best = malloc((t->n_ids ? t->n_ids : 1) * sizeof *best);
    if (!best) return -1;
    for (size_t i = 0; i < t->n_ids; i++) best[i] = UINT32_MAX;
    for (size_t r = 0; r < t->n_merges; r++) {
        uint64_t key = (((uint64_t)(uint32_t)t->merges[r][0] << 32) | (uint32_t)t->merges[r][1]) + 1;
        for (uint32_t h = (uint32_t)(key * 0x9E3779B97F4A7C15ull >> 32) & t->mmask;; h = (h + 1) & t->mmask) {
            const tok_merge_ent *en = &t->mtab[h];
            if (en->key == 0) break;
            if (en->key != key) continue;
            /* a repeated pair counts at its later rank, as HF keeps it */
            if (en->rank == r && en->id >= 0 && (size_t)en->id < t->n_ids && r < best[en->id]) best[en->id] = (uint32_t)r;
            break;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (i >= t->n_ids) { out[i] = 0.0f; continue; }
        if (best[i] != UINT32_MAX) { out[i] = -(float)best[i]; continue; }
        size_t len = 0;
        const char *s = tok_strtab_get(&t->str, (int32_t)i, &len);
        uint32_t cp;
        int one_char = s && len && tok_utf8_dec((const unsigned char *)s, len, &cp) == len;
        out[i] = !s || one_char || t->type[i] != TOK_TYPE_NORMAL ? 0.0f : -(float)t->n_merges - 1.0f;
    }
    free(best);
    return 0;
}
