#include "api/request.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "infer/sample.h"
#include "util/str.h"

int api_error_set(api_error *err, int status, const char *type, const char *param, const char *code,
                  const char *fmt, ...)
{
    err->status = status;
    snprintf(err->type, sizeof err->type, "%s", type ? type : "invalid_request_error");
    snprintf(err->param, sizeof err->param, "%s", param ? param : "");
    snprintf(err->code, sizeof err->code, "%s", code ? code : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    return -1;
}

json_t *api_error_json(const api_error *err)
{
    return json_pack("{s:{s:s, s:s, s:o, s:o}}", "error", "message", err->message, "type", err->type, "param",
                     err->param[0] ? json_string(err->param) : json_null(), "code",
                     err->code[0] ? json_string(err->code) : json_null());
}

void api_request_free(api_request *r)
{
    free(r->model);
    for (size_t i = 0; i < r->n_msgs; i++) {
        free((char *)r->msgs[i].content);
    }
    free(r->msgs);
    free(r->prompt);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    for (int i = 0; i < r->n_images; i++) free(r->images[i].data);
    memset(r, 0, sizeof *r);
}

#define BAD(param, ...) api_error_set(err, 400, "invalid_request_error", param, NULL, __VA_ARGS__)

/* A JSON string with no NUL inside (prompts go to C strings). */
static char *dup_text(const json_t *v)
{
    size_t n = json_string_length(v);
    const char *s = json_string_value(v);
    if (memchr(s, 0, n)) return NULL;
    return str_ndup(s, n);
}

/* An image part's data: URL, base64-decoded into r->images. */
static int take_image(const char *url, size_t part, api_request *r, api_error *err, const char *param)
{
    if (strcmp(r->msgs[r->n_msgs].role, "user"))
        return BAD(param, "%s[%zu]: images are taken in user messages only", param, part);
    if (strncmp(url, "data:", 5)) {
        if (!strncmp(url, "http://", 7) || !strncmp(url, "https://", 8))
            return BAD(param, "%s[%zu].image_url: an http(s) URL would be a network fetch, which dlm never makes; "
                       "send the image inline as a data: URL (data:image/png;base64,...)", param, part);
        return BAD(param, "%s[%zu].image_url: only data: URLs are accepted (dlm fetches nothing from the network)",
                   param, part);
    }
    const char *b64 = strstr(url, ";base64,");
    const char *comma = strchr(url, ',');
    if (!b64 || b64 + 7 != comma)
        return BAD(param, "%s[%zu].image_url: a data: URL must be base64 (data:image/png;base64,...)", param, part);
    if (r->n_images == API_MAX_IMAGES)
        return BAD(param, "%s: at most %d images per request", param, API_MAX_IMAGES);
    b64 += 8;
    size_t len = strlen(b64), got = 0;
    unsigned char *buf = malloc(len / 4 * 3 + 3);
    if (!buf) return api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    if (sodium_base642bin(buf, len / 4 * 3 + 3, b64, len, NULL, &got, NULL, sodium_base64_VARIANT_ORIGINAL) ||
        !got) {
        free(buf);
        return BAD(param, "%s[%zu].image_url: the data: URL is not valid base64", param, part);
    }
    r->images[r->n_images++] = (api_image){buf, got, r->n_msgs, part};
    return 0;
}

/* content: a string, or an array of {"type":"text","text":...} parts
 * (joined, as OpenAI does for text-only messages) and image parts (into
 * r->images). NULL on a bad shape. */
static char *message_content(const json_t *c, api_request *r, api_error *err, const char *param)
{
    if (json_is_string(c)) {
        char *s = dup_text(c);
        if (!s) BAD(param, "%s must not contain NUL characters", param);
        return s;
    }
    if (!json_is_array(c)) {
        BAD(param, "%s must be a string or an array of text parts", param);
        return NULL;
    }
    strbuf sb = STRBUF_INIT;
    size_t i;
    json_t *part;
    json_array_foreach(c, i, part) {
        const json_t *ty = json_object_get(part, "type"), *tx = json_object_get(part, "text");
        if (json_is_object(part) && json_is_string(ty) && !strcmp(json_string_value(ty), "image_url")) {
            /* OpenAI's image part: {"type":"image_url","image_url":{"url":...}} (docs/images.md) */
            const json_t *iu = json_object_get(part, "image_url");
            const json_t *u = json_is_object(iu) ? json_object_get(iu, "url") : iu;
            const char *url = json_is_string(u) ? json_string_value(u) : "";
            if (take_image(url, i, r, err, param)) {
                sb_free(&sb);
                return NULL;
            }
            continue;
        }
        if (!json_is_object(part) || !json_is_string(ty) || strcmp(json_string_value(ty), "text") ||
            !json_is_string(tx)) {
            sb_free(&sb);
            BAD(param, "%s[%zu]: only {\"type\": \"text\", \"text\": ...} parts are supported", param, i);
            return NULL;
        }
        char *s = dup_text(tx);
        if (!s) {
            sb_free(&sb);
            BAD(param, "%s[%zu].text must not contain NUL characters", param, i);
            return NULL;
        }
        sb_puts(&sb, s);
        free(s);
    }
    char *out = sb_detach(&sb, NULL);
    if (!out) out = calloc(1, 1);
    return out;
}

static int parse_messages(const json_t *ms, api_request *r, api_error *err)
{
    if (!json_is_array(ms)) return BAD("messages", "messages must be an array");
    size_t n = json_array_size(ms);
    if (n == 0) return BAD("messages", "messages must not be empty");
    if (n > API_MAX_MESSAGES) return BAD("messages", "too many messages (%zu; at most %d)", n, API_MAX_MESSAGES);
    r->msgs = calloc(n, sizeof *r->msgs);
    if (!r->msgs) return api_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *m = json_array_get(ms, i);
        char param[40];
        snprintf(param, sizeof param, "messages[%zu]", i);
        if (!json_is_object(m)) return BAD(param, "%s must be an object", param);
        const json_t *role = json_object_get(m, "role");
        if (!json_is_string(role)) return BAD(param, "%s.role must be a string", param);
        const char *rs = json_string_value(role);
        const char *norm = !strcmp(rs, "system") || !strcmp(rs, "developer") ? "system"
                           : !strcmp(rs, "user")                             ? "user"
                           : !strcmp(rs, "assistant")                        ? "assistant"
                                                                             : NULL;
        if (!norm)
            return BAD(param, "%s.role '%.40s' is not supported (system, developer, user, assistant)", param, rs);
        const json_t *c = json_object_get(m, "content");
        char cparam[48];
        snprintf(cparam, sizeof cparam, "%s.content", param);
        r->msgs[r->n_msgs].role = norm;   /* take_image reads it */
        char *content = message_content(c, r, err, cparam);
        if (!content) return -1;
        r->msgs[r->n_msgs].role = norm;
        r->msgs[r->n_msgs].content = content;
        r->n_msgs++;
    }
    if (strcmp(r->msgs[n - 1].role, "user") && strcmp(r->msgs[n - 1].role, "system"))
        return BAD("messages", "the last message must be from the user");
    return 0;
}

static int parse_prompt(const json_t *p, api_request *r, api_error *err)
{
    if (json_is_array(p)) {
        if (json_array_size(p) != 1 || !json_is_string(json_array_get(p, 0)))
            return BAD("prompt", "prompt must be a string (or an array of exactly one string)");
        p = json_array_get(p, 0);
    }
    if (!json_is_string(p)) return BAD("prompt", "prompt must be a string");
    if (!(r->prompt = dup_text(p))) return BAD("prompt", "prompt must not contain NUL characters");
    if (!r->prompt[0]) return BAD("prompt", "prompt must not be empty");
    return 0;
}

/* A sampling knob: a number in the range every front end shares
 * (infer/sample.h's sample_check). */
static int get_sample(const json_t *o, const char *key, double *out, api_error *err)
{
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return BAD(key, "%s must be a number", key);
    double d = json_number_value(v);
    char why[160];
    if (sample_check(key, d, why, sizeof why)) return BAD(key, "%s", why);
    *out = d;
    return 0;
}

static int parse_stop(const json_t *s, api_request *r, api_error *err)
{
    if (!s || json_is_null(s)) return 0;
    if (json_is_string(s)) {
        if (!json_string_length(s)) return 0;
        if (!(r->stop[0] = dup_text(s))) return BAD("stop", "stop must not contain NUL characters");
        r->n_stop = 1;
        return 0;
    }
    if (!json_is_array(s)) return BAD("stop", "stop must be a string or an array of strings");
    if (json_array_size(s) > API_MAX_STOP) return BAD("stop", "stop takes at most %d strings", API_MAX_STOP);
    size_t i;
    json_t *v;
    json_array_foreach(s, i, v) {
        if (!json_is_string(v)) return BAD("stop", "stop[%zu] must be a string", i);
        if (!json_string_length(v)) continue;
        if (!(r->stop[r->n_stop] = dup_text(v))) return BAD("stop", "stop[%zu] must not contain NUL characters", i);
        r->n_stop++;
    }
    return 0;
}

static int parse_obj(const json_t *o, api_request *r, api_error *err)
{
    const json_t *v = json_object_get(o, "model");
    if (v && !json_is_null(v)) {
        if (!json_is_string(v)) return BAD("model", "model must be a string");
        if (json_string_length(v) > 256) return BAD("model", "model name too long");
        if (json_string_length(v) && !(r->model = dup_text(v))) return BAD("model", "bad model name");
    }
    if (r->kind == API_CHAT) {
        if (!json_object_get(o, "messages")) return BAD("messages", "missing required parameter: messages");
        if (parse_messages(json_object_get(o, "messages"), r, err)) return -1;
    } else {
        if (!json_object_get(o, "prompt")) return BAD("prompt", "missing required parameter: prompt");
        if (parse_prompt(json_object_get(o, "prompt"), r, err)) return -1;
    }
    v = json_object_get(o, "stream");
    if (v && !json_is_null(v)) {
        if (!json_is_boolean(v)) return BAD("stream", "stream must be a boolean");
        r->stream = json_is_true(v);
    }
    v = json_object_get(o, "stream_options");
    if (v && !json_is_null(v)) {
        if (!json_is_object(v)) return BAD("stream_options", "stream_options must be an object");
        const json_t *iu = json_object_get(v, "include_usage");
        if (iu && !json_is_null(iu) && !json_is_boolean(iu))
            return BAD("stream_options", "stream_options.include_usage must be a boolean");
        r->include_usage = json_is_true(iu);
    }
    if (get_sample(o, "temperature", &r->temperature, err) || get_sample(o, "top_p", &r->top_p, err)) return -1;
    const char *mk = json_object_get(o, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    v = json_object_get(o, mk);
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v)) return BAD(mk, "%s must be an integer", mk);
        json_int_t m = json_integer_value(v);
        if (m < 1 || m > 1 << 24) return BAD(mk, "%s must be between 1 and %d", mk, 1 << 24);
        r->max_tokens = (int)m;
    }
    if (parse_stop(json_object_get(o, "stop"), r, err)) return -1;
    v = json_object_get(o, "seed");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v)) return BAD("seed", "seed must be an integer");
        r->has_seed = 1;
        r->seed = (uint64_t)json_integer_value(v);
    }
    v = json_object_get(o, "n");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v)) return BAD("n", "n must be an integer");
        if (json_integer_value(v) != 1) return BAD("n", "only n = 1 is supported");
    }
    return 0;
}

int api_request_parse(api_kind kind, const char *body, size_t n, api_request *r, api_error *err)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->temperature = 1.0;
    r->top_p = 1.0;
    json_error_t je;
    /* JSON_REJECT_DUPLICATES: a body with two "model" keys is ambiguous */
    json_t *o = json_loadb(body, n, JSON_REJECT_DUPLICATES, &je);
    if (!o) return BAD(NULL, "malformed JSON at line %d column %d: %s", je.line, je.column, je.text);
    int rc = 0;
    if (!json_is_object(o)) rc = BAD(NULL, "the request body must be a JSON object");
    else rc = parse_obj(o, r, err);
    json_decref(o);
    if (rc) api_request_free(r);
    return rc;
}
