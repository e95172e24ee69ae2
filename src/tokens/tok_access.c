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
    int rc = raw.oom ? -1 : tok_utf8_lossy(out, raw.buf ? raw.buf : "", raw.len);
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
