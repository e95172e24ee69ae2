/* teacher — see teacher.h. */
#include "infer/teacher.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "decoder/session.h"
#include "infer/generate.h"
#include "infer/synth.h"
#include "infer/target.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/log.h"
#include "util/str.h"

#define REPLY_MAX (4u << 20)   /* a reply larger than this is refused */

typedef enum { T_SELF, T_OPENAI, T_CLI, T_ANTHROPIC, T_HF } tkind;

struct teacher {
    tkind kind;
    char *spec, *url, *cmd;
    int vllm;               /* vllm-server:URL, the original's spelling: the model is asked for */
    char *model_id;         /* ... and kept here; anthropic:MODEL's model */
    teacher_opts o;
    infer_target tg;
    int tg_open;
};

/* ---- running a program --------------------------------------------------------- */

/* Run `sh -c cmd` with input on stdin; stdout into *out (capped). Stderr
 * passes through. Killed after timeout_s. */
static int run_cmd(const char *cmd, const char *input, double timeout_s, strbuf *out, int *status, dlm_err *e)
{
    int in[2], op[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(op, O_CLOEXEC)) return err_sys(e, "pipe");
    pid_t pid = fork();
    if (pid < 0) return err_sys(e, "fork");
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(op[1], 1);
        signal(SIGPIPE, SIG_DFL);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(op[1]);
    size_t inlen = strlen(input), sent = 0;
    int rc = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    void (*old)(int) = signal(SIGPIPE, SIG_IGN);
    int in_open = 1;
    if (!inlen) { close(in[1]); in_open = 0; }
    for (;;) {
        struct pollfd p[2] = {{op[0], POLLIN, 0}, {in_open ? in[1] : -1, POLLOUT, 0}};
        struct timespec t1;
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double left = timeout_s - ((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
        if (left <= 0) {
            kill(pid, SIGKILL);
            rc = err_set(e, "TeacherError", "'%s' did not finish within %.0fs", cmd, timeout_s);
            break;
        }
        int pr = poll(p, 2, (int)(left * 1000) + 1);
        if (pr < 0 && errno == EINTR) continue;
        if (pr < 0) { rc = err_sys(e, "poll"); kill(pid, SIGKILL); break; }
        if (in_open && (p[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t w = write(in[1], input + sent, inlen - sent);
            if (w > 0) sent += (size_t)w;
            if (w < 0 || sent == inlen) { close(in[1]); in_open = 0; }
        }
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            char buf[8192];
            ssize_t r = read(op[0], buf, sizeof buf);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            if (out->len + (size_t)r > REPLY_MAX) {
                kill(pid, SIGKILL);
                rc = err_set(e, "TeacherError", "'%s' wrote more than %u bytes", cmd, REPLY_MAX);
                break;
            }
            sb_append(out, buf, (size_t)r);
        }
    }
    if (in_open) close(in[1]);
    close(op[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    signal(SIGPIPE, old);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    return rc;
}

/* ---- openai ------------------------------------------------------------------ */

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    strbuf *sb = ud;
    if (sb->len + sz * n > REPLY_MAX) return 0;
    sb_append(sb, p, sz * n);
    return sz * n;
}

/* vllm-server:URL without --model: the first model the server lists
 * (GET <root>/v1/models, data[0].id), as the original's teacher asks */
static int fetch_model_id(teacher *t, dlm_err *e)
{
    strbuf url = STRBUF_INIT, resp = STRBUF_INIT;
    size_t n = strlen(t->url) - strlen("/chat/completions");   /* t->url ends so (teacher_open) */
    sb_append(&url, t->url, n);
    sb_puts(&url, "/models");
    CURL *c = curl_easy_init();
    int rc = -1;
    long code = 0;
    if (!c || url.oom) { err_set(e, "MemoryError", "out of memory"); goto out; }
    curl_easy_setopt(c, CURLOPT_URL, sb_str(&url));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)((t->o.timeout_s > 0 ? t->o.timeout_s : 300) * 1000));
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    CURLcode cr = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    json_t *j = cr == CURLE_OK && code == 200 ? json_loadb(resp.buf ? resp.buf : "", resp.len, 0, NULL) : NULL;
    const char *id = jget_str(json_array_get(json_object_get(j, "data"), 0), "id");
    if (id && (t->model_id = strdup(id))) rc = 0;
    else {
        err_set(e, "TeacherError", "vllm-server teacher could not query models from %s: %s", sb_str(&url),
                cr != CURLE_OK ? curl_easy_strerror(cr) : code != 200 ? "HTTP error" : "no data[0].id");
        err_hint(e, "name the model with --model NAME");
    }
    json_decref(j);
out:
    if (c) curl_easy_cleanup(c);
    sb_free(&url);
    sb_free(&resp);
    return rc;
}

static int openai_ask(teacher *t, const char *system, const char *user, int sample, char **reply, dlm_err *e)
{
    if (t->vllm && !t->o.model && !t->model_id && fetch_model_id(t, e)) return -1;
    json_t *req = json_pack("{s:s, s:[{s:s, s:s}, {s:s, s:s}], s:f, s:i, s:I}", "model",
                            t->o.model ? t->o.model : t->model_id ? t->model_id : "default", "messages", "role", "system", "content", system,
                            "role", "user", "content", user, "temperature", t->o.temp, "max_tokens",
                            t->o.max_new_tokens, "seed", (json_int_t)(t->o.seed + (uint64_t)sample));
    if (!req) return err_set(e, "MemoryError", "out of memory");
    if (t->o.top_p > 0 && t->o.top_p < 1) json_object_set_new(req, "top_p", json_real(t->o.top_p));
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    CURL *c = curl_easy_init();
    strbuf resp = STRBUF_INIT;
    struct curl_slist *hl = curl_slist_append(NULL, "Content-Type: application/json");
    if (t->o.api_key && *t->o.api_key) {
        strbuf a = STRBUF_INIT;
        sb_printf(&a, "Authorization: Bearer %s", t->o.api_key);
        hl = curl_slist_append(hl, sb_str(&a));
        sb_free(&a);
    }
    int rc = -1;
    if (!c || !body) { err_set(e, "MemoryError", "out of memory"); goto out; }
    curl_easy_setopt(c, CURLOPT_URL, t->url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)(t->o.timeout_s > 0 ? t->o.timeout_s : 300));
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    CURLcode cr = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (cr != CURLE_OK) {
        err_set(e, "TeacherError", "%s: %s", t->url, curl_easy_strerror(cr));
        err_hint(e, "is the server running? openai:URL takes the server root, /v1 or the chat/completions URL");
        goto out;
    }
    if (status != 200) {
        err_set(e, "TeacherError", "%s: HTTP %ld: %.300s", t->url, status, sb_str(&resp));
        goto out;
    }
    json_error_t je;
    json_t *j = json_loadb(resp.buf ? resp.buf : "", resp.len, 0, &je);
    json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
    const char *content = jget_str(json_object_get(ch, "message"), "content");
    if (!content) content = jget_str(ch, "text");
    if (!content) {
        err_set(e, "TeacherError", "%s: the reply has no choices[0].message.content: %.300s", t->url, sb_str(&resp));
        json_decref(j);
        goto out;
    }
    *reply = strdup(content);
    json_decref(j);
    rc = *reply ? 0 : err_set(e, "MemoryError", "out of memory");
out:
    curl_slist_free_all(hl);
    if (c) curl_easy_cleanup(c);
    free(body);
    sb_free(&resp);
    return rc;
}

/* ---- anthropic ---------------------------------------------------------------- */

/* The retry policy of Anthropic's Python SDK (what the original's teacher
 * calls; 2.10 checked by tests/ref/r0909): 2 retries after the first try,
 * on connection failures, 408, 409, 429 and 5xx (the server's
 * x-should-retry: true/false decides first); the wait is retry-after-ms /
 * retry-after when given, otherwise min(0.5 s * 2^retry, 8 s) less up to a
 * quarter (jitter). Where the SDK would sleep longer than a minute because
 * the server said so, dlm stops and says so instead. */
#define ANTHROPIC_RETRIES 2
#define ANTHROPIC_VERSION "2023-06-01"

typedef struct resp_head {
    double retry_after_s;   /* -1 = none */
    int should_retry;       /* -1 = no header, 0 false, 1 true */
} resp_head;

static size_t on_head(char *p, size_t sz, size_t n, void *ud)
{
    resp_head *h = ud;
    size_t len = sz * n;
    char line[256];
    if (len >= sizeof line) return len;
    memcpy(line, p, len);
    line[len] = 0;
    char *v = strchr(line, ':');
    if (!v) return len;
    *v++ = 0;
    while (*v == ' ') v++;
    char *end;
    if (!strcasecmp(line, "retry-after-ms")) {
        double x = strtod(v, &end);
        if (end != v) h->retry_after_s = x / 1000.0;
    } else if (!strcasecmp(line, "retry-after") && h->retry_after_s < 0) {
        double x = strtod(v, &end);     /* an HTTP date is not honoured: the backoff applies */
        if (end != v) h->retry_after_s = x;
    } else if (!strcasecmp(line, "x-should-retry")) {
        h->should_retry = !strncasecmp(v, "true", 4) ? 1 : !strncasecmp(v, "false", 5) ? 0 : -1;
    }
    return len;
}

static void retry_wait(const resp_head *h, int retry)
{
    double s;
    if (h->retry_after_s > 0) s = h->retry_after_s;     /* <= 60: anthropic_ask stops above */
    else {
        s = 0.5 * (double)(1 << retry);
        if (s > 8) s = 8;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        unsigned seed = (unsigned)now.tv_nsec;
        s *= 1.0 - 0.25 * ((double)rand_r(&seed) / RAND_MAX);
    }
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) && errno == EINTR) {}
}

static int anthropic_ask(teacher *t, const char *system, const char *user, char **reply, dlm_err *e)
{
    json_t *req = json_pack("{s:s, s:i, s:s, s:[{s:s, s:s}]}", "model", t->model_id, "max_tokens",
                            t->o.max_new_tokens, "system", system, "messages", "role", "user", "content", user);
    if (!req) return err_set(e, "MemoryError", "out of memory");
    /* The original always sent temperature (0.0) through the SDK of its
     * day; today's SDKs take no sampling parameters, API version 2026-10-21
     * refuses them and the newest models refuse temperature on 2023-06-01
     * too: sent only when asked for. */
    if (t->o.temp_set) json_object_set_new(req, "temperature", json_real(t->o.temp));
    if (t->o.top_p_set) json_object_set_new(req, "top_p", json_real(t->o.top_p));
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    CURL *c = curl_easy_init();
    strbuf resp = STRBUF_INIT, key = STRBUF_INIT;
    sb_printf(&key, "x-api-key: %s", t->o.api_key);
    struct curl_slist *hl = curl_slist_append(NULL, "Content-Type: application/json");
    hl = curl_slist_append(hl, "Accept: application/json");
    hl = curl_slist_append(hl, "anthropic-version: " ANTHROPIC_VERSION);
    hl = curl_slist_append(hl, sb_str(&key));
    sb_free(&key);      /* curl keeps its own copy */
    int rc = -1;
    if (!c || !body || !hl) { err_set(e, "MemoryError", "out of memory"); goto out; }
    resp_head h;
    curl_easy_setopt(c, CURLOPT_URL, t->url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &resp);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_head);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)(t->o.timeout_s > 0 ? t->o.timeout_s : 300));
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    long status = 0;
    CURLcode cr = CURLE_OK;
    for (int attempt = 0;; attempt++) {
        h.retry_after_s = -1;
        h.should_retry = -1;
        sb_reset(&resp);
        cr = curl_easy_perform(c);
        status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        if (cr == CURLE_WRITE_ERROR) {     /* only on_body refuses: the cap */
            err_set(e, "TeacherError", "%s: the reply is larger than %u bytes", t->url, REPLY_MAX);
            goto out;
        }
        int retry = cr != CURLE_OK ? 1
                  : h.should_retry >= 0 ? h.should_retry
                  : status == 408 || status == 409 || status == 429 || status >= 500;
        if (cr == CURLE_OK && status == 200) break;
        if (!retry || attempt == ANTHROPIC_RETRIES) break;
        if (h.retry_after_s > 60) {
            err_set(e, "TeacherError", "%s: HTTP %ld, and the API asks to wait %.0f s before retrying", t->url, status,
                    h.retry_after_s);
            err_hint(e, "run synth again later");
            goto out;
        }
        retry_wait(&h, attempt);
    }
    if (cr != CURLE_OK) {
        err_set(e, "TeacherError", "%s: %s (after %d tries)", t->url, curl_easy_strerror(cr), ANTHROPIC_RETRIES + 1);
        err_hint(e, "check the network, or ANTHROPIC_BASE_URL when it is set");
        goto out;
    }
    json_t *j = json_loadb(resp.buf ? resp.buf : "", resp.len, 0, NULL);
    if (status != 200) {
        /* {"type": "error", "error": {"type": "...", "message": "..."}} */
        json_t *er = json_object_get(j, "error");
        const char *ty = jget_str(er, "type"), *msg = jget_str(er, "message");
        if (msg) err_set(e, "TeacherError", "%s: HTTP %ld %s: %.300s", t->url, status, ty ? ty : "error", msg);
        else err_set(e, "TeacherError", "%s: HTTP %ld: %.300s", t->url, status, sb_str(&resp));
        if (status == 401 || status == 403) err_hint(e, "check ANTHROPIC_API_KEY (sent as x-api-key)");
        else if (status == 429 || status == 529 || status >= 500)
            err_hint(e, "still refused after %d retries; wait and run synth again", ANTHROPIC_RETRIES);
        else if (status == 404) err_hint(e, "check the model name in anthropic:MODEL");
        else if (status == 400 && msg && (strstr(msg, "temperature") || strstr(msg, "top_p")))
            err_hint(e, "this model takes no sampling parameters: run without --temp / --top-p");
        json_decref(j);
        goto out;
    }
    /* content: [{"type": "text", "text": "..."}, ...]; the text blocks are
     * joined with newlines, as the original does */
    json_t *content = json_object_get(j, "content");
    strbuf text = STRBUF_INIT;
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b) {
        const char *ty = jget_str(b, "type"), *tx = jget_str(b, "text");
        if (!ty || strcmp(ty, "text") || !tx) continue;
        if (text.len) sb_puts(&text, "\n");
        sb_puts(&text, tx);
    }
    if (!j || !json_is_array(content) || !text.len) {
        err_set(e, "TeacherError", "%s: %s: %.300s", t->url,
                !j ? "the reply is not JSON" : "the reply has no content[].text block", sb_str(&resp));
        sb_free(&text);
        json_decref(j);
        goto out;
    }
    json_decref(j);
    *reply = sb_detach(&text, NULL);
    rc = *reply ? 0 : err_set(e, "MemoryError", "out of memory");
out:
    curl_slist_free_all(hl);
    if (c) curl_easy_cleanup(c);
    free(body);
    sb_free(&resp);
    return rc;
}

/* ---- self ---------------------------------------------------------------------- */

/* The original's HF teacher prompt (synth/teachers.py): system and user
 * flattened into one user turn. */
static void flatten_prompt(const char *system, const char *user, strbuf *out)
{
    while (*system && strchr(" \t\r\n", *system)) system++;
    while (*user && strchr(" \t\r\n", *user)) user++;
    size_t ns = strlen(system), nu = strlen(user);
    while (ns && strchr(" \t\r\n", system[ns - 1])) ns--;
    while (nu && strchr(" \t\r\n", user[nu - 1])) nu--;
    if (ns && nu) sb_printf(out, "System:\n%.*s\n\nUser:\n%.*s\n\nAssistant:\n", (int)ns, system, (int)nu, user);
    else if (nu) sb_append(out, user, nu);
    else sb_append(out, system, ns);
}

/* self: base + the document's adapter, the teacher's instructions as the
 * system turn. hf: another base alone, asked as the original's HF teacher
 * asks (dlm.inference.generate): the flattened prompt as the one user
 * message of the base's chat template with the generation prompt (the raw
 * text when the base has none), tokenized with the tokenizer's special
 * tokens added, greedy at temperature 0, special tokens left out of the
 * reply. */
static int self_ask(teacher *t, const char *system, const char *user, int sample, char **reply, dlm_err *e)
{
    infer_target *tg = &t->tg;
    int hf = t->kind == T_HF;
    if (!tg->dialect && !hf) return err_set(e, "TeacherError", "the base has no chat template dlm can render");
    strbuf text = STRBUF_INIT, dec = STRBUF_INIT, flat = STRBUF_INIT;
    tok_ids ids = {0};
    session *s = NULL;
    int32_t *outv = NULL;
    int rc = -1;
    chat_msg m = {"user", user};
    if (hf) {
        flatten_prompt(system ? system : "", user, &flat);
        m.content = sb_str(&flat);
        if (tg->dialect ? chat_render(tg->dialect, NULL, &m, 1, 1, &text, NULL, NULL, e)
                        : (sb_puts(&text, m.content), 0))
            goto out;
        if (tok_encode_append(tg->t, text.buf ? text.buf : "", text.len, TOK_PARSE_SPECIAL | TOK_ADD_SPECIAL, &ids, e))
            goto out;
    } else if (chat_render(tg->dialect, system && *system ? system : tg->system_prompt, &m, 1, 1, &text, NULL, NULL, e) ||
               tok_encode_append(tg->t, text.buf, text.len, TOK_PARSE_SPECIAL, &ids, e)) {
        /* The teacher's instructions replace the document's system prompt:
         * the adapter answers as itself, asked to write data. */
        goto out;
    }
    int ctxlen = tg->m->cfg.max_pos > 0 ? tg->m->cfg.max_pos : 4096;
    int want = (int)ids.n + t->o.max_new_tokens;
    if (want < ctxlen) ctxlen = want;
    int maxnew = ctxlen - (int)ids.n;
    if (maxnew < 1) {
        err_set(e, "TeacherError", "the prompt has %zu tokens; the model's context is %d", ids.n, ctxlen);
        goto out;
    }
    if (session_create(tg->m, tg->l, ctxlen, 512, &s, e)) goto out;
    int32_t stops[32];
    gen_opts go;
    memset(&go, 0, sizeof go);
    sample_defaults(&go.sp);
    go.sp.temp = (float)t->o.temp;
    go.sp.top_p = t->o.top_p > 0 ? (float)t->o.top_p : 1.0f;
    go.sp.seed = t->o.seed + (uint64_t)sample;
    go.max_tokens = maxnew;
    go.n_stops = gen_stop_ids(tg->t, tg->dialect ? tg->dialect->stops : NULL, stops, 32);
    go.stops = stops;
    outv = malloc((size_t)maxnew * sizeof *outv);
    if (!outv) { err_set(e, "MemoryError", "out of memory"); goto out; }
    int nout;
    int32_t stop;
    if (generate(s, tg->t, ids.v, (int)ids.n, &go, outv, &nout, &stop, e)) goto out;
    if (log_level() >= LOG_VERBOSE) {
        /* -v: the token ids, one JSON line (tests compare them with transformers) */
        strbuf l = STRBUF_INIT;
        sb_printf(&l, "{\"teacher\": \"%s\", \"prompt_ids\": [", t->spec);
        for (size_t i = 0; i < ids.n; i++) sb_printf(&l, "%s%d", i ? ", " : "", ids.v[i]);
        sb_puts(&l, "], \"reply_ids\": [");
        for (int i = 0; i < nout; i++) sb_printf(&l, "%s%d", i ? ", " : "", outv[i]);
        sb_printf(&l, "], \"stopped_by\": %d}", stop);
        log_debug("teacher tokens: %s", sb_str(&l));
        sb_free(&l);
    }
    tok_decode(tg->t, outv, (size_t)nout, 1, &dec);
    *reply = sb_detach(&dec, NULL);
    rc = *reply ? 0 : err_set(e, "MemoryError", "out of memory");
out:
    free(outv);
    session_free(s);
    tok_ids_free(&ids);
    sb_free(&text);
    sb_free(&dec);
    sb_free(&flat);
    return rc;
}

/* ---- public ------------------------------------------------------------------- */

int teacher_open(const teacher_opts *o, teacher **out, dlm_err *e)
{
    *out = NULL;
    teacher *t = calloc(1, sizeof *t);
    if (!t) return err_set(e, "MemoryError", "out of memory");
    t->o = *o;
    t->spec = strdup(o->spec);
    if (!t->spec) goto oom;
    if (!strcmp(o->spec, "self")) {
        t->kind = T_SELF;
        if (!o->doc_path) { teacher_close(t); return err_set(e, "TeacherError", "teacher self needs a document"); }
        target_opts to = {o->doc_path, NULL, o->home, 1, 1, o->adapter_name};
        if (target_open(&to, &t->tg, e)) { teacher_close(t); return -1; }
        t->tg_open = 1;
        if (!t->tg.l) {
            teacher_close(t);
            err_set(e, "TeacherError", "teacher self needs a trained adapter; %s has none", o->doc_path);
            return err_hint(e, "train first (dlm train %s), or use --teacher openai:URL or cli:CMD", o->doc_path);
        }
    } else if ((!strncmp(o->spec, "openai:", 7) && o->spec[7]) || (!strncmp(o->spec, "vllm-server:", 12) && o->spec[12])) {
        t->kind = T_OPENAI;
        t->vllm = o->spec[0] == 'v';
        const char *u = o->spec + (t->vllm ? 12 : 7);
        if (strncmp(u, "http://", 7) && strncmp(u, "https://", 8)) {
            int vllm = t->vllm;
            teacher_close(t);
            err_set(e, "TeacherError", "%s needs an http:// or https:// URL, got '%s'", vllm ? "vllm-server:URL" : "openai:URL", u);
            return vllm ? -1 : err_hint(e, "the original's openai:MODEL (OpenAI's API) is --teacher "
                                           "openai:https://api.openai.com/v1 --model MODEL here");
        }
        strbuf sb = STRBUF_INIT;
        size_t n = strlen(u);
        while (n && u[n - 1] == '/') n--;
        sb_append(&sb, u, n);
        if (!(n >= 17 && !memcmp(u + n - 17, "/chat/completions", 17)))
            sb_puts(&sb, n >= 3 && !memcmp(u + n - 3, "/v1", 3) ? "/chat/completions" : "/v1/chat/completions");
        t->url = sb_detach(&sb, NULL);
        if (!t->url) goto oom;
    } else if (!strncmp(o->spec, "cli:", 4) && o->spec[4]) {
        t->kind = T_CLI;
        t->cmd = strdup(o->spec + 4);
        if (!t->cmd) goto oom;
    } else if (!strncmp(o->spec, "hf:", 3)) {
        /* a second base, in process, without an adapter: what dlm init
         * --base takes (a registry key, org/name from the HF cache or the
         * hub, a local folder or .gguf) */
        t->kind = T_HF;
        const char *b = o->spec + 3;
        if (!*b) {
            teacher_close(t);
            err_set(e, "TeacherError", "teacher hf: needs a model");
            return err_hint(e, "hf:ORG/NAME, hf:<registry key> or hf:<path to a model folder>");
        }
        /* ORG/NAME (not a folder here) is the hub id: the base spec hf:ORG/NAME */
        const char *bs = strchr(b, '/') && !strchr("/.~", b[0]) && !fs_exists(b) ? o->spec : b;
        target_opts to = {NULL, bs, o->home, 0, o->offline, NULL};
        if (target_open(&to, &t->tg, e)) {
            err_prefix(e, "teacher %s", o->spec);
            teacher_close(t);
            return -1;
        }
        t->tg_open = 1;
    } else if (!strncmp(o->spec, "anthropic:", 10)) {
        t->kind = T_ANTHROPIC;
        const char *mname = o->spec + 10, *base = o->base_url && *o->base_url ? o->base_url : "https://api.anthropic.com";
        if (!*mname) {
            teacher_close(t);
            err_set(e, "TeacherError", "teacher anthropic: needs a model name");
            return err_hint(e, "e.g. --teacher anthropic:claude-sonnet-4-5");
        }
        if (!o->api_key || !*o->api_key) {
            teacher_close(t);
            err_set(e, "TeacherError", "teacher %s needs ANTHROPIC_API_KEY set", o->spec);
            return err_hint(e, "export ANTHROPIC_API_KEY=... (the key is read from the environment only)");
        }
        if (strncmp(base, "http://", 7) && strncmp(base, "https://", 8)) {
            teacher_close(t);
            return err_set(e, "TeacherError", "ANTHROPIC_BASE_URL must be an http:// or https:// URL, got '%s'", base);
        }
        strbuf sb = STRBUF_INIT;
        size_t n = strlen(base);
        while (n && base[n - 1] == '/') n--;
        sb_append(&sb, base, n);
        sb_puts(&sb, "/v1/messages");
        t->url = sb_detach(&sb, NULL);
        t->model_id = strdup(mname);
        if (!t->url || !t->model_id) goto oom;
    } else {
        teacher_close(t);
        err_set(e, "TeacherError", "unknown teacher '%s'", o->spec);
        return err_hint(e, "one of: self, openai:URL, vllm-server:URL, anthropic:MODEL, hf:MODEL, cli:CMD");
    }
    *out = t;
    return 0;
oom:
    teacher_close(t);
    return err_set(e, "MemoryError", "out of memory");
}

int teacher_ask(teacher *t, const char *system, const char *user, int sample, char **reply, dlm_err *e)
{
    *reply = NULL;
    if (t->kind == T_SELF || t->kind == T_HF) return self_ask(t, system, user, sample, reply, e);
    if (t->kind == T_OPENAI) return openai_ask(t, system, user, sample, reply, e);
    if (t->kind == T_ANTHROPIC) return anthropic_ask(t, system, user, reply, e);
    json_t *in = json_pack("{s:s, s:s, s:i, s:f, s:f, s:I}", "system", system, "prompt", user, "max_new_tokens",
                           t->o.max_new_tokens, "temperature", t->o.temp, "top_p", t->o.top_p > 0 ? t->o.top_p : 1.0,
                           "seed", (json_int_t)(t->o.seed + (uint64_t)sample));
    char *s = in ? json_dumps(in, JSON_COMPACT) : NULL;
    json_decref(in);
    if (!s) return err_set(e, "MemoryError", "out of memory");
    strbuf out = STRBUF_INIT;
    int st = 0;
    int rc = run_cmd(t->cmd, s, t->o.timeout_s > 0 ? t->o.timeout_s : 300, &out, &st, e);
    free(s);
    if (!rc && st) rc = err_set(e, "TeacherError", "teacher '%s' exited with status %d", t->cmd, st);
    if (rc) { sb_free(&out); return -1; }
    *reply = sb_detach(&out, NULL);
    if (!*reply) *reply = strdup("");
    return *reply ? 0 : err_set(e, "MemoryError", "out of memory");
}

const char *teacher_name(const teacher *t) { return t->spec; }

void teacher_close(teacher *t)
{
    if (!t) return;
    if (t->tg_open) target_close(&t->tg);
    free(t->spec);
    free(t->url);
    free(t->cmd);
    free(t->model_id);
    free(t);
}

/* ---- judges ------------------------------------------------------------------ */

struct judge {
    char *spec, *cmd;
    double timeout_s;
    int sway;               /* the original's default judge (judge_bind_teacher) */
    teacher *self;          /* sway: the self teacher whose base + adapter score */
};

/* The original's sway judge (preference/judge.py SwayJudge over dlm-sway's
 * HF backend logprob_of): the summed log-probability of the tokens that
 * prompt + candidate adds after prompt's own tokens (each text tokenized
 * whole, special tokens as the tokenizer adds them), under base + adapter,
 * divided by max(1, characters(candidate) / 4). */
static int sway_score(teacher *t, const char *prompt, const char *cand, double *score, dlm_err *e)
{
    infer_target *T = &t->tg;
    tok_ids p = {0}, f = {0};
    session *s = NULL;
    float *logits = NULL;
    int rc = -1;
    size_t pl = strlen(prompt), cl = strlen(cand);
    char *full = malloc(pl + cl + 1);
    if (!full) return err_set(e, "MemoryError", "out of memory");
    memcpy(full, prompt, pl);
    memcpy(full + pl, cand, cl + 1);
    if (tok_encode_append(T->t, prompt, pl, TOK_PARSE_SPECIAL | TOK_ADD_SPECIAL, &p, e) ||
        tok_encode_append(T->t, full, pl + cl, TOK_PARSE_SPECIAL | TOK_ADD_SPECIAL, &f, e))
        goto out;
    if (f.n <= p.n || p.n < 1) {
        err_set(e, "JudgeInvocationError", "sway judge: the candidate tokenized to zero tokens");
        goto out;
    }
    int V = T->m->cfg.vocab, n = (int)f.n;
    if (session_create(T->m, T->l, n, 256, &s, e)) goto out;
    logits = malloc((size_t)n * (size_t)V * sizeof *logits);
    if (!logits) { err_set(e, "MemoryError", "out of memory"); goto out; }
    if (session_eval(s, f.v, n, logits, 1, e)) goto out;
    double sum = 0;
    for (int i = (int)p.n - 1; i + 1 < n; i++) {
        const float *lg = logits + (size_t)i * (size_t)V;
        float mx = lg[0];
        for (int k = 1; k < V; k++) if (lg[k] > mx) mx = lg[k];
        double z = 0;
        for (int k = 0; k < V; k++) z += exp((double)(lg[k] - mx));
        sum += (double)(lg[f.v[i + 1]] - mx) - log(z);
    }
    size_t chars = 0;   /* Python's len(): code points */
    for (const unsigned char *c = (const unsigned char *)cand; *c; c++) chars += (*c & 0xC0) != 0x80;
    *score = sum / (double)(chars / 4 > 1 ? chars / 4 : 1);
    rc = 0;
out:
    free(logits);
    session_free(s);
    tok_ids_free(&p);
    tok_ids_free(&f);
    free(full);
    return rc;
}

int judge_bind_teacher(judge *j, teacher *t, dlm_err *e)
{
    if (!j || !j->sway) return 0;
    if (!t || t->kind != T_SELF || !t->tg.l) {
        err_set(e, "JudgeUnavailableError", "the sway judge scores with the document's trained adapter");
        return err_hint(e, "use it with the self teacher (preference mine, or synth --teacher self)");
    }
    j->self = t;
    return 0;
}

int judge_open(const char *spec, double timeout_s, judge **out, dlm_err *e)
{
    *out = NULL;
    int cli = !strncmp(spec, "cli:", 4);
    const char *c = cli ? spec + 4 : NULL;
    while (c && (*c == ' ' || *c == '\t')) c++;
    if (!strncmp(spec, "hf:", 3)) {
        err_set(e, "JudgeUnavailableError", "--judge %s: HF reward models (sequence-classification heads) are not "
                                            "loaded by dlm", spec);
        return err_hint(e, "use --judge cli:CMD with a program that scores with that model, or --judge ref");
    }
    int sway = !strcmp(spec, "sway");
    if (!(cli && *c) && strcmp(spec, "ref") && !sway) {
        err_set(e, "InvalidJudgeSpecError", "unknown judge '%s'", spec);
        return err_hint(e, "one of: cli:CMD (stdin {\"prompt\", \"candidate\"}, stdout {\"score\": N}), ref, sway");
    }
    judge *j = calloc(1, sizeof *j);
    /* sway's marker name is the original's */
    if (!j || !(j->spec = strdup(sway ? "sway:preference_judge" : spec)) || (cli && !(j->cmd = strdup(c)))) {
        judge_close(j);
        return err_set(e, "MemoryError", "out of memory");
    }
    j->timeout_s = timeout_s > 0 ? timeout_s : 30;
    j->sway = sway;
    *out = j;
    return 0;
}

int judge_score(judge *j, const char *prompt, const char *candidate, const char *reference, double *score, dlm_err *e)
{
    if (j->sway) {
        if (!j->self) return err_set(e, "JudgeUnavailableError", "the sway judge has no adapter to score with");
        return sway_score(j->self, prompt, candidate, score, e);
    }
    if (!j->cmd) {
        double r = synth_ratio(candidate, reference ? reference : "");
        if (r < 0) return err_set(e, "MemoryError", "out of memory");
        *score = r;
        return 0;
    }
    json_t *in = json_pack("{s:s, s:s}", "prompt", prompt, "candidate", candidate);
    char *s = in ? json_dumps(in, JSON_COMPACT) : NULL;
    json_decref(in);
    if (!s) return err_set(e, "MemoryError", "out of memory");
    strbuf out = STRBUF_INIT;
    int st = 0;
    int rc = run_cmd(j->cmd, s, j->timeout_s, &out, &st, e);
    free(s);
    if (!rc && st)
        rc = err_set(e, "JudgeInvocationError", "cli judge '%s' exited %d: %.200s", j->cmd, st,
                     out.len ? sb_str(&out) : "(no output)");
    json_t *r = NULL;
    if (!rc) {
        r = json_loadb(out.buf ? out.buf : "", out.len, JSON_DECODE_ANY, NULL);
        json_t *sc = json_object_get(r, "score");
        if (!json_is_object(r)) rc = err_set(e, "JudgeInvocationError", "cli judge '%s' must print a JSON object, printed: %.200s", j->cmd, sb_str(&out));
        else if (!json_is_number(sc)) rc = err_set(e, "JudgeInvocationError", "cli judge '%s' printed no numeric score: %.200s", j->cmd, sb_str(&out));
        else if (!isfinite(json_number_value(sc))) rc = err_set(e, "JudgeInvocationError", "cli judge '%s': the score must be finite", j->cmd);
        else *score = json_number_value(sc);
    }
    json_decref(r);
    sb_free(&out);
    return rc;
}

const char *judge_name(const judge *j) { return j->spec; }
double judge_default_threshold(const judge *j) { (void)j; return 0.1; }

void judge_close(judge *j)
{
    if (!j) return;
    free(j->spec);
    free(j->cmd);
    free(j);
}
