/* Unit tests for src/api/inject.c, the probe-injection RPC of `dlm train
 * --listen-rpc`. Expected values come from the original's dlm.train.rpc
 * (document-language-model 0.10.0): its checks and statuses, its
 * _check_bearer (the "Bearer " prefix, str.strip() of the rest), and
 * dlm.watch.loop._probes_to_sections for the section text and name; the
 * section ids were computed with the original's Section.section_id. */
#include "check.h"

#include <stdlib.h>
#include <string.h>

#include "api/inject.h"
#include "doc/doc.h"

static int status(const char *body, char *msg)
{
    inject_probe p;
    int st = inject_parse(body, strlen(body), &p, msg, 512);
    inject_probe_clear(&p);
    return st;
}

static void test_parse(void)
{
    char msg[512];
    inject_probe p;
    const char *ok = "{\"method\": \"inject_probe\", \"params\": {\"prompt\": \"  What?\\n\", \"reference\": \"\\tThat. \", "
                     "\"tags\": [\"a\", \" b \"]}}";
    CHECK_INT(inject_parse(ok, strlen(ok), &p, msg, sizeof msg), 200);
    CHECK_STR(p.prompt, "What?");
    CHECK_STR(p.reference, "That.");
    CHECK_INT(p.n_tags, 2);
    if (p.n_tags == 2) CHECK_STR(p.tags[1], " b ");   /* tags kept as sent */
    inject_probe_clear(&p);
    /* one object and a newline (a line of NDJSON) is a body json.loads takes; two are not */
    CHECK_INT(status("{\"method\": \"inject_probe\", \"params\": {\"prompt\": \"p\", \"reference\": \"r\"}}\n", msg), 200);
    CHECK_INT(status("{\"method\": \"inject_probe\"}\n{\"method\": \"inject_probe\"}\n", msg), 400);
    CHECK(!strncmp(msg, "malformed JSON", 14));
    CHECK_INT(status("", msg), 400);
    CHECK_STR(msg, "empty body");
    CHECK_INT(status("{not json", msg), 400);
    CHECK(!strncmp(msg, "malformed JSON", 14));
    CHECK_INT(status("[1]", msg), 400);
    CHECK_STR(msg, "payload must be a JSON object");
    CHECK_INT(status("\"x\"", msg), 400);
    CHECK_INT(status("{\"method\": \"other\"}", msg), 404);
    CHECK_STR(msg, "unknown method 'other'");
    CHECK_INT(status("{}", msg), 404);
    CHECK_INT(status("{\"method\": \"inject_probe\\u0000x\"}", msg), 400);   /* NUL: not a str jansson takes */
    CHECK_INT(status("{\"method\": \"inject_probe\", \"params\": 3}", msg), 400);
    CHECK_STR(msg, "`params` must be an object");
    CHECK_INT(status("{\"method\": \"inject_probe\"}", msg), 400);
    CHECK_STR(msg, "`params.prompt` must be a non-empty string");
    /* str.strip() is Unicode: an em space alone is blank */
    CHECK_INT(status("{\"method\": \"inject_probe\", \"params\": {\"prompt\": \"\\u2003\", \"reference\": \"r\"}}", msg), 400);
    CHECK_INT(status("{\"method\": \"inject_probe\", \"params\": {\"prompt\": \"p\", \"reference\": 1}}", msg), 400);
    CHECK_STR(msg, "`params.reference` must be a non-empty string");
    CHECK_INT(status("{\"method\": \"inject_probe\", \"params\": {\"prompt\": \"p\", \"reference\": \"r\", \"tags\": \"t\"}}", msg), 400);
    CHECK_STR(msg, "`params.tags` must be a list of strings");
    CHECK_INT(status("{\"method\": \"inject_probe\", \"params\": {\"prompt\": \"p\", \"reference\": \"r\", \"tags\": [null]}}", msg), 400);
    CHECK_INT(status("{\"method\": \"inject_probe\", \"params\": {\"prompt\": \"p\", \"reference\": \"r\", \"tags\": null}}", msg), 400);
    /* the body bound is the parser's too */
    size_t n = INJECT_MAX_BODY + 1;
    char *big = malloc(n);
    memset(big, ' ', n);
    CHECK_INT(inject_parse(big, n, &p, msg, sizeof msg), 400);
    free(big);
}

static void test_bearer(void)
{
    CHECK(inject_bearer_ok("Bearer tok", "tok"));
    CHECK(inject_bearer_ok("Bearer   tok \t", "tok"));
    CHECK(!inject_bearer_ok("bearer tok", "tok"));
    CHECK(!inject_bearer_ok("Bearer", "tok"));
    CHECK(!inject_bearer_ok("Bearer ", "tok"));
    CHECK(!inject_bearer_ok("Bearer to", "tok"));
    CHECK(!inject_bearer_ok("Bearer tok2", "tok"));
    CHECK(!inject_bearer_ok("Bearer tik", "tok"));
    CHECK(!inject_bearer_ok(NULL, "tok"));
    CHECK(!inject_bearer_ok("Bearer tok", ""));
}

static void test_content(void)
{
    inject_probe p = {0};
    p.prompt = "a b";
    p.reference = "c";
    strbuf c = STRBUF_INIT, s = STRBUF_INIT;
    CHECK_INT(inject_probe_content(&p, &c, &s), 0);
    CHECK_STR(c.buf, "### Q !probe\na b\n\n### A\nc");
    CHECK_STR(s.buf, "rpc-inject/a-b");
    char id[17];
    doc_section_id(DOC_INSTRUCTION, c.buf, c.len, id);
    CHECK_STR(id, "74022fc863ca0a1e");   /* the original's Section(...).section_id */
    sb_free(&c);
    sb_free(&s);
    /* prompt[:32] counts code points; then strip, ' ' → '-' */
    p.prompt = "\xc3\x9cn\xc3\xaf c\xc3\xb6" "d\xc3\xa9 prompt that is longer than 32";
    CHECK_INT(inject_probe_content(&p, &c, &s), 0);
    CHECK_STR(s.buf, "rpc-inject/\xc3\x9cn\xc3\xaf-c\xc3\xb6" "d\xc3\xa9-prompt-that-is-longer-t");   /* as the original names it */
    sb_free(&c);
    sb_free(&s);
    char *tags[] = {"first\"tag\nx", "second"};
    p.tags = tags;
    p.n_tags = 2;
    CHECK_INT(inject_probe_content(&p, &c, &s), 0);
    CHECK_STR(s.buf, "rpc-inject/first'tag'x");   /* a marker cannot hold " or a newline */
    sb_free(&c);
    sb_free(&s);
}

static void test_listen(void)
{
    char host[64];
    int port = -1;
    dlm_err e;
    CHECK_INT(inject_parse_listen("127.0.0.1:7429", host, sizeof host, &port, &e), 0);
    CHECK_STR(host, "127.0.0.1");
    CHECK_INT(port, 7429);
    CHECK_INT(inject_parse_listen("[::1]:0", host, sizeof host, &port, &e), 0);
    CHECK_STR(host, "::1");
    CHECK_INT(port, 0);
    CHECK_INT(inject_parse_listen("localhost: 80", host, sizeof host, &port, &e), 0);   /* int() strips */
    CHECK_INT(port, 80);
    CHECK(inject_parse_listen("noport", host, sizeof host, &port, &e) < 0);
    CHECK(strstr(e.msg, "host:port") != NULL);
    CHECK(inject_parse_listen(":7429", host, sizeof host, &port, &e) < 0);
    CHECK(inject_parse_listen("h:", host, sizeof host, &port, &e) < 0);
    CHECK(inject_parse_listen("h:x", host, sizeof host, &port, &e) < 0);
    CHECK(strstr(e.msg, "integer") != NULL);
    CHECK(inject_parse_listen("h:65536", host, sizeof host, &port, &e) < 0);
    CHECK(inject_parse_listen("h:-1", host, sizeof host, &port, &e) < 0);
    CHECK(inject_host_is_loopback("127.0.0.1"));
    CHECK(inject_host_is_loopback("127.9.8.7"));
    CHECK(inject_host_is_loopback("::1"));
    CHECK(inject_host_is_loopback("localhost"));
    CHECK(!inject_host_is_loopback("0.0.0.0"));
    CHECK(!inject_host_is_loopback("::"));
    CHECK(!inject_host_is_loopback("128.0.0.1"));
    CHECK(!inject_host_is_loopback("10.0.0.1"));
    CHECK(!inject_host_is_loopback("example.com"));
}

int main(void)
{
    test_parse();
    test_bearer();
    test_content();
    test_listen();
    return check_done();
}
