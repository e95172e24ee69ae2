/* libFuzzer target: `dlm lsp`'s framing and dispatch (src/lsp). A session
 * is opened (initialize, a document with named adapters), then the input is
 * fed as raw client bytes in chunks of the size its first byte picks, so
 * headers and bodies split at every point. Every byte the server writes
 * must be a Content-Length frame holding one JSON object: a malformed
 * client may get errors, never a malformed answer or a crash. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lsp/lsp.h"

static void check_sink(void *ctx, const char *p, size_t n)
{
    (void)ctx;
    size_t clen = 0;
    int hl = 0;
    if (sscanf(p, "Content-Length: %zu\r\n\r\n%n", &clen, &hl) != 1 || hl <= 0 || (size_t)hl + clen != n) abort();
    json_t *m = json_loadb(p + hl, clen, 0, NULL);
    if (!json_is_object(m)) abort();
    json_decref(m);
}

static void feed_msg(lsp_server *s, const char *body)
{
    char hdr[64];
    int n = snprintf(hdr, sizeof hdr, "Content-Length: %zu\r\n\r\n", strlen(body));
    lsp_server_feed(s, hdr, (size_t)n);
    lsp_server_feed(s, body, strlen(body));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    lsp_options o = {0};
    lsp_server *s = lsp_server_new(&o, check_sink, NULL);
    if (!s) return 0;
    feed_msg(s, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{}}");
    feed_msg(s, "{\"jsonrpc\":\"2.0\",\"method\":\"initialized\",\"params\":{}}");
    feed_msg(s, "{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didOpen\",\"params\":{\"textDocument\":"
                "{\"uri\":\"file:///f/a.dlm\",\"languageId\":\"dlm\",\"version\":1,\"text\":"
                "\"---\\ndlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3\\nbase_model: smollm2-135m\\ntraining:\\n"
                "  adapters:\\n    tone: {}\\n    facts: {}\\n---\\nIntro.\\n\\n::instruction#tone::\\n"
                "### Q\\nHi?\\n### A\\nHello.\\n\"}}}");
    size_t chunk = size ? (size_t)data[0] + 1 : 1;
    for (size_t i = 1; i < size; i += chunk) {
        size_t n = size - i < chunk ? size - i : chunk;
        if (lsp_server_feed(s, data + i, n) == 1) break;
    }
    lsp_server_free(s);
    return 0;
}
