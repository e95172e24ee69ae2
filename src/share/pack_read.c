/* pack_read — the bounded pack reader (pack.h). The zstd stream is decoded
 * here (window, ratio and truncation under our control) and fed to
 * libarchive's tar reader, which only ever sees plain tar bytes. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "share/pack.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/progress.h"
#include "util/json.h"

#define META_MAX (16u << 20)     /* metadata files are read into memory */
#define NAME_MAX_LEN 1000

void pack_limits_default(pack_limits *l)
{
    l->max_member = 16ull << 30;
    l->max_total = 64ull << 30;
    l->max_ratio = 1000;
    l->ratio_floor = 64ull << 20;
    l->max_entries = 100000;
    l->window_log_max = 29;
}

int pack_valid_dlm_id(const char *s)
{
    static const char *alpha = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    if (!s || strlen(s) != 26) return 0;
    for (int i = 0; i < 26; i++)
        if (!strchr(alpha, s[i]) || !s[i]) return 0;
    return s[0] <= '7';
}

/* ---- the zstd source ----------------------------------------------------------- */

typedef struct zsrc {
    int fd;
    const unsigned char *mem;
    size_t memlen, mempos;
    ZSTD_DStream *z;
    unsigned char in[1 << 17], out[1 << 17];
    ZSTD_inBuffer ib;
    size_t last;                 /* last ZSTD_decompressStream hint: 0 = frame complete */
    int eof, started;
    uint64_t comp, plain;
    const pack_limits *lim;
    const char *what;            /* the pack's name for messages */
    dlm_err *e;
    int failed;
    progress *pg;                /* compressed bytes read of the whole */
} zsrc;

static la_ssize_t zfail(struct archive *a, zsrc *s, const char *kind, const char *msg, const char *hint)
{
    if (!s->failed) {
        err_at(s->e, kind, s->what, 0, 0, "%s", msg);
        if (hint) err_hint(s->e, "%s", hint);
        s->failed = 1;
    }
    if (a) archive_set_error(a, EINVAL, "%s", msg);
    return -1;
}

static la_ssize_t zread(struct archive *a, void *ud, const void **buf)
{
    zsrc *s = ud;
    if (s->failed) return -1;
    for (;;) {
        if (s->ib.pos == s->ib.size && !s->eof) {
            ssize_t n;
            if (s->mem) {
                n = (ssize_t)(s->memlen - s->mempos < sizeof s->in ? s->memlen - s->mempos : sizeof s->in);
                memcpy(s->in, s->mem + s->mempos, (size_t)n);
                s->mempos += (size_t)n;
            } else {
                do n = read(s->fd, s->in, sizeof s->in);
                while (n < 0 && errno == EINTR);
                if (n < 0) {
                    err_sys(s->e, "cannot read %s", s->what);
                    s->failed = 1;
                    return -1;
                }
            }
            if (n == 0) s->eof = 1;
            s->comp += (uint64_t)n;
            if (s->pg) progress_update(s->pg, s->comp);
            s->ib = (ZSTD_inBuffer){s->in, (size_t)n, 0};
        }
        if (s->ib.pos == s->ib.size && s->eof) {
            if (!s->started) return zfail(a, s, "PackCorruptError", "empty file, not a pack", NULL);
            if (s->last != 0)
                return zfail(a, s, "PackTruncatedError", "the compressed stream ends early (truncated pack)",
                             "the download or copy was cut short; fetch the pack again");
            return 0;
        }
        s->started = 1;
        ZSTD_outBuffer ob = {s->out, sizeof s->out, 0};
        size_t r = ZSTD_decompressStream(s->z, &ob, &s->ib);
        if (ZSTD_isError(r)) {
            char m[256];
            ZSTD_ErrorCode c = ZSTD_getErrorCode(r);
            if (c == ZSTD_error_frameParameter_windowTooLarge)
                snprintf(m, sizeof m, "the zstd window is over %llu MiB: refusing a decompression bomb",
                         (1ull << s->lim->window_log_max) >> 20);
            else snprintf(m, sizeof m, "not a zstd-compressed pack, or a corrupt one (zstd: %s)", ZSTD_getErrorName(r));
            const char *hint = c == ZSTD_error_frameParameter_windowTooLarge ? "packs use a zstd window of at most 512 MiB"
                               : s->plain ? "the pack is damaged part-way; copy or fetch it again"
                                          : "a pack is the .dlm.pack file `dlm pack` writes (a .dlm document is not one)";
            return zfail(a, s, c == ZSTD_error_frameParameter_windowTooLarge ? "PackBombError" : "PackCorruptError", m,
                         hint);
        }
        s->last = r;
        if (ob.pos) {
            s->plain += ob.pos;
            if (s->plain > s->lim->ratio_floor && s->plain / (s->comp ? s->comp : 1) > s->lim->max_ratio) {
                char m[256];
                snprintf(m, sizeof m, "compression ratio past %llu:1 (%llu bytes from %llu): refusing a decompression bomb",
                         (unsigned long long)s->lim->max_ratio, (unsigned long long)s->plain,
                         (unsigned long long)s->comp);
                return zfail(a, s, "PackBombError", m, NULL);
            }
            if (s->plain > s->lim->max_total + (1ull << 30)) {
                return zfail(a, s, "PackTooLargeError", "the pack expands past the total size limit", NULL);
            }
            *buf = s->out;
            return (la_ssize_t)ob.pos;
        }
    }
}

/* ---- member names ----------------------------------------------------------------- */

/* Normalise name into out (drop one trailing '/'); refuse anything that could
 * leave the folder or that dlm never writes. NULL = ok, else the reason. */
const char *pack_check_name(const char *name, int is_dir, char *out, size_t cap)
{
    if (!name || !*name) return "a member has no name";
    size_t n = strlen(name);
    if (n > NAME_MAX_LEN || n + 1 > cap) return "member name too long";
    memcpy(out, name, n + 1);
    if (n > 1 && out[n - 1] == '/') out[--n] = 0;
    if (out[0] == '/') return "absolute path";
    for (const unsigned char *p = (const unsigned char *)out; *p; p++)
        if (*p < 0x20 || *p > 0x7e || *p == '\\') return "control, non-ASCII or backslash character in the name";
    const char *c = out;
    for (;;) {
        size_t l = strcspn(c, "/");
        if (l == 0) return "empty path component";
        if ((l == 1 && c[0] == '.') || (l == 2 && c[0] == '.' && c[1] == '.')) return "'.' or '..' in the path";
        if (!c[l]) break;
        c += l + 1;
    }
    static const char *const top_files[] = {"PACK_HEADER.json", "manifest.json", "CHECKSUMS.sha256", "provenance.json"};
    if (!strchr(out, '/')) {
        if (is_dir)
            return strcmp(out, "dlm") && strcmp(out, "store") && strcmp(out, "base") ? "unexpected top-level folder"
                                                                                      : NULL;
        for (size_t i = 0; i < sizeof top_files / sizeof *top_files; i++)
            if (!strcmp(out, top_files[i])) return NULL;
        return "unexpected top-level file";
    }
    if (!strncmp(out, "dlm/", 4)) {
        if (is_dir || strchr(out + 4, '/') || n < 8 || strcmp(out + n - 4, ".dlm")) return "dlm/ holds only the .dlm file";
        return NULL;
    }
    if (!strncmp(out, "store/", 6)) return NULL;
    if (!strncmp(out, "base/", 5)) {
        /* --include-base: the base's snapshot files, flat (pack_write.c add_base) */
        if (is_dir || strchr(out + 5, '/')) return "base/ holds only the base's files, no folders";
        return NULL;
    }
    return "member outside dlm/, store/ and base/";
}

/* ---- reading -------------------------------------------------------------------------- */

typedef struct reader {
    pack_contents *c;
    int cap;
    char *meta[5];               /* PACK_HEADER, manifest, CHECKSUMS, provenance, current.txt */
    size_t meta_len[5];
} reader;

static const char *const META_NAMES[5] = {"PACK_HEADER.json", "manifest.json", "CHECKSUMS.sha256", "provenance.json",
                                          "store/adapter/current.txt"};

static int mkdir_parent(const char *dest, const char *rel, dlm_err *e)
{
    char p[8192];
    snprintf(p, sizeof p, "%s/%s", dest, rel);
    char *slash = strrchr(p, '/');
    *slash = 0;
    return fs_mkdir_p(p, e);
}

#define NAMED_CURRENT_MAX 128

/* 1 when name is store/adapter/<an>/current.txt (a named adapter's pointer,
 * store/store.h), with <an> into an[64]. */
static int named_current(const char *name, char an[64])
{
    const char *rest = name + 14, *sl;
    if (strncmp(name, "store/adapter/", 14) || !(sl = strchr(rest, '/')) || strcmp(sl, "/current.txt") || sl == rest ||
        sl - rest >= 64 || !strncmp(rest, "versions/", 9))
        return 0;
    memcpy(an, rest, (size_t)(sl - rest));
    an[sl - rest] = 0;
    return 1;
}

/* Its content must be exactly "adapter/<an>/versions/vNNNN" (+ '\n'). */
static int named_current_add(pack_contents *c, const char *an, const strbuf *b, const char *what, dlm_err *e)
{
    char want[96], v[8];
    int n = snprintf(want, sizeof want, "adapter/%s/versions/v", an), k = 0;
    const char *t = b->buf ? b->buf : "";
    size_t len = b->buf ? b->len : 0;
    if (len > (size_t)n && !memcmp(t, want, (size_t)n))
        while (k < 4 && (size_t)(n + k) < len && t[n + k] >= '0' && t[n + k] <= '9') v[k] = t[n + k], k++;
    if (k != 4 || !((size_t)(n + 4) == len || ((size_t)(n + 5) == len && t[n + 4] == '\n')))
        return err_at(e, "PackIntegrityError", what, 0, 0, "store/adapter/%s/current.txt is malformed", an);
    v[4] = 0;
    char rel[160];
    snprintf(rel, sizeof rel, "store/adapter/%s/versions/v%s", an, v);
    if (json_object_set_new(c->named_current, an, json_string(rel))) return err_set(e, "OOMError", "out of memory");
    return 0;
}

static int read_member(struct archive *a, struct archive_entry *en, const char *dest, const pack_limits *lim,
                       reader *rd, const char *what, dlm_err *e)
{
    pack_contents *c = rd->c;
    mode_t t = archive_entry_filetype(en);
    const char *raw = archive_entry_pathname(en);
    char name[NAME_MAX_LEN + 2];
    if (archive_entry_hardlink(en) || archive_entry_symlink(en) || t == AE_IFLNK)
        return err_at(e, "PackUnsafeMemberError", what, 0, 0, "%s: links are refused in packs", raw ? raw : "?");
    if (t != AE_IFREG && t != AE_IFDIR)
        return err_at(e, "PackUnsafeMemberError", what, 0, 0, "%s: devices, fifos and other special files are refused",
                      raw ? raw : "?");
    if (archive_entry_sparse_count(en) > 0)
        return err_at(e, "PackUnsafeMemberError", what, 0, 0, "%s: sparse files are refused", raw ? raw : "?");
    const char *why = pack_check_name(raw, t == AE_IFDIR, name, sizeof name);
    if (why)
        return err_at(e, "PackUnsafeMemberError", what, 0, 0, "member '%s' refused: %s", raw ? raw : "", why),
               err_hint(e, "dlm pack never writes such a member: the pack was made by something else or altered");
    if (c->n >= lim->max_entries)
        return err_at(e, "PackTooLargeError", what, 0, 0, "more than %d members", lim->max_entries);
    if (c->n == rd->cap) {
        int nc = rd->cap ? rd->cap * 2 : 64;
        pack_member *nm = realloc(c->m, (size_t)nc * sizeof *nm);
        if (!nm) return err_set(e, "OOMError", "out of memory");
        c->m = nm;
        rd->cap = nc;
    }
    pack_member *m = &c->m[c->n];
    memset(m, 0, sizeof *m);
    if (!(m->name = strdup(name))) return err_set(e, "OOMError", "out of memory");
    c->n++;
    m->is_dir = t == AE_IFDIR;
    if (m->is_dir) {
        if (dest) {
            char p[8192];
            snprintf(p, sizeof p, "%s/%s", dest, name);
            if (fs_mkdir_p(p, e)) return -1;
        }
        return 0;
    }
    if (archive_entry_size_is_set(en) && (uint64_t)archive_entry_size(en) > lim->max_member)
        return err_at(e, "PackTooLargeError", what, 0, 0, "member %s is %lld bytes, over the %llu-byte limit", name,
                      (long long)archive_entry_size(en), (unsigned long long)lim->max_member);
    int mi = -1;
    for (int i = 0; i < 5; i++)
        if (!strcmp(name, META_NAMES[i])) mi = i;
    char an[64];
    int named = named_current(name, an);
    if (named && json_object_get(c->named_current, an))
        return err_at(e, "PackDuplicateMemberError", what, 0, 0, "member %s appears twice", name);
    if (mi >= 0 && rd->meta[mi])
        return err_at(e, "PackDuplicateMemberError", what, 0, 0, "member %s appears twice", name);
    int fd = -1;
    if (dest) {
        char p[8192];
        snprintf(p, sizeof p, "%s/%s", dest, name);
        if (mkdir_parent(dest, name, e)) return -1;
        fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno == EEXIST)
            return err_at(e, "PackDuplicateMemberError", what, 0, 0, "member %s appears twice", name);
        if (fd < 0) return err_sys(e, "cannot create %s", p);
    }
    sha256_ctx h;
    sha256_init(&h);
    strbuf meta = STRBUF_INIT;
    int rc = 0;
    static char buf[1 << 16];
    for (;;) {
        la_ssize_t n = archive_read_data(a, buf, sizeof buf);
        if (n < 0) {
            if (!e->msg[0])
                err_at(e, "PackCorruptError", what, 0, 0, "%s: %s", name, archive_error_string(a));
            rc = -1;
            break;
        }
        if (n == 0) break;
        m->size += (uint64_t)n;
        c->bytes += (uint64_t)n;
        if (m->size > lim->max_member) {
            rc = err_at(e, "PackTooLargeError", what, 0, 0, "member %s is over the %llu-byte limit", name,
                        (unsigned long long)lim->max_member);
            break;
        }
        if (c->bytes > lim->max_total) {
            rc = err_at(e, "PackTooLargeError", what, 0, 0, "the members add up to more than %llu bytes",
                        (unsigned long long)lim->max_total);
            break;
        }
        sha256_update(&h, buf, (size_t)n);
        if (named) {
            if (m->size > NAMED_CURRENT_MAX) {
                rc = err_at(e, "PackIntegrityError", what, 0, 0, "%s is malformed (over %d bytes)", name, NAMED_CURRENT_MAX);
                break;
            }
            sb_append(&meta, buf, (size_t)n);
        }
        if (mi >= 0) {
            if (m->size > META_MAX) {
                rc = err_at(e, "PackTooLargeError", what, 0, 0, "%s is over %u bytes", name, META_MAX);
                break;
            }
            sb_append(&meta, buf, (size_t)n);
        }
        if (fd >= 0) {
            const char *p = buf;
            la_ssize_t left = n;
            while (left > 0) {
                ssize_t w = write(fd, p, (size_t)left);
                if (w < 0 && errno == EINTR) continue;
                if (w < 0) { rc = err_sys(e, "cannot write under %s", dest); break; }
                p += w;
                left -= w;
            }
            if (rc) break;
        }
    }
    if (fd >= 0 && close(fd) && !rc) rc = err_sys(e, "cannot write under %s", dest);
    unsigned char d[32];
    sha256_final(&h, d);
    hex_encode(d, 32, m->sha256);
    if (!rc && named) rc = named_current_add(c, an, &meta, what, e);
    if (!rc && mi >= 0) {
        if (meta.oom) rc = err_set(e, "OOMError", "out of memory");
        else {
            rd->meta[mi] = meta.buf ? sb_detach(&meta, &rd->meta_len[mi]) : strdup("");
            if (!rd->meta[mi]) rc = err_set(e, "OOMError", "out of memory");
        }
    }
    sb_free(&meta);
    return rc;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(((const pack_member *)a)->name, ((const pack_member *)b)->name);
}

const pack_member *pack_find(const pack_contents *c, const char *rel)
{
    pack_member key = {.name = (char *)rel};
    return bsearch(&key, c->m, (size_t)c->n, sizeof *c->m, name_cmp);
}

static int is_hex64(const char *s)
{
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

static json_t *meta_json(reader *rd, int i, const char *what, dlm_err *e)
{
    json_error_t je;
    json_t *j = json_loadb(rd->meta[i], rd->meta_len[i], JSON_REJECT_DUPLICATES, &je);
    if (!j || !json_is_object(j)) {
        json_decref(j);
        err_at(e, "PackIntegrityError", what, 0, 0, "%s is not a JSON object%s%s", META_NAMES[i], j ? "" : ": ",
               j ? "" : je.text);
        return NULL;
    }
    return j;
}

/* manifest.json's "base" (pack_write.c add_base) and the base/ members
 * agree: each listed file is a member of that size and sha256, and each
 * base/ member is listed. Where unpack puts them (repo, commit, blob names)
 * is checked by hub_install_snapshot. */
static int check_base(const pack_contents *c, const char *what, dlm_err *e)
{
    json_t *b = json_object_get(c->manifest, "base");
    int nmem = 0;
    for (int i = 0; i < c->n; i++) nmem += !c->m[i].is_dir && !strncmp(c->m[i].name, "base/", 5);
    if (!b || json_is_null(b)) {
        if (nmem) return err_at(e, "PackIntegrityError", what, 0, 0, "base/ files but no \"base\" in manifest.json");
        return 0;
    }
    json_t *files = json_object_get(b, "files"), *absent = json_object_get(b, "absent"), *v;
    const char *k;
    if (!json_is_object(b) || strcmp(jget_str(b, "kind") ? jget_str(b, "kind") : "", "hf") || !jget_str(b, "repo") ||
        !jget_str(b, "commit") || !json_is_object(files) || !json_is_array(absent))
        return err_at(e, "PackIntegrityError", what, 0, 0, "manifest.json: \"base\" is malformed");
    size_t ai;
    json_array_foreach(absent, ai, v) if (!json_is_string(v))
        return err_at(e, "PackIntegrityError", what, 0, 0, "manifest.json: base.absent holds a non-string");
    if ((int)json_object_size(files) != nmem)
        return err_at(e, "PackIntegrityError", what, 0, 0, "manifest.json: base.files lists %d files, base/ holds %d",
                      (int)json_object_size(files), nmem);
    json_object_foreach(files, k, v) {
        char rel[400];
        long long sz = -1;
        if (strlen(k) > 255 || !json_is_object(v) || !jget_str(v, "blob") || !jget_str(v, "sha256") ||
            jget_int(v, "size", &sz))
            return err_at(e, "PackIntegrityError", what, 0, 0, "manifest.json: base.files entry is malformed");
        snprintf(rel, sizeof rel, "base/%s", k);
        const pack_member *m = pack_find(c, rel);
        if (!m || m->is_dir || (uint64_t)sz != m->size || strcmp(jget_str(v, "sha256"), m->sha256))
            return err_at(e, "PackIntegrityError", what, 0, 0, "manifest.json: base file %s does not match %s", k,
                          m ? "its member" : "any member");
    }
    return 0;
}

/* Every check after the stream was read in full. */
static int check_contents(reader *rd, const char *what, dlm_err *e)
{
    pack_contents *c = rd->c;
    if (c->n > 1) qsort(c->m, (size_t)c->n, sizeof *c->m, name_cmp);   /* an empty pack has no array */
    for (int i = 1; i < c->n; i++)
        if (!strcmp(c->m[i].name, c->m[i - 1].name))
            return err_at(e, "PackDuplicateMemberError", what, 0, 0, "member %s appears twice", c->m[i].name);
    for (int i = 0; i < 3; i++)
        if (!rd->meta[i])
            return err_at(e, "PackIntegrityError", what, 0, 0, "required member %s is missing", META_NAMES[i]),
                   err_hint(e, "this is not a dlm pack, or an incomplete one");
    /* the format version first: a newer pack may check differently */
    if (!(c->header = meta_json(rd, 0, what, e))) return -1;
    json_t *fv = json_object_get(c->header, "pack_format_version");
    if (!json_is_integer(fv) || json_integer_value(fv) < 1)
        return err_at(e, "PackIntegrityError", what, 0, 0, "PACK_HEADER.json: pack_format_version is missing or invalid");
    if (json_integer_value(fv) > PACK_FORMAT_VERSION)
        return err_at(e, "PackFormatVersionError", what, 0, 0,
                      "pack_format_version %lld is newer than this tool's supported version %d. Upgrade dlm.",
                      (long long)json_integer_value(fv), PACK_FORMAT_VERSION);
    c->format_version = (int)json_integer_value(fv);

    /* CHECKSUMS.sha256 covers every file but itself and manifest.json */
    int nlisted = 0;
    char *p = rd->meta[2], *end = p + rd->meta_len[2];
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) return err_at(e, "PackIntegrityError", what, 0, 0, "CHECKSUMS.sha256: last line has no newline");
        *nl = 0;
        if (nl - p < 67 || !is_hex64(p) || p[64] != ' ' || p[65] != ' ')
            return err_at(e, "PackIntegrityError", what, 0, 0, "CHECKSUMS.sha256: malformed line '%.80s'", p);
        const char *rel = p + 66;
        pack_member *m = (pack_member *)pack_find(c, rel);
        if (!m || m->is_dir)
            return err_at(e, "PackIntegrityError", what, 0, 0, "CHECKSUMS.sha256 lists %s, which the pack does not hold",
                          rel);
        if (m->sha256[64] == 1)
            return err_at(e, "PackIntegrityError", what, 0, 0, "CHECKSUMS.sha256 lists %s twice", rel);
        if (memcmp(m->sha256, p, 64))
            return err_at(e, "PackIntegrityError", what, 0, 0, "checksum mismatch for %s: expected %.12s…, got %.12s…",
                          rel, p, m->sha256),
                   err_hint(e, "the pack was altered or damaged after it was made; get a fresh copy");
        m->sha256[64] = 1;     /* listed (restored below) */
        nlisted++;
        p = nl + 1;
    }
    int rc = 0;
    for (int i = 0; i < c->n; i++) {
        pack_member *m = &c->m[i];
        if (m->is_dir) continue;
        int listed = m->sha256[64] == 1;
        m->sha256[64] = 0;
        if (!listed && strcmp(m->name, "CHECKSUMS.sha256") && strcmp(m->name, "manifest.json") && !rc)
            rc = err_at(e, "PackIntegrityError", what, 0, 0, "%s has no checksum in CHECKSUMS.sha256", m->name);
        if (listed && (!strcmp(m->name, "CHECKSUMS.sha256") || !strcmp(m->name, "manifest.json")) && !rc)
            rc = err_at(e, "PackIntegrityError", what, 0, 0, "CHECKSUMS.sha256 must not list %s", m->name);
    }
    if (rc) return rc;

    /* manifest.json: id, entries, content hash */
    if (!(c->manifest = meta_json(rd, 1, what, e))) return -1;
    const char *id = jget_str(c->manifest, "dlm_id");
    if (!pack_valid_dlm_id(id))
        return err_at(e, "PackIntegrityError", what, 0, 0, "manifest.json: dlm_id is not a 26-char ULID");
    snprintf(c->dlm_id, sizeof c->dlm_id, "%s", id);
    json_t *ent = json_object_get(c->manifest, "entries");
    if (!json_is_object(ent)) return err_at(e, "PackIntegrityError", what, 0, 0, "manifest.json: no entries object");
    sha256_ctx h;
    sha256_init(&h);
    int ncontent = 0, ndoc = 0;
    for (int i = 0; i < c->n; i++) {
        const pack_member *m = &c->m[i];
        if (m->is_dir || (strncmp(m->name, "dlm/", 4) && strncmp(m->name, "store/", 6) && strncmp(m->name, "base/", 5)))
            continue;
        json_t *sz = json_object_get(ent, m->name);
        if (!json_is_integer(sz) || (uint64_t)json_integer_value(sz) != m->size)
            return err_at(e, "PackIntegrityError", what, 0, 0, "manifest.json: entry for %s is missing or has the wrong size",
                          m->name);
        sha256_update(&h, m->name, strlen(m->name));
        sha256_update(&h, "\n", 1);
        sha256_update(&h, m->sha256, 64);
        sha256_update(&h, "\n", 1);
        ncontent++;
        if (!strncmp(m->name, "dlm/", 4)) {
            ndoc++;
            snprintf(c->dlm_rel, sizeof c->dlm_rel, "%s", m->name);
        }
    }
    /* the original's packer lists PACK_HEADER.json among the entries too
     * (every checksummed file; content_sha256 leaves it out) */
    json_t *hz = json_object_get(ent, "PACK_HEADER.json");
    if (hz) {
        const pack_member *hm = NULL;
        for (int i = 0; i < c->n && !hm; i++)
            if (!c->m[i].is_dir && !strcmp(c->m[i].name, "PACK_HEADER.json")) hm = &c->m[i];
        if (!hm || !json_is_integer(hz) || (uint64_t)json_integer_value(hz) != hm->size)
            return err_at(e, "PackIntegrityError", what, 0, 0,
                          "manifest.json: entry for PACK_HEADER.json is missing or has the wrong size");
        ncontent++;
    }
    if ((int)json_object_size(ent) != ncontent)
        return err_at(e, "PackIntegrityError", what, 0, 0, "manifest.json lists files the pack does not hold");
    unsigned char d[32];
    char hex[65];
    sha256_final(&h, d);
    hex_encode(d, 32, hex);
    const char *cs = jget_str(c->manifest, "content_sha256");
    if (!cs || strcmp(cs, hex))
        return err_at(e, "PackIntegrityError", what, 0, 0, "content_sha256 mismatch: expected %.12s…, got %.12s…",
                      cs ? cs : "(none)", hex);
    if (ndoc != 1)
        return err_at(e, "PackIntegrityError", what, 0, 0, "the pack must hold exactly one dlm/*.dlm (it holds %d)", ndoc);
    if (!pack_find(c, "store/manifest.json"))
        return err_at(e, "PackIntegrityError", what, 0, 0, "the pack holds no store/manifest.json");
    if (check_base(c, what, e)) return -1;
    if (rd->meta[3] && !(c->provenance = meta_json(rd, 3, what, e))) return -1;
    if (rd->meta[4]) {
        char v[64];
        int n = 0;
        if (rd->meta_len[4] < 40 && sscanf(rd->meta[4], "adapter/versions/v%4[0-9]%n", v, &n) == 1 && n == 22 &&
            (rd->meta[4][n] == '\n' || !rd->meta[4][n]))
            snprintf(c->current_rel, sizeof c->current_rel, "store/adapter/versions/v%s", v);
        else return err_at(e, "PackIntegrityError", what, 0, 0, "store/adapter/current.txt is malformed");
    }
    (void)nlisted;
    return 0;
}

static pack_contents *read_any(int fd, const void *mem, size_t len, const char *what, const char *dest,
                               const pack_limits *lim, dlm_err *e)
{
    hash_init();
    reader rd = {0};
    zsrc *s = calloc(1, sizeof *s);
    rd.c = calloc(1, sizeof *rd.c);
    struct archive *a = NULL;
    int rc = -1;
    if (!s || !rd.c || !(rd.c->named_current = json_object())) { err_set(e, "OOMError", "out of memory"); goto out; }
    s->fd = fd;
    s->mem = mem;
    s->memlen = len;
    progress pg;
    struct stat pst;
    progress_begin(&pg, dest ? "unpacking" : "reading pack",
                   mem ? len : fstat(fd, &pst) == 0 ? (uint64_t)pst.st_size : 0, PROGRESS_BYTES);
    s->pg = &pg;
    s->lim = lim;
    s->what = what;
    s->e = e;
    if (!(s->z = ZSTD_createDStream())) { err_set(e, "OOMError", "out of memory"); goto out; }
    ZSTD_DCtx_setParameter(s->z, ZSTD_d_windowLogMax, lim->window_log_max);
    if (dest && mkdir(dest, 0700)) { err_sys(e, "cannot create %s", dest); dest = NULL; goto out; }
    a = archive_read_new();
    if (!a || archive_read_support_format_tar(a) != ARCHIVE_OK) { err_set(e, "OOMError", "out of memory"); goto out; }
    if (archive_read_open(a, s, NULL, zread, NULL) != ARCHIVE_OK) {
        if (!s->failed) err_at(e, "PackCorruptError", what, 0, 0, "not a pack: %s", archive_error_string(a));
        goto out;
    }
    for (;;) {
        struct archive_entry *en;
        int r = archive_read_next_header(a, &en);
        if (r == ARCHIVE_EOF) break;
        if (r != ARCHIVE_OK) {
            if (!s->failed) {
                const char *m = archive_error_string(a);
                int trunc = m && strstr(m, "runcated");
                err_at(e, trunc ? "PackTruncatedError" : "PackCorruptError", what, 0, 0, "%s",
                       m ? m : "unreadable tar stream");
                if (trunc) err_hint(e, "the download or copy was cut short; fetch the pack again");
            }
            goto out;
        }
        if (read_member(a, en, dest, lim, &rd, what, e)) {
            if (s->failed) { /* the stream's own error is the better one */ }
            goto out;
        }
    }
    /* the tar end marker may come before the end of the zstd stream: read
     * the rest so that truncation and trailing garbage are caught too */
    const void *junk;
    la_ssize_t n;
    uint64_t extra = 0;
    while ((n = zread(NULL, s, &junk)) > 0) {
        for (la_ssize_t i = 0; i < n; i++)
            if (((const char *)junk)[i]) {
                err_at(e, "PackCorruptError", what, 0, 0, "data after the end of the tar stream");
                goto out;
            }
        if ((extra += (uint64_t)n) > (1u << 20)) {
            err_at(e, "PackCorruptError", what, 0, 0, "padding after the end of the tar stream");
            goto out;
        }
    }
    if (n < 0) goto out;
    if (check_contents(&rd, what, e)) goto out;
    rc = 0;
    progress_end(&pg);
    s->pg = NULL;
out:
    if (s && s->pg) progress_abort(s->pg);
    if (a) archive_read_free(a);
    if (s) ZSTD_freeDStream(s->z);
    free(s);
    for (int i = 0; i < 5; i++) free(rd.meta[i]);
    if (rc) {
        pack_contents_free(rd.c);
        if (dest) {
            dlm_err e2;
            err_clear(&e2);
            fs_remove_tree(dest, &e2);
        }
        return NULL;
    }
    return rd.c;
}

pack_contents *pack_read_file(const char *path, const char *dest, const pack_limits *lim, dlm_err *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err_sys(e, "cannot open %s", path);
        return NULL;
    }
    pack_contents *c = read_any(fd, NULL, 0, path, dest, lim, e);
    close(fd);
    return c;
}

pack_contents *pack_read_mem(const void *buf, size_t len, const char *dest, const pack_limits *lim, dlm_err *e)
{
    static const unsigned char empty[1];
    return read_any(-1, buf ? buf : empty, len, "<memory>", dest, lim, e);
}

void pack_contents_free(pack_contents *c)
{
    if (!c) return;
    for (int i = 0; i < c->n; i++) free(c->m[i].name);
    free(c->m);
    json_decref(c->header);
    json_decref(c->manifest);
    json_decref(c->provenance);
    json_decref(c->named_current);
    free(c);
}
