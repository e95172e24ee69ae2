/* request — the bodies of POST /v1/chat/completions and /v1/completions,
 * parsed and checked into a plain struct (pure: no model, no I/O).
 *
 * Accepted fields, as OpenAI defines them: model, messages (role system |
 * developer | user | assistant, content a string or an array of text
 * parts) or prompt (a string or an array of one string), stream,
 * stream_options.include_usage, temperature [0, 5] and top_p (0, 1] (infer/sample.h, every front end's ranges),
 * max_tokens / max_completion_tokens (>= 1), stop (a string or up to 4),
 * seed, n (only 1). Other fields are ignored, as OpenAI-compatible servers
 * do. Image parts ({"type": "image_url", "image_url": {"url": ...}}) are
 * taken from base64 data: URLs only (dlm fetches nothing from the network),
 * at most API_MAX_IMAGES, in user messages (the server prompts them as
 * `dlm prompt --image` does, each user turn's images before its text,
 * docs/images.md). Every failure fills an api_error: the HTTP status and an OpenAI-style
 * error object (message, type, param, code). */
#ifndef DLM_API_REQUEST_H
#define DLM_API_REQUEST_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "tokens/chat.h"

#define API_MAX_STOP 4
#define API_MAX_MESSAGES 4096
#define API_MAX_IMAGES 8

typedef struct api_image {
    unsigned char *data;          /* the decoded file */
    size_t n;
    size_t msg, part;             /* its message, and its index in that message's content */
} api_image;

typedef enum { API_CHAT = 0, API_COMPLETION = 1 } api_kind;

typedef struct api_request {
    api_kind kind;
    char *model;                  /* NULL = the server's default */
    chat_msg *msgs;               /* chat: roles normalized, strings owned */
    size_t n_msgs;
    char *prompt;                 /* completion */
    int stream, include_usage;
    double temperature;           /* default 1 */
    double top_p;                 /* default 1 */
    int max_tokens;               /* 0 = not given */
    char *stop[API_MAX_STOP];
    int n_stop;
    int has_seed;
    uint64_t seed;
    api_image images[API_MAX_IMAGES];
    int n_images;
} api_request;

typedef struct api_error {
    int status;                   /* 400, 401, 404, 413, 429, 500, 503 */
    char type[32];                /* "invalid_request_error", ... */
    char param[40];               /* "" = null */
    char code[40];                /* "" = null */
    char message[320];
} api_error;

/* Parse body[0..n) (not NUL-terminated). 0 ok (free r with
 * api_request_free), -1 with err filled (r is left empty). */
int api_request_parse(api_kind kind, const char *body, size_t n, api_request *r, api_error *err);
void api_request_free(api_request *r);

/* Fill err and return -1. */
int api_error_set(api_error *err, int status, const char *type, const char *param, const char *code,
                  const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* {"error": {"message", "type", "param", "code"}} (new reference). */
json_t *api_error_json(const api_error *err);

#endif
