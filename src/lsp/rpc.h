/* rpc — JSON-RPC 2.0 over the Language Server Protocol's base protocol:
 * each message is a header block ("Content-Length: N\r\n", optionally
 * "Content-Type: ...\r\n", then "\r\n") followed by exactly N bytes of
 * UTF-8 JSON.
 *
 * The reader never trusts the peer: headers are capped at RPC_MAX_HEADER
 * bytes, bodies at the caller's max; a broken header or an oversized body is
 * reported once and skipped so that the stream resynchronises on the next
 * header instead of the server dying (the client gets a JSON-RPC error for
 * it from the server, see server.c). */
#ifndef DLM_LSP_RPC_H
#define DLM_LSP_RPC_H

#include <stddef.h>
#include "util/str.h"

#define RPC_MAX_HEADER 8192

/* JSON-RPC / LSP error codes. */
enum {
    RPC_PARSE_ERROR = -32700,
    RPC_INVALID_REQUEST = -32600,
    RPC_METHOD_NOT_FOUND = -32601,
    RPC_INVALID_PARAMS = -32602,
    RPC_INTERNAL_ERROR = -32603,
    RPC_SERVER_NOT_INITIALIZED = -32002,
    RPC_REQUEST_CANCELLED = -32800,
};

typedef struct rpc_reader {
    strbuf buf;          /* bytes received and not consumed yet (from off) */
    size_t off;
    size_t skip;         /* body bytes of an oversized message still to drop */
    size_t max_body;
} rpc_reader;

void rpc_reader_init(rpc_reader *r, size_t max_body);
void rpc_reader_free(rpc_reader *r);
/* Append received bytes. -1 when out of memory. */
int rpc_reader_feed(rpc_reader *r, const void *p, size_t n);
/* Take the next complete message: 1 with body and len pointing into the
 * reader (valid until the next feed/next call), 0 when more bytes are
 * needed, -1 for a framing error (why says what; the bad header or body is
 * already skipped, so calling again continues with the rest). */
int rpc_reader_next(rpc_reader *r, const char **body, size_t *len, char *why, size_t whycap);

/* One framed message ("Content-Length: N\r\n\r\n" + body) into out. */
int rpc_frame(strbuf *out, const char *body, size_t len);

#endif
