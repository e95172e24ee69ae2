/* body — the markdown body → sections (docs/reference/original-spec.md §1.5).
 *
 * A line-oriented scan. A line starting with ``` toggles "in code block";
 * inside one nothing is a fence. Outside, a whole line `::type[#adapter]::`
 * or `::image key="v" ...::` closes the current section and opens the next.
 * Content is the raw lines between fences joined with "\n"; the first
 * line(s) of an instruction/preference section may be provenance markers,
 * which are lifted out before hashing. Prose that is only whitespace is
 * dropped; fenced sections are kept even when empty.
 *
 * The grammar is the original's regular expressions written out by hand
 * (Python's \s is Unicode whitespace, so py_isspace is used for it). */
#include "doc/doc_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "doc/pystr.h"

static const char *const TYPE_NAMES[] = {"prose", "instruction", "preference", "image", "audio"};
#define VALID_TYPES "['prose', 'instruction', 'preference', 'image', 'audio']"

const char *doc_section_type_name(doc_section_type t)
{
    return (unsigned)t < 5 ? TYPE_NAMES[t] : "?";
}

static int type_from(const char *s, size_t n, doc_section_type *t)
{
    for (int i = 0; i < 5; i++)
        if (strlen(TYPE_NAMES[i]) == n && !memcmp(TYPE_NAMES[i], s, n)) { *t = (doc_section_type)i; return 0; }
    return -1;
}

static int is_lower(char c) { return c >= 'a' && c <= 'z'; }
static int is_ident(char c) { return is_lower(c) || (c >= '0' && c <= '9') || c == '_'; }

/* Skip Unicode whitespace from s[i]; returns the new index. */
static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n) {
        uint32_t cp;
        int len = py_utf8_next(s + i, n - i, &cp);
        if (!py_isspace(cp)) break;
        i += (size_t)len;
    }
    return i;
}

/* One `key="value"` attribute. */
typedef struct attr {
    const char *k, *v;
    size_t kn, vn;
} attr;

#define MAX_ATTRS 16

/* `(?:\s+[a-z][a-z0-9_]*="[^"\n]*")+` starting at s[i]; fills attrs,
 * returns the index after the last group, or 0 when no group matched. */
static size_t attr_groups(const char *s, size_t n, size_t i, attr *a, int *na, int *overflow)
{
    size_t end = 0;
    *na = 0;
    *overflow = 0;
    for (;;) {
        size_t j = skip_ws(s, n, i);
        if (j == i || j >= n || !is_lower(s[j])) return end;
        size_t k0 = j;
        while (j < n && is_ident(s[j])) j++;
        size_t kn = j - k0;
        if (j + 1 >= n || s[j] != '=' || s[j + 1] != '"') return end;
        j += 2;
        size_t v0 = j;
        while (j < n && s[j] != '"') j++;
        if (j >= n) return end;
        if (*na < MAX_ATTRS) {
            a[*na].k = s + k0;
            a[*na].kn = kn;
            a[*na].v = s + v0;
            a[*na].vn = j - v0;
            (*na)++;
        } else *overflow = 1;
        i = j + 1;
        end = i;
    }
}

/* `^::([a-z][a-z0-9_]*)((?:\s+key="v")+)\s*::$` */
static int match_attr_fence(const char *s, size_t n, size_t *name_len, attr *a, int *na, int *overflow)
{
    if (n < 4 || s[0] != ':' || s[1] != ':' || !is_lower(s[2])) return 0;
    size_t i = 3;
    while (i < n && is_ident(s[i])) i++;
    *name_len = i - 2;
    size_t end = attr_groups(s, n, i, a, na, overflow);
    if (!end) return 0;
    size_t j = skip_ws(s, n, end);
    return j + 2 == n && s[j] == ':' && s[j + 1] == ':';
}

/* `^::([A-Za-z0-9_#-]+)::$` */
static int match_bare_fence(const char *s, size_t n)
{
    if (n < 5 || s[0] != ':' || s[1] != ':' || s[n - 1] != ':' || s[n - 2] != ':') return 0;
    for (size_t i = 2; i < n - 2; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '#' || c == '-'))
            return 0;
    }
    return 1;
}

static int adapter_suffix_ok(const char *s, size_t n)
{
    if (n < 1 || n > 32 || !is_lower(s[0])) return 0;
    for (size_t i = 1; i < n; i++)
        if (!is_ident(s[i])) return 0;
    return 1;
}

static int all_ascii(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) return 0;
    return 1;
}

static char *dupn(const char *s, size_t n) { return str_ndup(s, n); }

/* ---- scanner state ---------------------------------------------------------- */

typedef struct scan {
    const char *path;
    doc_section *secs;
    int n, cap;
    /* current section */
    doc_section_type type;
    char *adapter;
    char *mpath, *malt, *mtrans;
    int fenced;
    int start_line;
    const char *first;      /* first content line (NULL = none yet) */
    const char *last_end;   /* end of the last content line */
    int first_line;         /* file line of `first` */
    dlm_err *e;
} scan;

static int marker_err(scan *sc, int line, const char *msg)
{
    return err_at(sc->e, "FenceError", sc->path, line, 1, "%s", msg);
}

static void sorted_list(strbuf *sb, const char *const *names, int n)
{
    /* names are given already sorted */
    sb_putc(sb, '[');
    for (int i = 0; i < n; i++) sb_printf(sb, "%s'%s'", i ? ", " : "", names[i]);
    sb_putc(sb, ']');
}

/* Parse a marker's attribute blob against the allowed key set (sorted). */
static int marker_attrs(scan *sc, const char *what, const char *blob, size_t bn, const char *const *keys,
                        int nkeys, char **vals, int line)
{
    attr a[MAX_ATTRS];
    int na, over;
    char msg[1024];
    size_t end = attr_groups(blob, bn, 0, a, &na, &over);
    if (end != bn) {
        snprintf(msg, sizeof msg, "invalid %s marker syntax", what);
        return marker_err(sc, line, msg);
    }
    for (int i = 0; i < na; i++) {
        int idx = -1;
        for (int k = 0; k < nkeys; k++)
            if (strlen(keys[k]) == a[i].kn && !memcmp(keys[k], a[i].k, a[i].kn)) idx = k;
        if (idx >= 0 && vals[idx]) {
            snprintf(msg, sizeof msg, "%s marker repeats attribute '%.*s'", what, (int)a[i].kn, a[i].k);
            return marker_err(sc, line, msg);
        }
        if (idx < 0) {
            strbuf sb = STRBUF_INIT;
            sb_printf(&sb, "%s marker has unknown attribute '%.*s' (allowed: ", what, (int)a[i].kn, a[i].k);
            sorted_list(&sb, keys, nkeys);
            sb_putc(&sb, ')');
            int r = marker_err(sc, line, sb_str(&sb));
            sb_free(&sb);
            return r;
        }
        vals[idx] = dupn(a[i].v, a[i].vn);
        if (!vals[idx]) return err_set(sc->e, "MemoryError", "out of memory");
    }
    if (over) return marker_err(sc, line, "too many marker attributes");
    strbuf miss = STRBUF_INIT;
    int nm = 0;
    for (int k = 0; k < nkeys; k++)
        if (!vals[k]) sb_printf(&miss, "%s'%s'", nm++ ? ", " : "", keys[k]);
    if (nm) {
        snprintf(msg, sizeof msg, "%s marker is missing required attribute(s) [%s]", what, sb_str(&miss));
        sb_free(&miss);
        return marker_err(sc, line, msg);
    }
    sb_free(&miss);
    return 0;
}

static int starts(const char *s, size_t n, const char *p)
{
    size_t m = strlen(p);
    return n >= m && !memcmp(s, p, m);
}

static int ends(const char *s, size_t n, const char *p)
{
    size_t m = strlen(p);
    return n >= m && !memcmp(s + n - m, p, m);
}

#define HARVEST_PRE "<!-- dlm-auto-harvest: source=\""
#define MINED_PRE "<!-- dlm-auto-mined:"
#define SYNTH_PRE "<!-- dlm-auto-synth:"

/* Returns 1 if the line was a marker (lifted into s), 0 if not, -1 error. */
static int try_marker(scan *sc, doc_section *s, const char *l, size_t n, int line)
{
    if (starts(l, n, HARVEST_PRE) && ends(l, n, "\" -->") && n >= strlen(HARVEST_PRE) + 5) {
        const char *v = l + strlen(HARVEST_PRE);
        size_t vn = n - strlen(HARVEST_PRE) - 5;
        if (!memchr(v, '"', vn)) {
            free(s->harvest_source);
            s->harvest_source = dupn(v, vn);
            s->auto_harvest = 1;
            return s->harvest_source ? 1 : -1;
        }
    }
    if (s->type == DOC_PREFERENCE && starts(l, n, MINED_PRE) && ends(l, n, " -->") &&
        n >= strlen(MINED_PRE) + 4) {
        static const char *const keys[] = {"judge_name", "judge_score_chosen", "judge_score_rejected",
                                           "mined_at", "mined_run_id"};
        char *vals[5] = {0};
        const char *blob = l + strlen(MINED_PRE);
        size_t bn = n - strlen(MINED_PRE) - 4;
        int r = marker_attrs(sc, "dlm-auto-mined", blob, bn, keys, 5, vals, line);
        double sc1 = 0, sc2 = 0;
        int64_t run = 0;
        int over = 0;
        if (!r && (py_float_parse(vals[1], strlen(vals[1]), &sc1) || py_float_parse(vals[2], strlen(vals[2]), &sc2)))
            r = marker_err(sc, line, "dlm-auto-mined marker judge scores must be floats");
        if (!r && (!isfinite(sc1) || !isfinite(sc2)))
            r = marker_err(sc, line, "dlm-auto-mined marker judge scores must be finite");
        if (!r && !py_isoformat_ok(vals[3]))
            r = marker_err(sc, line, "dlm-auto-mined marker mined_at must be ISO-8601");
        if (!r && py_int_parse(vals[4], strlen(vals[4]), &run, &over))
            r = marker_err(sc, line, "dlm-auto-mined marker mined_run_id must be an integer");
        if (!r && !over && run < 1)
            r = marker_err(sc, line, "dlm-auto-mined marker mined_run_id must be >= 1");
        if (!r && over)
            r = marker_err(sc, line, "dlm-auto-mined marker mined_run_id is out of range");
        if (r) {
            for (int k = 0; k < 5; k++) free(vals[k]);
            return -1;
        }
        free(s->judge_name); free(s->judge_score_chosen_text); free(s->judge_score_rejected_text); free(s->mined_at);
        s->judge_name = vals[0];
        s->judge_score_chosen_text = vals[1];
        s->judge_score_rejected_text = vals[2];
        s->mined_at = vals[3];
        free(vals[4]);
        s->judge_score_chosen = sc1;
        s->judge_score_rejected = sc2;
        s->mined_run_id = run;
        s->auto_mined = 1;
        return 1;
    }
    if (s->type == DOC_INSTRUCTION && starts(l, n, SYNTH_PRE) && ends(l, n, " -->") &&
        n >= strlen(SYNTH_PRE) + 4) {
        /* sorted for messages: source_section_id, synth_at, synth_strategy, synth_teacher */
        static const char *const keys[] = {"source_section_id", "synth_at", "synth_strategy", "synth_teacher"};
        char *vals[4] = {0};
        const char *blob = l + strlen(SYNTH_PRE);
        size_t bn = n - strlen(SYNTH_PRE) - 4;
        int r = marker_attrs(sc, "dlm-auto-synth", blob, bn, keys, 4, vals, line);
        if (!r && !py_isoformat_ok(vals[1]))
            r = marker_err(sc, line, "dlm-auto-synth marker synth_at must be ISO-8601");
        if (!r) {
            const char *id = vals[0];
            int ok = strlen(id) == 16;
            for (int k = 0; ok && id[k]; k++)
                if (!((id[k] >= '0' && id[k] <= '9') || (id[k] >= 'a' && id[k] <= 'f'))) ok = 0;
            if (!ok)
                r = marker_err(sc, line, "dlm-auto-synth marker source_section_id must be a 16-char lowercase hex section id");
        }
        if (!r && !vals[3][0]) r = marker_err(sc, line, "dlm-auto-synth marker synth_teacher must be non-empty");
        if (!r && !vals[2][0]) r = marker_err(sc, line, "dlm-auto-synth marker synth_strategy must be non-empty");
        if (r) {
            for (int k = 0; k < 4; k++) free(vals[k]);
            return -1;
        }
        free(s->source_section_id); free(s->synth_at); free(s->synth_strategy); free(s->synth_teacher);
        s->source_section_id = vals[0];
        s->synth_at = vals[1];
        s->synth_strategy = vals[2];
        s->synth_teacher = vals[3];
        s->auto_synth = 1;
        return 1;
    }
    return 0;
}

void doc_section_clear(doc_section *s)
{
    free(s->adapter);
    free(s->content);
    for (int i = 0; i < s->n_pairs; i++) { free(s->pairs[i].question); free(s->pairs[i].answer); }
    free(s->pairs);
    for (int i = 0; i < s->n_triples; i++) {
        free(s->triples[i].prompt); free(s->triples[i].chosen); free(s->triples[i].rejected);
    }
    free(s->triples);
    free(s->media_path); free(s->media_alt); free(s->media_transcript); free(s->media_src);
    free(s->harvest_source);
    free(s->judge_name); free(s->judge_score_chosen_text); free(s->judge_score_rejected_text); free(s->mined_at);
    free(s->synth_teacher); free(s->synth_strategy); free(s->synth_at); free(s->source_section_id);
    free(s->source_file);
    memset(s, 0, sizeof *s);
}

/* Close the current section (spec: flush()). */
static int flush(scan *sc)
{
    doc_section s;
    memset(&s, 0, sizeof s);
    s.type = sc->type;
    s.line = sc->start_line;
    s.fenced = sc->fenced;
    const char *p = sc->first, *end = sc->last_end;
    int line = sc->first_line;
    if (p && s.type != DOC_PROSE && s.type != DOC_IMAGE && s.type != DOC_AUDIO) {
        while (p) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            const char *le = nl ? nl : end;
            int r = try_marker(sc, &s, p, (size_t)(le - p), line);
            if (r < 0) { doc_section_clear(&s); return -1; }
            if (r == 0) break;
            p = nl ? nl + 1 : NULL;
            line++;
        }
    }
    size_t clen = p ? (size_t)(end - p) : 0;
    if (s.type == DOC_PROSE && py_is_blank(p ? p : "", clen)) {
        doc_section_clear(&s);
        free(sc->adapter);
        sc->adapter = NULL;
        return 0;
    }
    s.content = dupn(p ? p : "", clen);
    s.content_len = clen;
    s.content_line = p ? line : sc->start_line + 1;
    s.adapter = sc->adapter;
    sc->adapter = NULL;
    s.media_path = sc->mpath;
    s.media_alt = sc->malt;
    s.media_transcript = sc->mtrans;
    sc->mpath = sc->malt = sc->mtrans = NULL;
    if (!s.content) { doc_section_clear(&s); return err_set(sc->e, "MemoryError", "out of memory"); }
    if (s.type == DOC_IMAGE || s.type == DOC_AUDIO) doc_media_section_id(s.type, s.media_path, NULL, s.id);
    else doc_section_id(s.type, s.content, s.content_len, s.id);
    if (sc->n == sc->cap) {
        int cap = sc->cap ? sc->cap * 2 : 8;
        doc_section *ns = realloc(sc->secs, (size_t)cap * sizeof *ns);
        if (!ns) { doc_section_clear(&s); return err_set(sc->e, "MemoryError", "out of memory"); }
        sc->secs = ns;
        sc->cap = cap;
    }
    sc->secs[sc->n++] = s;
    return 0;
}

static void begin(scan *sc, doc_section_type t, int line)
{
    sc->type = t;
    sc->start_line = line;
    sc->fenced = 1;
    sc->first = NULL;
    sc->last_end = NULL;
}

static int attr_fence(scan *sc, const char *l, size_t n, size_t name_len, attr *a, int na, int over, int line)
{
    const char *name = l + 2;
    doc_section_type t;
    char msg[1024];
    if (type_from(name, name_len, &t))
        return err_at(sc->e, "FenceError", sc->path, line, 1,
                      "unknown attribute fence '::%.*s...::'; attribute form is only valid for types ['audio', 'image']",
                      (int)name_len, name);
    if (t != DOC_IMAGE && t != DOC_AUDIO)
        return err_at(sc->e, "FenceError", sc->path, line, 1, "fence '::%.*s...::' does not take attributes",
                      (int)name_len, name);
    static const char *const img_allowed[] = {"alt", "path"};
    static const char *const aud_allowed[] = {"path", "transcript"};
    const char *const *allowed = t == DOC_IMAGE ? img_allowed : aud_allowed;
    char *vals[2] = {0};
    for (int i = 0; i < na; i++) {
        int idx = -1;
        for (int k = 0; k < 2; k++)
            if (strlen(allowed[k]) == a[i].kn && !memcmp(allowed[k], a[i].k, a[i].kn)) idx = k;
        if (idx >= 0 && vals[idx]) {
            snprintf(msg, sizeof msg, "fence '::%.*s...::' repeats attribute '%.*s'", (int)name_len, name,
                     (int)a[i].kn, a[i].k);
            goto fail;
        }
        if (idx < 0) {
            snprintf(msg, sizeof msg, "fence '::%.*s...::' has unknown attribute '%.*s' (allowed: ['%s', '%s'])",
                     (int)name_len, name, (int)a[i].kn, a[i].k, allowed[0], allowed[1]);
            goto fail;
        }
        if (!all_ascii(a[i].v, a[i].vn)) {
            snprintf(msg, sizeof msg, "fence '::%.*s...::' attribute '%.*s' contains non-ASCII characters",
                     (int)name_len, name, (int)a[i].kn, a[i].k);
            goto fail;
        }
        vals[idx] = dupn(a[i].v, a[i].vn);
        if (!vals[idx]) { snprintf(msg, sizeof msg, "out of memory"); goto fail; }
    }
    if (over) { snprintf(msg, sizeof msg, "fence '::%.*s...::' has too many attributes", (int)name_len, name); goto fail; }
    int path_i = t == DOC_IMAGE ? 1 : 0, other_i = t == DOC_IMAGE ? 0 : 1;
    if (!vals[path_i] || (t == DOC_AUDIO && !vals[other_i])) {
        strbuf miss = STRBUF_INIT;
        int nm = 0;
        for (int k = 0; k < 2; k++) {
            int required = t == DOC_AUDIO || k == path_i;
            if (required && !vals[k]) sb_printf(&miss, "%s'%s'", nm++ ? ", " : "", allowed[k]);
        }
        snprintf(msg, sizeof msg, "fence '::%.*s...::' is missing required attribute(s) [%s]", (int)name_len, name,
                 sb_str(&miss));
        sb_free(&miss);
        goto fail;
    }
    if (flush(sc)) { free(vals[0]); free(vals[1]); return -1; }
    begin(sc, t, line);
    sc->mpath = vals[path_i];
    if (t == DOC_IMAGE) sc->malt = vals[other_i];
    else sc->mtrans = vals[other_i];
    return 0;
fail:
    free(vals[0]);
    free(vals[1]);
    return err_at(sc->e, "FenceError", sc->path, line, 1, "%s", msg);
}

static int bare_fence(scan *sc, const char *l, size_t n, int line)
{
    const char *name = l + 2;
    size_t nn = n - 4;
    const char *hash = memchr(name, '#', nn);
    size_t base_n = hash ? (size_t)(hash - name) : nn;
    char *adapter = NULL;
    if (hash) {
        const char *ad = hash + 1;
        size_t an = nn - base_n - 1;
        if (an == 0)
            return err_at(sc->e, "FenceError", sc->path, line, 1,
                          "fence '::%.*s::' has an empty adapter suffix after '#'", (int)nn, name);
        if (!adapter_suffix_ok(ad, an)) {
            strbuf r = STRBUF_INIT;
            py_repr(&r, ad, an);
            err_at(sc->e, "FenceError", sc->path, line, 1,
                   "fence '::%.*s::' has an invalid adapter name %s (must match ^[a-z][a-z0-9_]{0,31}$)",
                   (int)nn, name, sb_str(&r));
            sb_free(&r);
            return -1;
        }
        adapter = dupn(ad, an);
        if (!adapter) return err_set(sc->e, "MemoryError", "out of memory");
    }
    doc_section_type t;
    if (type_from(name, base_n, &t)) {
        free(adapter);
        return err_at(sc->e, "FenceError", sc->path, line, 1,
                      "unknown section fence '::%.*s::'; valid types are " VALID_TYPES, (int)nn, name);
    }
    if (t == DOC_IMAGE || t == DOC_AUDIO) {
        free(adapter);
        return err_at(sc->e, "FenceError", sc->path, line, 1,
                      "fence '::%.*s::' requires attributes (expected e.g. `::%s path=\"...\"::`)", (int)nn, name,
                      TYPE_NAMES[t]);
    }
    if (flush(sc)) { free(adapter); return -1; }
    begin(sc, t, line);
    sc->adapter = adapter;
    return 0;
}

int doc_parse_body(const char *path, const char *body, size_t len, int body_line,
                   doc_section **out, int *nout, dlm_err *e)
{
    *out = NULL;
    *nout = 0;
    /* One leading "\n" (the blank line after `---`) and one trailing "\n"
     * (the file's last newline) are not content. */
    if (len && body[0] == '\n') { body++; len--; body_line++; }
    if (len && body[len - 1] == '\n') len--;

    scan sc;
    memset(&sc, 0, sizeof sc);
    sc.path = path;
    sc.e = e;
    sc.type = DOC_PROSE;
    sc.start_line = body_line;
    int in_code = 0, code_line = 0;
    const char *p = body, *end = body + len;
    int line = body_line;
    while (len && p <= end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        size_t n = (size_t)(le - p);
        int is_fence_line = 0;
        if (n >= 3 && !memcmp(p, "```", 3)) {
            in_code = !in_code;
            if (in_code) code_line = line;
        } else if (!in_code) {
            size_t name_len;
            attr a[MAX_ATTRS];
            int na, over;
            if (match_attr_fence(p, n, &name_len, a, &na, &over)) {
                if (attr_fence(&sc, p, n, name_len, a, na, over, line)) goto fail;
                is_fence_line = 1;
            } else if (match_bare_fence(p, n)) {
                if (bare_fence(&sc, p, n, line)) goto fail;
                is_fence_line = 1;
            }
        }
        if (!is_fence_line) {
            if (!sc.first) { sc.first = p; sc.first_line = line; }
            sc.last_end = le;
        }
        if (!nl) break;
        p = nl + 1;
        line++;
    }
    if (in_code) {
        err_at(e, "FenceError", path, code_line, 1, "unterminated triple-backtick code block in body");
        goto fail;
    }
    if (flush(&sc)) goto fail;
    for (int i = 0; i < sc.n; i++)
        if (doc_parse_pairs(path, &sc.secs[i], e)) goto fail;
    *out = sc.secs;
    *nout = sc.n;
    return 0;
fail:
    for (int i = 0; i < sc.n; i++) doc_section_clear(&sc.secs[i]);
    free(sc.secs);
    free(sc.adapter);
    free(sc.mpath); free(sc.malt); free(sc.mtrans);
    return -1;
}
