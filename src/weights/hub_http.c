/* hub_http — HEAD/GET against the hub with libcurl: metadata headers,
 * relative-redirect handling, resumable verified downloads, retries with
 * backoff, and the progress display. See hub.h for the protocol. */
#include "weights/hub.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/hash.h"
#include "util/log.h"
#include "util/str.h"
#include "version.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* Python's urllib.parse.quote: unreserved characters and `safe` stay. */
static void quote(strbuf *sb, const char *s, const char *safe)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (isalnum(*p) || strchr("_.-~", *p) || (*p && strchr(safe, *p))) sb_putc(sb, (char)*p);
        else sb_printf(sb, "%%%02X", *p);
    }
}

static char *resolve_url(const hub_opts *o, const char *repo, const char *rev, const char *file)
{
    strbuf sb = STRBUF_INIT;
    sb_printf(&sb, "%s/%s/resolve/", o->endpoint, repo);
    quote(&sb, rev, "");
    sb_putc(&sb, '/');
    quote(&sb, file, "/");
    return sb_detach(&sb, NULL);
}

/* ---- response headers --------------------------------------------------------- */

typedef struct hdrs {
    long status;
    char location[2048];
    char commit[64];
    char etag[160], linked_etag[160];
    long long length, linked_size;
    char error_code[64];
    char content_range[128];
} hdrs;

static void hdrs_reset(hdrs *h)
{
    memset(h, 0, sizeof *h);
    h->length = h->linked_size = -1;
}

static void copy_val(char *dst, size_t cap, const char *v, size_t n)
{
    while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' ')) n--;
    while (n && *v == ' ') { v++; n--; }
    if (n >= cap) n = cap - 1;
    memcpy(dst, v, n);
    dst[n] = 0;
}

static size_t on_header(char *buf, size_t size, size_t n, void *ud)
{
    hdrs *h = ud;
    size_t len = size * n;
    if (len >= 5 && !strncmp(buf, "HTTP/", 5)) {
        /* a new response (redirect chain): its headers replace the last */
        hdrs_reset(h);
        const char *sp = memchr(buf, ' ', len);
        if (sp) h->status = strtol(sp + 1, NULL, 10);
        return len;
    }
    const char *colon = memchr(buf, ':', len);
    if (!colon) return len;
    size_t kn = (size_t)(colon - buf);
    const char *v = colon + 1;
    size_t vn = len - kn - 1;
    char tmp[64];
#define IS(name) (kn == strlen(name) && !strncasecmp(buf, name, kn))
    if (IS("location")) copy_val(h->location, sizeof h->location, v, vn);
    else if (IS("x-repo-commit")) copy_val(h->commit, sizeof h->commit, v, vn);
    else if (IS("etag")) copy_val(h->etag, sizeof h->etag, v, vn);
    else if (IS("x-linked-etag")) copy_val(h->linked_etag, sizeof h->linked_etag, v, vn);
    else if (IS("x-error-code")) copy_val(h->error_code, sizeof h->error_code, v, vn);
    else if (IS("content-range")) copy_val(h->content_range, sizeof h->content_range, v, vn);
    else if (IS("content-length")) { copy_val(tmp, sizeof tmp, v, vn); h->length = strtoll(tmp, NULL, 10); }
    else if (IS("x-linked-size")) { copy_val(tmp, sizeof tmp, v, vn); h->linked_size = strtoll(tmp, NULL, 10); }
#undef IS
    return len;
}

/* ETag normalisation: drop a leading W/ and the surrounding quotes. */
static void norm_etag(char *dst, size_t cap, const char *src)
{
    if (!strncmp(src, "W/", 2)) src += 2;
    size_t n = strlen(src);
    if (n >= 2 && src[0] == '"' && src[n - 1] == '"') { src++; n -= 2; }
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* An etag becomes a file name in blobs/: allow only what HF sends. */
static int safe_etag(const char *s)
{
    if (!*s || strlen(s) > 128) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '-' && *s != '_') return 0;
    return 1;
}

static int is_sha256(const char *s)
{
    if (strlen(s) != 64) return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s) && !(*s >= 'a' && *s <= 'f')) return 0;
    return 1;
}

/* ---- curl plumbing ---------------------------------------------------------------- */

static CURL *new_handle(const hub_opts *o, struct curl_slist **hl, hdrs *h)
{
    pthread_once(&curl_once, curl_init_once);
    CURL *c = curl_easy_init();
    if (!c) return NULL;
    *hl = curl_slist_append(NULL, "Accept-Encoding: identity");
    if (o->token[0]) {
        char auth[1200];
        snprintf(auth, sizeof auth, "authorization: Bearer %s", o->token);
        *hl = curl_slist_append(*hl, auth);
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hl);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "dlm/" DLM_VERSION);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, h);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, o->low_speed_s > 0 ? o->low_speed_s : 60L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    return c;
}

static int transient_curl(CURLcode rc)
{
    /* A host name that does not resolve means no network (or a typo in
     * HF_ENDPOINT): retrying only makes the user wait, so it is final. */
    return rc == CURLE_COULDNT_CONNECT || rc == CURLE_OPERATION_TIMEDOUT ||
           rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR ||
           rc == CURLE_GOT_NOTHING || rc == CURLE_HTTP2 || rc == CURLE_HTTP2_STREAM || rc == CURLE_SSL_CONNECT_ERROR;
}

/* Internal return code: a transient failure worth retrying. */
#define RETRY 2

static int transient_status(long s) { return s == 429 || s == 408 || (s >= 500 && s <= 599); }

/* Errors for a final non-success status. Returns -1 (fatal), RETRY or
 * HUB_NOT_FOUND. */
static int status_error(const char *repo, const char *rev, const char *file, const hdrs *h, dlm_err *e)
{
    long s = h->status;
    if (transient_status(s)) {
        err_set(e, "HubNetworkError", "%s: HTTP %ld fetching '%s'", repo, s, file);
        return RETRY;
    }
    if (!strcmp(h->error_code, "RepoNotFound")) {
        err_set(e, "RepoNotFoundError", "repository '%s' not found (HTTP %ld)", repo, s);
        err_hint(e, "check the model id; private or gated repositories also need HF_TOKEN");
        return -1;
    }
    if (!strcmp(h->error_code, "RevisionNotFound")) {
        err_set(e, "RevisionNotFoundError", "%s has no revision '%s'", repo, rev);
        return -1;
    }
    if (s == 401 || s == 403 || !strcmp(h->error_code, "GatedRepo")) {
        err_set(e, "GatedRepoError", "access to %s was refused (HTTP %ld)", repo, s);
        err_hint(e, "%s requires accepting its licence on huggingface.co and HF_TOKEN set", repo);
        return -1;
    }
    if (s == 404) {
        err_set(e, "EntryNotFoundError", "%s@%s has no file '%s'", repo, rev, file);
        return HUB_NOT_FOUND;
    }
    err_set(e, "HubError", "%s: unexpected HTTP %ld fetching '%s'", repo, s, file);
    return -1;
}

/* One HEAD, following relative redirects only. */
static int head_once(const hub_opts *o, const char *repo, const char *rev, const char *file, hub_meta *m,
                     dlm_err *e)
{
    hdrs h;
    struct curl_slist *hl = NULL;
    hdrs_reset(&h);
    CURL *c = new_handle(o, &hl, &h);
    char *url = resolve_url(o, repo, rev, file);
    int rc = -1;
    if (!c || !url) { err_set(e, "MemoryError", "cannot start an HTTP request"); goto out; }
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    for (int hop = 0;; hop++) {
        hdrs_reset(&h);
        curl_easy_setopt(c, CURLOPT_URL, url);
        CURLcode cr = curl_easy_perform(c);
        if (cr != CURLE_OK) {
            err_set(e, "HubNetworkError", "%s: cannot reach %s: %s", repo, o->endpoint, curl_easy_strerror(cr));
            if (cr == CURLE_COULDNT_RESOLVE_HOST)
                err_hint(e, "no network? the base must already be in the HF cache (HF_HUB_CACHE), or use a local"
                            " folder / .gguf, or --base tiny");
            rc = transient_curl(cr) ? RETRY : -1;
            goto out;
        }
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &h.status);
        int redirect = h.status >= 300 && h.status < 400 && h.location[0];
        /* relative Location ("/x", not "//host/x"): follow; absolute: a CDN,
         * stop here and read the metadata from this response */
        if (redirect && h.location[0] == '/' && h.location[1] != '/') {
            if (hop >= 10) { err_set(e, "HubError", "%s: too many redirects", repo); goto out; }
            char *base = NULL;
            curl_easy_getinfo(c, CURLINFO_EFFECTIVE_URL, &base);
            strbuf sb = STRBUF_INIT;
            const char *p = base ? strstr(base, "://") : NULL;
            const char *slash = p ? strchr(p + 3, '/') : NULL;
            if (!slash) { sb_free(&sb); err_set(e, "HubError", "bad redirect from %s", base ? base : "?"); goto out; }
            sb_append(&sb, base, (size_t)(slash - base));
            sb_puts(&sb, h.location);
            free(url);
            url = sb_detach(&sb, NULL);
            continue;
        }
        if (h.status >= 400 || (h.status >= 300 && !redirect)) {
            rc = status_error(repo, rev, file, &h, e);
            snprintf(m->commit, sizeof m->commit, "%s", h.commit);
            snprintf(m->error_code, sizeof m->error_code, "%s", h.error_code);
            goto out;
        }
        break;
    }
    memset(m, 0, sizeof *m);
    m->status = h.status;
    snprintf(m->commit, sizeof m->commit, "%s", h.commit);
    norm_etag(m->etag, sizeof m->etag, h.linked_etag[0] ? h.linked_etag : h.etag);
    m->size = h.linked_size >= 0 ? h.linked_size : h.length;
    if (!safe_etag(m->etag)) {
        err_set(e, "HubError", "%s: the server sent no usable ETag for '%s'", repo, file);
        goto out;
    }
    rc = 0;
out:
    free(url);
    if (c) curl_easy_cleanup(c);
    curl_slist_free_all(hl);
    return rc;
}

static int with_retries(const hub_opts *o, const char *what, dlm_err *e,
                        int (*fn)(const hub_opts *, void *, dlm_err *), void *arg)
{
    long delay = o->backoff_ms > 0 ? o->backoff_ms : 0;
    for (int attempt = 0;; attempt++) {
        int r = fn(o, arg, e);
        if (r != RETRY) return r;
        if (attempt >= o->max_retries) return -1;
        log_warn("%s: %s; retrying in %.1fs (%d/%d)", what, e->msg, delay / 1000.0, attempt + 1, o->max_retries);
        sleep_ms(delay);
        delay = delay * 2 > 30000 ? 30000 : delay * 2;
    }
}

typedef struct head_args { const char *repo, *rev, *file; hub_meta *m; } head_args;
static int head_fn(const hub_opts *o, void *a, dlm_err *e)
{
    head_args *h = a;
    return head_once(o, h->repo, h->rev, h->file, h->m, e);
}

int hub_http_head(const hub_opts *o, const char *repo, const char *rev, const char *file, hub_meta *m, dlm_err *e)
{
    memset(m, 0, sizeof *m);
    m->size = -1;
    head_args a = {repo, rev, file, m};
    return with_retries(o, file, e, head_fn, &a);
}

/* ---- progress ------------------------------------------------------------------------ */

typedef struct prog {
    const char *label;
    long long total, base;      /* expected size; bytes present before this GET */
    double start, last;
    int mode;                   /* 0 off, 1 lines, 2 terminal bar */
    int drawn;
} prog;

static void fmt_eta(char *b, size_t n, double s)
{
    if (s < 0 || s > 360000) { snprintf(b, n, "--:--"); return; }
    int t = (int)(s + 0.5);
    if (t >= 3600) snprintf(b, n, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
    else snprintf(b, n, "%d:%02d", t / 60, t % 60);
}

static void prog_draw(prog *p, long long have, int final)
{
    double t = now_s(), dt = t - p->start;
    if (!final && p->mode == 2 && t - p->last < 0.2) return;
    if (!final && p->mode == 1 && t - p->last < 10) return;
    p->last = t;
    double rate = dt > 0 ? (double)(have - p->base) / dt : 0;
    char a[32], b[32], r[32], eta[32];
    str_human_size((unsigned long long)have, a, sizeof a);
    str_human_size((unsigned long long)(p->total > 0 ? p->total : 0), b, sizeof b);
    str_human_size((unsigned long long)rate, r, sizeof r);
    fmt_eta(eta, sizeof eta, rate > 0 && p->total > 0 ? (double)(p->total - have) / rate : -1);
    int pct = p->total > 0 ? (int)(100.0 * (double)have / (double)p->total) : 0;
    if (p->mode == 2) {
        char bar[31];
        int fill = pct * 30 / 100;
        for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
        bar[30] = 0;
        fprintf(stderr, "\r%-28.28s [%s] %3d%% %s/%s %s/s ETA %s   ", p->label, bar, pct, a, b, r, eta);
        if (final) fputc('\n', stderr);
        p->drawn = 1;
    } else {
        p->drawn = 1;
        fprintf(stderr, "dlm: downloading %s: %s of %s (%d%%), %s/s, ETA %s\n", p->label, a, b, pct, r, eta);
    }
    fflush(stderr);
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    prog *p = ud;
    (void)dltotal; (void)ultotal; (void)ulnow;
    if (p->mode) prog_draw(p, p->base + (long long)dlnow, 0);
    return 0;
}

/* ---- GET -------------------------------------------------------------------------------- */

typedef struct sink {
    int fd;
    long long off;          /* where the next byte goes */
    long long asked;        /* Range start we asked for */
    int checked;            /* status examined */
    long bad_status;
    CURL *c;
    hdrs *h;
} sink;

static size_t on_body(char *buf, size_t size, size_t n, void *ud)
{
    sink *s = ud;
    size_t len = size * n;
    if (!s->checked) {
        long st = 0;
        curl_easy_getinfo(s->c, CURLINFO_RESPONSE_CODE, &st);
        s->checked = 1;
        if (st == 206) {
            long long from = -1;
            if (sscanf(s->h->content_range, "bytes %lld-", &from) != 1 || from != s->asked) {
                s->bad_status = -206; /* a range we did not ask for: restart */
                return 0;
            }
        } else if (st == 200) {
            if (s->asked > 0) {
                /* server ignored Range: start over (docs/reference/formats.md §1.3) */
                if (ftruncate(s->fd, 0) != 0) return 0;
                s->off = 0;
            }
        } else {
            s->bad_status = st;
            return 0;
        }
    }
    const char *p = buf;
    size_t left = len;
    while (left) {
        ssize_t w = pwrite(s->fd, p, left, s->off);
        if (w < 0) {
            if (errno == EINTR) continue;
            return 0;
        }
        p += w;
        left -= (size_t)w;
        s->off += w;
    }
    return len;
}

typedef struct get_args {
    const char *repo, *rev, *file, *inc;
    const hub_meta *m;
} get_args;

static int get_once(const hub_opts *o, void *arg, dlm_err *e)
{
    get_args *a = arg;
    int fd = open(a->inc, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return err_sys(e, "cannot create '%s'", a->inc);
    struct stat st;
    if (fstat(fd, &st) != 0) { close(fd); return err_sys(e, "cannot stat '%s'", a->inc); }
    long long have = (long long)st.st_size;
    if (a->m->size >= 0 && have > a->m->size) {
        if (ftruncate(fd, 0) != 0) { close(fd); return err_sys(e, "cannot truncate '%s'", a->inc); }
        have = 0;
    }
    int rc = -1;
    hdrs h;
    struct curl_slist *hl = NULL;
    hdrs_reset(&h);
    CURL *c = NULL;
    char *url = NULL;
    if (a->m->size >= 0 && have == a->m->size) { rc = 0; goto out; }  /* complete from an earlier run */
    c = new_handle(o, &hl, &h);
    url = resolve_url(o, a->repo, a->rev, a->file);
    if (!c || !url) { err_set(e, "MemoryError", "cannot start an HTTP request"); goto out; }
    sink s = {fd, have, have, 0, 0, c, &h};
    char range[64];
    if (have > 0) {
        snprintf(range, sizeof range, "%lld-", have);
        curl_easy_setopt(c, CURLOPT_RANGE, range);
        log_debug("hub: resuming %s at byte %lld", a->file, have);
    }
    prog p = {a->file, a->m->size, have, now_s(), 0, 0, 0};
    p.last = p.start;
    int lv = log_level();
    if (o->progress == 1) p.mode = 1;
    else if (o->progress == -1 && lv >= LOG_NORMAL) p.mode = isatty(2) ? 2 : 1;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &p);
    CURLcode cr = curl_easy_perform(c);
    if (p.mode == 2 && p.drawn) fputc('\n', stderr);
    if (s.bad_status == -206) {
        if (ftruncate(fd, 0) != 0) { err_sys(e, "cannot truncate '%s'", a->inc); goto out; }
        err_set(e, "HubNetworkError", "%s: server answered a different byte range; restarting", a->file);
        rc = RETRY;
        goto out;
    }
    if (s.bad_status) {
        h.status = s.bad_status;
        if (s.bad_status == 416) {
            /* our partial file is not a prefix of theirs: start over */
            if (ftruncate(fd, 0) != 0) { err_sys(e, "cannot truncate '%s'", a->inc); goto out; }
            err_set(e, "HubNetworkError", "%s: range not satisfiable; restarting", a->file);
            rc = RETRY;
            goto out;
        }
        int r = status_error(a->repo, a->rev, a->file, &h, e);
        rc = r == HUB_NOT_FOUND ? -1 : r;
        goto out;
    }
    if (cr != CURLE_OK) {
        err_set(e, "HubNetworkError", "downloading '%s' from %s: %s (%lld bytes so far)", a->file, a->repo,
                curl_easy_strerror(cr), s.off);
        rc = transient_curl(cr) ? RETRY : -1;
        goto out;
    }
    have = s.off;
    if (a->m->size >= 0 && have != a->m->size) {
        err_set(e, "HubNetworkError", "'%s': got %lld bytes, expected %lld", a->file, have, a->m->size);
        rc = have < a->m->size ? RETRY : -1;
        if (rc < 0 && ftruncate(fd, 0) != 0) {}
        goto out;
    }
    if (p.mode == 2 || (p.mode == 1 && (p.drawn || have - p.base >= (1 << 20)))) prog_draw(&p, have, 1);
    rc = 0;
out:
    if (rc == 0 && fsync(fd) != 0) rc = err_sys(e, "cannot fsync '%s'", a->inc);
    close(fd);
    free(url);
    if (c) curl_easy_cleanup(c);
    curl_slist_free_all(hl);
    return rc;
}

int hub_http_get(const hub_opts *o, const char *repo, const char *rev, const char *file, const hub_meta *m,
                 const char *incomplete, dlm_err *e)
{
    get_args a = {repo, rev, file, incomplete, m};
    if (with_retries(o, file, e, get_once, &a)) return -1;
    if (is_sha256(m->etag)) {
        char hex[65];
        if (sha256_file_hex(incomplete, hex, e)) return -1;
        if (strcmp(hex, m->etag)) {
            unlink(incomplete);
            err_set(e, "IntegrityError", "%s: '%s' has sha256 %s, expected %s", repo, file, hex, m->etag);
            return err_hint(e, "the download was corrupted in transit; run the command again to fetch it anew");
        }
    }
    return 0;
}
