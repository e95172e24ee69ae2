/* inject — see inject.h. The parser and the bearer check are plain
 * functions (fuzzed by tests/fuzz/fuzz_inject.c); the server around them
 * is one libmicrohttpd polling thread and a mutex-guarded FIFO. */
#include "api/inject.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "doc/pystr.h"
#include "util/json.h"
#include "util/net.h"
#include "util/timeutil.h"

/* ---- parsing -------------------------------------------------------------- */

static char *strip_dup(const char *s)
{
    const char *b = s, *e = s + strlen(s);
    py_strip(&b, &e);
    char *o = malloc((size_t)(e - b) + 1);
    if (!o) return NULL;
    memcpy(o, b, (size_t)(e - b));
    o[e - b] = 0;
    return o;
}

void inject_probe_clear(inject_probe *p)
{
    if (!p) return;
    free(p->prompt);
    free(p->reference);
    for (int i = 0; i < p->n_tags; i++) free(p->tags[i]);
    free(p->tags);
    memset(p, 0, sizeof *p);
}

/* a str the original accepts: non-empty after str.strip() (jansson has
 * already refused invalid UTF-8 and NUL) */
static int nonblank(const json_t *v)
{
    return json_is_string(v) && !py_is_blank(json_string_value(v), json_string_length(v));
}

int inject_parse(const char *body, size_t len, inject_probe *out, char *msg, size_t cap)
{
    memset(out, 0, sizeof *out);
    if (len == 0) {
        snprintf(msg, cap, "empty body");
        return 400;
    }
    if (len > INJECT_MAX_BODY) {
        snprintf(msg, cap, "body exceeds %d bytes", INJECT_MAX_BODY);
        return 400;
    }
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_DECODE_ANY, &je);
    if (!root) {
        snprintf(msg, cap, "malformed JSON: %s (line %d, column %d)", je.text, je.line, je.column);
        return 400;
    }
    int st = 400;
    if (!json_is_object(root)) {
        snprintf(msg, cap, "payload must be a JSON object");
        goto out;
    }
    const json_t *m = json_object_get(root, "method");
    if (!json_is_string(m) || json_string_length(m) != strlen("inject_probe") ||
        strcmp(json_string_value(m), "inject_probe")) {
        if (json_is_string(m))
            snprintf(msg, cap, "unknown method '%.64s'", json_string_value(m));
        else
            snprintf(msg, cap, "unknown method %s", m ? "(not a string)" : "None");
        st = 404;
        goto out;
    }
    const json_t *params = json_object_get(root, "params");
    if (params && !json_is_object(params)) {
        snprintf(msg, cap, "`params` must be an object");
        goto out;
    }
    const json_t *pr = params ? json_object_get(params, "prompt") : NULL;
    const json_t *rf = params ? json_object_get(params, "reference") : NULL;
    const json_t *tg = params ? json_object_get(params, "tags") : NULL;
    if (!nonblank(pr)) {
        snprintf(msg, cap, "`params.prompt` must be a non-empty string");
        goto out;
    }
    if (!nonblank(rf)) {
        snprintf(msg, cap, "`params.reference` must be a non-empty string");
        goto out;
    }
    if (tg && !json_is_array(tg)) {
        snprintf(msg, cap, "`params.tags` must be a list of strings");
        goto out;
    }
    size_t nt = tg ? json_array_size(tg) : 0;
    for (size_t i = 0; i < nt; i++)
        if (!json_is_string(json_array_get(tg, i))) {
            snprintf(msg, cap, "`params.tags` must be a list of strings");
            goto out;
        }
    /* the 64 KiB body bounds this already; the cap keeps a record small */
    if (nt > INJECT_MAX_TAGS) {
        snprintf(msg, cap, "`params.tags` has more than %d entries", INJECT_MAX_TAGS);
        goto out;
    }
    out->prompt = strip_dup(json_string_value(pr));
    out->reference = strip_dup(json_string_value(rf));
    out->tags = nt ? calloc(nt, sizeof *out->tags) : NULL;
    if (!out->prompt || !out->reference || (nt && !out->tags)) goto oom;
    for (size_t i = 0; i < nt; i++) {
        out->tags[i] = strdup(json_string_value(json_array_get(tg, i)));   /* tags are kept as sent */
        if (!out->tags[i]) goto oom;
        out->n_tags = (int)i + 1;
    }
    json_decref(root);
    return 200;
oom:
    inject_probe_clear(out);
    snprintf(msg, cap, "out of memory");
    json_decref(root);
    return 500;
out:
    json_decref(root);
    return st;
}

int inject_bearer_ok(const char *header, const char *token)
{
    static const char prefix[] = "Bearer ";
    if (!header || !token || strncmp(header, prefix, sizeof prefix - 1)) return 0;
    const char *b = header + sizeof prefix - 1, *e = b + strlen(b);
    py_strip(&b, &e);
    size_t n = (size_t)(e - b), tn = strlen(token);
    /* the lengths differ openly (as the original); equal lengths compare
     * in constant time */
    if (!n || !tn || n != tn) return 0;
    return sodium_memcmp(b, token, n) == 0;
}

int inject_probe_content(const inject_probe *p, strbuf *content, strbuf *source)
{
    sb_puts(content, "### Q !probe\n");
    sb_puts(content, p->prompt);
    sb_puts(content, "\n\n### A\n");
    sb_puts(content, p->reference);
    sb_puts(source, "rpc-inject/");
    size_t start = source->len;
    if (p->n_tags) {
        sb_puts(source, p->tags[0]);
    } else {
        /* prompt[:32].strip().replace(" ", "-"): 32 code points */
        const char *s = p->prompt;
        size_t n = strlen(s), at = 0;
        for (int k = 0; k < 32 && at < n; k++) {
            uint32_t cp;
            at += (size_t)py_utf8_next(s + at, n - at, &cp);
        }
        const char *b = s, *e = s + at;
        py_strip(&b, &e);
        for (const char *c = b; c < e; c++) sb_putc(source, *c == ' ' ? '-' : *c);
    }
    for (size_t i = start; source->buf && i < source->len; i++)
        if (source->buf[i] == '"' || source->buf[i] == '\n' || source->buf[i] == '\r') source->buf[i] = '\'';
    return content->oom || source->oom ? -1 : 0;
}

/* ---- the listen address ---------------------------------------------------- */

int inject_parse_listen(const char *spec, char *host, size_t cap, int *port, dlm_err *e)
{
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || !colon[1]) {
        err_set(e, "UsageError", "--listen-rpc expects host:port, got '%s'", spec);
        return err_hint(e, "e.g. --listen-rpc 127.0.0.1:7429 (port 0: any free one)");
    }
    int64_t v;
    int ovf = 0;
    if (py_int_parse(colon + 1, strlen(colon + 1), &v, &ovf) || ovf) {
        err_set(e, "UsageError", "--listen-rpc port must be an integer, got '%s'", colon + 1);
        return err_hint(e, "e.g. --listen-rpc 127.0.0.1:7429");
    }
    if (v < 0 || v > 65535) return err_set(e, "UsageError", "--listen-rpc port %lld is out of range (0-65535)", (long long)v);
    size_t hn = (size_t)(colon - spec);
    if (hn >= 2 && spec[0] == '[' && spec[hn - 1] == ']') {   /* [::1]:7429 */
        spec++;
        hn -= 2;
    }
    if (!hn || hn >= cap) return err_set(e, "UsageError", "--listen-rpc host is empty or too long in '%s'", spec);
    memcpy(host, spec, hn);
    host[hn] = 0;
    *port = (int)v;
    return 0;
}

int inject_host_is_loopback(const char *host)
{
    if (!strcmp(host, "localhost")) return 1;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
    return 0;
}

/* ---- the server ------------------------------------------------------------ */

struct inject_server {
    struct MHD_Daemon *d;
    pthread_mutex_t mu;
    inject_probe *q;
    int n, cap, closed, eta;
    char *token;
    int wake[2];
};

typedef struct conn {
    char *buf;
    size_t len, want;
} conn;

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, json_t *body)
{
    char *txt = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    const char *t = txt ? txt : "{\"error\": \"out of memory\"}";
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(t), (void *)t, MHD_RESPMEM_MUST_COPY);
    free(txt);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result reply_err(struct MHD_Connection *c, unsigned status, const char *msg)
{
    return reply(c, status, json_pack("{s:s}", "error", msg));
}

static void peer_addr(struct MHD_Connection *c, char *out, size_t cap)
{
    out[0] = 0;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!ci || !ci->client_addr) return;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out, (socklen_t)cap);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, out, (socklen_t)cap);
}

static enum MHD_Result enqueue(inject_server *s, struct MHD_Connection *c, inject_probe *p)
{
    peer_addr(c, p->source_addr, sizeof p->source_addr);
    time_iso_utc(time_now(), p->accepted_at, sizeof p->accepted_at);
    pthread_mutex_lock(&s->mu);
    if (s->closed) {
        pthread_mutex_unlock(&s->mu);
        inject_probe_clear(p);
        return reply_err(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                         "the last cycle has started (--max-cycles reached): no further probe can train");
    }
    if (s->n >= s->cap) {
        int depth = s->n;
        pthread_mutex_unlock(&s->mu);
        inject_probe_clear(p);
        char m[160];
        snprintf(m, sizeof m, "probe queue at capacity (%d); retry after the next cycle drains it", s->cap);
        return reply(c, MHD_HTTP_TOO_MANY_REQUESTS, json_pack("{s:s, s:i}", "error", m, "queue_depth", depth));
    }
    s->q[s->n++] = *p;
    memset(p, 0, sizeof *p);
    int depth = s->n, eta = s->eta;
    pthread_mutex_unlock(&s->mu);
    char one = 1;
    if (write(s->wake[1], &one, 1) < 0) { /* the pipe is full: the waiter is awake anyway */ }
    return reply(c, MHD_HTTP_OK,
                 json_pack("{s:b, s:i, s:i}", "accepted", 1, "next_cycle_eta_s", eta, "queue_depth", depth));
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    inject_server *s = cls;
    (void)version;
    conn *k = *con_cls;
    if (!k) {
        /* the original's order: path, token, length; an answer queued
         * now makes libmicrohttpd drop the body and keep the connection
         * usable (or close it cleanly) */
        if (strcmp(method, "POST")) return reply_err(c, MHD_HTTP_NOT_IMPLEMENTED, "unsupported method (POST /rpc)");
        if (strcmp(url, "/rpc")) {
            char m[300];
            snprintf(m, sizeof m, "unknown path %.256s", url);
            return reply_err(c, MHD_HTTP_NOT_FOUND, m);
        }
        if (!inject_bearer_ok(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"), s->token))
            return reply_err(c, MHD_HTTP_UNAUTHORIZED, "missing or invalid bearer token");
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        int64_t n = 0;
        int ovf = 0;
        if (cl && (py_int_parse(cl, strlen(cl), &n, &ovf) || ovf))
            return reply_err(c, MHD_HTTP_BAD_REQUEST, "invalid Content-Length");
        if (n <= 0) return reply_err(c, MHD_HTTP_BAD_REQUEST, "empty body");
        if (n > INJECT_MAX_BODY) {
            char m[64];
            snprintf(m, sizeof m, "body exceeds %d bytes", INJECT_MAX_BODY);
            return reply_err(c, MHD_HTTP_BAD_REQUEST, m);
        }
        k = calloc(1, sizeof *k);
        if (!k || !(k->buf = malloc((size_t)n))) {
            free(k);
            return reply_err(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        }
        k->want = (size_t)n;
        *con_cls = k;
        return MHD_YES;
    }
    if (*upload_size) {
        /* libmicrohttpd holds the body to Content-Length; the check keeps
         * the copy bounded whatever it hands over */
        size_t take = *upload_size <= k->want - k->len ? *upload_size : k->want - k->len;
        memcpy(k->buf + k->len, upload, take);
        k->len += take;
        *upload_size = 0;
        return MHD_YES;
    }
    inject_probe p;
    char msg[512];
    int st = inject_parse(k->buf, k->len, &p, msg, sizeof msg);
    if (st != 200) return reply_err(c, (unsigned)st, msg);
    return enqueue(s, c, &p);
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why)
{
    (void)cls;
    (void)c;
    (void)why;
    conn *k = *con_cls;
    if (k) {
        free(k->buf);
        free(k);
    }
    *con_cls = NULL;
}

inject_server *inject_start(const inject_server_opts *o, dlm_err *e)
{
    if (!o->token || !*o->token) return err_set(e, "UsageError", "the probe RPC needs a bearer token"), NULL;
    inject_server *s = calloc(1, sizeof *s);
    if (!s) return err_set(e, "MemoryError", "out of memory"), NULL;
    s->cap = o->capacity > 0 ? o->capacity : INJECT_QUEUE_CAP;
    s->q = calloc((size_t)s->cap, sizeof *s->q);
    s->token = strdup(o->token);
    s->wake[0] = s->wake[1] = -1;
    if (!s->q || !s->token || pipe2(s->wake, O_CLOEXEC | O_NONBLOCK)) {
        err_sys(e, "cannot set up the probe RPC");
        goto fail;
    }
    pthread_mutex_init(&s->mu, NULL);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC;
    struct sockaddr_storage ss;
    int af = net_listen_addr(o->host, o->port, &ss);
    if (af == AF_INET6) flags |= MHD_USE_IPv6;
    if (af < 0) {
        err_set(e, "UsageError", "--listen-rpc host '%s' is not a numeric IPv4 or IPv6 address", o->host);
        err_hint(e, "use 127.0.0.1, ::1 or localhost");
        goto fail_mu;
    }
    s->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED, on_done, s, MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30, MHD_OPTION_END);
    if (!s->d) {
        err_set(e, "ServeError", "cannot listen on %s:%d (in use, or not allowed)", o->host, o->port);
        err_hint(e, "pick another port (port 0: any free one)");
        goto fail_mu;
    }
    return s;
fail_mu:
    pthread_mutex_destroy(&s->mu);
fail:
    if (s->wake[0] >= 0) close(s->wake[0]);
    if (s->wake[1] >= 0) close(s->wake[1]);
    if (s->token) sodium_memzero(s->token, strlen(s->token));
    free(s->token);
    free(s->q);
    free(s);
    return NULL;
}

int inject_port(const inject_server *s)
{
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    return i ? i->port : 0;
}

int inject_wake_fd(const inject_server *s) { return s->wake[0]; }

int inject_drain(inject_server *s, inject_probe **out, int *n)
{
    char buf[256];
    while (read(s->wake[0], buf, sizeof buf) > 0) {}
    pthread_mutex_lock(&s->mu);
    *n = s->n;
    *out = NULL;
    if (s->n) {
        *out = malloc((size_t)s->n * sizeof **out);
        if (!*out) {
            pthread_mutex_unlock(&s->mu);
            *n = 0;
            return -1;
        }
        memcpy(*out, s->q, (size_t)s->n * sizeof **out);
        s->n = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int inject_depth(inject_server *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->n;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void inject_set_eta(inject_server *s, int seconds)
{
    pthread_mutex_lock(&s->mu);
    s->eta = seconds < 0 ? 0 : seconds;
    pthread_mutex_unlock(&s->mu);
}

void inject_close_queue(inject_server *s)
{
    pthread_mutex_lock(&s->mu);
    s->closed = 1;
    pthread_mutex_unlock(&s->mu);
}

void inject_stop(inject_server *s)
{
    if (!s) return;
    MHD_stop_daemon(s->d);
    for (int i = 0; i < s->n; i++) inject_probe_clear(&s->q[i]);
    free(s->q);
    close(s->wake[0]);
    close(s->wake[1]);
    sodium_memzero(s->token, strlen(s->token));
    free(s->token);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
