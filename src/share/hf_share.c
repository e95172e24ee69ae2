/* hf_share — packs in a Hugging Face Hub repository (hf_share.h). */
#include "share/hf_share.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/hash.h"
#include "util/json.h"
#include "util/log.h"
#include "util/progress.h"
#include "util/str.h"
#include "version.h"

#define RESP_MAX (1u << 20)     /* a JSON answer larger than this is refused */
#define SIG_MAX (64u << 10)

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

int hf_share_parse(const char *spec, char *repo, size_t cap, dlm_err *e)
{
    const char *r = !strncmp(spec, "hf:", 3) ? spec + 3 : spec;
    if (!hub_valid_repo(r) || strlen(r) >= cap) {
        err_set(e, "HfRepoError", "'%s' is not hf:ORG/NAME", spec);
        return err_hint(e, "name a Hugging Face repository, e.g. hf:my-user/my-notes (a model repository)");
    }
    snprintf(repo, cap, "%s", r);
    return 0;
}

/* ---- one HTTP exchange ------------------------------------------------------------ */

typedef struct req {
    const char *method, *url, *ctype;
    const char *body;                 /* in-memory body (blen bytes), or */
    size_t blen;
    const char *file;                 /* a file as the body (PUT) */
    int auth;                         /* send the token */
    const json_t *headers;            /* more headers: {name: value} (LFS actions) */
    int retry;                        /* retry transient failures (not for the commit) */
    const char *progress;             /* label for an upload's progress, or NULL */
    uint64_t off, len;                /* file: the slice [off, off+len) (len 0 = the whole file) */
} req;

typedef struct resp {
    long status;
    strbuf body;
    int over;
    char etag[160];
    char err_msg[512];                /* X-Error-Message */
} resp;

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    resp *r = ud;
    if (r->body.len + sz * n > RESP_MAX) { r->over = 1; return 0; }
    sb_append(&r->body, p, sz * n);
    return sz * n;
}

static void copy_hval(char *dst, size_t cap, const char *v, size_t n)
{
    while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' ')) n--;
    while (n && *v == ' ') { v++; n--; }
    if (n >= cap) n = cap - 1;
    memcpy(dst, v, n);
    dst[n] = 0;
}

static size_t on_head(char *p, size_t sz, size_t n, void *ud)
{
    resp *r = ud;
    size_t len = sz * n;
    const char *colon = memchr(p, ':', len);
    if (!colon) return len;
    size_t kn = (size_t)(colon - p);
    if (kn == 4 && !strncasecmp(p, "etag", 4)) copy_hval(r->etag, sizeof r->etag, colon + 1, len - kn - 1);
    else if (kn == 15 && !strncasecmp(p, "x-error-message", 15))
        copy_hval(r->err_msg, sizeof r->err_msg, colon + 1, len - kn - 1);
    return len;
}

typedef struct slice { FILE *f; uint64_t left; } slice;

static size_t on_read(char *p, size_t sz, size_t n, void *ud)
{
    slice *s = ud;
    size_t want = sz * n;
    if (want > s->left) want = (size_t)s->left;
    size_t got = fread(p, 1, want, s->f);
    s->left -= got;
    return got;
}

static int on_up(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut;
    progress_update(ud, (uint64_t)un);
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {}
}

/* The URL without its query (presigned upload URLs carry credentials). */
static void shown_url(const char *url, char *out, size_t cap) { snprintf(out, cap, "%.*s", (int)strcspn(url, "?"), url); }

/* 0 with r->status set (any status), -1 when no answer came. */
static int http_do(const hub_opts *o, const req *q, resp *r, dlm_err *e)
{
    pthread_once(&curl_once, curl_init_once);
    long delay = o->backoff_ms > 0 ? o->backoff_ms : 0;
    char shown[1200];
    shown_url(q->url, shown, sizeof shown);
    for (int attempt = 0;; attempt++) {
        sb_reset(&r->body);
        r->status = 0;
        r->over = 0;
        r->etag[0] = r->err_msg[0] = 0;
        CURL *c = curl_easy_init();
        struct curl_slist *hl = NULL;
        FILE *f = NULL;
        slice sl = {0};
        if (!c) return err_set(e, "MemoryError", "out of memory");
        strbuf h = STRBUF_INIT;
        if (q->ctype) {
            sb_printf(&h, "Content-Type: %s", q->ctype);
            hl = curl_slist_append(hl, sb_str(&h));
        }
        if (q->auth && o->token[0]) {
            sb_reset(&h);
            sb_printf(&h, "authorization: Bearer %s", o->token);
            hl = curl_slist_append(hl, sb_str(&h));
        }
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)q->headers, k, v) {
            if (!json_is_string(v) || strpbrk(k, "\r\n:") || strpbrk(json_string_value(v), "\r\n")) continue;
            sb_reset(&h);
            sb_printf(&h, "%s: %s", k, json_string_value(v));
            hl = curl_slist_append(hl, sb_str(&h));
        }
        sb_free(&h);
        hl = curl_slist_append(hl, "Expect:");
        curl_easy_setopt(c, CURLOPT_URL, q->url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
        curl_easy_setopt(c, CURLOPT_USERAGENT, "dlm/" DLM_VERSION);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, o->low_speed_s > 0 ? o->low_speed_s : 60L);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_head);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
        progress pg;
        int prog = 0;
        if (q->file) {
            f = fopen(q->file, "rb");
            if (!f) {
                curl_slist_free_all(hl);
                curl_easy_cleanup(c);
                return err_sys(e, "cannot open %s", q->file);
            }
            uint64_t total = (uint64_t)fs_file_size(q->file);
            sl.f = f;
            sl.left = q->len ? q->len : total;
            if (q->off && fseeko(f, (off_t)q->off, SEEK_SET)) {
                fclose(f);
                curl_slist_free_all(hl);
                curl_easy_cleanup(c);
                return err_sys(e, "cannot seek in %s", q->file);
            }
            curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
            curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
            curl_easy_setopt(c, CURLOPT_READDATA, &sl);
            curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)sl.left);
            if (q->progress) {
                progress_begin(&pg, q->progress, sl.left, PROGRESS_BYTES);
                curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
                curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_up);
                curl_easy_setopt(c, CURLOPT_XFERINFODATA, &pg);
                prog = 1;
            }
        } else if (q->body) {
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, q->body);
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->blen);
        }
        if (strcmp(q->method, "POST") && strcmp(q->method, "PUT")) curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, q->method);
        CURLcode cr = curl_easy_perform(c);
        if (prog) {
            if (cr == CURLE_OK) progress_end(&pg);
            else progress_abort(&pg);
        }
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
        curl_slist_free_all(hl);
        curl_easy_cleanup(c);
        if (f) fclose(f);
        if (r->over) return err_set(e, "HubError", "%s: the answer is larger than %u bytes", shown, RESP_MAX);
        int transient = cr != CURLE_OK ? cr != CURLE_COULDNT_RESOLVE_HOST
                                       : r->status == 429 || r->status == 408 || r->status >= 500;
        if (cr != CURLE_OK) {
            err_set(e, "HubNetworkError", "%s: %s", shown, curl_easy_strerror(cr));
            if (cr == CURLE_COULDNT_RESOLVE_HOST) err_hint(e, "no network? (HF_ENDPOINT is %s)", o->endpoint);
        }
        if (!transient || !q->retry || attempt >= o->max_retries) return cr == CURLE_OK ? 0 : -1;
        log_warn("%s: %s; retrying in %.1fs (%d/%d)", shown, cr != CURLE_OK ? curl_easy_strerror(cr) : "busy",
                 delay / 1000.0, attempt + 1, o->max_retries);
        sleep_ms(delay);
        delay = delay * 2 > 30000 ? 30000 : delay * 2;
    }
}

/* The Hub's reason for a refusal: {"error": "..."} or X-Error-Message. */
static const char *hub_reason(resp *r, json_t **j)
{
    *j = json_loadb(r->body.buf ? r->body.buf : "", r->body.len, 0, NULL);
    const char *m = jget_str(*j, "error");
    if (!m) m = jget_str(json_object_get(*j, "error"), "message");
    if (!m && r->err_msg[0]) m = r->err_msg;
    return m ? m : "";
}

static int hub_refused(const hub_opts *o, const char *what, const char *repo, resp *r, dlm_err *e)
{
    json_t *j;
    const char *why = hub_reason(r, &j);
    err_set(e, r->status == 401 ? "HfAuthError" : r->status == 403 ? "HfPermissionError" : "HfPushError",
            "hf:%s: %s refused (HTTP %ld)%s%.300s", repo, what, r->status, *why ? ": " : "", why);
    json_decref(j);
    if (r->status == 401)
        return err_hint(e, "HF_TOKEN was not accepted at %s: use a token with write access "
                           "(https://huggingface.co/settings/tokens)", o->endpoint);
    if (r->status == 403)
        return err_hint(e, "the token cannot write to %.*s: push to your own namespace or ask for access",
                        (int)strcspn(repo, "/"), repo);
    if (r->status == 404) return err_hint(e, "check hf:ORG/NAME (a model repository)");
    return -1;
}

/* ---- push -------------------------------------------------------------------------- */

typedef struct up_file {
    const char *path;                 /* in the repository */
    const char *local;                /* on disk, or NULL: data */
    char *data;                       /* owned: the bytes (memory files, and disk files sent "regular") */
    uint64_t size;
    char sha[65];
    int lfs;
} up_file;

static char *b64(const void *p, size_t n)
{
    size_t cap = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
    char *s = malloc(cap);
    if (s) sodium_bin2base64(s, cap, p, n, sodium_base64_VARIANT_ORIGINAL);
    return s;
}

static int file_head(const up_file *f, unsigned char *buf, size_t *n, dlm_err *e)
{
    if (!f->local) {
        *n = f->size < 512 ? (size_t)f->size : 512;
        memcpy(buf, f->data, *n);
        return 0;
    }
    FILE *fp = fopen(f->local, "rb");
    if (!fp) return err_sys(e, "cannot open %s", f->local);
    *n = fread(buf, 1, 512, fp);
    fclose(fp);
    return 0;
}

/* huggingface_hub's fix_hf_endpoint_in_url: an href on huggingface.co
 * goes to the configured endpoint instead */
static char *fix_endpoint(const hub_opts *o, const char *href)
{
    const char *hf = "https://huggingface.co";
    strbuf sb = STRBUF_INIT;
    if (!strncmp(href, hf, strlen(hf)) && strcmp(o->endpoint, hf)) {
        sb_puts(&sb, o->endpoint);
        sb_puts(&sb, href + strlen(hf));
    } else sb_puts(&sb, href);
    return sb_detach(&sb, NULL);
}

static int create_repo(const hub_opts *o, const char *repo, int *created, dlm_err *e)
{
    size_t ol = strcspn(repo, "/");
    char org[128];
    snprintf(org, sizeof org, "%.*s", (int)ol, repo);
    /* huggingface_hub 2.4's create_repo(private=False, repo_type="model") */
    json_t *b = json_pack("{s:s, s:s, s:s, s:s}", "name", repo + ol + 1, "organization", org, "visibility", "public",
                          "type", "model");
    char *body = b ? json_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    if (!body) return err_set(e, "MemoryError", "out of memory");
    strbuf url = STRBUF_INIT;
    sb_printf(&url, "%s/api/repos/create", o->endpoint);
    resp r = {0};
    req q = {"POST", sb_str(&url), "application/json", body, strlen(body), NULL, 1, NULL, 1, NULL, 0, 0};
    int rc = http_do(o, &q, &r, e);
    free(body);
    if (!rc) {
        *created = r.status >= 200 && r.status < 300;
        if (r.status == 409 || *created) rc = 0;
        else if (r.status == 403) {
            /* create_repo(exist_ok=True): no right to create there, but the
             * repository may exist and be writable */
            sb_reset(&url);
            sb_printf(&url, "%s/api/models/%s", o->endpoint, repo);
            resp r2 = {0};
            req q2 = {"GET", sb_str(&url), NULL, NULL, 0, NULL, 1, NULL, 1, NULL, 0, 0};
            rc = http_do(o, &q2, &r2, e);
            if (!rc && r2.status != 200) rc = hub_refused(o, "creating the repository", repo, &r, e);
            sb_free(&r2.body);
        } else rc = hub_refused(o, "creating the repository", repo, &r, e);
    }
    sb_free(&url);
    sb_free(&r.body);
    return rc;
}

static int preupload(const hub_opts *o, const char *repo, up_file *fs, int n, dlm_err *e)
{
    json_t *files = json_array();
    for (int i = 0; i < n; i++) {
        unsigned char head[512];
        size_t hn = 0;
        if (file_head(&fs[i], head, &hn, e)) { json_decref(files); return -1; }
        char *s = b64(head, hn);
        json_array_append_new(files, json_pack("{s:s, s:s, s:I}", "path", fs[i].path, "sample", s ? s : "", "size",
                                               (json_int_t)fs[i].size));
        free(s);
    }
    json_t *b = json_pack("{s:o}", "files", files);
    char *body = b ? json_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    if (!body) return err_set(e, "MemoryError", "out of memory");
    strbuf url = STRBUF_INIT;
    sb_printf(&url, "%s/api/models/%s/preupload/main", o->endpoint, repo);
    resp r = {0};
    req q = {"POST", sb_str(&url), "application/json", body, strlen(body), NULL, 1, NULL, 1, NULL, 0, 0};
    int rc = http_do(o, &q, &r, e);
    free(body);
    json_t *j = NULL;
    if (!rc && r.status != 200) rc = hub_refused(o, "preupload", repo, &r, e);
    else if (!rc) {
        j = json_loadb(r.body.buf ? r.body.buf : "", r.body.len, 0, NULL);
        for (int i = 0; i < n && !rc; i++) {
            size_t k;
            json_t *it;
            const char *mode = NULL;
            int ignore = 0;
            json_array_foreach(json_object_get(j, "files"), k, it) {
                const char *p = jget_str(it, "path");
                if (p && !strcmp(p, fs[i].path)) {
                    mode = jget_str(it, "uploadMode");
                    ignore = json_is_true(json_object_get(it, "shouldIgnore"));
                }
            }
            if (!mode || (strcmp(mode, "lfs") && strcmp(mode, "regular")))
                rc = err_set(e, "HfPushError", "hf:%s: the preupload answer has no upload mode for %s: %.200s", repo,
                             fs[i].path, sb_str(&r.body));
            else if (ignore)
                rc = err_set(e, "HfPushError", "hf:%s: the repository's .gitignore ignores %s", repo, fs[i].path),
                err_hint(e, "remove that pattern from the repository's .gitignore");
            else fs[i].lfs = !strcmp(mode, "lfs") && fs[i].size > 0;   /* empty files go "regular", as huggingface_hub */
        }
    }
    json_decref(j);
    sb_free(&url);
    sb_free(&r.body);
    return rc;
}

/* The Hub's multipart LFS transfer, as huggingface_hub's _upload_multi_part:
 * the upload header holds chunk_size and one presigned URL per part under
 * its number ("1", "2", ...); each slice is PUT to its URL and the ETags
 * are POSTed to the upload href as {"oid", "parts": [{"partNumber",
 * "etag"}]} (git-lfs JSON, no token). */
static int lfs_multipart(const hub_opts *o, const char *repo, const up_file *f, const char *href, const json_t *uh,
                         dlm_err *e)
{
    json_t *cs = json_object_get(uh, "chunk_size");
    long long chunk = json_is_integer(cs) ? (long long)json_integer_value(cs)
                    : json_is_string(cs) ? strtoll(json_string_value(cs), NULL, 10) : 0;
    if (chunk <= 0) return err_set(e, "HfPushError", "hf:%s: the multipart chunk_size is not a positive number", repo);
    uint64_t nparts = (f->size + (uint64_t)chunk - 1) / (uint64_t)chunk;
    json_t *parts = json_array();
    resp r = {0};
    int rc = 0;
    progress pg;
    progress_begin(&pg, "uploading pack", f->size, PROGRESS_BYTES);
    for (uint64_t i = 1; i <= nparts && !rc; i++) {
        char key[32];
        snprintf(key, sizeof key, "%llu", (unsigned long long)i);
        const char *u = jget_str(uh, key);
        if (!u) {
            rc = err_set(e, "HfPushError", "hf:%s: the multipart answer has no URL for part %s of %llu", repo, key,
                         (unsigned long long)nparts);
            break;
        }
        char *pu = fix_endpoint(o, u);
        uint64_t off = (i - 1) * (uint64_t)chunk, len = f->size - off < (uint64_t)chunk ? f->size - off : (uint64_t)chunk;
        req q = {"PUT", pu, NULL, NULL, 0, f->local, 0, NULL, 1, NULL, off, len};
        rc = http_do(o, &q, &r, e);
        if (!rc && (r.status < 200 || r.status > 299 || !r.etag[0])) {
            char shown[1200];
            shown_url(pu, shown, sizeof shown);
            rc = err_set(e, "HfPushError", "hf:%s: part %s of %s to %s: HTTP %ld%s", repo, key, f->path, shown,
                         r.status, r.etag[0] ? "" : " (no ETag)");
        }
        free(pu);
        if (!rc) json_array_append_new(parts, json_pack("{s:I, s:s}", "partNumber", (json_int_t)i, "etag", r.etag));
        progress_update(&pg, off + len);
    }
    if (rc) progress_abort(&pg);
    else progress_end(&pg);
    /* more part URLs than parts: the Hub reckons another size */
    if (!rc) {
        char key[32];
        snprintf(key, sizeof key, "%llu", (unsigned long long)nparts + 1);
        if (jget_str(uh, key))
            rc = err_set(e, "HfPushError", "hf:%s: the Hub gave more part URLs than %llu parts of %lld bytes", repo,
                         (unsigned long long)nparts, chunk);
    }
    if (!rc) {
        json_t *b = json_pack("{s:s, s:O}", "oid", f->sha, "parts", parts);
        char *body = b ? json_dumps(b, JSON_COMPACT) : NULL;
        json_decref(b);
        json_t *lh = json_pack("{s:s}", "Accept", "application/vnd.git-lfs+json");
        req q = {"POST", href, "application/vnd.git-lfs+json", body, body ? strlen(body) : 0, NULL, 0, lh, 1, NULL, 0, 0};
        rc = body ? http_do(o, &q, &r, e) : err_set(e, "MemoryError", "out of memory");
        if (!rc && (r.status < 200 || r.status > 299)) rc = hub_refused(o, "completing the multipart upload", repo, &r, e);
        json_decref(lh);
        free(body);
    }
    json_decref(parts);
    sb_free(&r.body);
    return rc;
}

static int lfs_upload(const hub_opts *o, const char *repo, up_file *f, int *uploaded, dlm_err *e)
{
    json_t *b = json_pack("{s:s, s:[s, s], s:[{s:s, s:I}], s:s, s:{s:s}}", "operation", "upload", "transfers", "basic",
                          "multipart", "objects", "oid", f->sha, "size", (json_int_t)f->size, "hash_algo", "sha256", "ref", "name",
                          "main");
    char *body = b ? json_dumps(b, JSON_COMPACT) : NULL;
    json_decref(b);
    if (!body) return err_set(e, "MemoryError", "out of memory");
    strbuf url = STRBUF_INIT;
    sb_printf(&url, "%s/%s.git/info/lfs/objects/batch", o->endpoint, repo);
    json_t *lh = json_pack("{s:s}", "Accept", "application/vnd.git-lfs+json");
    resp r = {0};
    req q = {"POST", sb_str(&url), "application/vnd.git-lfs+json", body, strlen(body), NULL, 1, lh, 1, NULL, 0, 0};
    int rc = http_do(o, &q, &r, e);
    free(body);
    json_decref(lh);
    json_t *j = NULL;
    char *href = NULL, *vhref = NULL;
    *uploaded = 0;
    if (rc) goto out;
    if (r.status != 200) { rc = hub_refused(o, "the LFS batch request", repo, &r, e); goto out; }
    j = json_loadb(r.body.buf ? r.body.buf : "", r.body.len, 0, NULL);
    json_t *ob = json_array_get(json_object_get(j, "objects"), 0);
    const char *tr = jget_str(j, "transfer");
    if (!ob || strcmp(jget_str(ob, "oid") ? jget_str(ob, "oid") : "", f->sha)) {
        rc = err_set(e, "HfPushError", "hf:%s: malformed LFS batch answer: %.200s", repo, sb_str(&r.body));
        goto out;
    }
    if (json_object_get(ob, "error")) {
        json_t *er = json_object_get(ob, "error");
        rc = err_set(e, "HfPushError", "hf:%s: the LFS store refused %s: %s (code %lld)", repo, f->path,
                     jget_str(er, "message") ? jget_str(er, "message") : "?",
                     (long long)json_integer_value(json_object_get(er, "code")));
        goto out;
    }
    json_t *acts = json_object_get(ob, "actions"), *up = json_object_get(acts, "upload"),
           *ver = json_object_get(acts, "verify");
    if (!up) goto out;      /* the Hub has these bytes already */
    json_t *uh = json_object_get(up, "header");
    if (tr && strcmp(tr, "basic") && strcmp(tr, "multipart")) {
        rc = err_set(e, "HfPushError", "hf:%s: the Hub asked for a '%s' upload; dlm speaks git-lfs basic and "
                                       "multipart only", repo, tr);
        err_hint(e, "Xet storage is not supported by dlm (docs/share.md)");
        goto out;
    }
    if (!jget_str(up, "href")) {
        rc = err_set(e, "HfPushError", "hf:%s: the LFS upload action has no href", repo);
        goto out;
    }
    href = fix_endpoint(o, jget_str(up, "href"));
    if (json_object_get(uh, "chunk_size")) rc = lfs_multipart(o, repo, f, href, uh, e);
    else {
        /* the href is presigned: the token is not sent there */
        req pq = {"PUT", href, NULL, NULL, 0, f->local, 0, uh, 1, "uploading pack", 0, 0};
        if ((rc = http_do(o, &pq, &r, e))) goto out;
        if (r.status < 200 || r.status > 299) {
            char shown[1200];
            shown_url(href, shown, sizeof shown);
            rc = err_set(e, "HfPushError", "hf:%s: uploading %s to %s: HTTP %ld %.200s", repo, f->path, shown,
                         r.status, sb_str(&r.body));
        }
    }
    if (rc) goto out;
    *uploaded = 1;
    if (ver && jget_str(ver, "href")) {
        vhref = fix_endpoint(o, jget_str(ver, "href"));
        json_t *vb = json_pack("{s:s, s:I}", "oid", f->sha, "size", (json_int_t)f->size);
        char *vs = vb ? json_dumps(vb, JSON_COMPACT) : NULL;
        json_decref(vb);
        if (!vs) { rc = err_set(e, "MemoryError", "out of memory"); goto out; }
        req vq = {"POST", vhref, "application/json", vs, strlen(vs), NULL, 1, NULL, 1, NULL, 0, 0};
        rc = http_do(o, &vq, &r, e);
        free(vs);
        if (!rc && r.status != 200) rc = hub_refused(o, "the LFS verification", repo, &r, e);
    }
out:
    json_decref(j);
    free(href);
    free(vhref);
    sb_free(&url);
    sb_free(&r.body);
    return rc;
}

/* Is path on main? 1 yes, 0 no, -1 error. */
static int repo_has(const hub_opts *o, const char *repo, const char *path, dlm_err *e)
{
    hub_meta m;
    dlm_err he;
    err_clear(&he);
    hub_opts q = *o;
    int r = hub_http_head(&q, repo, "main", path, &m, &he);
    if (r == 0) return 1;
    if (r == HUB_NOT_FOUND || !strcmp(he.kind, "RevisionNotFoundError")) return 0;
    *e = he;
    return -1;
}

int hf_push_ready(const hub_opts *o, const char *repo, dlm_err *e)
{
    if (!o->token[0]) {
        err_set(e, "HfAuthError", "pushing to hf:%s needs a Hugging Face token", repo);
        return err_hint(e, "create a token with write access at https://huggingface.co/settings/tokens and "
                           "export HF_TOKEN=hf_... (read from the environment only)");
    }
    if (o->offline) return err_set(e, "HfPushError", "HF_HUB_OFFLINE is set: pushing to hf:%s needs the network", repo);
    return 0;
}

int hf_push(const hub_opts *o, const char *repo, const char *pack, const char *sig, const char *readme,
            const char *message, hf_push_result *res, dlm_err *e)
{
    memset(res, 0, sizeof *res);
    if (hf_push_ready(o, repo, e)) return -1;
    up_file fs[3];
    int n = 0, rc = -1;
    memset(fs, 0, sizeof fs);
    fs[n].path = HF_PACK_NAME;
    fs[n].local = pack;
    fs[n].size = (uint64_t)fs_file_size(pack);
    if (sha256_file_hex_progress(pack, "hashing pack", fs[n].sha, e)) return -1;
    n++;
    if (sig) {
        size_t len;
        fs[n].path = HF_SIG_NAME;
        if (fs_read_all(sig, SIG_MAX, &fs[n].data, &len, e)) goto out;
        fs[n].size = len;
        sha256_hex(fs[n].data, len, fs[n].sha);
        n++;
    }
    fs[n].path = "README.md";
    if (!(fs[n].data = strdup(readme))) { err_set(e, "MemoryError", "out of memory"); goto out; }
    fs[n].size = strlen(readme);
    sha256_hex(fs[n].data, fs[n].size, fs[n].sha);
    n++;
    if (create_repo(o, repo, &res->created, e) || preupload(o, repo, fs, n, e)) goto out;
    int stale_sig = 0;
    if (!sig && (stale_sig = repo_has(o, repo, HF_SIG_NAME, e)) < 0) goto out;
    for (int i = 0; i < n; i++) {
        if (fs[i].lfs) {
            int up = 0;
            if (fs[i].local != pack) {
                /* the signature and the card are small text: the Hub takes them as regular files */
                err_set(e, "HfPushError", "hf:%s: the Hub wants %s in LFS; dlm sends it as a regular file only", repo,
                        fs[i].path);
                goto out;
            }
            if (lfs_upload(o, repo, &fs[i], &up, e)) goto out;
            res->pack_uploaded = up;
        } else if (fs[i].local) {
            size_t len;
            if (fs_read_all(fs[i].local, (size_t)fs[i].size + 1, &fs[i].data, &len, e)) goto out;
        }
    }
    /* the commit: NDJSON, one operation a line */
    strbuf body = STRBUF_INIT;
    json_t *l = json_pack("{s:s, s:{s:s, s:s}}", "key", "header", "value", "summary", message, "description", "");
    char *s = l ? json_dumps(l, JSON_COMPACT) : NULL;
    json_decref(l);
    if (s) { sb_puts(&body, s); sb_putc(&body, '\n'); }
    free(s);
    for (int i = 0; i < n; i++) {
        if (fs[i].lfs) l = json_pack("{s:s, s:{s:s, s:s, s:s, s:I}}", "key", "lfsFile", "value", "path", fs[i].path,
                                     "algo", "sha256", "oid", fs[i].sha, "size", (json_int_t)fs[i].size);
        else {
            char *c = b64(fs[i].data, fs[i].size);
            l = c ? json_pack("{s:s, s:{s:s, s:s, s:s}}", "key", "file", "value", "content", c, "path", fs[i].path,
                              "encoding", "base64") : NULL;
            free(c);
        }
        s = l ? json_dumps(l, JSON_COMPACT) : NULL;
        json_decref(l);
        if (!s) { sb_free(&body); err_set(e, "MemoryError", "out of memory"); goto out; }
        sb_puts(&body, s);
        sb_putc(&body, '\n');
        free(s);
    }
    if (stale_sig) sb_puts(&body, "{\"key\":\"deletedFile\",\"value\":{\"path\":\"" HF_SIG_NAME "\"}}\n");
    if (body.oom) { sb_free(&body); err_set(e, "MemoryError", "out of memory"); goto out; }
    strbuf url = STRBUF_INIT;
    sb_printf(&url, "%s/api/models/%s/commit/main", o->endpoint, repo);
    resp r = {0};
    req q = {"POST", sb_str(&url), "application/x-ndjson", body.buf, body.len, NULL, 1, NULL, 0, NULL, 0, 0};
    rc = http_do(o, &q, &r, e);
    if (!rc && r.status != 200 && r.status != 201) rc = hub_refused(o, "the commit", repo, &r, e);
    else if (!rc) {
        json_t *j = json_loadb(r.body.buf ? r.body.buf : "", r.body.len, 0, NULL);
        snprintf(res->commit, sizeof res->commit, "%s", jget_str(j, "commitOid") ? jget_str(j, "commitOid") : "");
        snprintf(res->commit_url, sizeof res->commit_url, "%s", jget_str(j, "commitUrl") ? jget_str(j, "commitUrl") : "");
        json_decref(j);
    }
    sb_free(&url);
    sb_free(&r.body);
    sb_free(&body);
out:
    for (int i = 0; i < n; i++) free(fs[i].data);
    return rc;
}

/* ---- pull --------------------------------------------------------------------------- */

/* hub.h's errors speak of models; these of packs */
static int pull_error(const hub_opts *o, const char *repo, const char *file, int r, dlm_err *e)
{
    if (r == HUB_NOT_FOUND) {
        err_set(e, "PullNotFoundError", "hf:%s has no %s", repo, file);
        return err_hint(e, "`dlm push PATH --to hf:%s` uploads one (the original's name for the pack)", repo);
    }
    if (!strcmp(e->kind, "RepoNotFoundError")) {
        err_set(e, "PullNotFoundError", "hf:%s: repository not found at %s", repo, o->endpoint);
        return err_hint(e, o->token[0] ? "check hf:ORG/NAME; HF_TOKEN is set but does not reach it"
                                       : "check hf:ORG/NAME; a private repository also needs HF_TOKEN");
    }
    if (!strcmp(e->kind, "GatedRepoError")) {
        char msg[sizeof e->msg];
        snprintf(msg, sizeof msg, "%s", e->msg);
        err_set(e, "HfAuthError", "hf:%s: %s", repo, msg);
        return err_hint(e, o->token[0] ? "HF_TOKEN was refused: use a token with read access to the repository"
                                       : "set HF_TOKEN to a token with read access to the repository");
    }
    return -1;
}

int hf_pull(const hub_opts *o, const char *repo, const char *pack_out, const char *sig_out, uint64_t max_bytes,
            int *have_sig, dlm_err *e)
{
    *have_sig = 0;
    if (o->offline) return err_set(e, "PullSourceError", "HF_HUB_OFFLINE is set: pulling hf:%s needs the network", repo);
    hub_meta m, ms;
    int r = hub_http_head(o, repo, "main", HF_PACK_NAME, &m, e);
    if (r) return pull_error(o, repo, HF_PACK_NAME, r, e);
    if (m.size > 0 && (uint64_t)m.size > max_bytes)
        return err_set(e, "PackTooLargeError", "hf:%s: the pack is %lld bytes, over the limit of %llu", repo,
                       m.size, (unsigned long long)max_bytes);
    /* the signature from the same commit as the pack */
    const char *rev = hub_is_commit(m.commit) ? m.commit : "main";
    if (hub_http_get(o, repo, rev, HF_PACK_NAME, &m, pack_out, e)) return -1;
    r = hub_http_head(o, repo, rev, HF_SIG_NAME, &ms, e);
    if (r == HUB_NOT_FOUND) return 0;
    if (r) return pull_error(o, repo, HF_SIG_NAME, r, e);
    if (ms.size > (long long)SIG_MAX)
        return err_set(e, "PullError", "hf:%s: %s is %lld bytes: not a signature", repo, HF_SIG_NAME, ms.size);
    if (hub_http_get(o, repo, rev, HF_SIG_NAME, &ms, sig_out, e)) return -1;
    *have_sig = 1;
    return 0;
}
