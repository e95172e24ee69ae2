/* Unit tests for src/weights/safetensors + st_write: the reference writer's
 * exact bytes (test vectors from the Rust safetensors crate's own tests),
 * round trips, sharded sets, and every malformed-header refusal. */
#include "check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "weights/safetensors.h"
#include "util/err.h"
#include "util/fs.h"
#include "util/hash.h"

static dlm_err E;

/* Build "u64 len | header | data" in memory. */
static unsigned char *mk(const char *hdr, size_t datalen, size_t *len)
{
    size_t n = strlen(hdr);
    unsigned char *b = calloc(1, 8 + n + datalen + 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(b + 8, hdr, n);
    for (size_t i = 0; i < datalen; i++) b[8 + n + i] = (unsigned char)i;
    *len = 8 + n + datalen;
    return b;
}

/* Parse and expect failure whose message contains want. */
static void refuse(const char *what, const unsigned char *b, size_t len, const char *want)
{
    st_file *f = NULL;
    err_clear(&E);
    int r = st_parse_buffer(b, len, "x.safetensors", &f, &E);
    CHECK_MSG(r == -1 && f == NULL, "%s: accepted", what);
    CHECK_MSG(strstr(E.msg, want) != NULL, "%s: message '%s' lacks '%s'", what, E.msg, want);
    st_close(f);
}

static void refuse_hdr(const char *what, const char *hdr, size_t datalen, const char *want)
{
    size_t len;
    unsigned char *b = mk(hdr, datalen, &len);
    refuse(what, b, len, want);
    free(b);
}

static const float SIX[6] = {0, 1, 2, 3, 4, 5};

/* The Rust crate's test_serialization / test_empty /
 * test_serialization_forced_alignement expected bytes. */
static void test_reference_bytes(void)
{
    static const unsigned char want1[] = {
        64, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 46, 48, 34, 58, 123, 34, 100,
        116, 121, 112, 101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34,
        58, 91, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102, 115,
        101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 0, 0, 0, 0, 0, 0, 128, 63,
        0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0, 160, 64};
    st_out t = {"attn.0", ST_F32, 3, {1, 2, 3}, SIX};
    unsigned char *buf;
    size_t len;
    CHECK_INT(st_serialize(&t, 1, NULL, &buf, &len, &E), 0);
    CHECK_INT(len, sizeof want1);
    CHECK(len == sizeof want1 && !memcmp(buf, want1, len));
    free(buf);

    static const unsigned char want2[] = {
        72, 0, 0, 0, 0, 0, 0, 0, 123, 34, 97, 116, 116, 110, 48, 34, 58, 123, 34, 100, 116,
        121, 112, 101, 34, 58, 34, 70, 51, 50, 34, 44, 34, 115, 104, 97, 112, 101, 34, 58,
        91, 49, 44, 49, 44, 50, 44, 51, 93, 44, 34, 100, 97, 116, 97, 95, 111, 102, 102,
        115, 101, 116, 115, 34, 58, 91, 48, 44, 50, 52, 93, 125, 125, 32, 32, 32, 32, 32,
        32, 32, 0, 0, 0, 0, 0, 0, 128, 63, 0, 0, 0, 64, 0, 0, 64, 64, 0, 0, 128, 64, 0, 0,
        160, 64};
    st_out t2 = {"attn0", ST_F32, 4, {1, 1, 2, 3}, SIX};
    CHECK_INT(st_serialize(&t2, 1, NULL, &buf, &len, &E), 0);
    CHECK(len == sizeof want2 && !memcmp(buf, want2, len));
    free(buf);

    static const unsigned char want3[] = {8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32};
    CHECK_INT(st_serialize(NULL, 0, NULL, &buf, &len, &E), 0);
    CHECK(len == sizeof want3 && !memcmp(buf, want3, len));
    free(buf);

    static const unsigned char want4[] = {
        40, 0, 0, 0, 0, 0, 0, 0, 123, 34, 95, 95, 109, 101, 116, 97, 100, 97, 116, 97, 95,
        95, 34, 58, 123, 34, 102, 114, 97, 109, 101, 119, 111, 114, 107, 34, 58, 34, 112,
        116, 34, 125, 125, 32, 32, 32, 32, 32};
    const char *meta[] = {"framework", "pt", NULL};
    CHECK_INT(st_serialize(NULL, 0, meta, &buf, &len, &E), 0);
    CHECK(len == sizeof want4 && !memcmp(buf, want4, len));
    /* and our reader accepts what it wrote */
    st_file *f;
    CHECK_INT(st_parse_buffer(buf, len, "m", &f, &E), 0);
    CHECK_INT(st_count(f), 0);
    CHECK_STR(st_metadata(f, "framework"), "pt");
    st_close(f);
    free(buf);
}

static void test_roundtrip(void)
{
    const char *dir = check_tmpdir("test_safetensors_rt");
    char p[4096];
    fs_join(p, sizeof p, dir, "a.safetensors");
    uint16_t h[4] = {0x3c00, 0x4000, 0xc000, 0x0001};    /* f16 1, 2, -2, tiny */
    int32_t ids[3] = {7, -1, 1 << 30};
    st_out t[3] = {
        {"b.half", ST_F16, 2, {2, 2}, h},
        {"a.ids", ST_I32, 1, {3}, ids},
        {"c.f32", ST_F32, 2, {2, 3}, SIX},
    };
    const char *meta[] = {"format", "pt", "a\"b", "line\nbreak", NULL};
    CHECK_INT(st_write(p, t, 3, meta, &E), 0);
    st_file *f;
    CHECK_INT(st_open(p, &f, &E), 0);
    if (!f) return;
    CHECK_INT(st_count(f), 3);
    CHECK_STR(st_metadata(f, "format"), "pt");
    CHECK_STR(st_metadata(f, "a\"b"), "line\nbreak");
    const st_tensor *a = st_find(f, "a.ids"), *b = st_find(f, "b.half"), *c = st_find(f, "c.f32");
    CHECK(a && b && c);
    if (a && b && c) {
        CHECK_INT(a->dtype, ST_I32);
        CHECK_INT(a->ndim, 1);
        CHECK_INT(a->shape[0], 3);
        CHECK(!memcmp(a->data, ids, sizeof ids));
        CHECK_INT(b->nbytes, 8);
        CHECK(!memcmp(b->data, h, sizeof h));
        CHECK_INT(c->shape[0], 2);
        CHECK_INT(c->shape[1], 3);
        CHECK(!memcmp(c->data, SIX, sizeof SIX));
        /* Rust order: F32 first, then I32, then F16; data contiguous. */
        CHECK((const char *)c->data < (const char *)a->data);
        CHECK((const char *)a->data < (const char *)b->data);
        CHECK((const char *)a->data == (const char *)c->data + 24);
    }
    CHECK(st_find(f, "nope") == NULL);
    st_close(f);
    /* duplicate names refused by the writer */
    st_out d[2] = {{"x", ST_F32, 1, {1}, SIX}, {"x", ST_F32, 1, {1}, SIX}};
    CHECK_INT(st_write(p, d, 2, NULL, &E), -1);
    /* injected write failure keeps the old file */
    fs_inject_write_failure("a.safetensors");
    CHECK_INT(st_write(p, d, 1, NULL, &E), -1);
    fs_inject_write_failure(NULL);
    CHECK_INT(st_open(p, &f, &E), 0);
    if (f) CHECK_INT(st_count(f), 3);
    st_close(f);
}

static void test_malformed(void)
{
    size_t len;
    unsigned char *b;
    refuse("empty", (const unsigned char *)"", 0, "truncated");
    refuse("7 bytes", (const unsigned char *)"\x02\0\0\0\0\0\0", 7, "truncated");
    b = mk("{}", 0, &len);
    b[0] = 200; /* claims more header than present */
    refuse("lying header length", b, len, "exceeds the");
    b[0] = 0; b[1] = 0xe2; b[2] = 0xf5; b[3] = 0x05; /* 100,000,512 */
    refuse("header cap", b, len, "limit");
    memset(b, 0xff, 8);
    refuse("u64 max header", b, len, "limit");
    free(b);
    refuse_hdr("not object", "[1, 2]  ", 0, "must start with '{'");
    refuse_hdr("bad json", "{\"a\":   ", 0, "invalid JSON");
    refuse_hdr("trailing garbage", "{} x    ", 0, "invalid JSON");
    refuse_hdr("duplicate key",
               "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "invalid JSON");
    refuse_hdr("metadata not string", "{\"__metadata__\":{\"k\":1}}", 0, "not a string");
    refuse_hdr("metadata not object", "{\"__metadata__\":[]}", 0, "not an object");
    refuse_hdr("unknown dtype", "{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
               "unknown dtype 'F33'");
    refuse_hdr("missing dtype", "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "missing dtype");
    refuse_hdr("shape vs bytes", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
               "give 8 bytes");
    refuse_hdr("negative dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4,
               "shape[0]");
    refuse_hdr("float dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4,
               "shape[0]");
    refuse_hdr("negative offset", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4,
               "data_offsets");
    refuse_hdr("end < begin", "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,0]}}", 4,
               "end 0 < begin 4");
    refuse_hdr("3 offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 4,
               "data_offsets");
    refuse_hdr("overflow", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}",
               4, "overflow");
    refuse_hdr("bits overflow", "{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904],\"data_offsets\":[0,4]}}",
               4, "overflow");
    refuse_hdr("too many dims",
               "{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1, "dimensions");
    refuse_hdr("hole",
               "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
               "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[3,5]}}", 5, "hole");
    refuse_hdr("not from 0", "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[1,3]}}", 3, "hole");
    refuse_hdr("overlap",
               "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
               "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]}}", 4, "overlaps");
    refuse_hdr("truncated data", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 12,
               "truncated");
    refuse_hdr("trailing bytes", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 5,
               "trailing");
    refuse_hdr("F4 odd", "{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, "whole bytes");
    refuse_hdr("tensor not object", "{\"a\":3}", 0, "not an object");

    /* accepted edge cases: scalar, empty tensor, F4 pairs, padded header */
    st_file *f;
    b = mk("{\"s\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[0,4]},"
           "\"z\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[4,4]},"
           "\"q\":{\"dtype\":\"F4\",\"shape\":[4],\"data_offsets\":[4,6]}}   ", 6, &len);
    CHECK_INT(st_parse_buffer(b, len, "ok", &f, &E), 0);
    if (f) {
        CHECK_INT(st_count(f), 3);
        const st_tensor *s = st_find(f, "s"), *z = st_find(f, "z");
        CHECK(s && s->ndim == 0 && s->nbytes == 4);
        CHECK(z && z->nbytes == 0 && z->shape[1] == 5);
        CHECK_STR(st_at(f, 0)->name, "q");
        st_close(f);
    }
    free(b);
}

static void test_sharded(void)
{
    const char *dir = check_tmpdir("test_safetensors_shard");
    char p[4096], ix[4096];
    float x[4] = {1, 2, 3, 4};
    st_out s1[2] = {{"w.a", ST_F32, 1, {2}, x}, {"w.b", ST_F32, 1, {2}, x + 2}};
    st_out s2[1] = {{"w.c", ST_F32, 2, {2, 2}, x}};
    fs_join(p, sizeof p, dir, "model-00001-of-00002.safetensors");
    CHECK_INT(st_write(p, s1, 2, NULL, &E), 0);
    fs_join(p, sizeof p, dir, "model-00002-of-00002.safetensors");
    CHECK_INT(st_write(p, s2, 1, NULL, &E), 0);
    fs_join(ix, sizeof ix, dir, "model.safetensors.index.json");
    const char *good = "{\"metadata\":{\"total_size\":32},\"weight_map\":{"
                       "\"w.a\":\"model-00001-of-00002.safetensors\","
                       "\"w.b\":\"model-00001-of-00002.safetensors\","
                       "\"w.c\":\"model-00002-of-00002.safetensors\"}}";
    CHECK_INT(fs_write_atomic(ix, good, strlen(good), 0644, &E), 0);
    st_file *f;
    CHECK_INT(st_open(dir, &f, &E), 0);
    if (f) {
        CHECK_INT(st_count(f), 3);
        CHECK_INT(st_shard_count(f), 2);
        const st_tensor *c = st_find(f, "w.c");
        CHECK(c && c->shard == 1 && ((const float *)c->data)[3] == 4.0f);
        const st_tensor *b = st_find(f, "w.b");
        CHECK(b && ((const float *)b->data)[0] == 3.0f);
        st_close(f);
    }
    const char *bad[][2] = {
        {"{\"weight_map\":{\"w.a\":\"../model-00001-of-00002.safetensors\"}}", "does not name a file"},
        {"{\"weight_map\":{\"w.a\":\"/etc/passwd\"}}", "does not name a file"},
        {"{\"weight_map\":{\"w.a\":\"model-00003-of-00002.safetensors\"}}", "is missing"},
        {"{\"weight_map\":{\"w.x\":\"model-00001-of-00002.safetensors\"}}", "'w.x' listed in the index"},
        {"{\"weight_map\":{\"w.a\":\"model-00002-of-00002.safetensors\","
         "\"w.c\":\"model-00002-of-00002.safetensors\"}}", "not in"},
        {"{\"weight_map\":{}}", "weight_map"},
        {"{\"weight_map\":{\"w.b\":\"model-00001-of-00002.safetensors\","
         "\"w.a\":\"model-00002-of-00002.safetensors\"}}", "is in 'model-00001"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fs_write_atomic(ix, bad[i][0], strlen(bad[i][0]), 0644, &E);
        err_clear(&E);
        f = NULL;
        CHECK_INT(st_open(ix, &f, &E), -1);
        CHECK_MSG(strstr(E.msg, bad[i][1]) != NULL, "case %zu: '%s'", i, E.msg);
        st_close(f);
    }
    /* a tensor present in two shards */
    st_out dup[1] = {{"w.a", ST_F32, 1, {2}, x}};
    fs_join(p, sizeof p, dir, "model-00002-of-00002.safetensors");
    CHECK_INT(st_write(p, dup, 1, NULL, &E), 0);
    const char *two = "{\"weight_map\":{\"w.a\":\"model-00001-of-00002.safetensors\","
                      "\"w.b\":\"model-00002-of-00002.safetensors\"}}";
    fs_write_atomic(ix, two, strlen(two), 0644, &E);
    CHECK_INT(st_open(dir, &f, &E), -1);
    CHECK(strstr(E.msg, "appears twice") != NULL);
    /* a directory with no weights */
    fs_remove_tree(dir, &E);
    fs_mkdir_p(dir, &E);
    CHECK_INT(st_open(dir, &f, &E), -1);
    CHECK(strstr(E.msg, "neither") != NULL);
}

int main(void)
{
    hash_init();
    test_reference_bytes();
    test_roundtrip();
    test_malformed();
    test_sharded();
    return check_done();
}
