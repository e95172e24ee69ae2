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

static int is_commit(const char *s)
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
    int ok = is_commit(txt);
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

    int have_commit = is_commit(rev) ? (snprintf(commit, sizeof commit, "%s", rev), 1) : read_ref(rdir, rev, commit) == 0;
    int cached = 0, missing = 0;
    if (have_commit) {
        snprintf(ptr, sizeof ptr, "%s/snapshots/%s/%s", rdir, commit, file);
        snprintf(nx, sizeof nx, "%s/.no_exist/%s/%s", rdir, commit, file);
        cached = fs_is_file(ptr);
        missing = !cached && fs_exists(nx);
    }
    if ((is_commit(rev) || o->offline) && (cached || missing)) {
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
        if (is_commit(meta.commit)) mark_missing(rdir, meta.commit, file);
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
    if (!is_commit(meta.commit)) {
        if (have_commit) snprintf(meta.commit, sizeof meta.commit, "%s", commit);
        else return err_set(e, KIND, "%s: the server sent no commit hash (X-Repo-Commit) for '%s'", repo, file);
    }
    if (!is_commit(rev) && write_ref(rdir, rev, meta.commit, e)) return -1;
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

static int need(const hub_opts *o, const char *repo, const char *rev, const char *file, int required, char *path,
                size_t cap, dlm_err *e)
{
    int r = hub_resolve_file(o, repo, rev, file, path, cap, e);
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
    if (!is_commit(commit)) return err_set(e, KIND, "unexpected cache layout at '%s'", p);
    static const char *const REQ[] = {"tokenizer.json", "tokenizer_config.json"};
    static const char *const OPT[] = {"generation_config.json", "special_tokens_map.json", "chat_template.jinja"};
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
