/* migrate — schema versions 1..15 (docs/reference/original-spec.md §1.4).
 *
 * Read path: the parsed YAML is walked up the migration chain in memory
 * (the file is untouched) before validation. Only v1→v2 changes data
 * (`training.dpo` → `training.preference`); the other steps record a
 * feature epoch. A future version is refused.
 *
 * Write path (`dlm migrate`): when only the version number changes, dlm
 * edits the `dlm_version:` value in place (or inserts the line), so the
 * user's comments and layout survive; when v1→v2 rewrote data, the
 * frontmatter is re-serialised like the original does (every key path the
 * document spelled out is kept, defaults elsewhere are omitted). The body
 * is kept byte for byte, so no section id changes (the original normalised
 * the blank lines around the body, which could change the first or last
 * section's id). Either way the result is parsed again and must give the
 * same frontmatter values and the same sections. */
#include "doc/doc_internal.h"

#include <stdlib.h>
#include <string.h>

#include "doc/pystr.h"
#include "util/fs.h"

static const char *const STEP_DESC[DOC_SCHEMA_VERSION] = {
    [1] = "training.dpo → training.preference (method: dpo; beta, learning_rate, num_epochs under hyperparams; "
          "reference pre_dpo_adapter → pre_adapter)",
    [2] = "identity (training.cpt available)",
    [3] = "identity (training.adapters available)",
    [4] = "identity (training.precision available)",
    [5] = "identity (training.sources / sources_policy available)",
    [6] = "identity (auto-harvest marker available)",
    [7] = "identity (training.gate available)",
    [8] = "identity (training.cache available)",
    [9] = "identity (::image fence available)",
    [10] = "identity (::audio fence available)",
    [11] = "identity (training.audio available)",
    [12] = "identity (base-model registry refresh)",
    [13] = "identity (auto-mined marker available)",
    [14] = "identity (auto-synth marker available)",
};

const char *doc_migration_step_desc(int from_version)
{
    if (from_version < 1 || from_version >= DOC_SCHEMA_VERSION) return "";
    return STEP_DESC[from_version];
}

/* v1 → v2: training.dpo → training.preference. */
static int migrate_v1(ydoc *y, int *changed)
{
    ynode *root = y->root, *tkey;
    ynode *training = ymap_get(root, "training", &tkey);
    if (!training || training->kind != YN_MAP) return 0;
    ynode *dkey;
    ynode *dpo = ymap_get(training, "dpo", &dkey);
    if (!dkey) return 0;
    ynode *t2 = ymap_clone(y, training);
    if (!t2) return -1;
    ymap_del(t2, "dpo");
    if (ymap_set(y, root, tkey, t2)) return -1;
    *changed = 1;
    if (dpo->kind == YN_NULL) return 0;   /* dict.pop() returned None: nothing to move */
    ynode *pkey = ynode_new_str(y, "preference", dkey->line, dkey->col);
    if (!pkey) return -1;
    if (dpo->kind != YN_MAP) return ymap_set(y, t2, pkey, dpo);   /* let validation complain */
    ynode *pref = ynode_new(y, YN_MAP, dpo->line, dpo->col);
    if (!pref) return -1;
    ynode *k = ynode_new_str(y, "method", dpo->line, dpo->col), *v = ynode_new_str(y, "dpo", dpo->line, dpo->col);
    if (!k || !v || ymap_set(y, pref, k, v)) return -1;
    ynode *src_k, *src;
    if ((src = ymap_get(dpo, "enabled", &src_k)) && ymap_set(y, pref, src_k, src)) return -1;
    ynode *hyper = NULL;
    static const char *const hk[] = {"beta", "learning_rate", "num_epochs"};
    for (int i = 0; i < 3; i++) {
        if (!(src = ymap_get(dpo, hk[i], &src_k))) continue;
        if (!hyper) {
            hyper = ynode_new(y, YN_MAP, src_k->line, src_k->col);
            if (!hyper) return -1;
        }
        if (ymap_set(y, hyper, src_k, src)) return -1;
    }
    if (hyper) {
        ynode *hkey = ynode_new_str(y, "hyperparams", hyper->line, hyper->col);
        if (!hkey || ymap_set(y, pref, hkey, hyper)) return -1;
    }
    if ((src = ymap_get(dpo, "loss_type", &src_k)) && ymap_set(y, pref, src_k, src)) return -1;
    if ((src = ymap_get(dpo, "reference", &src_k))) {
        if (ynode_is_str(src, "pre_dpo_adapter")) {
            src = ynode_new_str(y, "pre_adapter", src->line, src->col);
            if (!src) return -1;
        }
        if (ymap_set(y, pref, src_k, src)) return -1;
    }
    return ymap_set(y, t2, pkey, pref);
}

int doc_migrate_tree(const char *path, ydoc *y, int *from, int *data_changed, dlm_err *e)
{
    ynode *vkey;
    ynode *vn = ymap_get(y->root, "dlm_version", &vkey);
    *data_changed = 0;
    *from = 1;
    if (vn) {
        const ynode *at = vkey;
        if (vn->kind != YN_INT)
            return err_at(e, "SchemaValidationError", path, at->line, at->col,
                          "dlm_version must be an integer, got %s", ynode_pytype(vn));
        if (vn->big || vn->i > DOC_SCHEMA_VERSION) {
            if (vn->big && vn->i < 0)
                return err_at(e, "DlmVersionError", path, at->line, at->col,
                              "no migrator registered for dlm_version=%s; target_version=%d.", vn->bigtext,
                              DOC_SCHEMA_VERSION);
            char num[64];
            if (vn->big) snprintf(num, sizeof num, "%s", vn->bigtext);
            else snprintf(num, sizeof num, "%lld", (long long)vn->i);
            return err_at(e, "DlmVersionError", path, at->line, at->col,
                          "dlm_version %s is newer than this parser (CURRENT_SCHEMA_VERSION=%d); upgrade dlm "
                          "or check the source's schema.", num, DOC_SCHEMA_VERSION);
        }
        if (vn->i < 1)
            return err_at(e, "DlmVersionError", path, at->line, at->col,
                          "no migrator registered for dlm_version=%lld; target_version=%d.", (long long)vn->i,
                          DOC_SCHEMA_VERSION);
        *from = (int)vn->i;
    }
    if (*from == 1 && migrate_v1(y, data_changed))
        return err_set(e, "MemoryError", "out of memory migrating '%s'", path);
    return 0;
}

/* ---- write path -------------------------------------------------------------- */

void doc_migration_free(doc_migration *m)
{
    free(m->text);
    sb_free(&m->notes);
    memset(m, 0, sizeof *m);
}

/* Byte offset of (line, col) — both 1-based, col in characters — in text
 * whose first line is file line first_line. */
static size_t offset_of(const char *text, size_t len, int first_line, int line, int col)
{
    size_t p = 0;
    for (int l = first_line; l < line && p < len; l++) {
        const char *nl = memchr(text + p, '\n', len - p);
        if (!nl) return len;
        p = (size_t)(nl - text) + 1;
    }
    for (int c = 1; c < col && p < len && text[p] != '\n'; c++) {
        uint32_t cp;
        p += (size_t)py_utf8_next(text + p, len - p, &cp);
    }
    return p;
}

static int same_sections(const dlm_doc *a, const dlm_doc *b)
{
    if (doc_nsections(a) != doc_nsections(b)) return 0;
    for (int i = 0; i < doc_nsections(a); i++) {
        const doc_section *x = doc_section_at(a, i), *y = doc_section_at(b, i);
        if (x->type != y->type || strcmp(x->id, y->id) || x->content_len != y->content_len ||
            memcmp(x->content, y->content, x->content_len))
            return 0;
        if ((x->adapter || y->adapter) && (!x->adapter || !y->adapter || strcmp(x->adapter, y->adapter))) return 0;
    }
    return 1;
}

/* The migrated text must read back as the same document at version 15. */
static int verify(const dlm_doc *old, const char *text, size_t len, dlm_err *e)
{
    dlm_err pe;
    dlm_doc *n = doc_parse(doc_path(old), text, len, &pe);
    if (!n) return err_set(e, "MigrationError", "migrated document does not parse: %s", pe.msg);
    json_t *a = doc_frontmatter_json(old), *b = doc_frontmatter_json(n);
    int ok = a && b && json_equal(a, b) && same_sections(old, n) && doc_fm(n)->source_version == DOC_SCHEMA_VERSION;
    json_decref(a);
    json_decref(b);
    doc_free(n);
    return ok ? 0 : err_set(e, "MigrationError", "migrated document would read differently; not written");
}

/* In-place edit of the version number (identity migrations). */
static int edit_version(const dlm_doc *d, const char *text, size_t len, strbuf *out)
{
    size_t yoff, ylen, fm_end, boff;
    int body_line;
    dlm_err e;
    if (doc_split(d->path, text, len, &yoff, &ylen, &fm_end, &boff, &body_line, &e)) return -1;
    ydoc y;
    if (ydoc_parse(text + yoff, ylen, 2, d->path, &y, &e) || !y.root) return -1;
    ynode *vkey, *idkey;
    ynode *vn = ymap_get(y.root, "dlm_version", &vkey);
    int r = -1;
    if (vn) {
        size_t at = yoff + offset_of(text + yoff, ylen, 2, vn->line, vn->col);
        if (vn->kind == YN_INT && at + vn->len <= len && !memcmp(text + at, vn->text, vn->len)) {
            sb_append(out, text, at);
            sb_printf(out, "%d", DOC_SCHEMA_VERSION);
            sb_append(out, text + at + vn->len, len - at - vn->len);
            r = 0;
        }
    } else {
        /* Insert after the dlm_id line when it is a one-line top-level key,
         * else as the first frontmatter line. */
        ynode *idv = ymap_get(y.root, "dlm_id", &idkey);
        size_t at = yoff;
        if (idv && idkey->col == 1 && idv->line == idkey->line) {
            size_t next = yoff + offset_of(text + yoff, ylen, 2, idkey->line + 1, 1);
            if (next <= yoff + ylen && (next == yoff + ylen || (text[next] != ' ' && text[next] != '\t')))
                at = next;
        }
        if (at > yoff + ylen) at = yoff + ylen;
        sb_append(out, text, at);
        sb_printf(out, "dlm_version: %d\n", DOC_SCHEMA_VERSION);
        sb_append(out, text + at, len - at);
        r = 0;
    }
    ydoc_free(&y);
    return r;
}

/* Full re-serialisation (v1 documents whose data moved). */
static int reserialize(const dlm_doc *d, const char *text, size_t len, strbuf *out, dlm_err *e)
{
    size_t yoff, ylen, fm_end, boff;
    int body_line;
    if (doc_split(d->path, text, len, &yoff, &ylen, &fm_end, &boff, &body_line, e)) return -1;
    ydoc y;
    if (ydoc_parse(text + yoff, ylen, 2, d->path, &y, e)) return -1;
    int from, changed;
    if (!y.root || doc_migrate_tree(d->path, &y, &from, &changed, e)) { ydoc_free(&y); return -1; }
    strbuf fm = STRBUF_INIT;
    int r = doc_fm_emit(doc_fm(d), y.root, &fm);
    ydoc_free(&y);
    if (r) { sb_free(&fm); return err_set(e, "MemoryError", "out of memory"); }
    sb_puts(out, "---\n");
    sb_append(out, fm.buf ? fm.buf : "", fm.len);
    sb_puts(out, "---\n");
    sb_append(out, text + boff, len - boff);
    sb_free(&fm);
    return 0;
}

int doc_migrate_file(const char *path, doc_migration *m, dlm_err *e)
{
    memset(m, 0, sizeof *m);
    dlm_doc *d = doc_load(path, e);
    if (!d) return -1;
    m->from_version = doc_fm(d)->source_version;
    m->to_version = DOC_SCHEMA_VERSION;
    m->applied = DOC_SCHEMA_VERSION - m->from_version;
    if (!m->applied) { doc_free(d); return 0; }
    size_t len;
    const char *text = doc_text(d, &len);
    /* Did v1→v2 move data? Re-run the tree migration to find out. */
    size_t yoff, ylen, fm_end, boff;
    int body_line, from = 1, changed = 0;
    if (doc_split(path, text, len, &yoff, &ylen, &fm_end, &boff, &body_line, e)) { doc_free(d); return -1; }
    if (!py_is_blank(text + yoff, ylen)) {
        ydoc y;
        if (ydoc_parse(text + yoff, ylen, 2, path, &y, e)) { doc_free(d); return -1; }
        if (y.root && doc_migrate_tree(path, &y, &from, &changed, e)) { ydoc_free(&y); doc_free(d); return -1; }
        ydoc_free(&y);
    }
    m->rewrote_data = changed;
    strbuf out = STRBUF_INIT;
    int r = -1;
    if (!changed && !edit_version(d, text, len, &out) && !verify(d, out.buf, out.len, e)) r = 0;
    if (r) {
        sb_reset(&out);
        r = reserialize(d, text, len, &out, e);
        if (!r) r = verify(d, out.buf, out.len, e);
    }
    if (r) { sb_free(&out); doc_free(d); return -1; }
    for (int v = m->from_version; v < DOC_SCHEMA_VERSION; v++)
        if (v == 1 && changed) sb_printf(&m->notes, "v1 → v2: %s\n", STEP_DESC[1]);
    m->text = sb_detach(&out, &m->text_len);
    doc_free(d);
    return m->text ? 0 : err_set(e, "MemoryError", "out of memory");
}
