/* tok — byte-level BPE tokenizer, id-for-id the same as Hugging Face
 * `tokenizers` on the pipelines the supported bases use (GPT-2, Llama-3,
 * Qwen2/Qwen3, SmolLM2).
 *
 * A tokenizer comes from an HF `tokenizer.json` (+ `tokenizer_config.json`)
 * or from plain arrays (`tok_spec`, what a GGUF file's tokenizer.ggml.* keys
 * hold). Encoding follows HF's order of work:
 *
 *   1. added tokens are cut out of the raw text first (longest match at the
 *      leftmost position; special ones only with TOK_PARSE_SPECIAL),
 *   2. the pieces between them are normalized (NFC for Qwen),
 *   3. pre-tokenized (Split regex / Digits / ByteLevel regex, PCRE2 + JIT),
 *   4. each pre-token's bytes are mapped through the GPT-2 byte table and
 *      merged by BPE rank (or looked up whole with ignore_merges),
 *   5. with TOK_ADD_SPECIAL the post-processor's tokens are added (BOS...).
 *
 * SentencePiece-style vocabularies (Llama 2, Mistral/Mixtral, Phi-3, Gemma)
 * load too: a tokenizer.json without a ByteLevel pre-tokenizer is HF's
 * char-level BPE (Prepend/Replace normalizers or Metaspace for the "▁",
 * byte_fallback to <0xNN> tokens, the Replace/ByteFallback/Fuse/Strip or
 * Metaspace decoders), and a GGUF `llama` vocabulary is merged by token
 * score the way llama.cpp's SPM tokenizer does (tok_spm.c).
 *
 * What it is not: a Unigram or WordPiece tokenizer; such files are refused
 * with a clear error.
 *
 * Thread-safety: a tok carries its encode scratch buffers and BPE cache, so
 * one tok is used by one thread at a time (tok_clone-free by design: load one
 * per thread if you need parallel encoding). Read-only accessors are safe
 * from any thread while nobody encodes. */
#ifndef DLM_TOK_H
#define DLM_TOK_H

#include <stddef.h>
#include <stdint.h>
#include "util/err.h"
#include "util/str.h"

typedef struct tok tok;

/* Token types, GGUF numbering (llama.cpp llama_token_type). */
enum {
    TOK_TYPE_UNDEFINED = 0,
    TOK_TYPE_NORMAL = 1,
    TOK_TYPE_UNKNOWN = 2,
    TOK_TYPE_CONTROL = 3,       /* special added token: matched only with TOK_PARSE_SPECIAL */
    TOK_TYPE_USER_DEFINED = 4,  /* non-special added token: always matched in text */
    TOK_TYPE_UNUSED = 5,        /* an id with no token ("[PAD<id>]") */
    TOK_TYPE_BYTE = 6,
};

/* tok_encode flags. */
enum {
    TOK_PARSE_SPECIAL = 1,  /* special-token strings in the text become special tokens */
    TOK_ADD_SPECIAL = 2,    /* add BOS/EOS as the post-processor does */
};

/* Limits on what a tokenizer file may declare (bad files are refused, not
 * trusted). */
#define TOK_MAX_FILE_BYTES (256u << 20)
#define TOK_MAX_VOCAB (1 << 22)          /* ids must be < this */
#define TOK_MAX_MERGES (1 << 23)
#define TOK_MAX_TOKEN_BYTES 4096

/* ---- loading ---------------------------------------------------------------- */

/* Load an HF tokenizer.json. config_path may be NULL: then
 * "tokenizer_config.json" beside tokenizer.json is read when present
 * (special tokens, add_bos/eos, chat_template). */
int tok_load(const char *tokenizer_json_path, const char *tokenizer_config_path_or_NULL,
             tok **out, dlm_err *e);

/* The same from memory (config may be NULL/0). `name` labels errors. */
int tok_load_mem(const char *json, size_t json_len, const char *config, size_t config_len,
                 const char *name, tok **out, dlm_err *e);

/* Plain-array description, the shape of GGUF tokenizer.ggml.* metadata. */
typedef struct tok_spec {
    size_t n_tokens;
    const char *const *tokens;   /* ByteLevel form ("Ġthe"), index = id */
    const size_t *token_lens;    /* byte lengths; NULL = strlen each */
    const int32_t *token_types;  /* TOK_TYPE_*; NULL = all NORMAL */
    size_t n_merges;
    const char *const *merges;   /* "a b" in rank order (split at the first space at index >= 1) */
    const char *pre;             /* gpt2 | llama-bpe | llama3 | qwen2 | smollm ("llama": ignored) */
    int32_t bos_id, eos_id, pad_id, unk_id;   /* -1 = none */
    int add_bos, add_eos;
    const char *chat_template;   /* NULL = none */
    const char *model;           /* tokenizer.ggml.model: NULL/"gpt2" byte-level BPE, "llama" SentencePiece */
    const float *scores;         /* "llama": per-token scores (merge order), required */
    int add_space_prefix;        /* "llama": a space before each text piece (llama.cpp's default 1) */
} tok_spec;

/* Build from a spec (the GGUF loader fills it from tokenizer.ggml.*).
 * CONTROL tokens become special added tokens, USER_DEFINED ones non-special
 * added tokens, UNUSED ids stay out of the vocabulary. */
int tok_build(const tok_spec *spec, tok **out, dlm_err *e);

void tok_free(tok *t);

/* ---- encoding / decoding ----------------------------------------------------- */

/* Encode len bytes of UTF-8 text. *ids is malloc'd (caller frees), *n its
 * count. Invalid UTF-8 is an error (HF cannot take it either). */
int tok_encode(tok *t, const char *text, size_t len, int flags, int32_t **ids, size_t *n,
               dlm_err *e);

/* Growable id buffer for callers that encode many texts. */
typedef struct tok_ids {
    int32_t *v;
    size_t n, cap;
} tok_ids;

/* Append one id (grows the buffer); -1 when out of memory. */
int tok_ids_push(tok_ids *out, int32_t id);
/* Append the encoding of text to out (out->n grows). */
int tok_encode_append(tok *t, const char *text, size_t len, int flags, tok_ids *out, dlm_err *e);
void tok_ids_free(tok_ids *ids);

/* Decode ids into out (appended), as HF decode(ids, skip_special_tokens):
 * bytes of every token concatenated, invalid UTF-8 replaced by U+FFFD.
 * Returns -1 for an id out of range (out untouched then). */
int tok_decode(const tok *t, const int32_t *ids, size_t n, int skip_special, strbuf *out);

/* Raw bytes of one token (what it adds to a decode), or NULL for an id out
 * of range or without a token. Not NUL-terminated; may be partial UTF-8. */
const char *tok_token_bytes(const tok *t, int32_t id, size_t *len);

/* ---- lookups and the accessors a GGUF writer needs -------------------------- */

int32_t tok_find(const tok *t, const char *token_text);   /* ByteLevel form or added content; -1 */
int32_t tok_bos(const tok *t);
int32_t tok_eos(const tok *t);
int32_t tok_pad(const tok *t);
int32_t tok_unk(const tok *t);
int tok_is_special(const tok *t, int32_t id);     /* a special added token (skipped by decode) */
int tok_add_bos(const tok *t);
int tok_add_eos(const tok *t);

/* max id + 1 over vocabulary and added tokens. */
size_t tok_vocab_size(const tok *t);
/* Token string (ByteLevel form; added tokens as their content; holes as
 * "[PAD<id>]"), NUL-terminated, length in *len when len != NULL. */
const char *tok_token_str(const tok *t, int32_t id, size_t *len);
/* TOK_TYPE_* by llama.cpp's converter rules (docs/reference/formats.md §4.4). */
int tok_token_type(const tok *t, int32_t id);

size_t tok_n_merges(const tok *t);
/* Bytes the tokenizer's tables hold (string tables, maps, merges, added
 * tokens, tries, the BPE cache once an encode made it): counted from their
 * sizes, so the memory plan's "tokenizer" is the same number in every
 * process that loads the same file (a heap delta depends on what the
 * process freed before). */
uint64_t tok_mem_bytes(const tok *t);
/* Merge i as "a b" (a space inside a part written as 'Ġ', as llama.cpp's
 * converter does), into out (replaced). */
int tok_merge_str(const tok *t, size_t i, strbuf *out);

/* SentencePiece-style vocabulary (tok_spm.c): exported as llama.cpp's
 * `llama` vocabulary (tokenizer.ggml.scores, no merges). */
int tok_is_spm(const tok *t);
/* llama.cpp's add_space_prefix: a "▁" goes before the text. */
int tok_add_space_prefix(const tok *t);
/* The score llama.cpp's SPM tokenizer merges by, for ids 0..n-1 (0 past the
 * vocabulary): the GGUF's own, or derived from the merge ranks; -1 out of memory. */
int tok_spm_scores(const tok *t, float *out, size_t n);

/* llama.cpp tokenizer.ggml.pre name of this pipeline ("smollm", "qwen2",
 * "llama-bpe", "gpt2"); -1 with a clear error when it is none of them. */
int tok_pre_name(const tok *t, const char **name, dlm_err *e);

/* Jinja chat template from tokenizer_config (or the spec), or NULL. */
const char *tok_chat_template(const tok *t);

#endif
