/* qa — `### Q`/`### A` and `### Prompt`/`### Chosen`/`### Rejected` bodies
 * (docs/reference/original-spec.md §1.6, §1.7).
 *
 * The original parsed these only when building training rows, and its
 * errors carried a section-relative line and no file. dlm parses them with
 * the document and reports the file line of the offending header. The
 * grammar is the original's: headers are lines whose str.strip() equals the
 * header exactly, bodies run to the next header, are joined with "\n" and
 * str.strip()ped, and must not be empty. `### Q !probe` is a question
 * header that marks an eval probe. Lines are split like str.splitlines(). */
#include "doc/doc_internal.h"

#include <stdlib.h>
#include <string.h>

#include "doc/pystr.h"

typedef struct qline {
    const char *s;
    size_t n;
    int line;       /* file line */
} qline;

typedef struct qlines {
    qline *v;
    int n, cap;
    int base;       /* file line of the content's first line */
    int oom;
} qlines;

static void add_line(void *ctx, const char *s, size_t n, int nl_before)
{
    qlines *q = ctx;
    if (q->oom) return;
    if (q->n == q->cap) {
        int cap = q->cap ? q->cap * 2 : 16;
        qline *nv = realloc(q->v, (size_t)cap * sizeof *nv);
        if (!nv) { q->oom = 1; return; }
        q->v = nv;
        q->cap = cap;
    }
    q->v[q->n].s = s;
    q->v[q->n].n = n;
    q->v[q->n].line = q->base + nl_before;
    q->n++;
}

static int is_blank(const qline *l) { return py_is_blank(l->s, l->n); }

/* Body from line i up to the next header (per is_header), joined with "\n"
 * and stripped. */
static char *read_body(const qlines *q, int *i, int (*is_header)(const qline *))
{
    strbuf sb = STRBUF_INIT;
    int first = 1;
    while (*i < q->n && !is_header(&q->v[*i])) {
        if (!first) sb_putc(&sb, '\n');
        sb_append(&sb, q->v[*i].s, q->v[*i].n);
        first = 0;
        (*i)++;
    }
    const char *b = sb_str(&sb), *e = b + sb.len;
    py_strip(&b, &e);
    char *out = str_ndup(b, (size_t)(e - b));
    sb_free(&sb);
    return out;
}

static int is_q(const qline *l) { return py_strip_equals(l->s, l->n, "### Q") || py_strip_equals(l->s, l->n, "### Q !probe"); }
static int is_a(const qline *l) { return py_strip_equals(l->s, l->n, "### A"); }
static int is_qa(const qline *l) { return is_q(l) || is_a(l); }

static int is_prompt(const qline *l) { return py_strip_equals(l->s, l->n, "### Prompt"); }
static int is_chosen(const qline *l) { return py_strip_equals(l->s, l->n, "### Chosen"); }
static int is_rejected(const qline *l) { return py_strip_equals(l->s, l->n, "### Rejected"); }
static int is_pref_header(const qline *l) { return is_prompt(l) || is_chosen(l) || is_rejected(l); }

/* repr() of a line as the original shows it (`### Q !probe` was already
 * rewritten to `### Q` there). */
static void line_repr(strbuf *sb, const qline *l)
{
    if (py_strip_equals(l->s, l->n, "### Q !probe")) py_repr(sb, "### Q", 5);
    else py_repr(sb, l->s, l->n);
}

static int ierr(const char *path, int line, dlm_err *e, const char *msg, const qline *l)
{
    if (!l) return err_at(e, "InstructionParseError", path, line, 1, "%s", msg);
    strbuf sb = STRBUF_INIT;
    line_repr(&sb, l);
    err_at(e, "InstructionParseError", path, line, 1, "%s%s", msg, sb_str(&sb));
    sb_free(&sb);
    return -1;
}

static int parse_instruction(const char *path, doc_section *s, const qlines *q, dlm_err *e)
{
    int i = 0, cap = 0;
    while (i < q->n && is_blank(&q->v[i])) i++;
    while (i < q->n) {
        const qline *h = &q->v[i];
        if (!is_q(h)) return ierr(path, h->line, e, "expected `### Q` header alone on its line, got ", h);
        int probe = py_strip_equals(h->s, h->n, "### Q !probe");
        int qline_no = h->line;
        i++;
        char *question = read_body(q, &i, is_qa);
        if (!question) return err_set(e, "MemoryError", "out of memory");
        if (!*question) { free(question); return ierr(path, qline_no, e, "### Q body is empty", NULL); }
        if (i >= q->n) {
            free(question);
            return ierr(path, qline_no, e, "### Q without matching `### A` at end of section", NULL);
        }
        if (!is_a(&q->v[i])) {
            free(question);
            return ierr(path, q->v[i].line, e, "### Q must be followed by `### A` alone on its line, got ", &q->v[i]);
        }
        int aline_no = q->v[i].line;
        i++;
        char *answer = read_body(q, &i, is_qa);
        if (!answer) { free(question); return err_set(e, "MemoryError", "out of memory"); }
        if (!*answer) { free(question); free(answer); return ierr(path, aline_no, e, "### A body is empty", NULL); }
        if (s->n_pairs == cap) {
            cap = cap ? cap * 2 : 4;
            doc_qa *np = realloc(s->pairs, (size_t)cap * sizeof *np);
            if (!np) { free(question); free(answer); return err_set(e, "MemoryError", "out of memory"); }
            s->pairs = np;
        }
        doc_qa *p = &s->pairs[s->n_pairs++];
        p->question = question;
        p->answer = answer;
        p->q_line = qline_no;
        p->a_line = aline_no;
        p->probe = probe;
        while (i < q->n && is_blank(&q->v[i])) i++;
    }
    if (!s->n_pairs)
        return err_at(e, "InstructionParseError", path, s->line, 1, "instruction block has no ### Q / ### A pairs");
    return 0;
}

static int perr(const char *path, int line, dlm_err *e, const char *fmt, const char *hdr, const qline *l)
{
    strbuf sb = STRBUF_INIT;
    if (l) py_repr(&sb, l->s, l->n);
    char msg[512];
    snprintf(msg, sizeof msg, fmt, hdr);
    err_at(e, "PreferenceParseError", path, line, 1, "%s%s", msg, sb_str(&sb));
    sb_free(&sb);
    return -1;
}

/* One `### X` header + body; *last_line tracks the last header seen. */
static int pref_field(const char *path, const qlines *q, int *i, const char *hdr, int (*is_h)(const qline *),
                      char **out, int *hline, int *last_line, dlm_err *e)
{
    if (*i >= q->n) return perr(path, *last_line, e, "expected `%s` header, got end of section", hdr, NULL);
    const qline *l = &q->v[*i];
    if (!is_h(l)) return perr(path, l->line, e, "expected `%s` header alone on its line, got ", hdr, l);
    *hline = l->line;
    *last_line = l->line;
    (*i)++;
    *out = read_body(q, i, is_pref_header);
    if (!*out) return err_set(e, "MemoryError", "out of memory");
    if (!**out) {
        free(*out);
        *out = NULL;
        return perr(path, *hline, e, "`%s` body is empty", hdr, NULL);
    }
    return 0;
}

static int parse_preference(const char *path, doc_section *s, const qlines *q, dlm_err *e)
{
    int i = 0, cap = 0, last = s->line;
    while (i < q->n && is_blank(&q->v[i])) i++;
    while (i < q->n) {
        doc_triple t;
        memset(&t, 0, sizeof t);
        if (pref_field(path, q, &i, "### Prompt", is_prompt, &t.prompt, &t.prompt_line, &last, e) ||
            pref_field(path, q, &i, "### Chosen", is_chosen, &t.chosen, &t.chosen_line, &last, e) ||
            pref_field(path, q, &i, "### Rejected", is_rejected, &t.rejected, &t.rejected_line, &last, e)) {
            free(t.prompt); free(t.chosen); free(t.rejected);
            return -1;
        }
        if (s->n_triples == cap) {
            cap = cap ? cap * 2 : 4;
            doc_triple *nt = realloc(s->triples, (size_t)cap * sizeof *nt);
            if (!nt) { free(t.prompt); free(t.chosen); free(t.rejected); return err_set(e, "MemoryError", "out of memory"); }
            s->triples = nt;
        }
        s->triples[s->n_triples++] = t;
        while (i < q->n && is_blank(&q->v[i])) i++;
    }
    if (!s->n_triples)
        return err_at(e, "PreferenceParseError", path, s->line, 1,
                      "preference block has no ### Prompt / ### Chosen / ### Rejected triples");
    return 0;
}

int doc_parse_pairs(const char *path, doc_section *s, dlm_err *e)
{
    if (s->type != DOC_INSTRUCTION && s->type != DOC_PREFERENCE) return 0;
    qlines q;
    memset(&q, 0, sizeof q);
    q.base = s->content_line;
    py_splitlines(s->content, s->content_len, add_line, &q);
    if (q.oom) { free(q.v); return err_set(e, "MemoryError", "out of memory"); }
    int r = s->type == DOC_INSTRUCTION ? parse_instruction(path, s, &q, e) : parse_preference(path, s, &q, e);
    free(q.v);
    return r;
}
