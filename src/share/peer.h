/* peer — serving one pack to people on the network (spec §5 `serve`).
 *
 * GET /<dlm_id>?token=T answers the pack (application/octet-stream). Tokens
 * are stateless: T = base64url(nonce[12] || expires[8, big-endian unix
 * seconds] || HMAC-SHA256(secret, nonce || expires || dlm_id)) with a
 * 32-byte secret that lives only in the server's memory, so a restart
 * revokes every token. Answers:
 *   200 the pack            404 another path / dlm_id
 *   403 bad or expired token 429 past the token's limits: more than
 *       max_concurrency downloads at once, or rate_limit requests a minute
 *   405 anything but GET/HEAD
 * The URL to give out is peer://HOST:PORT/<dlm_id>?token=T (dlm pull). */
#ifndef DLM_PEER_H
#define DLM_PEER_H

#include <stddef.h>

#include "util/err.h"

#define PEER_TOKEN_CHARS 72    /* base64url of 52 bytes, no padding, + NUL */

typedef struct peer_opts {
    const char *pack_path;
    const char *dlm_id;
    const char *bind;              /* "127.0.0.1" or "0.0.0.0" */
    int port;                      /* 0 = any free port */
    int max_concurrency;           /* per token (4) */
    int rate_limit;                /* requests per minute per token (30) */
    double ttl_s;                  /* token lifetime (900) */
} peer_opts;

typedef struct peer_server peer_server;

peer_server *peer_start(const peer_opts *o, dlm_err *e);
int peer_port(const peer_server *s);
/* A fresh token valid for ttl_s from now. out >= PEER_TOKEN_CHARS. */
void peer_issue(peer_server *s, char *out, size_t cap);
void peer_stop(peer_server *s);

/* The token codec, exposed for tests. check: 0 valid, 1 expired, -1 bad. */
void peer_token_make(const unsigned char secret[32], const char *dlm_id, const unsigned char nonce[12],
                     unsigned long long expires, char *out, size_t cap);
int peer_token_check(const unsigned char secret[32], const char *dlm_id, const char *token, double now,
                     unsigned char nonce[12]);

#endif
