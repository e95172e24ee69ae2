/* synth — see synth.h. */
#include "infer/synth.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "util/json.h"

/* ---- reply parsing --------------------------------------------------------- */

static char *dup_stripped(const char *s)
{
    size_t n = strlen(s);
    while (n && strchr(" \t\n\r\f\v", *s)) { s++; n--; }
    while (n && strchr(" \t\n\r\f\v", s[n - 1])) n--;
    char *o = malloc(n + 1);
    if (o) { memcpy(o, s, n); o[n] = 0; }
    return o;
}

/* End of the JSON value that starts with the bracket at p[0] ([ or {):
 * index one past its matching close, honouring strings; 0 when unclosed. */
static size_t match_close(const char *p, size_t len)
{
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
            continue;
        }
        if (c == '"') in_str = 1;
        else if (c == '[' || c == '{') {
            if (++depth > 256) return 0;
        } else if (c == ']' || c == '}') {
            if (--depth == 0) return i + 1;
            if (depth < 0) return 0;
        }
    }
    return 0;
}

/* Copy p[0..n) without commas that are followed (after whitespace) by ] or
 * }: the trailing commas models write. Strings are copied as they are. */
static char *drop_trailing_commas(const char *p, size_t n)
{
    char *o = malloc(n + 1);
    if (!o) return NULL;
    size_t k = 0;
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (in_str) {
            o[k++] = c;
            if (c == '\\' && i + 1 < n) o[k++] = p[++i];
            else if (c == '"') in_str = 0;
            continue;
        }
        if (c == '"') in_str = 1;
        if (c == ',') {
            size_t j = i + 1;
            while (j < n && strchr(" \t\r\n", p[j])) j++;
            if (j < n && (p[j] == ']' || p[j] == '}')) continue;
        }
        o[k++] = c;
    }
    o[k] = 0;
    return o;
}

void synth_pairs_free(synth_pair *v, int n)
{
    for (int i = 0; i < n; i++) {
        free(v[i].question);
        free(v[i].answer);
    }
    free(v);
}

static const char *pair_field(json_t *o, const char *k1, const char *k2)
{
    const char *v = jget_str(o, k1);
    return v ? v : jget_str(o, k2);
}

int synth_parse_reply(const char *reply, size_t len, synth_pair **out, int *n, int *n_rejected, int *found_array,
                      dlm_err *e)
{
    *out = NULL;
    *n = *n_rejected = *found_array = 0;
    for (size_t i = 0; i < len; i++) {
        if (reply[i] != '[') continue;
        size_t end = match_close(reply + i, len - i);
        if (!end) continue;
        char *clean = drop_trailing_commas(reply + i, end);
        if (!clean) return err_set(e, "MemoryError", "out of memory");
        json_t *arr = json_loads(clean, JSON_DECODE_ANY, NULL);
        free(clean);
        /* An array of strings or numbers inside prose ("[1]") is not the
         * answer: keep looking unless it holds at least one object. */
        int objects = 0;
        size_t k;
        json_t *it;
        json_array_foreach(arr, k, it) objects += json_is_object(it);
        if (!json_is_array(arr) || !objects) {
            json_decref(arr);
            continue;
        }
        *found_array = 1;
        synth_pair *v = calloc(json_array_size(arr) + 1, sizeof *v);
        if (!v) { json_decref(arr); return err_set(e, "MemoryError", "out of memory"); }
        int m = 0;
        json_array_foreach(arr, k, it) {
            const char *q = json_is_object(it) ? pair_field(it, "question", "q") : NULL;
            const char *a = json_is_object(it) ? pair_field(it, "answer", "a") : NULL;
            char *qs = q ? dup_stripped(q) : NULL, *as = a ? dup_stripped(a) : NULL;
            if (!qs || !as || !*qs || !*as) {
                free(qs);
                free(as);
                (*n_rejected)++;
                continue;
            }
            v[m].question = qs;
            v[m].answer = as;
            m++;
        }
        json_decref(arr);
        *out = v;
        *n = m;
        return 0;
    }
    return 0;
}

/* ---- difflib ratio --------------------------------------------------------- */

typedef struct cps { int32_t *v; int n; } cps;

static int decode(const char *s, cps *o)
{
    size_t len = strlen(s);
    o->v = malloc((len + 1) * sizeof *o->v);
    o->n = 0;
    if (!o->v) return -1;
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0;
    while (i < len) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate(p + i, (utf8proc_ssize_t)(len - i), &c);
        if (k <= 0) { c = 0x110000 + p[i]; k = 1; }   /* a distinct value per invalid byte */
        o->v[o->n++] = c;
        i += (size_t)k;
    }
    return 0;
}

typedef struct b2j_entry { int32_t elt; int idx; } b2j_entry;

static int cmp_entry(const void *x, const void *y)
{
    const b2j_entry *a = x, *b = y;
    if (a->elt != b->elt) return a->elt < b->elt ? -1 : 1;
    return a->idx - b->idx;
}

typedef struct matcher {
    cps a, b;
    b2j_entry *ent;   /* b's (element, index) sorted; popular elements removed */
    int nent;
    int *len_prev, *len_cur;
    unsigned *stamp_prev, *stamp_cur;
    unsigned gen;
} matcher;

/* First entry of elt in ent, or -1. */
static int find_elt(const matcher *m, int32_t elt)
{
    int lo = 0, hi = m->nent;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (m->ent[mid].elt < elt) lo = mid + 1;
        else hi = mid;
    }
    return lo < m->nent && m->ent[lo].elt == elt ? lo : -1;
}

/* difflib's find_longest_match (no junk function, so the junk-extension
 * passes are no-ops; popular elements are not junk and extend matches). */
static void longest(matcher *m, int alo, int ahi, int blo, int bhi, int *bi, int *bj, int *bk)
{
    int besti = alo, bestj = blo, bestsize = 0;
    /* j2len of the previous row: len_prev[j] valid when stamp_prev[j] == gen-1 */
    unsigned row_prev = 0;
    for (int i = alo; i < ahi; i++) {
        unsigned row = ++m->gen;
        int f = find_elt(m, m->a.v[i]);
        if (f >= 0) {
            for (int t = f; t < m->nent && m->ent[t].elt == m->a.v[i]; t++) {
                int j = m->ent[t].idx;
                if (j < blo) continue;
                if (j >= bhi) break;
                int k = (j > 0 && row_prev && m->stamp_prev[j - 1] == row_prev ? m->len_prev[j - 1] : 0) + 1;
                m->len_cur[j] = k;
                m->stamp_cur[j] = row;
                if (k > bestsize) { besti = i - k + 1; bestj = j - k + 1; bestsize = k; }
            }
        }
        int *tl = m->len_prev; m->len_prev = m->len_cur; m->len_cur = tl;
        unsigned *ts = m->stamp_prev; m->stamp_prev = m->stamp_cur; m->stamp_cur = ts;
        row_prev = row;
    }
    while (besti > alo && bestj > blo && m->a.v[besti - 1] == m->b.v[bestj - 1]) { besti--; bestj--; bestsize++; }
    while (besti + bestsize < ahi && bestj + bestsize < bhi && m->a.v[besti + bestsize] == m->b.v[bestj + bestsize])
        bestsize++;
    *bi = besti; *bj = bestj; *bk = bestsize;
}

double synth_ratio(const char *sa, const char *sb)
{
    matcher m = {0};
    double r = -1;
    if (decode(sa, &m.a) || decode(sb, &m.b)) goto out;
    int la = m.a.n, lb = m.b.n;
    if (la + lb == 0) { r = 1.0; goto out; }
    m.ent = malloc(((size_t)lb + 1) * sizeof *m.ent);
    m.len_prev = calloc((size_t)lb + 1, sizeof(int));
    m.len_cur = calloc((size_t)lb + 1, sizeof(int));
    m.stamp_prev = calloc((size_t)lb + 1, sizeof(unsigned));
    m.stamp_cur = calloc((size_t)lb + 1, sizeof(unsigned));
    if (!m.ent || !m.len_prev || !m.len_cur || !m.stamp_prev || !m.stamp_cur) goto out;
    for (int j = 0; j < lb; j++) m.ent[j] = (b2j_entry){m.b.v[j], j};
    qsort(m.ent, (size_t)lb, sizeof *m.ent, cmp_entry);
    m.nent = lb;
    if (lb >= 200) {   /* autojunk: elements in more than 1% of b (+1) are dropped from b2j */
        int ntest = lb / 100 + 1, k = 0;
        for (int s = 0; s < lb;) {
            int t = s;
            while (t < lb && m.ent[t].elt == m.ent[s].elt) t++;
            if (t - s <= ntest)
                for (int u = s; u < t; u++) m.ent[k++] = m.ent[u];
            s = t;
        }
        m.nent = k;
    }
    /* get_matching_blocks: a stack of ranges; only the total size matters */
    int cap = 64, top = 0;
    int (*stack)[4] = malloc((size_t)cap * sizeof *stack);
    if (!stack) goto out;
    stack[top][0] = 0; stack[top][1] = la; stack[top][2] = 0; stack[top][3] = lb; top++;
    long matches = 0;
    while (top) {
        top--;
        int alo = stack[top][0], ahi = stack[top][1], blo = stack[top][2], bhi = stack[top][3];
        int i, j, k;
        longest(&m, alo, ahi, blo, bhi, &i, &j, &k);
        if (!k) continue;
        matches += k;
        if (top + 2 > cap) {
            cap *= 2;
            void *ns = realloc(stack, (size_t)cap * sizeof *stack);
            if (!ns) { free(stack); goto out; }
            stack = ns;
        }
        if (alo < i && blo < j) { stack[top][0] = alo; stack[top][1] = i; stack[top][2] = blo; stack[top][3] = j; top++; }
        if (i + k < ahi && j + k < bhi) {
            stack[top][0] = i + k; stack[top][1] = ahi; stack[top][2] = j + k; stack[top][3] = bhi; top++;
        }
    }
    free(stack);
    r = 2.0 * (double)matches / (double)(la + lb);
out:
    free(m.a.v); free(m.b.v); free(m.ent);
    free(m.len_prev); free(m.len_cur); free(m.stamp_prev); free(m.stamp_cur);
    return r;
}

/* Python's str.split() whitespace: str.isspace() code points. */
static int py_space(int32_t c)
{
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

void synth_normalize(strbuf *out, const char *s)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t len = strlen(s), i = 0;
    int pending_space = 0, any = 0;
    while (i < len) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate(p + i, (utf8proc_ssize_t)(len - i), &c);
        if (k <= 0) { sb_putc(out, (char)p[i]); i++; any = 1; continue; }
        i += (size_t)k;
        if (py_space(c)) { pending_space = any; continue; }
        if (pending_space) { sb_putc(out, ' '); pending_space = 0; }
        utf8proc_uint8_t buf[4];
        utf8proc_ssize_t w = utf8proc_encode_char(utf8proc_tolower(c), buf);
        sb_append(out, (const char *)buf, (size_t)w);
        any = 1;
    }
}

int synth_is_near_dup(const char *q1, const char *a1, const char *q2, const char *a2)
{
    strbuf x = STRBUF_INIT, y = STRBUF_INIT;
    synth_normalize(&x, q1);
    synth_normalize(&y, q2);
    int dup = !strcmp(sb_str(&x), sb_str(&y));
    if (!dup) {
        sb_putc(&x, '\n');
        synth_normalize(&x, a1);
        sb_putc(&y, '\n');
        synth_normalize(&y, a2);
        dup = synth_ratio(sb_str(&x), sb_str(&y)) > 0.95;
    }
    sb_free(&x);
    sb_free(&y);
    return dup;
}
