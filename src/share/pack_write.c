/* pack_write — a store and its document into one deterministic
 * tar+zstd file (spec §7, pack.h). */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "doc/doc.h"
#include "share/pack.h"
#include "share/provenance.h"
#include "share/sign.h"
#include "store/store.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/progress.h"
#include "util/json.h"
#include "util/str.h"
#include "util/timeutil.h"
#include "version.h"
#include "weights/hub.h"
#include "weights/registry.h"

#define MAX_DOC_BYTES (64u << 20)

/* One member to write: a directory, a file on disk, or bytes in memory. */
typedef struct item {
    char *name;                 /* relpath in the pack, no trailing '/' */
    int is_dir;
    char *disk;                 /* absolute path of the file, or NULL */
    char *mem;                  /* in-memory contents, or NULL */
    uint64_t size;
    char sha[65];
} item;

typedef struct items {
    item *v;
    int n, cap;
} items;

static item *items_add(items *l, const char *name, dlm_err *e)
{
    if (l->n == l->cap) {
        int nc = l->cap ? l->cap * 2 : 64;
        item *nv = realloc(l->v, (size_t)nc * sizeof *nv);
        if (!nv) return err_set(e, "OOMError", "out of memory"), NULL;
        l->v = nv;
        l->cap = nc;
    }
    item *it = &l->v[l->n];
    memset(it, 0, sizeof *it);
    if (!(it->name = strdup(name))) return err_set(e, "OOMError", "out of memory"), NULL;
    l->n++;
    return it;
}

static void items_free(items *l)
{
    for (int i = 0; i < l->n; i++) {
        free(l->v[i].name);
        free(l->v[i].disk);
        free(l->v[i].mem);
    }
    free(l->v);
}

static int item_cmp(const void *a, const void *b)
{
    return strcmp(((const item *)a)->name, ((const item *)b)->name);
}

/* Store folders and files that stay home: generated outputs, the base cache,
 * the tokenization cache (rebuilt from the document on the next train),
 * logs, process state of a running command, and the lock itself. */
static int excluded(const char *rel, const pack_opts *o)
{
    if (!strcmp(rel, ".lock") || !strcmp(rel, "run") || !strcmp(rel, "tokenized-cache")) return 1;
    if (!strcmp(rel, "exports")) return !o->include_exports;
    if (!strcmp(rel, "cache")) return !o->include_base;
    if (!strcmp(rel, "logs")) return !o->include_logs;
    return 0;
}

/* Walk <store>/<rel> into l as "store/<rel>". */
static int walk(const char *store, const char *rel, const pack_opts *o, items *l, dlm_err *e)
{
    char dir[4096], p[4096], r[4096], name[4200];
    if (!fs_join(dir, sizeof dir, store, rel[0] ? rel : ".")) return err_set(e, "PackError", "path too long");
    char **names;
    int n = fs_list_dir(dir, &names, e);
    if (n < 0) return -1;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        snprintf(r, sizeof r, "%s%s%s", rel, rel[0] ? "/" : "", names[i]);
        if (!rel[0] && excluded(r, o)) continue;
        if (!fs_join(p, sizeof p, dir, names[i])) { rc = err_set(e, "PackError", "path too long: %s", r); break; }
        struct stat st;
        if (lstat(p, &st)) { rc = err_sys(e, "cannot stat %s", p); break; }
        snprintf(name, sizeof name, "store/%s", r);
        char norm[4200];
        if (pack_check_name(name, S_ISDIR(st.st_mode), norm, sizeof norm)) {
            rc = err_set(e, "PackUnsupportedFileError", "%s: a name packs cannot carry (printable ASCII only, no '\\')", p);
            err_hint(e, "rename or remove it, then pack again");
            break;
        }
        if (S_ISDIR(st.st_mode)) {
            item *it = items_add(l, name, e);
            if (!it) { rc = -1; break; }
            it->is_dir = 1;
            rc = walk(store, r, o, l, e);
        } else if (S_ISREG(st.st_mode)) {
            if (st.st_mode & 0111) {
                rc = err_set(e, "PackExecutableFileError", "%s: executable file in the store; packs never carry programs",
                             p);
                err_hint(e, "remove it or clear its execute bits (chmod -x) and pack again");
                break;
            }
            item *it = items_add(l, name, e);
            if (!it || !(it->disk = strdup(p))) { rc = err_set(e, "OOMError", "out of memory"); break; }
            it->size = (uint64_t)st.st_size;
            char label[64];
            snprintf(label, sizeof label, "hashing %.48s", name);
            rc = sha256_file_hex_progress(p, label, it->sha, e);
        } else {
            rc = err_set(e, "PackUnsupportedFileError", "%s: %s in the store; packs carry only files and folders", p,
                         S_ISLNK(st.st_mode) ? "symbolic link" : "special file");
            err_hint(e, "replace it with a regular file or remove it, then pack again");
        }
    }
    fs_free_list(names, n);
    return rc;
}

static item *mem_item(items *l, const char *name, strbuf *sb, dlm_err *e)
{
    item *it = items_add(l, name, e);
    if (!it) return NULL;
    size_t len;
    it->mem = sb_detach(sb, &len);
    if (!it->mem) return err_set(e, "OOMError", "out of memory"), NULL;
    it->size = len;
    sha256_hex(it->mem, len, it->sha);
    return it;
}

static int json_bytes(const json_t *v, strbuf *sb, dlm_err *e)
{
    if (json_write(sb, v, JW_SORT) || sb_putc(sb, '\n') || sb->oom) return err_set(e, "OOMError", "out of memory");
    return 0;
}

/* --include-base: the files of the document's base as base/<name>, and
 * manifest.json's "base" object that says where unpack puts them: the HF
 * cache snapshot (repo, revision, commit; per file its blob name, size and
 * sha256; the optional files it lacks). The embedded base travels with the
 * program, so it adds nothing; a local path cannot be installed on another
 * machine at the same place, so it is refused. */
static int add_base(const char *spec, items *l, json_t **out, dlm_err *e)
{
    base_ref ref;
    if (registry_parse_base(spec, &ref, e)) return -1;
    if (ref.kind == BASE_TINY) return 0;
    if (ref.kind == BASE_PATH) {
        err_set(e, "BaseNotPackableError", "--include-base: the base '%s' is a local path, which unpack could not "
                "install where the document looks for it on another machine", spec);
        return err_hint(e, "packs carry hub bases (a registry key or hf:org/name); pack without --include-base and "
                           "hand over the model folder or .gguf separately");
    }
    const char *repo = ref.kind == BASE_REGISTRY ? ref.entry->hf_id : ref.hf_id;
    const char *rev = ref.kind == BASE_REGISTRY ? ref.entry->revision : ref.revision[0] ? ref.revision : "main";
    hub_opts ho;
    char snap[4700];
    if (hub_opts_init(&ho, e)) return -1;
    ho.offline = 1;            /* pack what is here; never download */
    if (hub_snapshot(&ho, repo, rev, snap, sizeof snap, e)) {
        err_prefix(e, "--include-base");
        return -1;
    }
    hub_file *f = NULL;
    char(*ab)[256] = NULL;
    int nf = 0, nab = 0, rc = -1;
    if (hub_snapshot_files(snap, &f, &nf, &ab, &nab, e)) return -1;
    json_t *files = json_object(), *absent = json_array();
    *out = json_pack("{s:s, s:s, s:s, s:s, s:o, s:o}", "kind", "hf", "repo", repo, "revision", rev, "commit",
                     fs_basename(snap), "files", files, "absent", absent);
    if (!*out) { err_set(e, "OOMError", "out of memory"); goto done; }
    for (int i = 0; i < nab; i++) json_array_append_new(absent, json_string(ab[i]));
    for (int i = 0; i < nf; i++) {
        char name[400];
        struct stat st;
        snprintf(name, sizeof name, "base/%s", f[i].name);
        if (stat(f[i].path, &st) || !S_ISREG(st.st_mode)) { err_sys(e, "cannot stat %s", f[i].path); goto done; }
        item *it = items_add(l, name, e);
        if (!it || !(it->disk = strdup(f[i].path))) { err_set(e, "OOMError", "out of memory"); goto done; }
        it->size = (uint64_t)st.st_size;
        char label[64];
        snprintf(label, sizeof label, "hashing %.48s", name);
        if (sha256_file_hex_progress(f[i].path, label, it->sha, e)) goto done;
        json_object_set_new(files, f[i].name,
                            json_pack("{s:s, s:I, s:s}", "blob", f[i].blob, "size", (json_int_t)it->size, "sha256",
                                      it->sha));
    }
    rc = 0;
done:
    free(f);
    free(ab);
    if (rc) {
        json_decref(*out);
        *out = NULL;
    }
    return rc;
}

static const char *content_type(const pack_opts *o)
{
    if (o->include_base && o->include_exports) return "full";
    if (o->include_exports) return "no-base";
    if (o->include_base) return "no-exports";
    return "minimal";
}

static int write_member(struct archive *a, const item *it, progress *pg, dlm_err *e)
{
    struct archive_entry *en = archive_entry_new();
    if (!en) return err_set(e, "OOMError", "out of memory");
    char nm[4200];
    snprintf(nm, sizeof nm, "%s%s", it->name, it->is_dir ? "/" : "");
    archive_entry_set_pathname(en, nm);
    archive_entry_set_filetype(en, it->is_dir ? AE_IFDIR : AE_IFREG);
    archive_entry_set_perm(en, it->is_dir ? 0755 : 0644);
    archive_entry_set_size(en, it->is_dir ? 0 : (la_int64_t)it->size);
    archive_entry_set_mtime(en, 0, 0);
    archive_entry_set_uid(en, 0);
    archive_entry_set_gid(en, 0);
    int rc = 0;
    if (archive_write_header(a, en) != ARCHIVE_OK) {
        rc = err_set(e, "PackError", "cannot write %s: %s", it->name, archive_error_string(a));
        goto out;
    }
    if (it->mem) {
        if (archive_write_data(a, it->mem, it->size) != (la_ssize_t)it->size)
            rc = err_set(e, "PackError", "cannot write %s: %s", it->name, archive_error_string(a));
        progress_add(pg, it->size);
    } else if (it->disk) {
        int fd = open(it->disk, O_RDONLY | O_CLOEXEC);
        if (fd < 0) { rc = err_sys(e, "cannot open %s", it->disk); goto out; }
        static char buf[1 << 16];
        uint64_t done = 0;
        for (;;) {
            ssize_t n = read(fd, buf, sizeof buf);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) { rc = err_sys(e, "cannot read %s", it->disk); break; }
            if (n == 0) break;
            if (done + (uint64_t)n > it->size) break;
            if (archive_write_data(a, buf, (size_t)n) != n) {
                rc = err_set(e, "PackError", "cannot write %s: %s", it->name, archive_error_string(a));
                break;
            }
            done += (uint64_t)n;
            progress_add(pg, (uint64_t)n);
        }
        close(fd);
        if (!rc && done != it->size)
            rc = err_set(e, "PackError", "%s changed while it was being packed", it->disk);
    }
out:
    archive_entry_free(en);
    return rc;
}

static int write_archive(const char *tmp, items *l, dlm_err *e)
{
    struct archive *a = archive_write_new();
    if (!a) return err_set(e, "OOMError", "out of memory");
    char lvl[8];
    snprintf(lvl, sizeof lvl, "%d", PACK_ZSTD_LEVEL);
    int rc = 0;
    if (archive_write_add_filter_zstd(a) != ARCHIVE_OK ||
        archive_write_set_filter_option(a, "zstd", "compression-level", lvl) != ARCHIVE_OK ||
        archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK || archive_write_open_filename(a, tmp) != ARCHIVE_OK) {
        rc = err_set(e, "PackError", "cannot start %s: %s", tmp, archive_error_string(a));
        archive_write_free(a);
        return rc;
    }
    uint64_t total = 0;
    for (int i = 0; i < l->n; i++) total += l->v[i].is_dir ? 0 : l->v[i].size;
    progress pg;
    progress_begin(&pg, "packing (zstd)", total, PROGRESS_BYTES);
    for (int i = 0; i < l->n && !rc; i++) rc = write_member(a, &l->v[i], &pg, e);
    if (archive_write_close(a) != ARCHIVE_OK && !rc)
        rc = err_set(e, "PackError", "cannot finish %s: %s", tmp, archive_error_string(a));
    archive_write_free(a);
    if (rc) progress_abort(&pg);
    else progress_end(&pg);
    return rc;
}

int pack_write(const pack_opts *o, pack_result *res, dlm_err *e)
{
    memset(res, 0, sizeof *res);
    hash_init();
    dlm_doc *d = doc_load(o->doc_path, e);
    if (!d) return -1;
    char id[27];
    snprintf(id, sizeof id, "%s", doc_fm(d)->dlm_id);
    char base_spec[4200];
    snprintf(base_spec, sizeof base_spec, "%s", doc_fm(d)->base_model ? doc_fm(d)->base_model : "");
    doc_free(d);
    char *docbytes = NULL;
    size_t doclen = 0;
    if (fs_read_all(o->doc_path, MAX_DOC_BYTES, &docbytes, &doclen, e)) return -1;

    char store[4096], mpath[4200];
    items l = {0};
    json_t *man = NULL, *pm = NULL, *prov = NULL, *hdr = NULL, *base_obj = NULL;
    strbuf sb = STRBUF_INIT;
    store_lock lk = {0};
    int rc = -1;
    if (store_dir(o->home, id, store, sizeof store, e)) goto out;
    if (!store_exists(store)) {
        err_set(e, "PackNoStoreError", "%s: no store for %s at %s", o->doc_path, id, store);
        err_hint(e, "run `dlm train %s` first (or `dlm unpack` the pack it came from)", o->doc_path);
        goto out;
    }
    if (store_lock_acquire(store, "pack", &lk, e)) goto out;
    snprintf(mpath, sizeof mpath, "%s/manifest.json", store);
    if (!(man = manifest_load(mpath, e))) goto out;
    if (o->include_base && !o->licensee_url) {
        /* The registry says which bases may be passed on; a base it does
         * not know (a local folder, an hf: id) is treated as not. */
        const char *bm = jget_str(man, "base_model");
        const reg_entry *re = bm ? registry_lookup(bm) : NULL;
        if (!re || !re->redistributable) {
            err_set(e, "BaseLicenseRefusedError", "--include-base: the licence of base '%s' (%s) does not allow redistribution",
                    bm ? bm : "?", re ? re->license : "unknown: not in the registry");
            err_hint(e, "if you hold a licence that allows it, pass --i-am-the-licensee URL");
            goto out;
        }
    }
    if (walk(store, "", o, &l, e)) goto out;
    if (o->include_base && add_base(base_spec, &l, &base_obj, e)) goto out;

    /* the document and the top-level folders */
    char docrel[1200];
    snprintf(docrel, sizeof docrel, "dlm/%s", fs_basename(o->doc_path));
    char norm[1200];
    if (pack_check_name(docrel, 0, norm, sizeof norm)) {
        err_set(e, "PackError", "%s: a packed document's name must end in .dlm and be printable ASCII without '\\'",
                o->doc_path);
        err_hint(e, "copy or rename it (e.g. notes.dlm) and pack that");
        goto out;
    }
    item *it;
    if (!(it = items_add(&l, "dlm", e))) goto out;
    it->is_dir = 1;
    if (!(it = items_add(&l, "store", e))) goto out;
    it->is_dir = 1;
    if (base_obj) {
        if (!(it = items_add(&l, "base", e))) goto out;
        it->is_dir = 1;
    }
    if (!(it = items_add(&l, docrel, e))) goto out;
    it->mem = docbytes;
    docbytes = NULL;
    it->size = doclen;
    sha256_hex(it->mem, doclen, it->sha);

    int cur = store_current_version(store, e);
    if (cur < 0) goto out;
    qsort(l.v, (size_t)l.n, sizeof *l.v, item_cmp);

    /* provenance */
    char vname[16], arel[256], lockrel[] = "store/dlm.lock";
    const char *adapter_sha = NULL, *lock_sha = NULL, *corpus_sha = NULL;
    store_version_name(cur, vname, sizeof vname);
    snprintf(arel, sizeof arel, "store/adapter/versions/%s/adapter_model.safetensors", vname);
    for (int i = 0; i < l.n; i++) {
        if (l.v[i].is_dir) continue;
        if (cur > 0 && !strcmp(l.v[i].name, arel)) adapter_sha = l.v[i].sha;
        if (!strcmp(l.v[i].name, lockrel)) lock_sha = l.v[i].sha;
        if (!strcmp(l.v[i].name, docrel)) corpus_sha = l.v[i].sha;
    }
    /* a store of named adapters (training.adapters): each one's current
     * version, from its adapter/<name>/current.txt, claimed by name */
    json_t *named = NULL;
    for (int i = 0; i < l.n; i++) {
        const char *nm = l.v[i].name, *rest = nm + 14, *sl;
        if (l.v[i].is_dir || strncmp(nm, "store/adapter/", 14) || !(sl = strchr(rest, '/')) || strcmp(sl, "/current.txt"))
            continue;
        char an[64], vn[16], rel[256];
        snprintf(an, sizeof an, "%.*s", (int)(sl - rest), rest);
        int v = store_current_version_of(store, an, e);
        if (v < 0) goto out;
        store_version_name(v, vn, sizeof vn);
        snprintf(rel, sizeof rel, "store/adapter/%s/versions/%s/adapter_model.safetensors", an, vn);
        const char *sha = NULL;
        for (int k = 0; k < l.n; k++)
            if (!l.v[k].is_dir && !strcmp(l.v[k].name, rel)) sha = l.v[k].sha;
        if (!named) named = json_object();
        json_object_set_new(named, an, sha ? json_string(sha) : json_null());
    }
    const char *base_rev = jget_str(man, "base_model_revision");
    char signed_at[32];
    time_iso_utc(o->now, signed_at, sizeof signed_at);
    prov = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "adapter_sha256",
                     adapter_sha ? json_string(adapter_sha) : json_null(), "base_revision",
                     base_rev ? json_string(base_rev) : json_null(), "corpus_root_sha256",
                     corpus_sha ? json_string(corpus_sha) : json_null(), "env_lock_digest",
                     lock_sha ? json_string(lock_sha) : json_null(), "signed_at",
                     o->signer ? json_string(signed_at) : json_null(), "signer_public_key", json_null(),
                     "signature", json_null());
    if (!prov) { json_decref(named); err_set(e, "OOMError", "out of memory"); goto out; }
    if (named) json_object_set_new(prov, PROV_ADAPTERS_KEY, named);
    if (o->signer) {
        strbuf payload = STRBUF_INIT, sig = STRBUF_INIT;
        char tc[160], pub[128];
        minisign_pub mp;
        minisign_key_pub(o->signer, &mp);
        minisign_pub_b64(&mp, pub, sizeof pub);
        snprintf(tc, sizeof tc, "dlm provenance %s signed_at:%s", id, signed_at);
        int bad = provenance_payload(prov, &payload, e) ||
                  minisign_sign(o->signer, payload.buf, payload.len, tc, &sig, e);
        if (!bad) {
            json_object_set_new(prov, "signer_public_key", json_string(pub));
            json_object_set_new(prov, "signature", json_string(sb_str(&sig)));
        }
        sb_free(&payload);
        sb_free(&sig);
        if (bad) goto out;
        res->signed_ = 1;
    }

    /* manifest.json: entries and content hash over dlm/ and store/ files */
    json_t *entries = json_object();
    sha256_ctx hc;
    sha256_init(&hc);
    for (int i = 0; i < l.n; i++) {
        if (l.v[i].is_dir) continue;
        json_object_set_new(entries, l.v[i].name, json_integer((json_int_t)l.v[i].size));
        sha256_update(&hc, l.v[i].name, strlen(l.v[i].name));
        sha256_update(&hc, "\n", 1);
        sha256_update(&hc, l.v[i].sha, 64);
        sha256_update(&hc, "\n", 1);
        res->n_files++;
    }
    unsigned char ch[32];
    sha256_final(&hc, ch);
    hex_encode(ch, 32, res->content_sha256);
    json_t *jv;
    const char *bm = jget_str(man, "base_model");
    pm = json_pack("{s:s, s:o, s:o, s:o, s:i, s:o, s:s, s:o*}", "dlm_id", id, "base_model",
                   bm ? json_string(bm) : json_null(), "base_model_revision",
                   base_rev ? json_string(base_rev) : json_null(), "base_model_sha256",
                   (jv = json_object_get(man, "base_model_sha256")) ? json_deep_copy(jv) : json_null(),
                   "adapter_version", cur, "entries", entries, "content_sha256", res->content_sha256, "base", base_obj);
    base_obj = NULL;
    if (!pm) { err_set(e, "OOMError", "out of memory"); goto out; }

    /* PACK_HEADER.json: created_at is the store's last change, so that
     * packing the same store twice gives the same bytes */
    const char *upd = jget_str(man, "updated_at");
    hdr = json_pack("{s:i, s:s, s:s, s:s, s:s, s:o}", "pack_format_version", PACK_FORMAT_VERSION, "created_at",
                    upd ? upd : "1970-01-01T00:00:00", "tool_version", "dlm " DLM_VERSION, "content_type",
                    content_type(o), "platform_hint", "linux-cpu", "licensee_acceptance_url",
                    o->licensee_url ? json_string(o->licensee_url) : json_null());
    if (!hdr) { err_set(e, "OOMError", "out of memory"); goto out; }
    if (json_bytes(hdr, &sb, e) || !mem_item(&l, "PACK_HEADER.json", &sb, e)) goto out;
    if (json_bytes(prov, &sb, e) || !mem_item(&l, "provenance.json", &sb, e)) goto out;
    if (json_bytes(pm, &sb, e) || !mem_item(&l, "manifest.json", &sb, e)) goto out;
    qsort(l.v, (size_t)l.n, sizeof *l.v, item_cmp);
    for (int i = 0; i < l.n; i++)
        if (!l.v[i].is_dir && strcmp(l.v[i].name, "manifest.json"))
            sb_printf(&sb, "%s  %s\n", l.v[i].sha, l.v[i].name);
    if (sb.oom || !mem_item(&l, "CHECKSUMS.sha256", &sb, e)) goto out;
    qsort(l.v, (size_t)l.n, sizeof *l.v, item_cmp);

    /* write next to the target, then rename */
    if (o->out) snprintf(res->path, sizeof res->path, "%s", o->out);
    else snprintf(res->path, sizeof res->path, "%s.pack", o->doc_path);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", res->path, (long)getpid());
    if (write_archive(tmp, &l, e)) { unlink(tmp); goto out; }
    if (fs_fsync_path(tmp, e) || rename(tmp, res->path)) {
        if (!e->msg[0]) err_sys(e, "cannot rename %s to %s", tmp, res->path);
        unlink(tmp);
        goto out;
    }
    char dir[4096];
    fs_dirname(dir, sizeof dir, res->path);
    fs_fsync_dir(dir, e);
    snprintf(res->dlm_id, sizeof res->dlm_id, "%s", id);
    res->adapter_version = cur;
    for (int i = 0; i < l.n; i++) res->bytes_in += l.v[i].size;
    res->bytes_out = (uint64_t)fs_file_size(res->path);
    rc = 0;
out:
    json_decref(base_obj);
    if (lk.held) store_lock_release(&lk);
    json_decref(man);
    json_decref(pm);
    json_decref(prov);
    json_decref(hdr);
    sb_free(&sb);
    items_free(&l);
    free(docbytes);
    return rc;
}
