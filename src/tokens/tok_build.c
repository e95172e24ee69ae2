/* tok_build — a tokenizer from plain arrays (GGUF tokenizer.ggml.* keys),
 * and the way back: naming a loaded pipeline with llama.cpp's
 * tokenizer.ggml.pre vocabulary so a GGUF writer can record it.
 *
 * A GGUF file stores no pipeline, only its name, so each name maps to the
 * HF pipeline it stands for (docs/reference/formats.md §2.2):
 *   gpt2       ByteLevel(use_regex)                     (GPT-2 regex)
 *   llama-bpe  Split(LLAMA3 regex) + ByteLevel, ignore_merges
 *   qwen2      NFC + Split(QWEN2 regex) + ByteLevel
 *   smollm     Digits(individual) + ByteLevel(use_regex)
 * Qwen's NFC is kept (llama.cpp skips it) so that ids stay HF's. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokens/tok_impl.h"

#define TERR "TokenizerError"

static int pipeline_for(tok *t, const char *pre, dlm_err *e)
{
    /* llama.cpp spells GPT-2's pipeline "gpt-2" (the name its converter writes) */
    if (!strcmp(pre, "gpt2") || !strcmp(pre, "gpt-2")) return tok_pt_bytelevel(t, 0, 1, e);
    if (!strcmp(pre, "llama-bpe") || !strcmp(pre, "llama3")) {
        t->ignore_merges = 1;
        if (tok_pt_split(t, TOK_RE_LLAMA3, strlen(TOK_RE_LLAMA3), 1, SPLIT_ISOLATED, 0, e)) return -1;
        return tok_pt_bytelevel(t, 0, 0, e);
    }
    if (!strcmp(pre, "qwen2")) {
        t->norm[t->n_norm++] = UTF8PROC_STABLE | UTF8PROC_COMPOSE;
        if (tok_pt_split(t, TOK_RE_QWEN2, strlen(TOK_RE_QWEN2), 1, SPLIT_ISOLATED, 0, e)) return -1;
        return tok_pt_bytelevel(t, 0, 0, e);
    }
    if (!strcmp(pre, "smollm")) {
        if (tok_pt_digits(t, 1, e)) return -1;
        return tok_pt_bytelevel(t, 0, 1, e);
    }
    return err_set(e, TERR, "pre-tokenizer '%s' is not supported (dlm knows gpt2, llama-bpe, qwen2, smollm)", pre);
}

/* llama.cpp's SPM text handling as normalizer steps: a space before every
 * piece between special tokens (its is_prev_special rule), spaces as ▁;
 * decoding as HF's Llama 2 decoder (▁ -> space, bytes, one leading space
 * stripped when one was added). */
static int pipeline_spm(tok *t, const tok_spec *s, dlm_err *e)
{
    static const char U2581[] = "\xE2\x96\x81";
    t->spm = t->spm_scores = 1;
    t->add_space_prefix = !!s->add_space_prefix;
    if (s->add_space_prefix && tok_norm_str(t, TOK_NORM_PREPEND, U2581, 3, NULL, 0, e)) return -1;
    if (tok_norm_str(t, TOK_NORM_REPLACE, " ", 1, U2581, 3, e)) return -1;
    if (tok_dec_add(t, DEC_REPLACE, U2581, 3, " ", 1, e) || tok_dec_add(t, DEC_BYTEFALLBACK, NULL, 0, NULL, 0, e) ||
        tok_dec_add(t, DEC_FUSE, NULL, 0, NULL, 0, e))
        return -1;
    if (s->add_space_prefix) {
        if (tok_dec_add(t, DEC_STRIP, " ", 1, NULL, 0, e)) return -1;
        t->dec[t->n_dec - 1].start = 1;
    }
    t->scores = malloc(s->n_tokens * sizeof *t->scores);
    if (!t->scores || tok_strtab_init(&t->all, s->n_tokens)) return err_set(e, "OOMError", "out of memory");
    for (size_t i = 0; i < s->n_tokens; i++) {
        float v = s->scores[i];
        t->scores[i] = v == v ? v : -1e30f; /* a NaN score never wins */
        size_t n = s->token_lens ? s->token_lens[i] : strlen(s->tokens[i]);
        if (n > TOK_MAX_TOKEN_BYTES) return err_set(e, TERR, "token %zu is too long", i);
        if (n && tok_strtab_set(&t->all, (int32_t)i, s->tokens[i], n)) return err_set(e, "OOMError", "out of memory");
    }
    return 0;
}

static int build(tok *t, const tok_spec *s, dlm_err *e)
{
    if (!s->tokens || !s->n_tokens || s->n_tokens > TOK_MAX_VOCAB)
        return err_set(e, TERR, "tokenizer has no tokens or too many (%zu)", s->n_tokens);
    if (s->n_merges > TOK_MAX_MERGES || (s->n_merges && !s->merges))
        return err_set(e, TERR, "tokenizer has too many merges (%zu)", s->n_merges);
    int llama = s->model && !strcmp(s->model, "llama");
    if (s->model && !llama && strcmp(s->model, "gpt2"))
        return err_set(e, TERR, "tokenizer model '%.32s' is not supported (dlm reads 'gpt2' byte-level BPE and 'llama' SentencePiece)",
                       s->model);
    if (llama && !s->scores) return err_set(e, TERR, "a 'llama' (SentencePiece) vocabulary needs token scores");
    for (size_t i = 0; i < s->n_tokens; i++)
        if (!s->tokens[i]) return err_set(e, TERR, "token %zu has no text", i);
    if (!s->pre && !llama) return err_set(e, TERR, "tokenizer has no pre-tokenizer name");
    snprintf(t->pre_name, sizeof t->pre_name, "%s", llama ? "llama-spm" : s->pre);
    t->from_spec = 1;
    t->n_ids = s->n_tokens;
    t->in_vocab = calloc(t->n_ids, 1);
    t->type = calloc(t->n_ids, 1);
    t->added_of = malloc(t->n_ids * sizeof *t->added_of);
    if (!t->in_vocab || !t->type || !t->added_of || tok_strtab_init(&t->str, t->n_ids))
        return err_set(e, "OOMError", "out of memory for %zu tokens", t->n_ids);
    if (llama ? pipeline_spm(t, s, e) : pipeline_for(t, s->pre, e)) return -1;

    for (size_t i = 0; i < t->n_ids; i++) {
        t->added_of[i] = -1;
        const char *str = s->tokens[i];
        if (!str) return err_set(e, TERR, "token %zu has no text", i);
        size_t n = s->token_lens ? s->token_lens[i] : strlen(str);
        int ty = s->token_types ? s->token_types[i] : TOK_TYPE_NORMAL;
        if (ty < TOK_TYPE_NORMAL || ty > TOK_TYPE_BYTE) return err_set(e, TERR, "token %zu has unknown type %d", i, ty);
        t->type[i] = (uint8_t)ty;
        if (ty == TOK_TYPE_UNUSED) continue;
        if (n == 0 || n > TOK_MAX_TOKEN_BYTES) return err_set(e, TERR, "token %zu is empty or too long", i);
        if (ty == TOK_TYPE_CONTROL || ty == TOK_TYPE_USER_DEFINED) {
            /* Stored as their text, matched in the raw text before BPE. */
            if (tok_add_added(t, (int32_t)i, str, n, ty == TOK_TYPE_CONTROL, 0, 0, 0, 0, e)) return -1;
            continue;
        }
        if (tok_strtab_set(&t->str, (int32_t)i, str, n)) return err_set(e, "OOMError", "out of memory");
        t->in_vocab[i] = 1;
    }

    tok_pair_ref *refs = malloc((s->n_merges ? s->n_merges : 1) * sizeof *refs);
    if (!refs) return err_set(e, "OOMError", "out of memory for merges");
    for (size_t i = 0; i < s->n_merges; i++) {
        const char *m = s->merges[i];
        /* llama.cpp splits at the first space at index >= 1. */
        const char *sp = m && m[0] ? strchr(m + 1, ' ') : NULL;
        if (!sp) {
            free(refs);
            return err_set(e, TERR, "merge %zu is not \"a b\"", i);
        }
        refs[i].a = m;
        refs[i].an = (size_t)(sp - m);
        refs[i].b = sp + 1;
        refs[i].bn = strlen(sp + 1);
    }
    int rc = tok_finish(t, refs, s->n_merges, "tokenizer", e);
    free(refs);
    if (rc) return -1;

    int32_t *ids[] = {&t->bos, &t->eos, &t->pad, &t->unk};
    int32_t vals[] = {s->bos_id, s->eos_id, s->pad_id, s->unk_id};
    for (int i = 0; i < 4; i++) *ids[i] = vals[i] >= 0 && (size_t)vals[i] < t->n_ids ? vals[i] : -1;
    t->add_bos = !!s->add_bos;
    t->add_eos = !!s->add_eos;
    if (t->add_bos && t->bos >= 0) t->post_prefix[t->n_post_prefix++] = t->bos;
    if (t->add_eos && t->eos >= 0) t->post_suffix[t->n_post_suffix++] = t->eos;
    if (s->chat_template && !(t->chat_template = strdup(s->chat_template)))
        return err_set(e, "OOMError", "out of memory");
    return 0;
}

int tok_build(const tok_spec *spec, tok **out, dlm_err *e)
{
    *out = NULL;
    tok *t = tok_alloc();
    if (!t) return err_set(e, "OOMError", "out of memory");
    if (build(t, spec, e)) {
        tok_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

/* ---- naming a loaded pipeline ---------------------------------------------------------- */

static int is_split(const tok_pt *p, const char *re)
{
    return p->kind == PT_SPLIT && p->is_regex && p->behavior == SPLIT_ISOLATED && !p->invert &&
           p->pattern_len == strlen(re) && !memcmp(p->pattern, re, p->pattern_len);
}

static int is_bytelevel(const tok_pt *p, int use_regex)
{
    return p->kind == PT_BYTELEVEL && !p->add_prefix_space && p->use_regex == use_regex;
}

int tok_pre_name(const tok *t, const char **name, dlm_err *e)
{
    *name = NULL;
    if (t->spm) {
        err_set(e, TERR, "a SentencePiece-style vocabulary has no byte-level pre-tokenizer name");
        return err_hint(e, "it is exported as llama.cpp's `llama` vocabulary (tokenizer.ggml.pre \"default\"); see docs/tokenizer.md");
    }
    if (t->pre_name[0]) {
        *name = t->pre_name;
        return 0;
    }
    const tok_pt *p = t->pt;
    int nfc = t->n_norm == 1 && t->norm[0] == (UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (t->n_pt == 2 && is_split(&p[0], TOK_RE_LLAMA3) && is_bytelevel(&p[1], 0) && t->ignore_merges && !t->n_norm)
        *name = "llama-bpe";
    else if (t->n_pt == 2 && is_split(&p[0], TOK_RE_QWEN2) && is_bytelevel(&p[1], 0) && !t->ignore_merges && nfc)
        *name = "qwen2";
    else if (t->n_pt == 2 && p[0].kind == PT_DIGITS && p[0].individual_digits && is_bytelevel(&p[1], 1) &&
             !t->ignore_merges && !t->n_norm)
        *name = "smollm";
    else if (t->n_pt == 1 && is_bytelevel(&p[0], 1) && !t->ignore_merges && !t->n_norm)
        *name = "gpt2";
    if (*name) return 0;
    err_set(e, TERR, "the tokenizer's pre-tokenizer matches none that llama.cpp knows by name "
                     "(smollm, qwen2, llama-bpe, gpt2)");
    return err_hint(e, "exporting to GGUF needs one of these pipelines; see docs/tokenizer.md");
}
