/* test_cbor — util/cbor against bytes written by the reference, Python's
 * cbor2 (cbor2.dumps(..., canonical=True, timezone=UTC)), as the original
 * DocumentLanguageModel 0.10.0 frames its replay records:
 *   R1: a record the original wrote for an ::instruction:: section;
 *   R2: a preference record with a 302-byte text, auto_mined true, runs
 *       [3, 24, 300] (1-, 2- and 3-byte heads) and two datetimes.
 * Decoding both gives their values; encoding R2's values with cbor_put_*
 * in canonical key order gives cbor2's bytes exactly. */
#include "check.h"

#include <stdlib.h>
#include <string.h>

#include "util/cbor.h"
#include "util/json.h"

static const char R1[] =
    "a767636f6e74656e74786623232320510a5768617420697320746865206361706974616c206f66204672616e63653f0a2323232041"
    "0a50617269732e0a0a23232320510a5768617420697320746865206361706974616c206f66204765726d616e793f0a23232320410a"
    "4265726c696e2e6a6175746f5f6d696e6564f46a73656374696f6e5f696470646562396364373032336666363539376c6c61737"
    "45f7365656e5f6174c074323032362d31322d30355430383a32323a31375a6c73656374696f6e5f747970656b696e737472756374"
    "696f6e6d66697273745f7365656e5f6174c074323032362d31322d30355430383a32323a31375a72747261696e696e675f72756e"
    "735f7365656e8101";
/* R2 = a7 "content" 79012e c3a9 78×300 ... (built below: the x run is long) */
static const char R2_HEAD[] = "a767636f6e74656e7479012ec3a9";
static const char R2_TAIL[] =
    "6a6175746f5f6d696e6564f56a73656374696f6e5f696470303132333435363738396162636465666c6c6173745f7365656e5f61"
    "74c074323032362d30312d30325430333a30343a30365a6c73656374696f6e5f747970656a707265666572656e63656d66697273"
    "745f7365656e5f6174c074323032362d30312d30325430333a30343a30355a72747261696e696e675f72756e735f7365656e8303"
    "181819012c";

static size_t unhex(const char *h, unsigned char *out)
{
    size_t n = strlen(h) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        out[i] = (unsigned char)v;
    }
    return n;
}

static void test_decode_r1(void)
{
    unsigned char b[1024];
    size_t n = unhex(R1, b);
    json_t *o;
    dlm_err e;
    CHECK_INT(cbor_to_json(b, n, &o, &e), 0);
    CHECK_STR(jget_str(o, "section_id"), "deb9cd7023ff6597");
    CHECK_STR(jget_str(o, "section_type"), "instruction");
    CHECK_STR(jget_str(o, "content"), "### Q\nWhat is the capital of France?\n### A\nParis.\n\n"
                                      "### Q\nWhat is the capital of Germany?\n### A\nBerlin.");
    CHECK_STR(jget_str(o, "last_seen_at"), "2026-12-05T08:22:17Z");
    CHECK(json_is_false(json_object_get(o, "auto_mined")));
    json_t *runs = json_object_get(o, "training_runs_seen");
    CHECK(json_array_size(runs) == 1 && json_integer_value(json_array_get(runs, 0)) == 1);
    json_decref(o);
    /* truncated, trailing bytes, a byte string: errors, never a crash */
    for (size_t k = 0; k < n; k++) {
        CHECK_INT(cbor_to_json(b, k, &o, &e), -1);
    }
    b[n] = 0;
    CHECK_INT(cbor_to_json(b, n + 1, &o, &e), -1);
    CHECK(strstr(e.msg, "trailing") != NULL);
    unsigned char bs[] = {0x42, 1, 2};
    CHECK_INT(cbor_to_json(bs, 3, &o, &e), -1);
    unsigned char indef[] = {0x9f, 0xff};
    CHECK_INT(cbor_to_json(indef, 2, &o, &e), -1);
}

static void test_r2(void)
{
    unsigned char want[1024];
    size_t n = unhex(R2_HEAD, want);
    memset(want + n, 'x', 300);
    n += 300;
    n += unhex(R2_TAIL, want + n);
    /* decode */
    json_t *o;
    dlm_err e;
    CHECK_INT(cbor_to_json(want, n, &o, &e), 0);
    CHECK_INT(strlen(jget_str(o, "content")), 302);
    CHECK(json_is_true(json_object_get(o, "auto_mined")));
    json_t *runs = json_object_get(o, "training_runs_seen");
    CHECK(json_array_size(runs) == 3 && json_integer_value(json_array_get(runs, 2)) == 300 &&
          json_integer_value(json_array_get(runs, 1)) == 24);
    CHECK_STR(jget_str(o, "first_seen_at"), "2026-01-02T03:04:05Z");
    json_decref(o);
    /* encode */
    char content[303];
    memcpy(content, "\xc3\xa9", 2);
    memset(content + 2, 'x', 300);
    content[302] = 0;
    strbuf sb = STRBUF_INIT;
    cbor_put_map(&sb, 7);
    cbor_put_text(&sb, "content", 7);
    cbor_put_text(&sb, content, 302);
    cbor_put_text(&sb, "auto_mined", 10);
    cbor_put_bool(&sb, 1);
    cbor_put_text(&sb, "section_id", 10);
    cbor_put_text(&sb, "0123456789abcdef", 16);
    cbor_put_text(&sb, "last_seen_at", 12);
    cbor_put_tag(&sb, 0);
    cbor_put_text(&sb, "2026-01-02T03:04:06Z", 20);
    cbor_put_text(&sb, "section_type", 12);
    cbor_put_text(&sb, "preference", 10);
    cbor_put_text(&sb, "first_seen_at", 13);
    cbor_put_tag(&sb, 0);
    cbor_put_text(&sb, "2026-01-02T03:04:05Z", 20);
    cbor_put_text(&sb, "training_runs_seen", 18);
    cbor_put_array(&sb, 3);
    cbor_put_uint(&sb, 3);
    cbor_put_uint(&sb, 24);
    cbor_put_uint(&sb, 300);
    CHECK_INT(sb.len, n);
    CHECK(sb.len == n && !memcmp(sb.buf, want, n));
    sb_free(&sb);
    /* the longer heads */
    strbuf h = STRBUF_INIT;
    cbor_put_uint(&h, 70000);
    cbor_put_uint(&h, 5000000000ull);
    CHECK(h.len == 5 + 9 && !memcmp(h.buf, "\x1a\x00\x01\x11\x70\x1b\x00\x00\x00\x01\x2a\x05\xf2\x00", 14));
    sb_free(&h);
}

int main(void)
{
    test_decode_r1();
    test_r2();
    return check_done();
}
