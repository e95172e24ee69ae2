/* inject — the probe-injection endpoint of `dlm train --listen-rpc`, the
 * original DocumentLanguageModel's dlm.train.rpc on the same wire:
 *
 *   POST /rpc  Authorization: Bearer <DLM_PROBE_TOKEN>  Content-Length <= 64 KiB
 *   {"method": "inject_probe", "params": {"prompt": str, "reference": str, "tags": [str]}}
 *   200 {"accepted": true, "next_cycle_eta_s": int, "queue_depth": int}
 *   400 malformed (Content-Length, JSON, schema)   401 token missing or wrong
 *   404 unknown path or method   429 queue full {"error", "queue_depth"}
 *   503 the last cycle has drained (dlm: nothing more can train)
 *   every error body {"error": "..."}; other HTTP methods 501.
 *
 * The checks run in the original's order (path, token, length, JSON,
 * method, params). Probes wait in a bounded FIFO until the command drains
 * it at a cycle boundary; they become `### Q !probe` instruction sections
 * of that cycle's run (inject_probe_section). The server is libmicrohttpd
 * with its own polling thread; nothing it does touches a training run. */
#ifndef DLM_API_INJECT_H
#define DLM_API_INJECT_H

#include <stddef.h>
#include <stdint.h>

#include "util/err.h"
#include "util/str.h"

#define INJECT_MAX_BODY (64 * 1024)
#define INJECT_QUEUE_CAP 1000
#define INJECT_MAX_TAGS 256

typedef struct inject_probe {
    char *prompt, *reference;     /* str.strip()ped, non-empty */
    char **tags;
    int n_tags;
    char source_addr[64];         /* the client's address */
    char accepted_at[40];         /* ISO 8601 UTC, set when queued */
} inject_probe;

/* Parse one request body. Returns the HTTP status: 200 (out filled; free
 * with inject_probe_clear), 400 or 404 with the reason in msg. Bounded:
 * len > INJECT_MAX_BODY is a 400 too. */
int inject_parse(const char *body, size_t len, inject_probe *out, char *msg, size_t cap);
void inject_probe_clear(inject_probe *p);
/* `Authorization` header value against the token: "Bearer " then the
 * token (the rest str.strip()ped), compared in constant time. 1 = ok. */
int inject_bearer_ok(const char *header, const char *token);

/* The section a probe becomes, as the original's _probes_to_sections:
 * content "### Q !probe\n<prompt>\n\n### A\n<reference>", auto_harvest,
 * harvest_source "rpc-inject/<first tag, else the prompt's first 32
 * characters stripped with spaces as '-'>" (quotes and newlines, which a
 * marker cannot hold, become '). */
int inject_probe_content(const inject_probe *p, strbuf *content, strbuf *source);

/* "HOST:PORT" (split at the last ':'; "[::1]:7429" for IPv6). port 0 =
 * any free one. -1 with e set (a usage error) when malformed. */
int inject_parse_listen(const char *spec, char *host, size_t cap, int *port, dlm_err *e);
/* 1 when host is a loopback address (127.0.0.0/8, ::1, "localhost"). */
int inject_host_is_loopback(const char *host);

typedef struct inject_server inject_server;
typedef struct inject_server_opts {
    const char *host;             /* numeric IPv4/IPv6 or "localhost" */
    int port;
    const char *token;            /* non-empty */
    int capacity;                 /* 0 = INJECT_QUEUE_CAP */
} inject_server_opts;

inject_server *inject_start(const inject_server_opts *o, dlm_err *e);
int inject_port(const inject_server *s);
/* readable (a byte per queued probe) when a probe arrived; the command
 * polls it beside its other waits and empties it with inject_drain */
int inject_wake_fd(const inject_server *s);
/* Take every queued probe in arrival order (*out malloc'd, n may be 0). */
int inject_drain(inject_server *s, inject_probe **out, int *n);
int inject_depth(inject_server *s);
/* what 200 replies say for next_cycle_eta_s */
void inject_set_eta(inject_server *s, int seconds);
/* from now on answer 503: the last cycle has drained */
void inject_close_queue(inject_server *s);
void inject_stop(inject_server *s);

#endif
