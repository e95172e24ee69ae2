/* tok_pre — pre-tokenizers: HF `Split` (regex or literal, five delimiter
 * behaviours, invert), `Digits` and `ByteLevel` (with its built-in GPT-2
 * regex), run as a chain the way HF's `Sequence` runs them: each step
 * splits every piece the previous step produced, and no step can look past
 * the end of its piece (a regex's lookahead sees the piece only).
 *
 * Pieces are streamed, never listed: a step hands each piece to the next
 * step as soon as its delimiter behaviour has decided where it ends, so
 * nothing is allocated per piece. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokens/tok_impl.h"

/* The regexes of the supported families, as they appear in tokenizer.json
 * (docs/reference/formats.md §2.2). GPT-2's is the one built into HF's ByteLevel. */
const char TOK_RE_GPT2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const char TOK_RE_LLAMA3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char TOK_RE_QWEN2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* Bound on regex work per match: a hostile tokenizer.json cannot make one
 * encode call run for ever. */
#define TOK_RE_MATCH_LIMIT 10000000u

static tok_pt *pt_new(tok *t, int kind, dlm_err *e)
{
    if (t->n_pt >= TOK_PT_MAX) {
        err_set(e, "TokenizerError", "more than %d pre-tokenizer steps", TOK_PT_MAX);
        return NULL;
    }
    tok_pt *p = &t->pt[t->n_pt++];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    return p;
}

/* HF compiles these patterns with Oniguruma, whose Unicode \s is exactly
 * White_Space; PCRE2's UCP \s also takes U+180E, and its \w differs (marks,
 * connector punctuation). Rewrite those escapes into properties so both
 * engines agree. \W inside a class has no property form and is kept. */
static char *onig_compat(const char *pat, size_t n, size_t *out_n)
{
    strbuf sb = STRBUF_INIT;
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        char c = pat[i];
        if (c == '\\' && i + 1 < n) {
            char d = pat[++i];
            if (d == 's') sb_puts(&sb, "\\p{White_Space}");
            else if (d == 'S') sb_puts(&sb, "\\P{White_Space}");
            else if (d == 'w') sb_puts(&sb, in_class ? "\\p{L}\\p{M}\\p{Nd}\\p{Pc}" : "[\\p{L}\\p{M}\\p{Nd}\\p{Pc}]");
            else if (d == 'W' && !in_class) sb_puts(&sb, "[^\\p{L}\\p{M}\\p{Nd}\\p{Pc}]");
            else {
                sb_putc(&sb, c);
                sb_putc(&sb, d);
            }
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = 1;
            sb_putc(&sb, c);
            /* A ']' right after '[' or '[^' is a literal. */
            if (i + 1 < n && pat[i + 1] == '^') sb_putc(&sb, pat[++i]);
            if (i + 1 < n && pat[i + 1] == ']') sb_putc(&sb, pat[++i]);
            continue;
        }
        if (c == ']' && in_class) in_class = 0;
        sb_putc(&sb, c);
    }
    if (sb.oom) {
        sb_free(&sb);
        return NULL;
    }
    return sb_detach(&sb, out_n);
}

static int compile_re(tok_pt *p, const char *pattern, size_t n, dlm_err *e)
{
    int ec;
    PCRE2_SIZE eo;
    size_t cn;
    char *compat = onig_compat(pattern, n, &cn);
    if (!compat) return err_set(e, "OOMError", "out of memory");
    p->re = pcre2_compile((PCRE2_SPTR)compat, cn, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    free(compat);
    if (!p->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return err_set(e, "TokenizerError", "pre-tokenizer regex does not compile at offset %zu: %s",
                       (size_t)eo, (const char *)msg);
    }
    p->jit = pcre2_jit_compile(p->re, PCRE2_JIT_COMPLETE) == 0;
    p->md = pcre2_match_data_create_from_pattern(p->re, NULL);
    if (!p->md) return err_set(e, "OOMError", "out of memory for regex match data");
    return 0;
}

int tok_pt_split(tok *t, const char *pattern, size_t n, int is_regex, int behavior, int invert,
                 dlm_err *e)
{
    tok_pt *p = pt_new(t, PT_SPLIT, e);
    if (!p) return -1;
    p->behavior = behavior;
    p->invert = invert;
    p->is_regex = is_regex;
    p->pattern = str_ndup(pattern, n);
    p->pattern_len = n;
    if (!p->pattern) return err_set(e, "OOMError", "out of memory");
    return is_regex ? compile_re(p, pattern, n, e) : 0;
}

int tok_pt_digits(tok *t, int individual, dlm_err *e)
{
    tok_pt *p = pt_new(t, PT_DIGITS, e);
    if (!p) return -1;
    p->individual_digits = individual;
    p->behavior = individual ? SPLIT_ISOLATED : SPLIT_CONTIGUOUS;
    return 0;
}

int tok_pt_bytelevel(tok *t, int add_prefix_space, int use_regex, dlm_err *e)
{
    tok_pt *p = pt_new(t, PT_BYTELEVEL, e);
    if (!p) return -1;
    p->add_prefix_space = add_prefix_space;
    p->use_regex = use_regex;
    p->behavior = SPLIT_ISOLATED;
    return use_regex ? compile_re(p, TOK_RE_GPT2, strlen(TOK_RE_GPT2), e) : 0;
}

int tok_pt_metaspace(tok *t, const char *repl, size_t n, int prepend_scheme, int split, dlm_err *e)
{
    if (!n || n > 8) return err_set(e, "TokenizerError", "Metaspace replacement must be one char");
    tok_pt *p = pt_new(t, PT_METASPACE, e);
    if (!p) return -1;
    p->pattern = str_ndup(repl, n);
    p->pattern_len = n;
    p->prepend_scheme = prepend_scheme;
    p->ms_split = split;
    p->behavior = SPLIT_MERGED_NEXT;
    return p->pattern ? 0 : err_set(e, "OOMError", "out of memory");
}

int tok_scratch_init(tok *t, dlm_err *e)
{
    t->mctx = pcre2_match_context_create(NULL);
    t->jstack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
    if (!t->mctx || !t->jstack) return err_set(e, "OOMError", "out of memory for regex state");
    pcre2_set_match_limit(t->mctx, TOK_RE_MATCH_LIMIT);
    pcre2_jit_stack_assign(t->mctx, NULL, t->jstack);
    return 0;
}

/* ---- streaming delimiter behaviours ----------------------------------------------------
 * Segments (a, b, is_match) arrive in order, gaps and matches alternating
 * as HF's find_matches yields them; the emitter reproduces HF's folds for
 * each SplitDelimiterBehavior and passes finished pieces on. */
typedef struct emitter {
    tok *t;
    int step;            /* the step whose output this is */
    int behavior;
    const char *s;
    tok_ids *out;
    dlm_err *e;
    int have;            /* a pending piece */
    size_t pa, pb;
    int pm;
    int prev_m;
    int at0;             /* the split piece starts the input */
} emitter;

static int run_step(tok *t, int i, const char *s, size_t n, int at0, tok_ids *out, dlm_err *e);

static int emit_piece(emitter *em, size_t a, size_t b)
{
    if (b <= a) return 0; /* HF drops empty pieces */
    return run_step(em->t, em->step + 1, em->s + a, b - a, em->at0 && a == 0, em->out, em->e);
}

/* Extend the pending piece to b when join, else emit it and start a new
 * pending piece [a, b). */
static int em_join(emitter *em, int join, size_t a, size_t b)
{
    if (em->have && join) {
        em->pb = b;
        return 0;
    }
    if (em->have && emit_piece(em, em->pa, em->pb)) return -1;
    em->have = 1;
    em->pa = a;
    em->pb = b;
    return 0;
}

static int em_seg(emitter *em, size_t a, size_t b, int m)
{
    int rc;
    switch (em->behavior) {
    case SPLIT_ISOLATED:
        return emit_piece(em, a, b);
    case SPLIT_REMOVED:
        return m ? 0 : emit_piece(em, a, b);
    case SPLIT_MERGED_PREV:
        /* A match joins the piece before it unless that was a match too. */
        rc = em_join(em, m && !em->prev_m, a, b);
        em->prev_m = m;
        return rc;
    case SPLIT_MERGED_NEXT:
        /* A match joins the piece after it unless that is a match too. */
        if (em->have) {
            if (em->pm && !m) {
                em->have = 0;
                return emit_piece(em, em->pa, b);
            }
            em->have = 0;
            if (emit_piece(em, em->pa, em->pb)) return -1;
        }
        if (m) {
            em->have = 1;
            em->pa = a;
            em->pb = b;
            em->pm = 1;
            return 0;
        }
        return emit_piece(em, a, b);
    case SPLIT_CONTIGUOUS:
        /* Runs of matches, and runs of non-matches, each become one piece. */
        rc = em_join(em, m == em->prev_m, a, b);
        em->prev_m = m;
        return rc;
    default:
        return emit_piece(em, a, b);
    }
}

static int em_end(emitter *em)
{
    if (em->have) {
        em->have = 0;
        return emit_piece(em, em->pa, em->pb);
    }
    return 0;
}

/* Feed the regex matches of p over s[0..n) as segments. */
static int split_regex(tok *t, tok_pt *p, emitter *em, const char *s, size_t n, int invert)
{
    size_t pos = 0, prev = 0;
    while (pos <= n) {
        int rc = p->jit ? pcre2_jit_match(p->re, (PCRE2_SPTR)s, n, pos, 0, p->md, t->mctx)
                        : pcre2_match(p->re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, p->md, t->mctx);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return err_set(em->e, "TokenizerError", "pre-tokenizer regex failed: %s", (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(p->md);
        size_t ms = ov[0], me = ov[1];
        if (ms > prev && em_seg(em, prev, ms, invert)) return -1;
        if (em_seg(em, ms, me, !invert)) return -1;
        prev = me;
        if (me > ms) pos = me;
        else {
            /* An empty match: step over one char, as find_iter does. */
            if (ms >= n) break;
            uint32_t cp;
            size_t l = tok_utf8_dec((const unsigned char *)s + ms, n - ms, &cp);
            pos = ms + (l ? l : 1);
        }
    }
    if (prev < n && em_seg(em, prev, n, invert)) return -1;
    return em_end(em);
}

static int split_literal(tok_pt *p, emitter *em, const char *s, size_t n)
{
    if (!p->pattern_len) {
        if (em_seg(em, 0, n, p->invert)) return -1;
        return em_end(em);
    }
    size_t prev = 0, pos = 0;
    while (pos + p->pattern_len <= n) {
        const char *hit = memmem(s + pos, n - pos, p->pattern, p->pattern_len);
        if (!hit) break;
        size_t ms = (size_t)(hit - s), me = ms + p->pattern_len;
        if (ms > prev && em_seg(em, prev, ms, p->invert)) return -1;
        if (em_seg(em, ms, me, !p->invert)) return -1;
        prev = pos = me;
    }
    if (prev < n && em_seg(em, prev, n, p->invert)) return -1;
    return em_end(em);
}

/* Rust char::is_numeric: general category Nd, Nl or No. */
static int is_numeric(uint32_t cp)
{
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

static int split_digits(emitter *em, const char *s, size_t n)
{
    size_t last = 0, i = 0;
    while (i < n) {
        uint32_t cp;
        size_t l = tok_utf8_dec((const unsigned char *)s + i, n - i, &cp);
        if (!l) l = 1, cp = 0xFFFD;
        if (is_numeric(cp)) {
            if (last < i && em_seg(em, last, i, 0)) return -1;
            if (em_seg(em, i, i + l, 1)) return -1;
            last = i + l;
        }
        i += l;
    }
    if (last < n && em_seg(em, last, n, 0)) return -1;
    return em_end(em);
}

static int scratch_fit(tok_pt *p, size_t need, dlm_err *e)
{
    if (need <= p->scratch_cap) return 0;
    size_t nc = p->scratch_cap ? p->scratch_cap : 256;
    while (nc < need) nc *= 2;
    char *d = realloc(p->scratch, nc);
    if (!d) return err_set(e, "OOMError", "out of memory");
    p->scratch = d;
    p->scratch_cap = nc;
    return 0;
}

/* HF Metaspace: every ' ' becomes the replacement, which is prepended
 * (always, or only to the piece that starts the input with "first") unless
 * the piece already starts with it. Written to the step's scratch. */
static int metaspace(tok_pt *p, const char **s, size_t *n, int at0, dlm_err *e)
{
    size_t spaces = 0;
    for (size_t i = 0; i < *n; i++) spaces += (*s)[i] == ' ';
    size_t rn = p->pattern_len;
    if (scratch_fit(p, *n + (spaces + 1) * rn + 1, e)) return -1;
    size_t o = 0;
    int starts = *n >= rn && !memcmp(*s, p->pattern, rn);
    if (!starts && (*n ? (*s)[0] != ' ' : 1) &&
        (p->prepend_scheme == MS_ALWAYS || (p->prepend_scheme == MS_FIRST && at0))) {
        memcpy(p->scratch, p->pattern, rn);
        o = rn;
    }
    for (size_t i = 0; i < *n; i++) {
        if ((*s)[i] == ' ') {
            memcpy(p->scratch + o, p->pattern, rn);
            o += rn;
        } else p->scratch[o++] = (*s)[i];
    }
    *s = p->scratch;
    *n = o;
    return 0;
}

static int run_step(tok *t, int i, const char *s, size_t n, int at0, tok_ids *out, dlm_err *e)
{
    if (n == 0) return 0;
    if (i >= t->n_pt) return tok_bpe_piece(t, s, n, out, e);
    tok_pt *p = &t->pt[i];
    if (p->kind == PT_BYTELEVEL && p->add_prefix_space && s[0] != ' ') {
        if (scratch_fit(p, n + 2, e)) return -1;
        p->scratch[0] = ' ';
        memcpy(p->scratch + 1, s, n);
        s = p->scratch;
        n++;
    }
    if (p->kind == PT_METASPACE && metaspace(p, &s, &n, at0, e)) return -1;
    emitter em = {t, i, p->behavior, s, out, e, 0, 0, 0, 0, 0, at0};
    switch (p->kind) {
    case PT_METASPACE:
        if (!p->ms_split) return run_step(t, i + 1, s, n, at0, out, e);
        return split_literal(p, &em, s, n);
    case PT_BYTELEVEL:
        if (!p->use_regex) return run_step(t, i + 1, s, n, at0, out, e);
        return split_regex(t, p, &em, s, n, 0);
    case PT_SPLIT:
        return p->is_regex ? split_regex(t, p, &em, s, n, p->invert) : split_literal(p, &em, s, n);
    case PT_DIGITS:
        return split_digits(&em, s, n);
    default:
        return err_set(e, "TokenizerError", "unknown pre-tokenizer step");
    }
}

int tok_pretokenize(tok *t, const char *s, size_t n, tok_ids *out, dlm_err *e)
{
    return run_step(t, 0, s, n, t->piece_at0, out, e);
}
