/* Unit tests for src/util: errors, strings, JSON writer, atomic files,
 * sha256, ULIDs. */
#include "check.h"

#include <stdlib.h>
#include <string.h>
#include "util/err.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/json.h"
#include "util/str.h"
#include "util/ulid.h"

static void test_err(void)
{
    dlm_err e;
    err_clear(&e);
    CHECK_INT(err_at(&e, "FenceError", "a.dlm", 3, 1, "bad %s", "fence"), -1);
    char buf[256];
    err_format(&e, buf, sizeof buf);
    CHECK_STR(buf, "a.dlm:3:1: bad fence");
    err_set(&e, NULL, "plain");
    err_format(&e, buf, sizeof buf);
    CHECK_STR(buf, "plain");
    err_at(&e, NULL, "x.dlm", 2, 0, "schema");
    err_format(&e, buf, sizeof buf);
    CHECK_STR(buf, "x.dlm:2: schema");
}

static void test_json_floats(void)
{
    char b[64];
    json_fmt_double(0.1, b, sizeof b); CHECK_STR(b, "0.1");
    json_fmt_double(2e-4, b, sizeof b); CHECK_STR(b, "0.0002");
    json_fmt_double(1e-5, b, sizeof b); CHECK_STR(b, "1e-05");
    json_fmt_double(3.0, b, sizeof b); CHECK_STR(b, "3.0");
    json_fmt_double(1.234, b, sizeof b); CHECK_STR(b, "1.234");
    json_fmt_double(10737418240.0, b, sizeof b); CHECK_STR(b, "10737418240.0");
    json_t *o = json_pack("{s:i, s:[], s:{}, s:s, s:f}", "b", 1, "a", "c", "d", "é\n\"", "e", 0.5);
    strbuf sb = STRBUF_INIT;
    json_write(&sb, o, JW_SORT);
    CHECK_STR(sb_str(&sb), "{\n  \"a\": [],\n  \"b\": 1,\n  \"c\": {},\n  \"d\": \"é\\n\\\"\",\n  \"e\": 0.5\n}");
    sb_reset(&sb);
    json_write(&sb, o, JW_SORT | JW_COMPACT);
    CHECK_STR(sb_str(&sb), "{\"a\":[],\"b\":1,\"c\":{},\"d\":\"é\\n\\\"\",\"e\":0.5}");
    sb_free(&sb);
    json_decref(o);
}

static void test_fs(void)
{
    const char *dir = check_tmpdir("test_util_fs");
    char p[4096], sub[4096];
    fs_join(p, sizeof p, dir, "a.txt");
    dlm_err e;
    CHECK_INT(fs_write_atomic(p, "hello", 5, 0644, &e), 0);
    char *buf; size_t len;
    CHECK_INT(fs_read_all(p, 100, &buf, &len, &e), 0);
    CHECK_INT(len, 5);
    CHECK_STR(buf, "hello");
    free(buf);
    CHECK_INT(fs_read_all(p, 3, &buf, &len, &e), -1); /* size cap */
    /* Injected write failure leaves the old content and no temp file. */
    fs_inject_write_failure("a.txt");
    CHECK_INT(fs_write_atomic(p, "world", 5, 0644, &e), -1);
    fs_inject_write_failure(NULL);
    CHECK_INT(fs_read_all(p, 100, &buf, &len, &e), 0);
    CHECK_STR(buf, "hello");
    free(buf);
    char **names;
    int n = fs_list_dir(dir, &names, &e);
    CHECK_INT(n, 1);
    fs_free_list(names, n);
    fs_join(sub, sizeof sub, dir, "x/y/z");
    CHECK_INT(fs_mkdir_p(sub, &e), 0);
    CHECK(fs_is_dir(sub));
    CHECK_INT(fs_remove_tree(dir, &e), 0);
    CHECK(!fs_exists(dir));
}

static void test_hash_ulid(void)
{
    char hex[65];
    sha256_hex("prose\n# My tutor\n\nSome prose.\n", 30, hex);
    CHECK(!strncmp(hex, "c78031fc5ab5a29a", 16)); /* the spec's golden section id */
    sha256_hex("", 0, hex);
    CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    char id[27];
    unsigned char zero[10] = {0};
    ulid_make(0, zero, id);
    CHECK_STR(id, "00000000000000000000000000");
    unsigned char ff[10];
    memset(ff, 0xff, sizeof ff);
    ulid_make(0xFFFFFFFFFFFFull, ff, id);
    CHECK_STR(id, "7ZZZZZZZZZZZZZZZZZZZZZZZZZ");
    ulid_new(id);
    CHECK(ulid_valid(id));
    CHECK(!ulid_valid("01KTESTEXAMPLE000000000000")); /* contains L */
}

static void test_str(void)
{
    unsigned long long v;
    CHECK_INT(str_parse_size("8G", &v), 0); CHECK(v == 8ull << 30);
    CHECK_INT(str_parse_size("512MiB", &v), 0); CHECK(v == 512ull << 20);
    CHECK_INT(str_parse_size("100", &v), 0); CHECK(v == 100);
    CHECK_INT(str_parse_size("8X", &v), -1);
    CHECK_INT(str_edit_distance("trian", "train"), 2);
    /* UTF-8 hold-back: "aé€😀" cut at every byte, checked against the
     * sequence lengths Python's str.encode gives (1, 2, 3, 4) */
    const unsigned char u[] = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
    const size_t want[] = {0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10};
    for (size_t n = 0; n <= 10; n++) CHECK_INT((int)str_utf8_complete(u, n), (int)want[n]);
    const unsigned char bad[] = "\x80\x80";   /* continuation bytes only: nothing to wait for */
    CHECK_INT((int)str_utf8_complete(bad, 2), 2);

    /* U+FFFD per maximal subpart: the Unicode Standard's own example
     * (chapter 3, "U+FFFD Substitution of Maximal Subparts", Table 3-8):
     * 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 -> a, 3 x FFFD, b, FFFD, c,
     * 2 x FFFD, d; Python's bytes.decode('utf-8', 'replace') agrees */
    strbuf sb = STRBUF_INIT;
    const char t38[] = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
    CHECK_INT(str_utf8_lossy(&sb, t38, sizeof t38 - 1), 0);
    CHECK_STR(sb_str(&sb), "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c\xEF\xBF\xBD\xEF\xBF\xBD" "d");
    sb_reset(&sb);
    /* overlong, surrogate, above U+10FFFF; valid text passes as is */
    const char odd[] = "\xC0\xAF|\xED\xA0\x80|\xF4\x90\x80\x80|\xC3\xA9\xF0\x9F\x98\x80";
    CHECK_INT(str_utf8_lossy(&sb, odd, sizeof odd - 1), 0);
    CHECK_STR(sb_str(&sb), "\xEF\xBF\xBD\xEF\xBF\xBD|\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD|"
                           "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD|\xC3\xA9\xF0\x9F\x98\x80");
    sb_free(&sb);

    /* did you mean: the closest within 2 edits, else none */
    const char *const keys[] = {"lora_r", "lora_alpha", "lora_dropout", NULL};
    CHECK_STR(str_closest("lora_rr", keys), "lora_r");
    CHECK_STR(str_closest("lora_alfa", keys), "lora_alpha");
    CHECK(str_closest("learning_rate", keys) == NULL);
}

int main(void)
{
    hash_init();
    test_err();
    test_json_floats();
    test_fs();
    test_hash_ulid();
    test_str();
    return check_done();
}
