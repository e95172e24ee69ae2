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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "decoder/session.h"
#include "infer/generate.h"
#include "infer/synth.h"
#include "infer/target.h"
#include "util/json.h"
#include "util/str.h"

#define REPLY_MAX (4u << 20)   /* a reply larger than this is refused */

typedef enum { T_SELF, T_OPENAI, T_CLI } tkind;

struct teacher {
    tkind kind;
    char *spec, *url, *cmd;
    int vllm;               /* vllm-server:URL, the original's spelling: the model is asked for */
    char *model_id;         /* ... and kept here */
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

/* ---- self ---------------------------------------------------------------------- */

static int self_ask(teacher *t, const char *system, const char *user, int sample, char **reply, dlm_err *e)
{
    infer_target *tg = &t->tg;
    if (!tg->dialect) return err_set(e, "TeacherError", "the base has no chat template dlm can render");
    strbuf text = STRBUF_INIT, dec = STRBUF_INIT;
    tok_ids ids = {0};
    session *s = NULL;
    int32_t *outv = NULL;
    int rc = -1;
    chat_msg m = {"user", user};
    /* The teacher's instructions replace the document's system prompt:
     * the adapter answers as itself, asked to write data. */
    if (chat_render(tg->dialect, system && *system ? system : tg->system_prompt, &m, 1, 1, &text, NULL, NULL, e) ||
        tok_encode_append(tg->t, text.buf, text.len, TOK_PARSE_SPECIAL, &ids, e))
        goto out;
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
    go.n_stops = gen_stop_ids(tg->t, tg->dialect->stops, stops, 32);
    go.stops = stops;
    outv = malloc((size_t)maxnew * sizeof *outv);
    if (!outv) { err_set(e, "MemoryError", "out of memory"); goto out; }
    int nout;
    int32_t stop;
    if (generate(s, tg->t, ids.v, (int)ids.n, &go, outv, &nout, &stop, e)) goto out;
    tok_decode(tg->t, outv, (size_t)nout, 1, &dec);
    *reply = sb_detach(&dec, NULL);
    rc = *reply ? 0 : err_set(e, "MemoryError", "out of memory");
out:
    free(outv);
    session_free(s);
    tok_ids_free(&ids);
    sb_free(&text);
    sb_free(&dec);
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
    } else if (!strncmp(o->spec, "hf:", 3) || !strncmp(o->spec, "anthropic:", 10)) {
        /* the original's spellings; not built in dlm yet (issue 31) */
        int hf = o->spec[0] == 'h';
        teacher_close(t);
        if (hf) {
            err_set(e, "TeacherError", "teacher %s (a second local base in process) is not supported by dlm yet", o->spec);
            return err_hint(e, "serve that base with 'dlm serve --base MODEL' (or llama-server/vLLM) and pass "
                               "--teacher openai:http://127.0.0.1:PORT");
        }
        err_set(e, "TeacherError", "teacher %s (Anthropic's Messages API) is not supported by dlm yet", o->spec);
        return err_hint(e, "use an OpenAI-compatible endpoint (--teacher openai:URL) or a program (--teacher cli:CMD)");
    } else {
        teacher_close(t);
        err_set(e, "TeacherError", "unknown teacher '%s'", o->spec);
        return err_hint(e, "one of: self, openai:URL, cli:CMD");
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
    if (t->kind == T_SELF) return self_ask(t, system, user, sample, reply, e);
    if (t->kind == T_OPENAI) return openai_ask(t, system, user, sample, reply, e);
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
