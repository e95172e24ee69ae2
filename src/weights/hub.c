/* hub — cache layout, lookups and whole-model snapshots. The HTTP side is
 * hub_http.c. See hub.h. */
#include "weights/hub.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/hash.h"
#include "util/json.h"
#include "util/log.h"

#define KIND "HubError"

static hub_env g_env;

void hub_set_env(const hub_env *env) { g_env = *env; }
const hub_env *hub_get_env(void) { return &g_env; }

static int set(const char *v) { return v && *v; }

int hub_cache_root(char *out, size_t cap, dlm_err *e)
{
    const hub_env *v = &g_env;
    int n;
    if (set(v->hub_cache)) n = snprintf(out, cap, "%s", v->hub_cache);
    else if (set(v->hf_home)) n = snprintf(out, cap, "%s/hub", v->hf_home);
    else if (set(v->xdg_cache)) n = snprintf(out, cap, "%s/huggingface/hub", v->xdg_cache);
    else if (set(v->home)) n = snprintf(out, cap, "%s/.cache/huggingface/hub", v->home);
    else return err_set(e, KIND, "cannot locate the HF cache: none of HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME, HOME is set");
    if (n < 0 || (size_t)n >= cap) return err_set(e, KIND, "HF cache path is too long");
    return 0;
}

int hub_opts_init(hub_opts *o, dlm_err *e)
{
    memset(o, 0, sizeof *o);
    if (hub_cache_root(o->cache, sizeof o->cache, e)) return -1;
    snprintf(o->endpoint, sizeof o->endpoint, "%s", set(g_env.endpoint) ? g_env.endpoint : "https://huggingface.co");
    size_t n = strlen(o->endpoint);
    while (n > 0 && o->endpoint[n - 1] == '/') o->endpoint[--n] = 0;
    if (set(g_env.token)) snprintf(o->token, sizeof o->token, "%s", g_env.token);
    o->offline = g_env.offline;
    o->max_retries = 4;
    o->backoff_ms = 1000;
    o->progress = -1;
    o->low_speed_s = 60;
    return 0;
}

/* ---- validation -------------------------------------------------------------- */

static int name_char(int c) { return isalnum(c) || c == '-' || c == '_' || c == '.'; }

static int valid_segment(const char *s, size_t n)
{
    if (n == 0 || n > 96) return 0;
    if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.')) return 0;
    for (size_t i = 0; i < n; i++)
        if (!name_char((unsigned char)s[i])) return 0;
    return 1;
}

int hub_valid_repo(const char *repo)
{
    const char *sl = strchr(repo, '/');
    if (!sl || strchr(sl + 1, '/')) return 0;
    if (strstr(repo, "--") || strstr(repo, "..")) return 0;     /* HF ids never contain them */
    return valid_segment(repo, (size_t)(sl - repo)) && valid_segment(sl + 1, strlen(sl + 1));
}

/* A relative path of safe segments: no "", ".", "..", no leading "/". */
static int valid_path(const char *p, size_t maxlen)
{
    size_t n = strlen(p);
    if (n == 0 || n > maxlen || p[0] == '/') return 0;
    const char *s = p;
    for (;;) {
        const char *sl = strchr(s, '/');
        size_t len = sl ? (size_t)(sl - s) : strlen(s);
        if (len == 0 || len > 255) return 0;
        if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.')) return 0;
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)s[i];
            if (c < 0x20 || c == 0x7f || c == '\\') return 0;
        }
        if (!sl) return 1;
        s = sl + 1;
    }
}

int hub_valid_rev(const char *rev) { return valid_path(rev, 255); }
int hub_valid_filename(const char *f) { return valid_path(f, 1024); }

int hub_is_commit(const char *s)
{
    if (strlen(s) != 40) return 0;
    for (int i = 0; i < 40; i++)
        if (!isdigit((unsigned char)s[i]) && !(s[i] >= 'a' && s[i] <= 'f')) return 0;
    return 1;
}

int hub_repo_dir(const hub_opts *o, const char *repo, char *out, size_t cap, dlm_err *e)
{
    if (!hub_valid_repo(repo)) {
        err_set(e, KIND, "'%s' is not a Hugging Face model id", repo);
        return err_hint(e, "write it as org/name, e.g. Qwen/Qwen2.5-0.5B-Instruct");
    }
    const char *sl = strchr(repo, '/');
    int n = snprintf(out, cap, "%s/models--%.*s--%s", o->cache, (int)(sl - repo), repo, sl + 1);
    if (n < 0 || (size_t)n >= cap) return err_set(e, KIND, "HF cache path is too long");
    return 0;
}

/* ---- cache ---------------------------------------------------------------------- */

/* refs/<rev> → commit; 0 found, 1 absent. */
static int read_ref(const char *rdir, const char *rev, char commit[64])
{
    char p[4600], *txt;
    size_t len;
    snprintf(p, sizeof p, "%s/refs/%s", rdir, rev);
    if (!fs_is_file(p) || fs_read_all(p, 4096, &txt, &len, NULL)) return 1;
    while (len && isspace((unsigned char)txt[len - 1])) txt[--len] = 0;
    int ok = hub_is_commit(txt);
    if (ok) snprintf(commit, 64, "%s", txt);
    free(txt);
    return ok ? 0 : 1;
}

static int mkdirs_for(const char *path, dlm_err *e)
{
    char d[4600];
    fs_dirname(d, sizeof d, path);
    return fs_mkdir_p(d, e);
}

static int write_ref(const char *rdir, const char *rev, const char *commit, dlm_err *e)
{
    char p[4600], old[64];
    if (read_ref(rdir, rev, old) == 0 && !strcmp(old, commit)) return 0;
    snprintf(p, sizeof p, "%s/refs/%s", rdir, rev);
    if (mkdirs_for(p, e)) return -1;
    return fs_write_atomic(p, commit, 40, 0644, e);
}

/* snapshots/<commit>/<file> → ../../blobs/<etag> (one more "../" per
 * directory level in file), replaced atomically. */
static int link_snapshot(const char *rdir, const char *commit, const char *file, const char *etag, dlm_err *e)
{
    char ptr[4600], tmp[4700], target[2048];
    snprintf(ptr, sizeof ptr, "%s/snapshots/%s/%s", rdir, commit, file);
    if (mkdirs_for(ptr, e)) return -1;
    size_t n = 0;
    n += (size_t)snprintf(target + n, sizeof target - n, "../../");
    for (const char *s = file; *s; s++)
        if (*s == '/' && n < sizeof target) n += (size_t)snprintf(target + n, sizeof target - n, "../");
    if (n < sizeof target) snprintf(target + n, sizeof target - n, "blobs/%s", etag);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", ptr, (int)getpid());
    unlink(tmp);
    if (symlink(target, tmp) != 0) return err_sys(e, "cannot create symlink '%s'", tmp);
    if (rename(tmp, ptr) != 0) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
        return err_sys(e, "cannot create '%s'", ptr);
    }
    return 0;
}

static int mark_missing(const char *rdir, const char *commit, const char *file)
{
    char p[4600];
    snprintf(p, sizeof p, "%s/.no_exist/%s/%s", rdir, commit, file);
    if (mkdirs_for(p, NULL)) return -1;
    return fs_write_atomic(p, "", 0, 0644, NULL);
}

/* Exclusive lock on <cache>/.locks/<repo folder>/<etag>.lock (fd, or -1). */
static int lock_blob(const hub_opts *o, const char *rdir, const char *etag, dlm_err *e)
{
    char p[4800];
    snprintf(p, sizeof p, "%s/.locks/%s/%s.lock", o->cache, fs_basename(rdir), etag);
    if (mkdirs_for(p, e)) return -1;
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return err_sys(e, "cannot create lock '%s'", p);
    while (flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR) { close(fd); return err_sys(e, "cannot lock '%s'", p); }
    }
    return fd;
}

static int not_cached(const char *repo, const char *rev, const char *file, dlm_err *e)
{
    err_set(e, "HubOfflineError", "%s@%s: '%s' is not in the HF cache and HF_HUB_OFFLINE=1 forbids downloading",
            repo, rev, file);
    return err_hint(e, "unset HF_HUB_OFFLINE (and TRANSFORMERS_OFFLINE) to download it, or use a local model path");
}

static int done(char *out, size_t cap, const char *path, dlm_err *e)
{
    int n = snprintf(out, cap, "%s", path);
    if (n < 0 || (size_t)n >= cap) return err_set(e, KIND, "path too long");
    return 0;
}

int hub_resolve_file(const hub_opts *o, const char *repo, const char *rev, const char *file, char *out,
                     size_t cap, dlm_err *e)
{
    char rdir[4400], commit[64] = "", ptr[4600], nx[4600];
    if (!rev || !*rev) rev = "main";
    if (hub_repo_dir(o, repo, rdir, sizeof rdir, e)) return -1;
    if (!hub_valid_rev(rev)) return err_set(e, KIND, "invalid revision '%s'", rev);
    if (!hub_valid_filename(file)) return err_set(e, KIND, "invalid file name '%s'", file);

    int have_commit = hub_is_commit(rev) ? (snprintf(commit, sizeof commit, "%s", rev), 1) : read_ref(rdir, rev, commit) == 0;
    int cached = 0, missing = 0;
    if (have_commit) {
        snprintf(ptr, sizeof ptr, "%s/snapshots/%s/%s", rdir, commit, file);
        snprintf(nx, sizeof nx, "%s/.no_exist/%s/%s", rdir, commit, file);
        cached = fs_is_file(ptr);
        missing = !cached && fs_exists(nx);
    }
    if ((hub_is_commit(rev) || o->offline) && (cached || missing)) {
        if (cached) return done(out, cap, ptr, e);
        err_set(e, "EntryNotFoundError", "%s@%s has no file '%s'", repo, rev, file);
        return HUB_NOT_FOUND;
    }
    if (o->offline) return not_cached(repo, rev, file, e);

    hub_meta meta;
    dlm_err he;
    err_clear(&he);
    int r = hub_http_head(o, repo, rev, file, &meta, &he);
    if (r == HUB_NOT_FOUND) {
        if (hub_is_commit(meta.commit)) mark_missing(rdir, meta.commit, file);
        *e = he;
        return HUB_NOT_FOUND;
    }
    if (r < 0) {
        /* network trouble but a cached copy: use it, as huggingface_hub does */
        if (cached && !strcmp(he.kind, "HubNetworkError")) {
            log_debug("hub: %s; using the cached %s", he.msg, ptr);
            return done(out, cap, ptr, e);
        }
        *e = he;
        return -1;
    }
    if (!hub_is_commit(meta.commit)) {
        if (have_commit) snprintf(meta.commit, sizeof meta.commit, "%s", commit);
        else return err_set(e, KIND, "%s: the server sent no commit hash (X-Repo-Commit) for '%s'", repo, file);
    }
    if (!hub_is_commit(rev) && write_ref(rdir, rev, meta.commit, e)) return -1;
    snprintf(ptr, sizeof ptr, "%s/snapshots/%s/%s", rdir, meta.commit, file);

    char blob[4700], inc[4800];
    snprintf(blob, sizeof blob, "%s/blobs/%s", rdir, meta.etag);
    snprintf(inc, sizeof inc, "%s.incomplete", blob);
    if (!fs_is_file(blob)) {
        if (mkdirs_for(blob, e)) return -1;
        int lk = lock_blob(o, rdir, meta.etag, e);
        if (lk < 0) return -1;
        /* another process may have finished it while we waited */
        if (!fs_is_file(blob)) {
            r = hub_http_get(o, repo, meta.commit, file, &meta, inc, e);
            if (r == 0 && rename(inc, blob) != 0) r = err_sys(e, "cannot rename '%s'", inc);
            if (r == 0) r = fs_fsync_dir(fs_dirname(nx, sizeof nx, blob), e);
        }
        close(lk);
        if (r) return -1;
    }
    if (link_snapshot(rdir, meta.commit, file, meta.etag, e)) return -1;
    return done(out, cap, ptr, e);
}

/* ---- whole model ------------------------------------------------------------------- */

/* Beside config.json, what hub_snapshot takes from a snapshot (and what a
 * pack's base carries): required, then optional files. */
static const char *const REQ[] = {"tokenizer.json", "tokenizer_config.json"};
static const char *const OPT[] = {"generation_config.json", "special_tokens_map.json", "chat_template.jinja"};

static int need(const hub_opts *o, const char *repo, const char *rev, const char *file, int required, char *path,
                size_t cap, dlm_err *e)
{
    int r = hub_resolve_file(o, repo, rev, file, path, cap, e);
    /* offline, an optional file the cache neither holds nor marks missing
     * is absent, as transformers takes it (a snapshot written by
     * save_pretrained, or the original's cache, has no .no_exist markers) */
    if (r < 0 && !required && o->offline && !strcmp(e->kind, "HubOfflineError")) return HUB_NOT_FOUND;
    if (r == HUB_NOT_FOUND && required) {
        err_set(e, "EntryNotFoundError", "%s@%s has no '%s'", repo, rev, file);
        return err_hint(e, "dlm needs an HF model repository with config.json, tokenizer.json and safetensors weights");
    }
    return r;
}

int hub_snapshot(const hub_opts *o, const char *repo, const char *rev, char *out_dir, size_t cap, dlm_err *e)
{
    char p[4600], commit[64];
    if (!rev || !*rev) rev = "main";
    if (need(o, repo, rev, "config.json", 1, p, sizeof p, e)) return -1;
    /* .../snapshots/<commit>/config.json: take every other file at that commit */
    char dir[4600];
    fs_dirname(dir, sizeof dir, p);
    snprintf(commit, sizeof commit, "%s", fs_basename(dir));
    if (!hub_is_commit(commit)) return err_set(e, KIND, "unexpected cache layout at '%s'", p);
    for (size_t i = 0; i < sizeof REQ / sizeof REQ[0]; i++)
        if (need(o, repo, commit, REQ[i], 1, p, sizeof p, e)) return -1;
    for (size_t i = 0; i < sizeof OPT / sizeof OPT[0]; i++)
        if (need(o, repo, commit, OPT[i], 0, p, sizeof p, e) < 0) return -1;
    int r = need(o, repo, commit, "model.safetensors", 0, p, sizeof p, e);
    if (r < 0) return -1;
    if (r == HUB_NOT_FOUND) {
        if (need(o, repo, commit, "model.safetensors.index.json", 0, p, sizeof p, e)) {
            err_set(e, "EntryNotFoundError", "%s@%s has neither model.safetensors nor model.safetensors.index.json",
                    repo, rev);
            return err_hint(e, "dlm reads safetensors weights (not pytorch_model.bin)");
        }
        json_t *ix = json_load_path(p, 64u << 20, e);
        if (!ix) return -1;
        json_t *wm = json_object_get(ix, "weight_map");
        const char *k;
        json_t *v;
        int rc = json_is_object(wm) ? 0 : err_at(e, KIND, p, 0, 0, "missing \"weight_map\"");
        /* each distinct shard once (resolve_file is a no-op when cached) */
        json_object_foreach(wm, k, v) {
            const char *s = json_string_value(v);
            if (rc) break;
            if (!s || strchr(s, '/') || !hub_valid_filename(s)) {
                rc = err_at(e, KIND, p, 0, 0, "weight_map entry '%s' is not a shard file name", k);
                break;
            }
            char sp[4600];
            rc = need(o, repo, commit, s, 1, sp, sizeof sp, e) ? -1 : 0;
        }
        json_decref(ix);
        if (rc) return -1;
    }
    return done(out_dir, cap, dir, e);
}

/* ---- a snapshot carried in a pack ------------------------------------------------ */

static int valid_blob(const char *b)
{
    size_t n = strlen(b);
    if (n == 0 || n > 128 || b[0] == '.') return 0;
    for (size_t i = 0; i < n; i++)
        if (!name_char((unsigned char)b[i])) return 0;
    return 1;
}

static int add_file(hub_file **v, int *n, int *cap, const char *snapdir, const char *name, dlm_err *e)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp((*v)[i].name, name)) return 0;
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 16;
        hub_file *nv = realloc(*v, (size_t)nc * sizeof *nv);
        if (!nv) return err_set(e, "OOMError", "out of memory");
        *v = nv;
        *cap = nc;
    }
    hub_file *f = &(*v)[(*n)++];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    snprintf(f->path, sizeof f->path, "%s/%s", snapdir, name);
    char target[4096];
    ssize_t len = readlink(f->path, target, sizeof target - 1);
    if (len > 0) {
        /* ../../blobs/<etag>: keep the etag, so the cache installed from a
         * pack has the layout huggingface_hub would have made */
        target[len] = 0;
        const char *b = fs_basename(target);
        if (strstr(target, "blobs/") && valid_blob(b)) snprintf(f->blob, sizeof f->blob, "%s", b);
    }
    return 0;
}

int hub_snapshot_files(const char *snapdir, hub_file **files, int *n, char (**absent)[256], int *nabsent,
                       dlm_err *e)
{
    hub_file *v = NULL;
    int nv = 0, cap = 0, rc = -1;
    char(*ab)[256] = calloc(sizeof OPT / sizeof OPT[0] + 1, sizeof *ab);
    int nab = 0;
    char p[4800];
    json_t *ix = NULL;
    if (!ab) return err_set(e, "OOMError", "out of memory");
    const char *req[1 + sizeof REQ / sizeof REQ[0]] = {"config.json"};
    for (size_t i = 0; i < sizeof REQ / sizeof REQ[0]; i++) req[i + 1] = REQ[i];
    for (size_t i = 0; i < sizeof req / sizeof req[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", snapdir, req[i]);
        if (!fs_is_file(p)) { err_set(e, "EntryNotFoundError", "the base snapshot %s has no %s", snapdir, req[i]); goto out; }
        if (add_file(&v, &nv, &cap, snapdir, req[i], e)) goto out;
    }
    for (size_t i = 0; i < sizeof OPT / sizeof OPT[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", snapdir, OPT[i]);
        if (fs_is_file(p)) {
            if (add_file(&v, &nv, &cap, snapdir, OPT[i], e)) goto out;
        } else snprintf(ab[nab++], sizeof *ab, "%s", OPT[i]);
    }
    snprintf(p, sizeof p, "%s/model.safetensors", snapdir);
    if (fs_is_file(p)) {
        if (add_file(&v, &nv, &cap, snapdir, "model.safetensors", e)) goto out;
    } else {
        /* sharded: hub_snapshot asks for model.safetensors first, so an
         * offline cache must say that it does not exist */
        snprintf(ab[nab++], sizeof *ab, "model.safetensors");
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", snapdir);
        if (!(ix = json_load_path(p, 64u << 20, e))) goto out;
        if (add_file(&v, &nv, &cap, snapdir, "model.safetensors.index.json", e)) goto out;
        json_t *wm = json_object_get(ix, "weight_map"), *jv;
        const char *k;
        if (!json_is_object(wm)) { err_at(e, KIND, p, 0, 0, "missing \"weight_map\""); goto out; }
        json_object_foreach(wm, k, jv) {
            const char *s = json_string_value(jv);
            if (!s || strchr(s, '/') || !hub_valid_filename(s)) {
                err_at(e, KIND, p, 0, 0, "weight_map entry '%s' is not a shard file name", k);
                goto out;
            }
            if (add_file(&v, &nv, &cap, snapdir, s, e)) goto out;
        }
    }
    for (int i = 0; i < nv; i++)
        if (!fs_is_file(v[i].path)) { err_set(e, "EntryNotFoundError", "the base snapshot lacks %s", v[i].path); goto out; }
    rc = 0;
out:
    json_decref(ix);
    if (rc) {
        free(v);
        free(ab);
        return -1;
    }
    *files = v;
    *n = nv;
    *absent = ab;
    *nabsent = nab;
    return 0;
}

/* 1 when the file at path holds the bytes whose sha256 is hex. */
static int same_bytes(const char *path, const char *hex)
{
    char h[65];
    return !sha256_file_hex(path, h, NULL) && !strcmp(h, hex);
}

static int conflict(const hub_install *in, int *replaced, dlm_err *e, const char *fmt, const char *a, const char *b)
{
    if (in->force) {
        (*replaced)++;
        return 0;
    }
    err_set(e, "BaseConflictError", fmt, a, b);
    return err_hint(e, "pass --force to replace it (other documents on this base share the HF cache), or unpack "
                       "with another cache (HF_HUB_CACHE=DIR)");
}

int hub_install_snapshot(const hub_opts *o, const hub_install *in, int check_only, int *replaced, dlm_err *e)
{
    int dummy = 0;
    if (!replaced) replaced = &dummy;
    *replaced = 0;
    char rdir[4400], b[4700], p[4700], old[64];
    if (!hub_is_commit(in->commit)) return err_set(e, KIND, "the base's commit '%s' is not a 40-hex hash", in->commit);
    if (in->rev && *in->rev && !hub_is_commit(in->rev) && !hub_valid_rev(in->rev))
        return err_set(e, KIND, "invalid revision '%s'", in->rev);
    if (hub_repo_dir(o, in->repo, rdir, sizeof rdir, e)) return -1;
    for (int i = 0; i < in->n; i++) {
        const hub_file *f = &in->files[i];
        if (strchr(f->name, '/') || !hub_valid_filename(f->name)) return err_set(e, KIND, "invalid file name '%s'", f->name);
        if (f->blob[0] && !valid_blob(f->blob)) return err_set(e, KIND, "invalid blob name '%s'", f->blob);
        if (strlen(f->sha256) != 64 || !valid_blob(f->sha256)) return err_set(e, KIND, "no sha256 for '%s'", f->name);
    }
    for (int i = 0; i < in->nabsent; i++)
        if (strchr(in->absent[i], '/') || !hub_valid_filename(in->absent[i]))
            return err_set(e, KIND, "invalid file name '%s'", in->absent[i]);

    for (int i = 0; i < in->n; i++) {
        const hub_file *f = &in->files[i];
        const char *blob = f->blob[0] ? f->blob : f->sha256;
        snprintf(b, sizeof b, "%s/blobs/%s", rdir, blob);
        snprintf(p, sizeof p, "%s/snapshots/%s/%s", rdir, in->commit, f->name);
        int have_b = fs_exists(b), bad_b = have_b && !same_bytes(b, f->sha256);
        int have_p = fs_is_file(p), bad_p = have_p && !same_bytes(p, f->sha256);
        if ((bad_b || bad_p) &&
            conflict(in, replaced, e, "%s already holds other bytes than the pack's base file %s", bad_b ? b : p,
                     f->name))
            return -1;
        if (check_only) continue;
        if (!have_b || bad_b) {
            if (mkdirs_for(b, e)) return -1;
            int lk = lock_blob(o, rdir, blob, e);
            if (lk < 0) return -1;
            int r = fs_copy_file(f->path, b, e);
            close(lk);
            if (r) return -1;
        }
        if ((!have_p || bad_p) && link_snapshot(rdir, in->commit, f->name, blob, e)) return -1;
    }
    for (int i = 0; i < in->nabsent; i++) {
        snprintf(p, sizeof p, "%s/snapshots/%s/%s", rdir, in->commit, in->absent[i]);
        struct stat st;
        if (lstat(p, &st) == 0) {
            if (conflict(in, replaced, e, "%s exists, but the pack's base has no %s", p, in->absent[i])) return -1;
            if (!check_only && unlink(p)) return err_sys(e, "cannot remove %s", p);
        }
        if (!check_only && mark_missing(rdir, in->commit, in->absent[i]))
            return err_set(e, KIND, "cannot mark %s missing in %s", in->absent[i], rdir);
    }
    if (in->rev && *in->rev && !hub_is_commit(in->rev)) {
        if (read_ref(rdir, in->rev, old) == 0 && strcmp(old, in->commit)) {
            snprintf(p, sizeof p, "%s/refs/%s", rdir, in->rev);
            if (conflict(in, replaced, e, "%s points at another commit than the pack's base (%s)", p, in->commit))
                return -1;
        }
        if (!check_only && write_ref(rdir, in->rev, in->commit, e)) return -1;
    }
    return 0;
}
