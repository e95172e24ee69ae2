/* sources — see sources.h. The walk, the per-file verdicts and the
 * synthesized sections. */
#include "doc/doc_internal.h"
#include "doc/sources.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/hash.h"
#include "util/log.h"

#define SRC_SNIFF 1024

const char *src_verdict_name(src_verdict v)
{
    static const char *const n[] = {"kept", "not_included", "excluded", "symlink_escape", "too_large", "media",
                                    "binary", "not_utf8", "max_files", "unreadable"};
    return (unsigned)v <= SRC_UNREADABLE ? n[v] : "?";
}

/* ---- report ---------------------------------------------------------------- */

void src_report_free(src_report *r)
{
    if (!r) return;
    for (int i = 0; i < r->n_files; i++) {
        free(r->files[i].relpath);
        free(r->files[i].reason);
        free(r->files[i].tags_json);
        free(r->files[i].transcript);
    }
    free(r->files);
    for (int i = 0; i < r->n_dirs; i++) { free(r->dirs[i].path); free(r->dirs[i].root); }
    free(r->dirs);
    for (int i = 0; i < r->n_weights; i++) { free(r->weights[i].key); free(r->weights[i].val); }
    free(r->weights);
    memset(r, 0, sizeof *r);
}

static src_file *add_file(src_report *r)
{
    if (r->n_files == r->cap_files) {
        int cap = r->cap_files ? r->cap_files * 2 : 64;
        src_file *v = realloc(r->files, (size_t)cap * sizeof *v);
        if (!v) return NULL;
        r->files = v;
        r->cap_files = cap;
    }
    src_file *f = &r->files[r->n_files++];
    memset(f, 0, sizeof *f);
    f->size = -1;
    f->weight = 1.0;
    return f;
}

/* A JSON string of s; bytes that are not UTF-8 (file names may be
 * anything) become '?' so the record stays valid JSON. */
static json_t *jstr(const char *s)
{
    json_t *j = json_string(s ? s : "");
    if (j) return j;
    char *c = strdup(s);
    if (!c) return json_string("?");
    for (char *p = c; *p; p++)
        if ((unsigned char)*p >= 0x80) *p = '?';
    j = json_string(c);
    free(c);
    return j;
}

json_t *src_report_json(const src_report *r, int with_files)
{
    json_t *dirs = json_array();
    for (int i = 0; i < r->n_dirs; i++) {
        const src_directive_stats *d = &r->dirs[i];
        json_t *sk = json_object();
        for (int v = 1; v <= SRC_UNREADABLE; v++)
            if (d->skipped[v]) json_object_set_new(sk, src_verdict_name((src_verdict)v), json_integer(d->skipped[v]));
        json_array_append_new(dirs, json_pack("{s:o, s:o, s:i, s:i, s:I, s:o}", "path", jstr(d->path), "root",
                                              jstr(d->root), "line", d->line, "files", d->kept, "bytes",
                                              (json_int_t)d->kept_bytes, "skipped", sk));
    }
    json_t *o = json_pack("{s:o, s:{s:i, s:i, s:i, s:I}}", "directives", dirs, "totals", "files", r->n_files, "kept",
                          r->kept, "skipped", r->skipped, "bytes", (json_int_t)r->kept_bytes);
    if (with_files) {
        json_t *fa = json_array();
        for (int i = 0; i < r->n_files; i++) {
            const src_file *f = &r->files[i];
            if (with_files == 2 && f->verdict != SRC_KEPT) continue;
            json_t *jf = json_pack("{s:i, s:o, s:s, s:I}", "directive", f->directive, "path", jstr(f->relpath),
                                   "verdict", src_verdict_name(f->verdict), "size", (json_int_t)f->size);
            if (f->reason) json_object_set_new(jf, "reason", jstr(f->reason));
            if (f->verdict == SRC_KEPT) {
                json_object_set_new(jf, "sha256", json_string(f->sha256));
                json_object_set_new(jf, "section_id", json_string(f->id));
                json_object_set_new(jf, "weight", json_real(f->weight));
                json_t *tags = f->tags_json ? json_loads(f->tags_json, 0, NULL) : NULL;
                json_object_set_new(jf, "tags", tags ? tags : json_object());
            }
            json_array_append_new(fa, jf);
        }
        json_object_set_new(o, "files", fa);
    }
    return o;
}

/* ---- paths ------------------------------------------------------------------- */

/* Lexical normalisation of an absolute path: "//", "." and ".." removed. */
static void norm_abs(char *p)
{
    char out[PATH_MAX];
    size_t o = 0;
    const char *s = p;
    while (*s) {
        while (*s == '/') s++;
        if (!*s) break;
        const char *e = strchr(s, '/');
        size_t k = e ? (size_t)(e - s) : strlen(s);
        if (k == 1 && s[0] == '.') {
        } else if (k == 2 && s[0] == '.' && s[1] == '.') {
            while (o > 0 && out[o - 1] != '/') o--;
            if (o > 0) o--;
        } else if (o + 1 + k < sizeof out) {
            out[o++] = '/';
            memcpy(out + o, s, k);
            o += k;
        }
        s += k;
    }
    if (o == 0) out[o++] = '/';
    out[o] = 0;
    memcpy(p, out, o + 1);
}

/* Path.resolve(strict=False): realpath of the longest existing prefix, the
 * rest appended lexically. */
static void resolve_loose(const char *in, char out[PATH_MAX])
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", in);
    norm_abs(p);
    if (realpath(p, out)) return;
    size_t n = strlen(p);
    for (size_t cut = n; cut-- > 0;) {
        if (p[cut] != '/') continue;
        char head[PATH_MAX], r[PATH_MAX];
        memcpy(head, p, cut);
        head[cut] = 0;
        if (realpath(cut ? head : "/", r)) {
            snprintf(out, PATH_MAX, "%s%s", strcmp(r, "/") ? r : "", p + cut);
            norm_abs(out);
            return;
        }
    }
    snprintf(out, PATH_MAX, "%s", p);
}

/* Is p equal to or below dir (both normalised absolute)? */
static int under(const char *p, const char *dir)
{
    size_t k = strlen(dir);
    if (k == 1 && dir[0] == '/') return 1;
    return !strncmp(p, dir, k) && (p[k] == 0 || p[k] == '/');
}

/* Path.expanduser: "~" and "~/x" from the password database's home of this
 * user (library code reads no environment), "~name/x" from name's entry. */
static int expand_user(const char *in, char *out, size_t cap)
{
    if (in[0] != '~') { snprintf(out, cap, "%s", in); return 0; }
    const char *sl = strchr(in, '/');
    size_t k = sl ? (size_t)(sl - in) : strlen(in);
    struct passwd *pw;
    if (k == 1) pw = getpwuid(getuid());
    else {
        char name[256];
        if (k - 1 >= sizeof name) return -1;
        memcpy(name, in + 1, k - 1);
        name[k - 1] = 0;
        pw = getpwnam(name);
    }
    if (!pw || !pw->pw_dir) return -1;
    snprintf(out, cap, "%s%s", pw->pw_dir, in + k);
    return 0;
}

/* ---- per-file rules ---------------------------------------------------------- */

typedef struct anchor {
    char *abs;              /* anchor directory (the .dlm/'s parent) */
    char *rel;              /* relative to the directive root ("" = root) */
    int has_yaml;
    src_yaml yaml;
    src_ignore_rule *ign;
    int n_ign;
} anchor;

typedef struct walker {
    const doc_source *d;
    int di;
    const char *doc_path;
    const src_opts *o;
    src_sink sink;
    void *ctx;
    src_report *r;
    src_directive_stats *st;
    char root[PATH_MAX];    /* resolved directive root */
    char header_root[PATH_MAX];
    int single;             /* directive names one file */
    anchor *anc;
    int n_anc, cap_anc;
    int stop;               /* max_files reached */
    strbuf content;
    char *buf;
    size_t buf_cap;
} walker;

static const char *rel_to_anchor(const anchor *a, const char *rel)
{
    size_t k = strlen(a->rel);
    return k ? rel + k + 1 : rel;
}

static int match_any(const doc_strlist *l, const char *path, const char **which)
{
    for (int i = 0; i < l->n; i++)
        if (src_glob_match(l->v[i], path)) { if (which) *which = l->v[i]; return 1; }
    return 0;
}

/* The verdict of §1.9 / the original's effective_config_for. */
static src_verdict rule_verdict(walker *w, const char *rel, strbuf *why, src_file *f)
{
    const doc_strlist *inc = &w->d->include;
    const anchor *inc_from = NULL;
    for (int i = w->n_anc - 1; i >= 0; i--)
        if (w->anc[i].has_yaml && w->anc[i].yaml.include.n) { inc = &w->anc[i].yaml.include; inc_from = &w->anc[i]; break; }
    int included = match_any(inc, rel, NULL);

    int excluded = 0;
    const char *pat = NULL;
    if (match_any(&w->d->exclude, rel, &pat)) { excluded = 1; sb_reset(why); sb_printf(why, "directive exclude '%s'", pat); }
    int defaults = 1;
    for (int i = w->n_anc - 1; i >= 0; i--)
        if (w->anc[i].has_yaml) { defaults = w->anc[i].yaml.exclude_defaults; break; }
    if (defaults)
        for (int i = 0; src_default_excludes[i]; i++)
            if (src_glob_match(src_default_excludes[i], rel)) {
                excluded = 1;
                sb_reset(why);
                sb_printf(why, "default exclude '%s'", src_default_excludes[i]);
                break;
            }
    for (int i = 0; i < w->n_anc; i++) {
        const anchor *a = &w->anc[i];
        if (a->has_yaml && match_any(&a->yaml.exclude, rel_to_anchor(a, rel), &pat)) {
            excluded = 1;
            sb_reset(why);
            sb_printf(why, "%s%s.dlm/training.yaml exclude '%s'", a->rel, *a->rel ? "/" : "", pat);
        }
    }
    for (int i = 0; i < w->n_anc; i++) {
        const anchor *a = &w->anc[i];
        const char *ra = rel_to_anchor(a, rel);
        for (int k = 0; k < a->n_ign; k++) {
            const src_ignore_rule *ru = &a->ign[k];
            if (!src_ignore_match(ru, ra, 0)) continue;
            excluded = !ru->negate;
            sb_reset(why);
            sb_printf(why, "%s%s.dlm/ignore:%d '%s%s%s%s'", a->rel, *a->rel ? "/" : "", ru->line, ru->negate ? "!" : "",
                      ru->anchored ? "/" : "", ru->pattern, ru->dir_only ? "/" : "");
        }
    }
    /* metadata (shallow → deep, deeper wins) and the weight it earns */
    json_t *tags = NULL;
    for (int i = 0; i < w->n_anc; i++) {
        const anchor *a = &w->anc[i];
        if (!a->has_yaml) continue;
        for (int k = 0; k < a->yaml.n_metadata; k++) {
            if (!tags) tags = json_object();
            json_object_set_new(tags, a->yaml.metadata[k].key, json_string(a->yaml.metadata[k].val));
        }
    }
    if (tags) {
        /* the weight it earns is resolved once every directive's .dlm/
         * configs are known (apply_weights: the original merges them all) */
        f->tags_json = json_dumps(tags, JSON_COMPACT);
        json_decref(tags);
    }
    if (excluded) return SRC_EXCLUDED;
    if (!included) {
        sb_reset(why);
        if (inc_from) sb_printf(why, "no include of %s%s.dlm/training.yaml matches", inc_from->rel, *inc_from->rel ? "/" : "");
        else sb_puts(why, "no include of the directive matches");
        return SRC_NOT_INCLUDED;
    }
    return SRC_KEPT;
}

/* 1 image, 2 audio, 0 neither (the original's _IMAGE_EXTENSIONS / _AUDIO_EXTENSIONS) */
static int is_media(const char *name)
{
    static const char *const ext[] = {".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp", ".tiff",
                                      ".wav", ".flac", ".ogg", NULL};
    const char *dot = strrchr(name, '.');
    if (!dot || dot == name || !dot[1]) return 0;     /* Path.suffix */
    for (int i = 0; ext[i]; i++)
        if (!strcasecmp(dot, ext[i])) return i < 7 ? 1 : 2;
    return 0;
}

static int set_reason(src_file *f, const char *s)
{
    free(f->reason);
    f->reason = s ? strdup(s) : NULL;
    return s && !f->reason ? -1 : 0;
}

/* Read at most cap+1 bytes (so "larger than cap" is seen without trusting
 * the size stat gave: the file may grow meanwhile). */
static int read_capped(walker *w, const char *abs, size_t cap, size_t *len)
{
    int fd = open(abs, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t n = 0;
    for (;;) {
        if (n + 1 >= w->buf_cap) {
            size_t nc = w->buf_cap ? w->buf_cap * 2 : 65536;
            if (nc > cap + 2) nc = cap + 2;
            if (nc <= w->buf_cap) break;
            char *b = realloc(w->buf, nc);
            if (!b) { close(fd); errno = ENOMEM; return -1; }
            w->buf = b;
            w->buf_cap = nc;
        }
        ssize_t k = read(fd, w->buf + n, w->buf_cap - 1 - n);
        if (k < 0) { if (errno == EINTR) continue; close(fd); return -1; }
        if (k == 0) break;
        n += (size_t)k;
        if (n > cap) break;
    }
    close(fd);
    *len = n;
    return 0;
}

static int do_file(walker *w, const char *abs, const char *rel, int is_link, dlm_err *e)
{
    const doc_source *d = w->d;
    if (d->max_files > 0 && w->st->kept >= d->max_files) { w->stop = 1; return 0; }
    src_file *f = add_file(w->r);
    if (!f) return err_set(e, "MemoryError", "out of memory");
    f->directive = w->di;
    f->relpath = strdup(rel);
    if (!f->relpath) return err_set(e, "MemoryError", "out of memory");
    strbuf why = STRBUF_INIT;
    src_verdict v = rule_verdict(w, rel, &why, f);
    struct stat sb;
    size_t len = 0;
    if (v != SRC_KEPT) goto done;
    {
        /* the name goes into the section's text ("# source: <relpath>"),
         * which must be UTF-8 like every other byte of it */
        char *chk = NULL;
        size_t cl;
        dlm_err ne;
        if (doc_text_normalize(rel, rel, strlen(rel), &chk, &cl, NULL, &ne)) {
            v = SRC_NOT_UTF8;
            sb_puts(&why, "the file name is not UTF-8");
            goto done;
        }
        free(chk);
    }
    if (is_link) {
        char real[PATH_MAX];
        if (!realpath(abs, real) || !under(real, w->root)) {
            v = SRC_SYMLINK_ESCAPE;
            sb_printf(&why, "symlink to %s, outside %s", realpath(abs, real) ? real : "?", w->root);
            goto done;
        }
    }
    if (stat(abs, &sb)) { v = SRC_UNREADABLE; sb_printf(&why, "%s", strerror(errno)); goto done; }
    f->size = sb.st_size;
    uint64_t cap = DOC_MAX_BYTES;
    if (d->max_bytes_per_file > 0 && (uint64_t)d->max_bytes_per_file < cap) cap = (uint64_t)d->max_bytes_per_file;
    if ((uint64_t)sb.st_size > cap) {
        v = SRC_TOO_LARGE;
        sb_printf(&why, "%lld bytes > %s %llu", (long long)sb.st_size,
                  d->max_bytes_per_file > 0 && (uint64_t)d->max_bytes_per_file == cap ? "max_bytes_per_file" : "dlm's cap of",
                  (unsigned long long)cap);
        goto done;
    }
    int media = is_media(fs_basename(rel));
    if (media == 1 && w->o->images) {
        /* the bytes go to the blob store (media/ingest.h), not into text */
        f->verdict = SRC_KEPT;
        f->image = 1;
        w->st->kept++;
        w->st->kept_bytes += f->size;
        w->r->kept++;
        w->r->kept_bytes += f->size;
        sb_free(&why);
        if (w->sink && !w->o->list_only && w->sink(w->ctx, f, abs, strlen(abs), e)) return -1;
        return 0;
    }
    if (media == 2 && w->o->audio) {
        /* as the original's walker: the transcript is <stem>.txt beside the
         * clip, stripped; without one the clip has no training signal and is
         * skipped (an empty one is refused at train time) */
        char side[PATH_MAX + 8];
        const char *dot = strrchr(abs, '.');
        snprintf(side, sizeof side, "%.*s.txt", (int)(dot - abs), abs);
        char *raw = NULL, *txt = NULL;
        size_t rl = 0, tl = 0;
        dlm_err te;
        if (!fs_is_file(side)) {
            v = SRC_MEDIA;
            sb_printf(&why, "audio file without its transcript sidecar %s", fs_basename(side));
            goto done;
        }
        if (fs_read_all(side, DOC_MAX_BYTES, &raw, &rl, &te) || doc_text_normalize(side, raw, rl, &txt, &tl, NULL, &te)) {
            free(raw);
            v = SRC_MEDIA;
            sb_printf(&why, "transcript sidecar %s: %s", fs_basename(side), te.msg);
            goto done;
        }
        free(raw);
        size_t a = 0;
        while (a < tl && isspace((unsigned char)txt[a])) a++;
        while (tl > a && isspace((unsigned char)txt[tl - 1])) tl--;
        f->transcript = str_ndup(txt + a, tl - a);
        free(txt);
        if (!f->transcript) { sb_free(&why); return err_set(e, "MemoryError", "out of memory"); }
        f->verdict = SRC_KEPT;
        f->audio = 1;
        w->st->kept++;
        w->st->kept_bytes += f->size;
        w->r->kept++;
        w->r->kept_bytes += f->size;
        sb_free(&why);
        if (w->sink && !w->o->list_only && w->sink(w->ctx, f, abs, strlen(abs), e)) return -1;
        return 0;
    }
    if (media) {
        v = SRC_MEDIA;
        sb_puts(&why, media == 2 ? "audio file: the base is not audio-language (an audio-language base ingests it)"
                                 : "image file: the base is text-only (a vision-language base ingests it)");
        goto done;
    }
    if (read_capped(w, abs, (size_t)cap, &len)) { v = SRC_UNREADABLE; sb_printf(&why, "%s", strerror(errno)); goto done; }
    f->size = (int64_t)len;
    if (len > cap) { v = SRC_TOO_LARGE; sb_printf(&why, "grew past %llu bytes while read", (unsigned long long)cap); goto done; }
    if (memchr(w->buf, 0, len < SRC_SNIFF ? len : SRC_SNIFF)) { v = SRC_BINARY; sb_puts(&why, "NUL byte in the first 1024 bytes"); goto done; }
    char *text = NULL;
    size_t tlen = 0;
    dlm_err te;
    if (doc_text_normalize(rel, w->buf, len, &text, &tlen, NULL, &te)) {
        v = SRC_NOT_UTF8;
        sb_puts(&why, te.msg);
        goto done;
    }
    sb_reset(&w->content);
    const char *hdr = w->single ? fs_basename(rel) : rel;
    sb_printf(&w->content, "# source: %s\n\n", hdr);
    sb_append(&w->content, text, tlen);
    free(text);
    if (w->content.oom) { sb_free(&why); return err_set(e, "MemoryError", "out of memory"); }
    sha256_hex(w->buf, len, f->sha256);
    doc_section_id(DOC_PROSE, w->content.buf, w->content.len, f->id);
    w->st->kept++;
    w->st->kept_bytes += (int64_t)len;
    w->r->kept++;
    w->r->kept_bytes += (int64_t)len;
    f->verdict = SRC_KEPT;
    sb_free(&why);
    if (w->sink && w->sink(w->ctx, f, w->content.buf, w->content.len, e)) return -1;
    return 0;
done:
    f->verdict = v;
    if (why.len && set_reason(f, sb_str(&why))) { sb_free(&why); return err_set(e, "MemoryError", "out of memory"); }
    sb_free(&why);
    w->st->skipped[v]++;
    w->r->skipped++;
    return 0;
}

/* Enter dir: if it holds a `.dlm/` directory, push its anchor. */
static int push_anchor(walker *w, const char *abs, const char *rel, int *pushed, dlm_err *e)
{
    *pushed = 0;
    char p[PATH_MAX];
    if (!fs_join(p, sizeof p, abs, ".dlm") || !fs_is_dir(p)) return 0;
    if (w->n_anc == w->cap_anc) {
        int cap = w->cap_anc ? w->cap_anc * 2 : 4;
        anchor *v = realloc(w->anc, (size_t)cap * sizeof *v);
        if (!v) return err_set(e, "MemoryError", "out of memory");
        w->anc = v;
        w->cap_anc = cap;
    }
    anchor *a = &w->anc[w->n_anc];
    memset(a, 0, sizeof *a);
    a->abs = strdup(abs);
    a->rel = strdup(rel);
    if (!a->abs || !a->rel) { free(a->abs); free(a->rel); return err_set(e, "MemoryError", "out of memory"); }
    w->n_anc++;
    *pushed = 1;
    char f[PATH_MAX], label[PATH_MAX + 64];
    char *raw = NULL, *text = NULL;
    size_t rl = 0, tl = 0;
    dlm_err le;
    if (fs_join(f, sizeof f, p, "training.yaml") && fs_is_file(f)) {
        snprintf(label, sizeof label, "%s", f);
        if (fs_read_all(f, 1u << 20, &raw, &rl, &le) || doc_text_normalize(label, raw, rl, &text, &tl, NULL, &le))
            log_warn("%s: %s; config ignored", label, le.msg);
        else if (src_yaml_parse(label, text, tl, &a->yaml, &le)) {
            char m[5200];
            err_format(&le, m, sizeof m);
            log_warn("%s (config ignored)", m);
        } else a->has_yaml = 1;
        free(raw);
        free(text);
        raw = text = NULL;
    }
    if (fs_join(f, sizeof f, p, "ignore") && fs_is_file(f)) {
        snprintf(label, sizeof label, "%s", f);
        if (fs_read_all(f, 1u << 20, &raw, &rl, &le) || doc_text_normalize(label, raw, rl, &text, &tl, NULL, &le))
            log_warn("%s: %s; ignore file skipped", label, le.msg);
        else {
            int n = src_ignore_parse(label, text, tl, &a->ign);
            if (n < 0) { free(raw); free(text); return err_set(e, "MemoryError", "out of memory"); }
            a->n_ign = n;
        }
        free(raw);
        free(text);
    }
    return 0;
}

static void pop_anchor(walker *w)
{
    anchor *a = &w->anc[--w->n_anc];
    free(a->abs);
    free(a->rel);
    if (a->has_yaml) src_yaml_free(&a->yaml);
    src_ignore_free(a->ign, a->n_ign);
}

static int walk_dir(walker *w, const char *abs, const char *rel, int depth, dlm_err *e)
{
    if (depth > 256) return 0;          /* PATH_MAX bounds it anyway */
    int pushed;
    if (push_anchor(w, abs, rel, &pushed, e)) return -1;
    char **names = NULL;
    dlm_err le;
    int n = fs_list_dir(abs, &names, &le);
    if (n < 0) {
        log_warn("%s: %s; skipped", abs, le.msg);
        n = 0;
    }
    int rc = 0;
    for (int i = 0; i < n && !rc && !w->stop; i++) {
        char ca[PATH_MAX], cr[PATH_MAX];
        if (!fs_join(ca, sizeof ca, abs, names[i])) continue;
        int k = *rel ? snprintf(cr, sizeof cr, "%s/%s", rel, names[i]) : snprintf(cr, sizeof cr, "%s", names[i]);
        if (k < 0 || (size_t)k >= sizeof cr) continue;
        struct stat ls, ts;
        if (lstat(ca, &ls)) continue;
        if (S_ISDIR(ls.st_mode)) rc = walk_dir(w, ca, cr, depth + 1, e);
        else if (S_ISREG(ls.st_mode)) rc = do_file(w, ca, cr, 0, e);
        else if (S_ISLNK(ls.st_mode) && !stat(ca, &ts) && S_ISREG(ts.st_mode)) rc = do_file(w, ca, cr, 1, e);
        /* symlinked directories are not descended (rglob does not) */
    }
    fs_free_list(names, n);
    if (pushed) pop_anchor(w);
    return rc;
}

json_t *src_weight_distribution(const src_report *r)
{
    if (!r || !r->n_weights) return NULL;
    json_t *o = json_object();
    for (int i = 0; i < r->n_files; i++) {
        const src_file *f = &r->files[i];
        if (f->verdict != SRC_KEPT || !f->tags_json) continue;
        json_t *tags = json_loads(f->tags_json, 0, NULL);
        const char *key;
        json_t *val;
        json_object_foreach(tags, key, val) {
            const char *tv = json_string_value(val);
            if (!tv) continue;
            json_t *inner = json_object_get(o, key);
            if (!inner) json_object_set_new(o, key, inner = json_object());
            json_t *n = json_object_get(inner, tv);
            json_object_set_new(inner, tv, json_integer(n ? json_integer_value(n) + 1 : 1));
        }
        json_decref(tags);
    }
    return o;
}

/* ---- tag weights ---------------------------------------------------------------
 * The original (trainer.py → data/weighted_rows.py merge_weights_maps) merges
 * the `weights` of every discovered .dlm/training.yaml of every directive into
 * one map, later entries winning per (tag_key, tag_value): directives in
 * order, within one directive its configs as discover_configs gives them:
 * sorted(root.rglob(".dlm")) (path components compared in turn: a depth-first
 * walk over sorted names), then stably by the anchor path's length in
 * characters. A row's weight is the product over its tags of the matching
 * scales, so a config anywhere in the tree weighs rows whose tags came from
 * elsewhere. rglob sees every .dlm/ (excluded subtrees and past max_files
 * too) but not through symlinked directories; so does this walk. */

typedef struct wanchor { size_t chars; int seq; src_weight *w; int n; } wanchor;
typedef struct wlist { wanchor *a; int n, cap; } wlist;

static size_t utf8_chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* dir's `.dlm/` (named in its listing) as an anchor, its training.yaml's
 * weights (a file the walk warns about is skipped here in silence). */
static int discover_one(wlist *L, const char *dir, dlm_err *e)
{
    char f[PATH_MAX];
    if (!fs_join(f, sizeof f, dir, ".dlm/training.yaml") || !fs_is_file(f)) return 0;
    char *raw = NULL, *text = NULL;
    size_t rl = 0, tl = 0;
    dlm_err le;
    src_yaml y;
    memset(&y, 0, sizeof y);
    int ok = !fs_read_all(f, 1u << 20, &raw, &rl, &le) && !doc_text_normalize(f, raw, rl, &text, &tl, NULL, &le) &&
             !src_yaml_parse(f, text, tl, &y, &le);
    free(raw);
    free(text);
    if (!ok) return 0;
    if (!y.n_weights) { src_yaml_free(&y); return 0; }
    if (L->n == L->cap) {
        int cap = L->cap ? L->cap * 2 : 8;
        wanchor *v = realloc(L->a, (size_t)cap * sizeof *v);
        if (!v) { src_yaml_free(&y); return err_set(e, "MemoryError", "out of memory"); }
        L->a = v;
        L->cap = cap;
    }
    wanchor *a = &L->a[L->n];
    a->chars = utf8_chars(dir);
    a->seq = L->n;
    a->n = y.n_weights;
    a->w = calloc((size_t)y.n_weights, sizeof *a->w);
    if (!a->w) { src_yaml_free(&y); return err_set(e, "MemoryError", "out of memory"); }
    for (int i = 0; i < y.n_weights; i++) {
        a->w[i] = y.weights[i];
        y.weights[i].key = y.weights[i].val = NULL;   /* moved */
    }
    L->n++;
    src_yaml_free(&y);
    return 0;
}

static int discover_weights(wlist *L, const char *dir, int depth, dlm_err *e)
{
    if (depth > 256) return 0;
    char **names = NULL;
    dlm_err le;
    int n = fs_list_dir(dir, &names, &le);
    if (n < 0) return 0;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        char ca[PATH_MAX];
        struct stat ls;
        if (!fs_join(ca, sizeof ca, dir, names[i]) || lstat(ca, &ls) || !S_ISDIR(ls.st_mode)) continue;
        if (!strcmp(names[i], ".dlm")) rc = discover_one(L, dir, e);
        if (!rc) rc = discover_weights(L, ca, depth + 1, e);
    }
    fs_free_list(names, n);
    return rc;
}

static int wanchor_cmp(const void *x, const void *y)
{
    const wanchor *a = x, *b = y;
    if (a->chars != b->chars) return a->chars < b->chars ? -1 : 1;
    return a->seq - b->seq;   /* stable: Python's sort */
}

static void wlist_free(wlist *L)
{
    for (int i = 0; i < L->n; i++) {
        for (int k = 0; k < L->a[i].n; k++) { free(L->a[i].w[k].key); free(L->a[i].w[k].val); }
        free(L->a[i].w);
    }
    free(L->a);
    memset(L, 0, sizeof *L);
}

/* Merge one directive's configs into the map (weights in the report). */
static int merge_weights(src_report *r, wlist *L, dlm_err *e)
{
    if (L->n > 1) qsort(L->a, (size_t)L->n, sizeof *L->a, wanchor_cmp);
    for (int i = 0; i < L->n; i++)
        for (int k = 0; k < L->a[i].n; k++) {
            src_weight *w = &L->a[i].w[k];
            int j = 0;
            while (j < r->n_weights && (strcmp(r->weights[j].key, w->key) || strcmp(r->weights[j].val, w->val))) j++;
            if (j == r->n_weights) {
                src_weight *v = realloc(r->weights, (size_t)(j + 1) * sizeof *v);
                if (!v) return err_set(e, "MemoryError", "out of memory");
                r->weights = v;
                r->weights[j] = (src_weight){w->key, w->val, w->w};
                w->key = w->val = NULL;
                r->n_weights++;
            } else r->weights[j].w = w->w;
        }
    return 0;
}

/* Every file's weight: the product, over its tags in order, of the merged
 * map's scale for (key, value) (resolve_row_weight). */
static void apply_weights(src_report *r)
{
    for (int i = 0; i < r->n_files; i++) {
        src_file *f = &r->files[i];
        f->weight = 1.0;
        if (!f->tags_json || !r->n_weights) continue;
        json_t *tags = json_loads(f->tags_json, 0, NULL);
        const char *key;
        json_t *val;
        json_object_foreach(tags, key, val) {
            const char *tv = json_string_value(val);
            for (int j = 0; tv && j < r->n_weights; j++)
                if (!strcmp(r->weights[j].key, key) && !strcmp(r->weights[j].val, tv)) { f->weight *= r->weights[j].w; break; }
        }
        json_decref(tags);
    }
}

/* ---- directives -------------------------------------------------------------- */

int src_expand(const char *doc_path, const doc_frontmatter *fm, const src_opts *o, src_sink sink, void *ctx,
               src_report *r, dlm_err *e)
{
    memset(r, 0, sizeof *r);
    const doc_training *t = &fm->training;
    if (!t->n_sources) return 0;
    r->dirs = calloc((size_t)t->n_sources, sizeof *r->dirs);
    if (!r->dirs) return err_set(e, "MemoryError", "out of memory");
    char dir[PATH_MAX], base[PATH_MAX];
    fs_dirname(dir, sizeof dir, doc_path);
    if (!realpath(dir, base)) return err_sys(e, "cannot resolve the directory of '%s'", doc_path);
    /* the auto-scaffold shape: <corpus>/.dlm/corpus.dlm anchors at <corpus> */
    if (!strcmp(fs_basename(base), ".dlm")) {
        char *sl = strrchr(base, '/');
        if (sl == base) base[1] = 0; else *sl = 0;
    }
    int strict = t->sources_policy == DOC_POLICY_STRICT;
    walker w;
    memset(&w, 0, sizeof w);
    w.doc_path = doc_path;
    static const src_opts none;   /* NULL opts: the defaults (do_file reads them) */
    w.o = o ? o : &none;
    w.sink = sink;
    w.ctx = ctx;
    w.r = r;
    int rc = 0;
    for (int i = 0; i < t->n_sources && !rc; i++) {
        const doc_source *d = &t->sources[i];
        src_directive_stats *st = &r->dirs[i];
        r->n_dirs = i + 1;
        st->path = strdup(d->path ? d->path : "");
        st->line = d->line;
        if (!st->path) { rc = err_set(e, "MemoryError", "out of memory"); break; }
        char raw[PATH_MAX], exp[PATH_MAX];
        if (d->path[0] != '/' && d->path[0] != '~') snprintf(raw, sizeof raw, "%s/%s", base, d->path);
        else snprintf(raw, sizeof raw, "%s", d->path);
        if (expand_user(raw, exp, sizeof exp)) {
            err_at(e, "DirectivePathError", doc_path, d->line, 0, "directive path %s: cannot expand '~'", d->path);
            rc = err_hint(e, "write the path out in full");
            break;
        }
        if (exp[0] != '/') {   /* "~" expanded to a relative home: anchor it */
            char tmp[PATH_MAX];
            snprintf(tmp, sizeof tmp, "%s/%s", base, exp);
            snprintf(exp, sizeof exp, "%s", tmp);
        }
        resolve_loose(exp, w.root);
        st->root = strdup(w.root);
        if (strict && !under(w.root, base)) {
            err_at(e, "DirectivePolicyError", doc_path, d->line, 0,
                   "directive path %s escapes strict-policy root %s", w.root, base);
            rc = err_hint(e, "either move the path under the .dlm's parent directory or set "
                             "`training.sources_policy: permissive` to allow external paths");
            break;
        }
        if (!strict) {
            char lex[PATH_MAX];
            snprintf(lex, sizeof lex, "%s", exp);
            norm_abs(lex);
            if (under(lex, base) && !under(w.root, base))
                log_warn("%s:%d: directive: symlink at %s escapes %s (permissive: proceeding)", doc_path, d->line, lex,
                         base);
        }
        struct stat sb;
        if (stat(w.root, &sb)) {
            err_at(e, "DirectivePathError", doc_path, d->line, 0, "directive path %s: path does not exist", w.root);
            rc = err_hint(e, "fix `path:` in training.sources, or remove the directive");
            break;
        }
        w.d = d;
        w.di = i;
        w.st = st;
        w.stop = 0;
        if (S_ISDIR(sb.st_mode)) {
            w.single = 0;
            wlist wl = {0};
            rc = discover_weights(&wl, w.root, 0, e);
            if (!rc) rc = merge_weights(r, &wl, e);
            wlist_free(&wl);
            if (!rc) rc = walk_dir(&w, w.root, "", 0, e);
        } else {
            w.single = 1;
            rc = do_file(&w, w.root, fs_basename(w.root), 0, e);
        }
        while (w.n_anc) pop_anchor(&w);
        if (w.stop)
            log_info("%s:%d: directive %s: max_files=%lld reached; the rest of the tree is not read", doc_path, d->line,
                     d->path, (long long)d->max_files);
    }
    free(w.anc);
    free(w.buf);
    sb_free(&w.content);
    if (!rc) apply_weights(r);
    return rc;
}

/* ---- on a document ----------------------------------------------------------- */

typedef struct append_ctx { dlm_doc *d; src_report *r; } append_ctx;

static int append_section(void *ctx, const src_file *f, const char *content, size_t len, dlm_err *e)
{
    append_ctx *ac = ctx;
    dlm_doc *d = ac->d;
    if (d->n == d->cap) {
        int cap = d->cap ? d->cap * 2 : 16;
        doc_section *v = realloc(d->sections, (size_t)cap * sizeof *v);
        if (!v) return err_set(e, "MemoryError", "out of memory");
        d->sections = v;
        d->cap = cap;
    }
    doc_section *s = &d->sections[d->n];
    memset(s, 0, sizeof *s);
    if (f->image || f->audio) {
        /* as the original's walker: path = relpath; an image's alt is the
         * file's stem, an audio clip's transcript its <stem>.txt sidecar */
        const char *base = fs_basename(f->relpath), *dot = strrchr(base, '.');
        s->type = f->image ? DOC_IMAGE : DOC_AUDIO;
        s->content = strdup("");
        s->media_path = strdup(f->relpath);
        char **text = f->image ? &s->media_alt : &s->media_transcript;
        *text = f->image ? str_ndup(base, dot && dot != base ? (size_t)(dot - base) : strlen(base)) : strdup(f->transcript);
        s->media_src = str_ndup(content, len);
        s->source_file = strdup(f->relpath);
        if (!s->content || !s->media_path || !*text || !s->media_src || !s->source_file) {
            doc_section_clear(s);
            return err_set(e, "MemoryError", "out of memory");
        }
        doc_media_section_id(s->type, s->media_path, NULL, s->id);
        s->line = d->fm.training.sources[f->directive].line;
        s->content_line = s->line;
        s->source_index = (int)(f - ac->r->files);
        s->source_weight = 1.0;
        d->n++;
        return 0;
    }
    s->type = DOC_PROSE;
    s->content = str_ndup(content, len);
    s->source_file = strdup(f->relpath);
    if (!s->content || !s->source_file) {
        free(s->content);
        free(s->source_file);
        return err_set(e, "MemoryError", "out of memory");
    }
    s->content_len = len;
    memcpy(s->id, f->id, sizeof s->id);
    s->line = d->fm.training.sources[f->directive].line;
    s->content_line = s->line;
    s->source_index = (int)(f - ac->r->files);
    s->source_weight = 1.0;   /* the merged weights are known after the walk */
    d->n++;
    return 0;
}

int doc_expand_sources(dlm_doc *d, dlm_err *e)
{
    return doc_expand_sources_images(d, 0, e);
}

int doc_expand_sources_images(dlm_doc *d, int images, dlm_err *e)
{
    return doc_expand_sources_media(d, images, 0, e);
}

int doc_expand_sources_media(dlm_doc *d, int images, int audio, dlm_err *e)
{
    if (d->sources || !d->fm.training.n_sources) return 0;
    src_report *r = calloc(1, sizeof *r);
    if (!r) return err_set(e, "MemoryError", "out of memory");
    src_opts o = {.images = images, .audio = audio};
    int n0 = d->n;
    append_ctx ac = {d, r};
    if (src_expand(d->path, &d->fm, &o, append_section, &ac, r, e)) {
        for (int i = n0; i < d->n; i++) doc_section_clear(&d->sections[i]);
        d->n = n0;
        src_report_free(r);
        free(r);
        return -1;
    }
    for (int i = n0; i < d->n; i++) d->sections[i].source_weight = r->files[d->sections[i].source_index].weight;
    d->sources = r;
    return 0;
}

const src_report *doc_sources_report(const dlm_doc *d)
{
    return d->sources;
}
