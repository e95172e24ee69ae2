/* libFuzzer target: the probe-injection RPC's body parser and bearer check
 * (src/api/inject.c, `dlm train --listen-rpc`), and the section text an
 * accepted probe becomes. The input is split at its first NUL: the body,
 * then an Authorization header value checked against a fixed token. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/inject.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > INJECT_MAX_BODY + 4096) return 0;
    const char *d = (const char *)data;
    const char *nul = memchr(d, 0, size);
    size_t body_len = nul ? (size_t)(nul - d) : size;
    inject_probe p;
    char msg[512];
    int st = inject_parse(d, body_len, &p, msg, sizeof msg);
    if (st == 200) {
        strbuf c = STRBUF_INIT, s = STRBUF_INIT;
        (void)inject_probe_content(&p, &c, &s);
        sb_free(&c);
        sb_free(&s);
        inject_probe_clear(&p);
    } else {
        (void)strlen(msg);
    }
    if (nul) {
        size_t hl = size - body_len - 1;
        char *h = malloc(hl + 1);
        if (!h) return 0;
        memcpy(h, nul + 1, hl);
        h[hl] = 0;
        (void)inject_bearer_ok(h, "fuzz-token");
        char host[64];
        int port;
        dlm_err e;
        if (!inject_parse_listen(h, host, sizeof host, &port, &e)) (void)inject_host_is_loopback(host);
        free(h);
    }
    return 0;
}
