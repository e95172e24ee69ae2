/* tok_impl — the private state of a tokenizer, shared by the files of
 * src/tokens/ (load, build, encode, pre-tokenize, decode). Not for use outside
 * the module. */
#ifndef DLM_TOK_IMPL_H
#define DLM_TOK_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdint.h>
#include <stddef.h>

#include "tokens/tok.h"

/* ---- id-keyed string maps ------------------------------------------------------
 * Open addressing over ids: a slot holds id+1 (0 = empty); the key bytes of
 * an id are read back from the table the map was built on. */
typedef struct tok_strtab {
    char *data;          /* all strings, each NUL-terminated */
    size_t len, cap;
    uint32_t *off;       /* per id; UINT32_MAX = none */
    uint32_t *n;         /* per id byte length */
} tok_strtab;

typedef struct tok_idmap {
    uint32_t *slot;
    uint32_t mask;       /* capacity - 1 (power of two) */
} tok_idmap;

uint64_t tok_hash(const void *p, size_t n);
int tok_idmap_init(tok_idmap *m, size_t n_keys);
void tok_idmap_free(tok_idmap *m);
/* Insert id under its key in tab; an existing equal key is replaced when
 * replace, else kept. Returns 1 when the key was already there. */
int tok_idmap_put(tok_idmap *m, const tok_strtab *tab, int32_t id, int replace);
int32_t tok_idmap_get(const tok_idmap *m, const tok_strtab *tab, const char *s, size_t n);

/* ---- merges: (left id, right id) -> (rank, merged id) --------------------------- */
typedef struct tok_merge_ent {
    uint64_t key;        /* (left << 32 | right) + 1; 0 = empty */
    uint32_t rank;
    int32_t id;
} tok_merge_ent;

/* ---- added tokens ---------------------------------------------------------------- */
typedef struct tok_added {
    int32_t id;
    uint32_t off, len;   /* content in tok->added_text */
    uint8_t special, single_word, lstrip, rstrip, normalized;
} tok_added;

/* A byte trie over added-token contents, longest match at a position. */
typedef struct tok_trie_node {
    int32_t child;       /* first child, -1 none */
    int32_t sibling;     /* next sibling, -1 none */
    int32_t added;       /* index into tok->added ending here, -1 none */
    uint8_t byte;
} tok_trie_node;

typedef struct tok_trie {
    tok_trie_node *nodes;
    size_t n, cap;
    uint8_t first[256];  /* first[b]: some token starts with byte b */
} tok_trie;

/* ---- normalizer and pre-tokenizer steps ------------------------------------------ */
enum { TOK_NORM_MAX = 4 };
/* norm[] holds utf8proc option sets (> 0) or one of these string steps,
 * whose strings are norm_a/norm_b. */
enum { TOK_NORM_PREPEND = -1, TOK_NORM_REPLACE = -2 };

enum { PT_SPLIT = 1, PT_DIGITS, PT_BYTELEVEL, PT_METASPACE };
/* Metaspace prepend_scheme */
enum { MS_ALWAYS = 0, MS_FIRST, MS_NEVER };
enum { SPLIT_REMOVED = 1, SPLIT_ISOLATED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS };
enum { TOK_PT_MAX = 8 };

typedef struct tok_pt {
    int kind;
    int behavior, invert;        /* PT_SPLIT */
    char *pattern;               /* PT_SPLIT regex source or literal; NULL for others */
    size_t pattern_len;
    int is_regex;
    int individual_digits;       /* PT_DIGITS */
    int add_prefix_space, use_regex;  /* PT_BYTELEVEL */
    int prepend_scheme, ms_split;     /* PT_METASPACE (pattern = the replacement) */
    pcre2_code *re;              /* PT_SPLIT regex, or the GPT-2 regex of ByteLevel */
    pcre2_match_data *md;
    int jit;
    char *scratch;               /* ByteLevel add_prefix_space copy */
    size_t scratch_cap;
} tok_pt;

/* ---- BPE cache: pre-token bytes -> ids -------------------------------------------- */
#define TOK_CACHE_SLOTS (1u << 16)
#define TOK_CACHE_MAX_ENTRIES (1u << 15)
#define TOK_CACHE_MAX_KEY 64
#define TOK_CACHE_BYTES (4u << 20)

typedef struct tok_cache_ent {
    uint64_t h;          /* 0 = empty */
    uint32_t key_off, key_len;
    uint32_t ids_off, n_ids;
} tok_cache_ent;

/* ---- decoder steps (HF decoders other than ByteLevel) ------------------------------ */
enum { DEC_REPLACE = 1, DEC_BYTEFALLBACK, DEC_FUSE, DEC_STRIP, DEC_METASPACE };
enum { TOK_DEC_MAX = 8 };

typedef struct tok_dec {
    int kind;
    char *a, *b;                 /* REPLACE: pattern -> content; METASPACE/STRIP: a = the char */
    size_t an, bn;
    int start, stop;             /* STRIP */
    int prepend;                 /* METASPACE: prepend_scheme != never */
} tok_dec;

typedef struct tok_sym {
    int32_t id;
    int32_t prev, next;
    int32_t alive;
} tok_sym;

struct tok {
    size_t n_ids;                /* max id + 1 */
    tok_strtab str;              /* model vocab string per id (ByteLevel form) */
    tok_strtab vraw;             /* model vocab raw bytes per id (when all chars are ByteLevel) */
    tok_strtab raw;              /* decode bytes per id (HF ByteLevel decoder, per token) */
    uint8_t *in_vocab;           /* 1: the BPE model vocabulary has this id */
    uint8_t *type;               /* TOK_TYPE_* per id */
    int32_t *added_of;           /* index into added[], -1 none */
    tok_idmap vocab_str;         /* model vocab: ByteLevel string -> id (merges, tok_find) */
    tok_idmap vocab_raw;         /* model vocab: raw bytes -> id (BPE, ignore_merges) */
    int32_t byte_id[256];        /* vocab id of each byte's ByteLevel char, -1 none */

    tok_merge_ent *mtab;         /* merge map */
    uint32_t mmask;
    int32_t (*merges)[2];        /* rank order, for tok_merge_str */
    size_t n_merges;
    int ignore_merges;
    int32_t unk_model;           /* BPE unk (model.unk_token), -1 none */
    int fuse_unk;

    tok_added *added;
    size_t n_added, added_cap;
    char *added_text;
    size_t added_text_len, added_text_cap;
    tok_trie trie_raw;           /* normalized:false tokens */
    tok_trie trie_norm;          /* normalized:true tokens */

    int norm[TOK_NORM_MAX];      /* utf8proc option sets or TOK_NORM_*, applied in order */
    char *norm_a[TOK_NORM_MAX], *norm_b[TOK_NORM_MAX];
    size_t norm_an[TOK_NORM_MAX], norm_bn[TOK_NORM_MAX];
    int n_norm;
    tok_dec dec[TOK_DEC_MAX];    /* decoder chain; none = ByteLevel (raw bytes concatenated) */
    int n_dec;

    /* SentencePiece-style vocabularies (no ByteLevel pre-tokenizer): BPE
     * starts from the pre-token's chars, not its bytes; a char not in the
     * vocabulary becomes its <0xNN> byte tokens (byte_fallback) or unk. */
    int spm;
    int byte_fallback;
    int32_t byte_tok[256];       /* id of "<0xNN>", -1 none */
    /* llama.cpp's `llama` GGUF vocabulary: pairs merge by token score
     * (llm_tokenizer_spm), not by merge rank. */
    int spm_scores;
    float *scores;
    tok_strtab all;              /* every id's text (llama.cpp's token_to_id covers all types) */
    tok_idmap all_map;
    int add_space_prefix;
    tok_pt pt[TOK_PT_MAX];
    int n_pt;

    int32_t post_prefix[8], post_suffix[8];  /* TOK_ADD_SPECIAL */
    size_t n_post_prefix, n_post_suffix;

    int32_t bos, eos, pad, unk;
    int add_bos, add_eos;
    char *chat_template;
    char pre_name[32];           /* from tok_build; "" when loaded from json */
    int from_spec;

    /* scratch, reused across calls */
    pcre2_match_context *mctx;
    pcre2_jit_stack *jstack;
    tok_sym *sym;
    size_t sym_cap;
    uint64_t *heap;
    size_t heap_cap;
    char *nbuf;                  /* normalized text */
    size_t nbuf_cap;
    int piece_at0;               /* the piece being pre-tokenized starts the input (Metaspace "first") */

    tok_cache_ent *cache;
    char *cache_keys;
    int32_t *cache_ids;
    size_t cache_keys_len, cache_ids_len, cache_n;
};

/* ---- shared helpers (tok_core.c) ---------------------------------------------------- */
tok *tok_alloc(void);
int tok_strtab_init(tok_strtab *t, size_t n_ids);
int tok_strtab_set(tok_strtab *t, int32_t id, const char *s, size_t n);
const char *tok_strtab_get(const tok_strtab *t, int32_t id, size_t *n);
void tok_strtab_free(tok_strtab *t);

/* ByteLevel: byte <-> char of the GPT-2 table, and decoding a ByteLevel
 * string to raw bytes (-1 if a char is outside the table). */
uint32_t tok_byte_to_char(unsigned b);
int tok_char_to_byte(uint32_t c);   /* -1 when c is not a ByteLevel char */
int tok_bytelevel_decode(const char *s, size_t n, char *out /* n */, size_t *out_n);
/* Decode one UTF-8 char at s (n > 0 bytes); returns its length, 0 if invalid. */
size_t tok_utf8_dec(const unsigned char *s, size_t n, uint32_t *cp);

/* Called once the id tables are filled: derived maps, byte ids, merges,
 * tries, raw bytes, scratch. merges_str: n "a b"-style pairs as (a,alen,b,blen). */
typedef struct tok_pair_ref {
    const char *a, *b;
    size_t an, bn;
} tok_pair_ref;
int tok_finish(tok *t, const tok_pair_ref *merges, size_t n_merges, const char *name, dlm_err *e);

int tok_add_added(tok *t, int32_t id, const char *s, size_t n, int special, int single_word,
                  int lstrip, int rstrip, int normalized, dlm_err *e);
/* 1 when NFC cannot change this char or combine it with a neighbour that is
 * also quick-stable (see tok_core.c). */
int tok_nfc_quick_stable(uint32_t cp);
/* Apply the normalizer to s into t->nbuf (*out, *on); identity returns s. */
int tok_normalize(tok *t, const char *s, size_t n, const char **out, size_t *on, dlm_err *e);
/* Token string of id as HF id_to_token gives it (added content first). */
const char *tok_str_of(const tok *t, int32_t id, size_t *n);

/* Pre-tokenizer setup (tok_pre.c). */
extern const char TOK_RE_GPT2[], TOK_RE_LLAMA3[], TOK_RE_QWEN2[];
int tok_pt_split(tok *t, const char *pattern, size_t n, int is_regex, int behavior, int invert,
                 dlm_err *e);
int tok_pt_digits(tok *t, int individual, dlm_err *e);
int tok_pt_bytelevel(tok *t, int add_prefix_space, int use_regex, dlm_err *e);
int tok_pt_metaspace(tok *t, const char *repl, size_t n, int prepend_scheme, int split, dlm_err *e);
/* Add a Prepend / Replace normalizer step (tok_core.c). */
int tok_norm_str(tok *t, int kind, const char *a, size_t an, const char *b, size_t bn, dlm_err *e);

/* SentencePiece pieces (tok_spm.c): BPE from chars with byte fallback, and
 * llama.cpp's score-ordered merging; the decoder chain. */
int tok_spm_bpe(tok *t, const char *s, size_t n, tok_ids *out, dlm_err *e);
int tok_spm_score(tok *t, const char *s, size_t n, tok_ids *out, dlm_err *e);
int tok_dec_add(tok *t, int kind, const char *a, size_t an, const char *b, size_t bn, dlm_err *e);
int tok_spm_decode(const tok *t, const int32_t *ids, size_t n, int skip_special, strbuf *out);
/* Raw bytes one token adds (for streaming): replacements applied, <0xNN> as its byte. */
int tok_spm_raw(const tok *t, const char *s, size_t n, strbuf *out);
int tok_spm_finish(tok *t, dlm_err *e);
void tok_spm_free(tok *t);
int tok_scratch_init(tok *t, dlm_err *e);

/* Run the pre-tokenizer over one normalized piece; every pre-token goes to
 * tok_bpe_piece, which appends ids to out. */
int tok_pretokenize(tok *t, const char *s, size_t n, tok_ids *out, dlm_err *e);
int tok_bpe_piece(tok *t, const char *s, size_t n, tok_ids *out, dlm_err *e);

#endif
