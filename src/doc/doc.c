/* doc — the document handle: load, parse, accessors, section ids, edits. */
#include "doc/doc_internal.h"

#include <stdlib.h>
#include <string.h>

#include "doc/pystr.h"
#include "doc/sources.h"
#include "util/fs.h"
#include "util/hash.h"

/* ---- section ids (docs/reference/original-spec.md §1.8) --------------------------------------------- */

void doc_section_id(doc_section_type t, const char *content, size_t len, char out[17])
{
    /* Content is already normalised by the reader; normalise again for
     * callers that hash text from elsewhere (BOM strip, CRLF/CR → LF). */
    sha256_ctx c;
    sha256_init(&c);
    const char *name = doc_section_type_name(t);
    sha256_update(&c, name, strlen(name));
    sha256_update(&c, "\n", 1);
    size_t i = 0;
    if (len >= 3 && (unsigned char)content[0] == 0xef && (unsigned char)content[1] == 0xbb &&
        (unsigned char)content[2] == 0xbf)
        i = 3;
    size_t run = i;
    for (; i < len; i++) {
        if (content[i] != '\r') continue;
        sha256_update(&c, content + run, i - run);
        sha256_update(&c, "\n", 1);
        if (i + 1 < len && content[i + 1] == '\n') i++;
        run = i + 1;
    }
    sha256_update(&c, content + run, len - run);
    unsigned char d[32];
    sha256_final(&c, d);
    hex_encode(d, 8, out);
    out[16] = 0;
}

void doc_media_section_id(doc_section_type t, const char *path, const char *blob_sha, char out[17])
{
    sha256_ctx c;
    sha256_init(&c);
    const char *name = doc_section_type_name(t);
    sha256_update(&c, name, strlen(name));
    sha256_update(&c, "\n", 1);
    if (path) sha256_update(&c, path, strlen(path));
    if (blob_sha) {
        sha256_update(&c, "\n", 1);
        sha256_update(&c, blob_sha, strlen(blob_sha));
    }
    unsigned char d[32];
    sha256_final(&c, d);
    hex_encode(d, 8, out);
    out[16] = 0;
}

/* ---- frontmatter delimiting (docs/reference/original-spec.md §1.2) ------------------------------------ */

int doc_split(const char *path, const char *text, size_t len, size_t *yaml_off, size_t *yaml_len,
              size_t *fm_end, size_t *body_off, int *body_line, dlm_err *e)
{
    const char *nl = memchr(text, '\n', len);
    size_t l0 = nl ? (size_t)(nl - text) : len;
    if (l0 != 3 || memcmp(text, "---", 3)) {
        strbuf r = STRBUF_INIT;
        py_repr(&r, text, l0);
        err_at(e, "FrontmatterError", path, 1, 1, "expected '---' on line 1 to open frontmatter, got %s", sb_str(&r));
        sb_free(&r);
        return -1;
    }
    if (!nl) return err_at(e, "FrontmatterError", path, 1, 1, "no closing '---' found for frontmatter block");
    size_t p = l0 + 1;
    int line = 2;
    while (p <= len) {
        const char *n2 = memchr(text + p, '\n', len - p);
        size_t le = n2 ? (size_t)(n2 - text) : len;
        if (le - p == 3 && !memcmp(text + p, "---", 3)) {
            *yaml_off = l0 + 1;
            *yaml_len = p > l0 + 1 ? p - 1 - (l0 + 1) : 0;
            *fm_end = le;
            *body_off = n2 ? le + 1 : len;
            *body_line = line + 1;
            return 0;
        }
        if (!n2) break;
        p = le + 1;
        line++;
    }
    return err_at(e, "FrontmatterError", path, 1, 1, "no closing '---' found for frontmatter block");
}

/* ---- parse ------------------------------------------------------------------- */

void doc_free(dlm_doc *d)
{
    if (!d) return;
    free(d->path);
    free(d->raw);
    free(d->text);
    doc_fm_free(&d->fm);
    for (int i = 0; i < d->n; i++) doc_section_clear(&d->sections[i]);
    free(d->sections);
    src_report_free(d->sources);
    free(d->sources);
    free(d->scoped);
    free(d);
}

/* Parse d->text into fm + sections. */
static int parse_text(dlm_doc *d, dlm_err *e)
{
    size_t yoff, ylen, boff;
    if (doc_split(d->path, d->text, d->text_len, &yoff, &ylen, &d->fm_end, &boff, &d->body_line, e)) return -1;
    ydoc y = {0};
    const char *ys = d->text + yoff;
    if (!py_is_blank(ys, ylen)) {
        if (ydoc_parse(ys, ylen, 2, d->path, &y, e)) return -1;
        if (!y.root || y.root->kind != YN_MAP) {
            err_at(e, "FrontmatterError", d->path, 2, 0, "frontmatter must be a mapping, got %s",
                   y.root ? ynode_pytype(y.root) : "NoneType");
            ydoc_free(&y);
            return -1;
        }
    } else {
        y.arena = NULL;
    }
    ynode empty;
    memset(&empty, 0, sizeof empty);
    empty.kind = YN_MAP;
    empty.line = 2;
    const ynode *root = y.root ? y.root : &empty;
    int from = 1, changed = 0;
    if (y.root && doc_migrate_tree(d->path, &y, &from, &changed, e)) { ydoc_free(&y); return -1; }
    root = y.root ? y.root : &empty;
    int r = doc_schema_validate(d->path, root, &d->fm, e);
    ydoc_free(&y);
    if (r) return -1;
    d->fm.source_version = from;
    d->fm.dlm_version = DOC_SCHEMA_VERSION;
    if (doc_parse_body(d->path, d->text + boff, d->text_len - boff, d->body_line, &d->sections, &d->n, e)) {
        doc_fm_free(&d->fm);
        return -1;
    }
    d->cap = d->n;
    /* §3.9: a suffix naming an undeclared adapter stops here, at its line */
    if (doc_check_routes(d, e)) {
        for (int i = 0; i < d->n; i++) doc_section_clear(&d->sections[i]);
        free(d->sections);
        d->sections = NULL;
        d->n = d->cap = 0;
        doc_fm_free(&d->fm);
        return -1;
    }
    return 0;
}

dlm_doc *doc_parse(const char *path, const void *bytes, size_t len, dlm_err *e)
{
    if (!path) path = "<text>";
    if (len > DOC_MAX_BYTES) {
        err_at(e, "DlmEncodingError", path, 0, 0, "document is too large (%zu bytes, limit %u)", len, DOC_MAX_BYTES);
        return NULL;
    }
    dlm_doc *d = calloc(1, sizeof *d);
    if (!d) { err_set(e, "MemoryError", "out of memory"); return NULL; }
    d->path = strdup(path);
    d->raw = malloc(len + 1);
    if (!d->path || !d->raw) { doc_free(d); err_set(e, "MemoryError", "out of memory"); return NULL; }
    if (len) memcpy(d->raw, bytes, len);
    d->raw[len] = 0;
    d->raw_len = len;
    if (doc_text_normalize(path, d->raw, len, &d->text, &d->text_len, NULL, e) || parse_text(d, e)) {
        doc_free(d);
        return NULL;
    }
    return d;
}

dlm_doc *doc_load(const char *path, dlm_err *e)
{
    char *buf;
    size_t len;
    if (fs_read_all(path, DOC_MAX_BYTES, &buf, &len, e)) return NULL;
    dlm_doc *d = doc_parse(path, buf, len, e);
    free(buf);
    return d;
}

const char *doc_path(const dlm_doc *d) { return d->path; }
const char *doc_raw(const dlm_doc *d, size_t *len) { if (len) *len = d->raw_len; return d->raw; }
const char *doc_text(const dlm_doc *d, size_t *len) { if (len) *len = d->text_len; return d->text; }
const doc_frontmatter *doc_fm(const dlm_doc *d) { return &d->fm; }
int doc_nsections(const dlm_doc *d) { return d->n; }
const doc_section *doc_section_at(const dlm_doc *d, int i) { return i >= 0 && i < d->n ? &d->sections[i] : NULL; }
int doc_body_line(const dlm_doc *d) { return d->body_line; }

void doc_set_media_blob(dlm_doc *d, int i, const char *sha)
{
    if (i < 0 || i >= d->n) return;
    doc_section *s = &d->sections[i];
    snprintf(s->media_blob_sha, sizeof s->media_blob_sha, "%s", sha);
    doc_media_section_id(s->type, s->media_path, s->media_blob_sha, s->id);
}
int doc_dirty(const dlm_doc *d) { return d->dirty; }

/* ---- edits ------------------------------------------------------------------- */

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static int copy_section(doc_section *dst, const doc_section *src)
{
    memset(dst, 0, sizeof *dst);
    dst->type = src->type;
    dst->fenced = 1;
    dst->adapter = dup_or_null(src->adapter);
    size_t clen = src->content ? strlen(src->content) : 0;
    dst->content = str_ndup(src->content ? src->content : "", clen);
    dst->content_len = clen;
    dst->media_path = dup_or_null(src->media_path);
    dst->media_alt = dup_or_null(src->media_alt);
    dst->media_transcript = dup_or_null(src->media_transcript);
    dst->auto_harvest = src->auto_harvest;
    dst->harvest_source = dup_or_null(src->harvest_source);
    dst->auto_mined = src->auto_mined;
    dst->judge_name = dup_or_null(src->judge_name);
    dst->judge_score_chosen = src->judge_score_chosen;
    dst->judge_score_rejected = src->judge_score_rejected;
    dst->judge_score_chosen_text = dup_or_null(src->judge_score_chosen_text);
    dst->judge_score_rejected_text = dup_or_null(src->judge_score_rejected_text);
    dst->mined_at = dup_or_null(src->mined_at);
    dst->mined_run_id = src->mined_run_id;
    dst->auto_synth = src->auto_synth;
    dst->synth_teacher = dup_or_null(src->synth_teacher);
    dst->synth_strategy = dup_or_null(src->synth_strategy);
    dst->synth_at = dup_or_null(src->synth_at);
    dst->source_section_id = dup_or_null(src->source_section_id);
    return dst->content ? 0 : -1;
}

/* Re-parse d's current serialisation and adopt its sections (ids, pairs,
 * lines), so an edited handle looks exactly like a freshly read one. */
static int reparse(dlm_doc *d, const char *text, size_t len, dlm_err *e)
{
    dlm_doc *n = doc_parse(d->path, text, len, e);
    if (!n) return -1;
    for (int i = 0; i < d->n; i++) doc_section_clear(&d->sections[i]);
    free(d->sections);
    d->sections = n->sections;
    d->n = n->n;
    d->cap = n->n;
    n->sections = NULL;
    n->n = 0;
    doc_free(n);
    return 0;
}

int doc_append_section(dlm_doc *d, const doc_section *tmpl, dlm_err *e)
{
    if ((unsigned)tmpl->type > DOC_AUDIO) return err_set(e, "ValueError", "unknown section type");
    if (doc_check_route(d->path, &d->fm, tmpl, e)) return -1;   /* before the write-back parse wraps it */
    if (d->n == d->cap) {
        int cap = d->cap ? d->cap * 2 : 8;
        doc_section *ns = realloc(d->sections, (size_t)cap * sizeof *ns);
        if (!ns) return err_set(e, "MemoryError", "out of memory");
        d->sections = ns;
        d->cap = cap;
    }
    if (copy_section(&d->sections[d->n], tmpl)) {
        doc_section_clear(&d->sections[d->n]);
        return err_set(e, "MemoryError", "out of memory");
    }
    d->n++;
    strbuf sb = STRBUF_INIT;
    int old_dirty = d->dirty;
    d->dirty = 1;
    if (doc_serialize(d, &sb, e) || reparse(d, sb.buf, sb.len, e)) {
        sb_free(&sb);
        d->n--;
        doc_section_clear(&d->sections[d->n]);
        d->dirty = old_dirty;
        return -1;
    }
    sb_free(&sb);
    return 0;
}

int doc_remove_section(dlm_doc *d, int i, dlm_err *e)
{
    if (i < 0 || i >= d->n) return err_set(e, "ValueError", "no section %d", i);
    doc_section gone = d->sections[i];
    memmove(d->sections + i, d->sections + i + 1, (size_t)(d->n - i - 1) * sizeof *d->sections);
    d->n--;
    int old_dirty = d->dirty;
    d->dirty = 1;
    strbuf sb = STRBUF_INIT;
    if (doc_serialize(d, &sb, e) || reparse(d, sb.buf, sb.len, e)) {
        sb_free(&sb);
        memmove(d->sections + i + 1, d->sections + i, (size_t)(d->n - i) * sizeof *d->sections);
        d->sections[i] = gone;
        d->n++;
        d->dirty = old_dirty;
        return -1;
    }
    sb_free(&sb);
    doc_section_clear(&gone);
    return 0;
}
