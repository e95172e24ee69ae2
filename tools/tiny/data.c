/* data — the recipe file, the corpus, token streams and the instruction
 * set of the embedded base (see recipe.h). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "tokens/chat.h"
#include "recipe.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/rng.h"

/* ---- recipe ----------------------------------------------------------------- */

static int need_num(const json_t *o, const char *key, double lo, double hi, double *out, const char *path, dlm_err *e)
{
    if (jget_num(o, key, out)) return err_set(e, "RecipeError", "%s: missing number '%s'", path, key);
    if (!(*out >= lo && *out <= hi)) return err_set(e, "RecipeError", "%s: '%s' = %g is outside %g..%g", path, key, *out, lo, hi);
    return 0;
}

int tiny_recipe_load(const char *path, tiny_recipe *r, dlm_err *e)
{
    memset(r, 0, sizeof *r);
    json_t *o = json_load_path(path, 1 << 20, e);
    if (!o) return -1;
    double v[32];
    static const struct { const char *k; double lo, hi; } K[] = {
        {"seed", 0, 4294967295.0}, {"vocab", 259, 65536}, {"bpe_min_count", 1, 1e9},
        {"d_model", 64, 4096}, {"n_layer", 1, 64}, {"n_ff", 64, 16384}, {"n_head", 1, 64}, {"n_kv_head", 1, 64},
        {"head_dim", 8, 256}, {"context_length", 16, 1 << 20}, {"rope_theta", 1, 1e9}, {"rms_eps", 1e-12, 1e-2},
        {"seq_len", 8, 8192}, {"batch", 1, 1024}, {"pretrain_steps", 0, 1e7}, {"lr", 0, 1}, {"min_lr_ratio", 0, 1},
        {"warmup_ratio", 0, 1}, {"weight_decay", 0, 10}, {"beta2", 0, 1}, {"init_std", 0, 1}, {"sft_steps", 0, 1e7},
        {"sft_rows", 0, 1024}, {"sft_lr", 0, 1}, {"sft_warmup_ratio", 0, 1}, {"sft_arith", 0, 100000},
        {"heldout_every", 2, 1e6}, {"max_corpus_bytes", 0, 1e12}, {"eval_rows", 0, 1e6}, {"eval_every", 0, 1e7},
        {"log_every", 1, 1e7},
    };
    int rc = 0;
    for (size_t i = 0; i < sizeof K / sizeof *K && !rc; i++) rc = need_num(o, K[i].k, K[i].lo, K[i].hi, &v[i], path, e);
    /* the committed base's sha256 is the fp32 numerics' (docs/tiny.md): a
     * recipe says so, and nothing else is accepted */
    const char *prec = jget_str(o, "precision");
    if (!rc && (!prec || strcmp(prec, "fp32")))
        rc = err_set(e, "RecipeError", "%s: 'precision' must be \"fp32\" (the tiny base's pinned bytes are trained in"
                     " fp32 on every CPU), got %s%s%s", path, prec ? "\"" : "", prec ? prec : "none", prec ? "\"" : "");
    json_decref(o);
    if (rc) return -1;
    int i = 0;
    r->seed = (uint64_t)v[i++];
    r->vocab = (int)v[i++];
    r->bpe_min_count = (int64_t)v[i++];
    model_config *c = &r->cfg;
    c->arch = ARCH_LLAMA;
    c->d_model = (int)v[i++];
    c->n_layer = (int)v[i++];
    c->n_ff = (int)v[i++];
    c->n_head = (int)v[i++];
    c->n_kv_head = (int)v[i++];
    c->head_dim = (int)v[i++];
    c->max_pos = (int)v[i++];
    c->rope_theta = (float)v[i++];
    c->rms_eps = (float)v[i++];
    c->vocab = r->vocab;
    c->tied = 1;
    c->bos_id = c->eos_id = -1;
    r->seq_len = (int)v[i++];
    r->batch = (int)v[i++];
    r->pretrain_steps = (int)v[i++];
    r->lr = v[i++];
    r->min_lr_ratio = v[i++];
    r->warmup_ratio = v[i++];
    r->weight_decay = v[i++];
    r->beta2 = v[i++];
    r->init_std = v[i++];
    r->sft_steps = (int)v[i++];
    r->sft_rows = (int)v[i++];
    r->sft_lr = v[i++];
    r->sft_warmup_ratio = v[i++];
    r->sft_arith = (int)v[i++];
    r->heldout_every = (int)v[i++];
    r->max_corpus_bytes = (int64_t)v[i++];
    r->eval_rows = (int)v[i++];
    r->eval_every = (int)v[i++];
    r->log_every = (int)v[i++];
    if (c->n_head % c->n_kv_head || c->head_dim % 2 || r->sft_rows > r->batch || r->seq_len > c->max_pos)
        return err_set(e, "RecipeError", "%s: inconsistent shape (heads %d/%d, head_dim %d, sft_rows %d > batch %d, "
                       "seq_len %d > context %d?)", path, c->n_head, c->n_kv_head, c->head_dim, r->sft_rows, r->batch,
                       r->seq_len, c->max_pos);
    return 0;
}

/* ---- corpus ----------------------------------------------------------------- */

void tiny_corpus_free(tiny_corpus *c)
{
    for (int i = 0; i < c->n; i++) free(c->docs[i]);
    free(c->docs);
    free(c->lens);
    memset(c, 0, sizeof *c);
}

int tiny_corpus_load(const char *list_path, int64_t max_bytes, tiny_corpus *c, dlm_err *e)
{
    memset(c, 0, sizeof *c);
    char *list;
    size_t ll;
    if (fs_read_all(list_path, 1 << 24, &list, &ll, e)) return -1;
    int cap = 0;
    int64_t total = 0;
    char *save = NULL;
    for (char *line = strtok_r(list, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!*line || *line == '#') continue;
        if (max_bytes && total >= max_bytes) break;
        char *text;
        size_t len;
        if (fs_read_all(line, (size_t)1 << 28, &text, &len, e)) goto fail;
        /* CRLF → LF, then trim */
        size_t o = 0;
        for (size_t k = 0; k < len; k++)
            if (!(text[k] == '\r' && k + 1 < len && text[k + 1] == '\n')) text[o++] = text[k];
        size_t a = 0;
        while (a < o && isspace((unsigned char)text[a])) a++;
        while (o > a && isspace((unsigned char)text[o - 1])) o--;
        if (o == a) { free(text); continue; }
        memmove(text, text + a, o - a);
        text[o - a] = 0;
        if (c->n == cap) {
            cap = cap ? cap * 2 : 256;
            char **nd = realloc(c->docs, (size_t)cap * sizeof *nd);
            size_t *nl = nd ? realloc(c->lens, (size_t)cap * sizeof *nl) : NULL;
            if (nd) c->docs = nd;
            if (nl) c->lens = nl;
            if (!nd || !nl) { free(text); err_set(e, "MemoryError", "out of memory"); goto fail; }
        }
        c->docs[c->n] = text;
        c->lens[c->n] = o - a;
        c->n++;
        total += (int64_t)(o - a);
    }
    free(list);
    if (!c->n) return err_set(e, "CorpusError", "%s lists no readable, non-empty document", list_path);
    return 0;
fail:
    free(list);
    tiny_corpus_free(c);
    return -1;
}

int tiny_stream_build(const tiny_corpus *c, tok *k, int every, int heldout, int32_t eot, tiny_stream *s, dlm_err *e)
{
    tok_ids ids = {0};
    for (int i = 0; i < c->n; i++) {
        if ((i % every == every - 1) != heldout) continue;
        if (tok_encode_append(k, c->docs[i], c->lens[i], 0, &ids, e) || tok_ids_push(&ids, eot)) {
            tok_ids_free(&ids);
            return err_set(e, "MemoryError", "encoding document %d failed: %s", i, e->msg);
        }
    }
    s->ids = ids.v;
    s->n = ids.n;
    return 0;
}

/* ---- instruction set -------------------------------------------------------- */

void tiny_sft_free(tiny_conv *c, int n)
{
    for (int i = 0; c && i < n; i++) {
        free(c[i].ids);
        free(c[i].tgt);
    }
    free(c);
}

typedef struct qa_list {
    char **q, **a;
    int n, cap;
} qa_list;

static int qa_add(qa_list *l, const char *q, size_t ql, const char *a, size_t al)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 256;
        char **nq = realloc(l->q, (size_t)l->cap * sizeof *nq);
        if (nq) l->q = nq;
        char **na = nq ? realloc(l->a, (size_t)l->cap * sizeof *na) : NULL;
        if (na) l->a = na;
        if (!nq || !na) return -1;
    }
    l->q[l->n] = str_ndup(q, ql);
    l->a[l->n] = str_ndup(a, al);
    if (!l->q[l->n] || !l->a[l->n]) return -1;
    l->n++;
    return 0;
}

static void trim_sb(strbuf *sb)
{
    while (sb->len && isspace((unsigned char)sb->buf[sb->len - 1])) sb->buf[--sb->len] = 0;
}

/* "Q: text" then "A: text" (continuation lines join the answer with a
 * newline); blank lines end a pair; '#' lines are comments. */
static int parse_qa(const char *path, qa_list *l, dlm_err *e)
{
    char *text;
    size_t len;
    if (fs_read_all(path, 1 << 24, &text, &len, e)) return -1;
    strbuf q = STRBUF_INIT, a = STRBUF_INIT;
    int state = 0, line_no = 0, rc = 0; /* 0 none, 1 in Q, 2 in A */
    char *p = text;
    for (;;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        line_no++;
        int blank = !*p;
        if (!strncmp(p, "Q: ", 3)) {
            if (state) { rc = err_at(e, "RecipeError", path, line_no, 1, "a new Q: before the previous pair ended"); break; }
            sb_reset(&q);
            sb_puts(&q, p + 3);
            state = 1;
        } else if (!strncmp(p, "A: ", 3)) {
            if (state != 1) { rc = err_at(e, "RecipeError", path, line_no, 1, "A: without a Q:"); break; }
            sb_reset(&a);
            sb_puts(&a, p + 3);
            state = 2;
        } else if (*p == '#' && !state) {
            /* comment */
        } else if (!blank) {
            if (!state) { rc = err_at(e, "RecipeError", path, line_no, 1, "text outside a Q:/A: pair"); break; }
            strbuf *t = state == 1 ? &q : &a;
            sb_putc(t, '\n');
            sb_puts(t, p);
        }
        if ((blank || !nl) && state == 2) {
            trim_sb(&q);
            trim_sb(&a);
            if (qa_add(l, q.buf, q.len, a.buf, a.len)) { rc = err_set(e, "MemoryError", "out of memory"); break; }
            state = 0;
        } else if ((blank || !nl) && state == 1) {
            rc = err_at(e, "RecipeError", path, line_no, 1, "Q: without an A:");
            break;
        }
        if (!nl) break;
        p = nl + 1;
    }
    sb_free(&q);
    sb_free(&a);
    free(text);
    return rc;
}

static const char *const NUM_WORDS[] = {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
                                        "nine", "ten", "eleven", "twelve"};

/* Arithmetic drills: sums, differences and products of small numbers, the
 * operands drawn from (seed, RNG_SHUFFLE, 1000 + i). */
static int add_arith(qa_list *l, const tiny_recipe *r)
{
    char q[160], a[160];
    for (int i = 0; i < r->sft_arith; i++) {
        uint32_t w[4];
        rng_philox(r->seed, RNG_SHUFFLE, 1000 + (uint64_t)i, 0, w);
        int kind = (int)(w[0] % 3), x = (int)(w[1] % 13), y = (int)(w[2] % 13), style = (int)(w[3] % 2);
        if (kind == 0) {
            x = (int)(w[1] % 50);
            y = (int)(w[2] % 50);
            snprintf(q, sizeof q, style ? "What is %d plus %d?" : "What is %d + %d?", x, y);
            snprintf(a, sizeof a, "%d plus %d is %d.", x, y, x + y);
        } else if (kind == 1) {
            x = (int)(w[1] % 50);
            y = (int)(w[2] % 50);
            if (y > x) { int s = x; x = y; y = s; }
            snprintf(q, sizeof q, style ? "What is %d minus %d?" : "What is %d - %d?", x, y);
            snprintf(a, sizeof a, "%d minus %d is %d.", x, y, x - y);
        } else if (style) {
            snprintf(q, sizeof q, "What is %d times %d?", x, y);
            snprintf(a, sizeof a, "%d times %d is %d.", x, y, x * y);
        } else {
            snprintf(q, sizeof q, "What is %s times %s?", NUM_WORDS[x], NUM_WORDS[y]);
            snprintf(a, sizeof a, "%s times %s is %d.", NUM_WORDS[x], NUM_WORDS[y], x * y);
            a[0] = (char)toupper((unsigned char)a[0]);
        }
        if (qa_add(l, q, strlen(q), a, strlen(a))) return -1;
    }
    return 0;
}

/* System turns seen in training, so a document's system_prompt is familiar:
 * index 0 = none. */
static const char *const SYSTEMS[] = {NULL, NULL, "You are a helpful assistant.",
                                      "You are a patient tutor. Answer briefly, then give one example.",
                                      "Answer the question in one or two sentences."};

int tiny_sft_load(const char *qa_path, tok *k, const tiny_recipe *r, tiny_conv **out, int *n_out, int *n_pairs,
                  dlm_err *e)
{
    *out = NULL;
    *n_out = 0;
    qa_list l = {0};
    tiny_conv *cv = NULL;
    int rc = -1;
    if (parse_qa(qa_path, &l, e)) goto done;
    if (add_arith(&l, r)) { err_set(e, "MemoryError", "out of memory"); goto done; }
    if (!l.n) { err_set(e, "RecipeError", "%s: no Q&A pairs", qa_path); goto done; }
    const chat_dialect *d = chat_dialect_find("chatml");
    cv = calloc((size_t)l.n, sizeof *cv);
    if (!d || !cv) { err_set(e, "MemoryError", "out of memory"); goto done; }
    strbuf sb = STRBUF_INIT;
    for (int i = 0; i < l.n; i++) {
        uint32_t w[4];
        rng_philox(r->seed, RNG_SHUFFLE, 2000 + (uint64_t)i, 0, w);
        const char *sys = SYSTEMS[w[0] % (sizeof SYSTEMS / sizeof *SYSTEMS)];
        chat_msg msgs[2] = {{"user", l.q[i]}, {"assistant", l.a[i]}};
        chat_span sp;
        size_t nsp = 0;
        sb_reset(&sb);
        if (chat_render(d, sys, msgs, 2, 0, &sb, &sp, &nsp, e) || nsp != 1) { sb_free(&sb); goto done; }
        /* three pieces, so the answer's tokens are known exactly: prompt,
         * answer + <|im_end|> (the targets), the closing newline */
        size_t cut[4] = {0, sp.start, sp.turn_end, sb.len};
        tok_ids ids = {0};
        size_t ans_a = 0, ans_b = 0;
        for (int p = 0; p < 3; p++) {
            if (p == 1) ans_a = ids.n;
            if (tok_encode_append(k, sb.buf + cut[p], cut[p + 1] - cut[p], TOK_PARSE_SPECIAL, &ids, e)) {
                tok_ids_free(&ids);
                sb_free(&sb);
                goto done;
            }
            if (p == 1) ans_b = ids.n;
        }
        cv[i].n = (int)ids.n;
        cv[i].ids = ids.v;
        cv[i].tgt = malloc(ids.n * sizeof(int32_t));
        if (!cv[i].tgt) { sb_free(&sb); err_set(e, "MemoryError", "out of memory"); goto done; }
        for (size_t j = 0; j < ids.n; j++)
            cv[i].tgt[j] = (j + 1 >= ans_a && j + 1 < ans_b) ? ids.v[j + 1] : -1;
    }
    sb_free(&sb);
    *out = cv;
    *n_out = l.n;
    if (n_pairs) *n_pairs = l.n - r->sft_arith;
    cv = NULL;
    rc = 0;
done:
    tiny_sft_free(cv, l.n);
    for (int i = 0; i < l.n; i++) {
        free(l.q[i]);
        free(l.a[i]);
    }
    free(l.q);
    free(l.a);
    return rc;
}

void tiny_fill_sft_row(tiny_trainer *t, int b, const tiny_conv *c, const int *perm, int n, int *cursor, int32_t pad)
{
    size_t o = (size_t)b * (size_t)t->T;
    int used = 0, seg = 0;
    for (int tries = 0; tries < n; tries++) {
        const tiny_conv *x = &c[perm[*cursor % n]];
        int len = x->n < t->T ? x->n : t->T;
        if (used && used + len > t->T) break; /* the next row starts with it */
        for (int j = 0; j < len; j++) {
            t->tok[o + used + j] = x->ids[j];
            t->tgt[o + used + j] = j + 1 < len ? x->tgt[j] : -1;
            t->pos[o + used + j] = j;
            t->seg[o + used + j] = seg;
        }
        used += len;
        seg++;
        *cursor += 1;
        if (used >= t->T) break;
    }
    for (int j = used; j < t->T; j++) {
        t->tok[o + j] = pad;
        t->tgt[o + j] = -1;
        t->pos[o + j] = 0;
        t->seg[o + j] = seg;
    }
}
