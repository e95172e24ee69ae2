/* server — the JSON-RPC dispatcher and the session's lifecycle:
 * initialize → initialized → requests → shutdown → exit (LSP 3.17 §
 * "Lifecycle Messages"), the open documents (full or incremental sync),
 * $/cancelRequest, and the stdio loop.
 *
 * Every malformed input gets the protocol's answer instead of a crash:
 * unparsable JSON → -32700 (id null), not a request object → -32600,
 * unknown method → -32601, bad params → -32602, a request before
 * initialize → -32002, a cancelled request → -32800. Notifications are
 * never answered (unknown ones are dropped, as the protocol asks). */
#include "lsp/lsp_internal.h"

#include <errno.h>
#include <stdio.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/str.h"
#include "version.h"

/* ---- output ------------------------------------------------------------------ */

void lsp_send(lsp_server *s, json_t *msg)
{
    if (!msg) return;
    json_object_set_new(msg, "jsonrpc", json_string("2.0"));
    char *body = json_dumps(msg, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(msg);
    if (!body) return;
    strbuf out = STRBUF_INIT;
    if (!rpc_frame(&out, body, strlen(body)) && s->sink) s->sink(s->sink_ctx, out.buf, out.len);
    sb_free(&out);
    free(body);
}

void lsp_notify(lsp_server *s, const char *method, json_t *params)
{
    lsp_send(s, json_pack("{s:s, s:o}", "method", method, "params", params ? params : json_object()));
}

static void reply(lsp_server *s, json_t *id, json_t *result)
{
    lsp_send(s, json_pack("{s:O, s:o}", "id", id ? id : json_null(), "result", result ? result : json_null()));
}

static void reply_error(lsp_server *s, json_t *id, int code, const char *msg)
{
    lsp_send(s, json_pack("{s:O, s:{s:i, s:s}}", "id", id ? id : json_null(), "error", "code", code, "message", msg));
}

/* ---- documents ------------------------------------------------------------------ */

lsp_doc *lsp_doc_find(lsp_server *s, const char *uri)
{
    for (int i = 0; i < s->ndocs; i++)
        if (!strcmp(s->docs[i].uri, uri)) return &s->docs[i];
    return NULL;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* file:///a/b%20c.dlm → /a/b c.dlm (percent-decoded); NULL for other schemes. */
static char *uri_to_path(const char *uri)
{
    if (strncmp(uri, "file://", 7)) return NULL;
    const char *p = uri + 7;
    if (*p != '/') {   /* file://host/path: only the local host */
        if (strncmp(p, "localhost/", 10)) return NULL;
        p += 9;
    }
    size_t n = strlen(p);
    char *out = malloc(n + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        int a, b;
        if (p[i] == '%' && i + 2 < n + 1 && (a = hexval(p[i + 1])) >= 0 && (b = hexval(p[i + 2])) >= 0) {
            char c = (char)(a * 16 + b);
            if (!c) { free(out); return NULL; }
            *o++ = c;
            i += 2;
        } else *o++ = p[i];
    }
    *o = 0;
    return out;
}

static void doc_clear(lsp_doc *d)
{
    free(d->uri);
    free(d->path);
    free(d->text);
    doc_free(d->parsed);
    json_decref(d->diags);
    memset(d, 0, sizeof *d);
}

static lsp_doc *doc_open(lsp_server *s, const char *uri, const char *text, size_t len, int64_t version)
{
    lsp_doc *d = lsp_doc_find(s, uri);
    if (d) doc_clear(d);
    else {
        if (s->ndocs == s->capdocs) {
            int cap = s->capdocs ? s->capdocs * 2 : 8;
            lsp_doc *nd = realloc(s->docs, (size_t)cap * sizeof *nd);
            if (!nd) return NULL;
            s->docs = nd;
            s->capdocs = cap;
        }
        d = &s->docs[s->ndocs++];
        memset(d, 0, sizeof *d);
    }
    d->uri = strdup(uri);
    d->path = uri_to_path(uri);
    d->text = malloc(len + 1);
    if (!d->uri || !d->text) return NULL;
    memcpy(d->text, text, len);
    d->text[len] = 0;
    d->len = len;
    d->version = version;
    d->progress_step = d->progress_run = -1;
    return d;
}

static void doc_close(lsp_server *s, const char *uri)
{
    lsp_doc *d = lsp_doc_find(s, uri);
    if (!d) return;
    /* clients expect the close to clear what was published */
    lsp_notify(s, "textDocument/publishDiagnostics", json_pack("{s:s, s:[]}", "uri", uri, "diagnostics"));
    doc_clear(d);
    int i = (int)(d - s->docs);
    memmove(&s->docs[i], &s->docs[i + 1], (size_t)(s->ndocs - i - 1) * sizeof *d);
    s->ndocs--;
}

/* ---- handlers ------------------------------------------------------------------ */

static json_t *capabilities(void)
{
    return json_pack(
        "{s:{s:b, s:i, s:{s:b}}, s:{s:[s,s,s,s,s,s]}, s:b, s:{s:[s,s]}, s:{s:[s,s,s,s,s]}}",
        "textDocumentSync", "openClose", 1, "change", 2, "save", "includeText", 1,
        "completionProvider", "triggerCharacters", ":", ".", "-", " ", "#", "/",
        "hoverProvider", 1,
        "codeActionProvider", "codeActionKinds", "quickfix", "source",
        "executeCommandProvider", "commands", "dlm.setBaseModel", "dlm.addSourceDirective", "dlm/listBaseModels",
        "dlm/listTemplates", "dlm/documentState");
}

/* textDocument params: the open document they name, or NULL. */
static lsp_doc *param_doc(lsp_server *s, const json_t *params)
{
    const char *uri = json_string_value(json_object_get(json_object_get(params, "textDocument"), "uri"));
    return uri ? lsp_doc_find(s, uri) : NULL;
}

static int is_cancelled(lsp_server *s, const json_t *id)
{
    size_t i;
    json_t *v;
    json_array_foreach(s->cancelled, i, v) {
        if (json_equal(v, (json_t *)id)) {
            json_array_remove(s->cancelled, i);
            return 1;
        }
    }
    return 0;
}

static void handle_notification(lsp_server *s, const char *method, json_t *params)
{
    if (!strcmp(method, "exit")) {
        s->exited = 1;
        return;
    }
    if (!s->initialized) return;   /* only exit is heard before initialize */
    if (!strcmp(method, "$/cancelRequest")) {
        json_t *id = json_object_get(params, "id");
        if ((json_is_integer(id) || json_is_string(id)) && json_array_size(s->cancelled) < 1024)
            json_array_append(s->cancelled, id);
        return;
    }
    const json_t *td = json_object_get(params, "textDocument");
    const char *uri = json_string_value(json_object_get(td, "uri"));
    if (!strcmp(method, "textDocument/didOpen")) {
        json_t *t = json_object_get(td, "text");
        if (!uri || !json_is_string(t)) return;
        if (json_string_length(t) > DOC_MAX_BYTES) {   /* as the CLI refuses the file */
            char msg[160];
            snprintf(msg, sizeof msg, "document of %zu bytes is larger than the %u-byte limit",
                     json_string_length(t), DOC_MAX_BYTES);
            lsp_notify(s, "textDocument/publishDiagnostics",
                       json_pack("{s:s, s:[{s:{s:{s:i,s:i},s:{s:i,s:i}}, s:i, s:s, s:s}]}", "uri", uri, "diagnostics",
                                 "range", "start", "line", 0, "character", 0, "end", "line", 0, "character", 0,
                                 "severity", 1, "source", "dlm", "message", msg));
            return;
        }
        json_int_t v = json_integer_value(json_object_get(td, "version"));
        lsp_doc *d = doc_open(s, uri, json_string_value(t), json_string_length(t), v);
        if (d) lsp_diagnose(s, d);
    } else if (!strcmp(method, "textDocument/didChange")) {
        lsp_doc *d = uri ? lsp_doc_find(s, uri) : NULL;
        json_t *ch = json_object_get(params, "contentChanges");
        if (!d || !json_is_array(ch)) return;
        size_t i;
        json_t *c;
        json_array_foreach(ch, i, c) {
            if (text_apply_change(&d->text, &d->len, c)) {
                /* an edit we cannot apply leaves us out of step: say so in the diagnostics */
                break;
            }
        }
        d->version = json_integer_value(json_object_get(td, "version"));
        lsp_diagnose(s, d);
    } else if (!strcmp(method, "textDocument/didSave")) {
        lsp_doc *d = uri ? lsp_doc_find(s, uri) : NULL;
        json_t *t = json_object_get(params, "text");
        if (!d) return;
        if (json_is_string(t) && json_string_length(t) <= DOC_MAX_BYTES) {
            char *nt = malloc(json_string_length(t) + 1);
            if (!nt) return;
            memcpy(nt, json_string_value(t), json_string_length(t) + 1);
            free(d->text);
            d->text = nt;
            d->len = json_string_length(t);
        }
        lsp_diagnose(s, d);   /* sources on disk may have changed too */
    } else if (!strcmp(method, "textDocument/didClose")) {
        if (uri) doc_close(s, uri);
    }
    /* initialized, workspace/didChange*, $/setTrace, ...: nothing to do */
}

static void handle_request(lsp_server *s, json_t *id, const char *method, json_t *params)
{
    if (!strcmp(method, "initialize")) {
        if (s->initialized) { reply_error(s, id, RPC_INVALID_REQUEST, "initialize was already received"); return; }
        s->initialized = 1;
        reply(s, id, json_pack("{s:o, s:{s:s, s:s}}", "capabilities", capabilities(), "serverInfo", "name", "dlm",
                               "version", DLM_VERSION));
        return;
    }
    if (!s->initialized) { reply_error(s, id, RPC_SERVER_NOT_INITIALIZED, "the server is not initialized"); return; }
    if (s->shutdown) { reply_error(s, id, RPC_INVALID_REQUEST, "the server is shutting down"); return; }
    if (is_cancelled(s, id)) { reply_error(s, id, RPC_REQUEST_CANCELLED, "request cancelled"); return; }
    if (!strcmp(method, "shutdown")) {
        s->shutdown = 1;
        reply(s, id, json_null());
        return;
    }
    if (!strncmp(method, "textDocument/", 13)) {
        const char *what = method + 13;
        int known = !strcmp(what, "completion") || !strcmp(what, "hover") || !strcmp(what, "codeAction");
        if (!known) { reply_error(s, id, RPC_METHOD_NOT_FOUND, "method not found"); return; }
        if (!json_is_object(params) || !json_is_string(json_object_get(json_object_get(params, "textDocument"), "uri"))) {
            reply_error(s, id, RPC_INVALID_PARAMS, "params.textDocument.uri is required");
            return;
        }
        lsp_doc *d = param_doc(s, params);
        if (!d) { reply(s, id, json_null()); return; }   /* not open: nothing to say */
        json_t *r;
        if (!strcmp(what, "completion")) r = lsp_completion(s, d, params);
        else if (!strcmp(what, "hover")) r = lsp_hover(s, d, params);
        else r = lsp_code_actions(s, d, params);
        if (r == (json_t *)-1) reply_error(s, id, RPC_INVALID_PARAMS, "bad position or range");
        else reply(s, id, r);
        return;
    }
    const char *command = NULL;
    json_t *args = NULL;
    if (!strcmp(method, "workspace/executeCommand")) {
        command = json_string_value(json_object_get(params, "command"));
        args = json_object_get(params, "arguments");
        if (!command) { reply_error(s, id, RPC_INVALID_PARAMS, "params.command is required"); return; }
    } else if (!strncmp(method, "dlm/", 4)) {
        /* the original's custom requests, also accepted as plain requests:
         * params is the arguments array, or {"uri": ...} */
        command = method;
        args = params;
    }
    if (!command) { reply_error(s, id, RPC_METHOD_NOT_FOUND, "method not found"); return; }
    json_t *result = NULL;
    const char *msg = NULL;
    int code = lsp_execute(s, command, args, &result, &msg);
    if (code) reply_error(s, id, code, msg ? msg : "error");
    else reply(s, id, result);
}

/* One message body. */
static void dispatch(lsp_server *s, const char *body, size_t len)
{
    json_error_t je;
    json_t *m = json_loadb(body, len, 0, &je);
    if (!m) {
        reply_error(s, NULL, RPC_PARSE_ERROR, "parse error: invalid JSON");
        return;
    }
    json_t *id = json_object_get(m, "id");
    int id_ok = json_is_integer(id) || json_is_string(id);
    const char *method = json_string_value(json_object_get(m, "method"));
    const char *ver = json_string_value(json_object_get(m, "jsonrpc"));
    if (!json_is_object(m) || !ver || strcmp(ver, "2.0") || (id && !id_ok && !json_is_null(id))) {
        reply_error(s, id_ok ? id : NULL, RPC_INVALID_REQUEST, "invalid request: not a JSON-RPC 2.0 message");
    } else if (!method) {
        /* a response to one of our requests (workspace/applyEdit), or junk */
        if (!id || !(json_object_get(m, "result") || json_object_get(m, "error")))
            reply_error(s, id_ok ? id : NULL, RPC_INVALID_REQUEST, "invalid request: no method");
    } else {
        json_t *params = json_object_get(m, "params");
        if (params && !json_is_object(params) && !json_is_array(params)) {
            if (id_ok) reply_error(s, id, RPC_INVALID_PARAMS, "params must be an object or an array");
        } else if (id_ok) handle_request(s, id, method, params);
        else if (!id) handle_notification(s, method, params);
        else reply_error(s, NULL, RPC_INVALID_REQUEST, "invalid request: id is null");
    }
    json_decref(m);
}

/* ---- the server ------------------------------------------------------------------ */

lsp_server *lsp_server_new(const lsp_options *o, lsp_sink_fn sink, void *sink_ctx)
{
    lsp_server *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->opt = *o;
    s->sink = sink;
    s->sink_ctx = sink_ctx;
    s->cancelled = json_array();
    rpc_reader_init(&s->rd, LSP_MAX_MESSAGE);
    return s;
}

void lsp_server_free(lsp_server *s)
{
    if (!s) return;
    for (int i = 0; i < s->ndocs; i++) doc_clear(&s->docs[i]);
    free(s->docs);
    free(s->fits);
    json_decref(s->cancelled);
    rpc_reader_free(&s->rd);
    free(s);
}

int lsp_server_exit_code(const lsp_server *s)
{
    return s->shutdown ? 0 : 1;
}

/* Queue the $/cancelRequest notifications among the messages already
 * received, so that a request cancelled before we reached it is answered
 * -32800 instead of being computed. */
static void prescan_cancels(lsp_server *s)
{
    rpc_reader peek = s->rd;   /* a shallow copy: only off moves */
    const char *body;
    size_t len;
    char why[160];
    int r;
    while ((r = rpc_reader_next(&peek, &body, &len, why, sizeof why)) != 0) {
        if (r < 0) continue;
        if (len > 4096 || !memmem(body, len, "$/cancelRequest", 15)) continue;
        json_t *m = json_loadb(body, len, 0, NULL);
        const char *method = json_string_value(json_object_get(m, "method"));
        json_t *id = json_object_get(json_object_get(m, "params"), "id");
        if (method && !strcmp(method, "$/cancelRequest") && (json_is_integer(id) || json_is_string(id)) &&
            json_array_size(s->cancelled) < 1024)
            json_array_append(s->cancelled, id);
        json_decref(m);
    }
}

int lsp_server_feed(lsp_server *s, const void *bytes, size_t n)
{
    if (s->exited) return 1;
    if (rpc_reader_feed(&s->rd, bytes, n)) return -1;
    if (s->initialized) prescan_cancels(s);
    const char *body;
    size_t len;
    char why[160];
    int r;
    while (!s->exited && (r = rpc_reader_next(&s->rd, &body, &len, why, sizeof why)) != 0) {
        if (r < 0) {
            char msg[256];
            snprintf(msg, sizeof msg, "invalid request: %s", why);
            reply_error(s, NULL, RPC_INVALID_REQUEST, msg);
            continue;
        }
        dispatch(s, body, len);
    }
    return s->exited;
}

static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

typedef struct fd_sink {
    int fd;
    int failed;
} fd_sink;

static void fd_write(void *ctx, const char *p, size_t n)
{
    fd_sink *sk = ctx;
    while (n && !sk->failed) {
        ssize_t w = write(sk->fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            sk->failed = 1;
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

int lsp_serve(int in, int out, const lsp_options *o, dlm_err *e)
{
    fd_sink sk = {out, 0};
    lsp_server *s = lsp_server_new(o, fd_write, &sk);
    if (!s) return err_set(e, "MemoryError", "out of memory");
    int poll_ms = o->poll_ms > 0 ? o->poll_ms : 1000;
    char *buf = malloc(1 << 16);
    int rc = 0;
    if (!buf) { lsp_server_free(s); return err_set(e, "MemoryError", "out of memory"); }
    double last_poll = mono_ms();
    for (;;) {
        struct pollfd p = {.fd = in, .events = POLLIN};
        int pr = poll(&p, 1, poll_ms);
        if (pr < 0) {
            if (errno == EINTR) continue;
            rc = err_sys(e, "lsp: poll");
            break;
        }
        /* the run's progress: when idle, and between messages of a busy client */
        if (pr == 0 || mono_ms() - last_poll >= poll_ms) {
            if (s->initialized && !s->shutdown) lsp_poll_progress(s);
            last_poll = mono_ms();
        }
        if (pr == 0) continue;
        ssize_t k = read(in, buf, 1 << 16);
        if (k < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            rc = err_sys(e, "lsp: read");
            break;
        }
        if (k == 0) { rc = 1; break; }   /* the client went away without exit */
        if (lsp_server_feed(s, buf, (size_t)k) == 1) { rc = lsp_server_exit_code(s); break; }
        if (sk.failed) { rc = err_set(e, "IOError", "lsp: the client closed its input"); break; }
    }
    free(buf);
    lsp_server_free(s);
    return rc;
}
