/* Unit tests for src/weights/gguf: a hand-assembled GGUF (bytes written here,
 * independently of any writer) read back through every accessor, then each
 * refusal of docs/reference/formats.md §4.1 / docs/reference/style.md rule 12, and every truncation. */
#include "check.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "weights/gguf.h"
#include "util/fs.h"

static dlm_err E;

typedef struct buf { unsigned char *p; size_t n, cap; } buf;

static void put(buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void u8(buf *b, uint8_t v) { put(b, &v, 1); }
static void u32(buf *b, uint32_t v) { unsigned char x[4]; for (int i = 0; i < 4; i++) x[i] = (unsigned char)(v >> (8 * i)); put(b, x, 4); }
static void u64(buf *b, uint64_t v) { unsigned char x[8]; for (int i = 0; i < 8; i++) x[i] = (unsigned char)(v >> (8 * i)); put(b, x, 8); }
static void f32(buf *b, float f) { uint32_t w; memcpy(&w, &f, 4); u32(b, w); }
static void str(buf *b, const char *s) { u64(b, strlen(s)); put(b, s, strlen(s)); }
static void key(buf *b, const char *k, uint32_t type) { str(b, k); u32(b, type); }
static void pad(buf *b, size_t a) { while (b->n % a) u8(b, 0); }

static void header(buf *b, uint64_t nt, uint64_t nkv)
{
    put(b, "GGUF", 4);
    u32(b, 3);
    u64(b, nt);
    u64(b, nkv);
}

static void tinfo(buf *b, const char *name, int nd, const int64_t *ne, uint32_t type, uint64_t off)
{
    str(b, name);
    u32(b, (uint32_t)nd);
    for (int i = 0; i < nd; i++) u64(b, (uint64_t)ne[i]);
    u32(b, type);
    u64(b, off);
}

/* The valid reference file: 8 keys, 3 tensors (F32 [4,2], Q8_0 [32,2], F16 [3]). */
static buf good(void)
{
    buf b = {0};
    header(&b, 3, 8);
    key(&b, "general.architecture", GGUF_STR); str(&b, "llama");
    key(&b, "general.alignment", GGUF_U32); u32(&b, 32);
    key(&b, "llama.block_count", GGUF_U32); u32(&b, 2);
    key(&b, "llama.attention.layer_norm_rms_epsilon", GGUF_F32); f32(&b, 1e-5f);
    key(&b, "tokenizer.ggml.add_bos_token", GGUF_BOOL); u8(&b, 1);
    key(&b, "neg", GGUF_I32); u32(&b, (uint32_t)-7);
    key(&b, "tokenizer.ggml.tokens", GGUF_ARR); u32(&b, GGUF_STR); u64(&b, 3);
    str(&b, "a"); str(&b, "\xc4\xa0the"); str(&b, "<|im_end|>");
    key(&b, "tokenizer.ggml.token_type", GGUF_ARR); u32(&b, GGUF_I32); u64(&b, 3);
    u32(&b, 1); u32(&b, 1); u32(&b, 3);
    int64_t ne_a[2] = {4, 2}, ne_b[2] = {32, 2}, ne_c[1] = {3};
    tinfo(&b, "a", 2, ne_a, 0, 0);          /* 32 bytes */
    tinfo(&b, "b", 2, ne_b, 8, 32);         /* 68 bytes -> next at 128 */
    tinfo(&b, "c", 1, ne_c, 1, 128);        /* 6 bytes */
    pad(&b, 32);
    for (int i = 0; i < 8; i++) f32(&b, (float)i);
    for (int i = 0; i < 68; i++) u8(&b, (uint8_t)i);
    pad(&b, 32);
    u32(&b, 0x40003c00); u8(&b, 0); u8(&b, 0xc0);   /* f16 1, 2, -2 */
    return b;
}

static void test_good(void)
{
    buf b = good();
    gguf_file *g;
    CHECK_INT(gguf_parse_buffer(b.p, b.n, "good.gguf", &g, &E), 0);
    if (!g) { free(b.p); return; }
    CHECK_INT(gguf_version(g), 3);
    CHECK_INT(gguf_alignment(g), 32);
    CHECK_INT(gguf_kv_count(g), 8);
    CHECK_INT(gguf_tensor_count(g), 3);
    const char *s;
    size_t n;
    int id = gguf_find_key(g, "general.architecture");
    CHECK_INT(id, 0);
    CHECK_INT(gguf_get_str(g, id, &s, &n, &E), 0);
    CHECK_STR(s, "llama");
    CHECK_INT(n, 5);
    uint32_t u;
    CHECK_INT(gguf_get_u32(g, gguf_find_key(g, "llama.block_count"), &u, &E), 0);
    CHECK_INT(u, 2);
    /* strict types: a u32 is not an i32, a string is not a u32 */
    int32_t i32;
    CHECK_INT(gguf_get_i32(g, gguf_find_key(g, "llama.block_count"), &i32, &E), -1);
    CHECK(strstr(E.msg, "has type u32, expected i32") != NULL);
    CHECK_INT(gguf_get_u32(g, 0, &u, &E), -1);
    CHECK_INT(gguf_get_u32(g, gguf_find_key(g, "missing"), &u, &E), -1);
    CHECK_INT(gguf_get_i32(g, gguf_find_key(g, "neg"), &i32, &E), 0);
    CHECK_INT(i32, -7);
    int64_t iv;
    CHECK_INT(gguf_get_int(g, gguf_find_key(g, "neg"), &iv, &E), 0);
    CHECK_INT(iv, -7);
    CHECK_INT(gguf_get_int(g, gguf_find_key(g, "llama.block_count"), &iv, &E), 0);
    CHECK_INT(iv, 2);
    float f;
    CHECK_INT(gguf_get_f32(g, gguf_find_key(g, "llama.attention.layer_norm_rms_epsilon"), &f, &E), 0);
    CHECK(f == 1e-5f);
    double d;
    CHECK_INT(gguf_get_num(g, gguf_find_key(g, "llama.block_count"), &d, &E), 0);
    CHECK(d == 2.0);
    int bo;
    CHECK_INT(gguf_get_bool(g, gguf_find_key(g, "tokenizer.ggml.add_bos_token"), &bo, &E), 0);
    CHECK_INT(bo, 1);

    int tk = gguf_find_key(g, "tokenizer.ggml.tokens");
    gguf_vtype et;
    uint64_t cnt;
    CHECK_INT(gguf_arr_info(g, tk, &et, &cnt, &E), 0);
    CHECK_INT(et, GGUF_STR);
    CHECK_INT(cnt, 3);
    CHECK_STR(gguf_arr_str(g, tk, 1, &n), "\xc4\xa0the");
    CHECK_INT(n, 5);
    CHECK_STR(gguf_arr_str(g, tk, 2, NULL), "<|im_end|>");
    CHECK(gguf_arr_str(g, tk, 3, NULL) == NULL);
    CHECK_INT(gguf_arr_int(g, tk, 0, &iv), -1);
    int tt = gguf_find_key(g, "tokenizer.ggml.token_type");
    CHECK_INT(gguf_arr_int(g, tt, 2, &iv), 0);
    CHECK_INT(iv, 3);
    CHECK_INT(gguf_arr_num(g, tt, 0, &d), 0);
    CHECK(d == 1.0);
    CHECK(gguf_arr_str(g, tt, 0, NULL) == NULL);
    CHECK(gguf_arr_data(g, tt) != NULL);
    CHECK_INT(gguf_arr_info(g, 0, &et, &cnt, &E), -1);

    const gguf_tensor *a = gguf_find_tensor(g, "a"), *tb = gguf_find_tensor(g, "b"), *c = gguf_find_tensor(g, "c");
    CHECK(a && tb && c && !gguf_find_tensor(g, "d"));
    if (a && tb && c) {
        CHECK_INT(a->n_dims, 2);
        CHECK_INT(a->ne[0], 4);
        CHECK_INT(a->ne[1], 2);
        CHECK_INT(a->ne[2], 1);
        CHECK_INT(a->nbytes, 32);
        CHECK(((const float *)a->data)[7] == 7.0f);
        CHECK_INT(tb->type, 8);
        CHECK_INT(tb->nbytes, 68);
        CHECK(((const unsigned char *)tb->data)[67] == 67);
        CHECK_INT(c->nbytes, 6);
        CHECK_INT(((const unsigned char *)c->data)[5], 0xc0);
        CHECK((size_t)((const unsigned char *)a->data - b.p) % 32 == 0);
        CHECK_INT(gguf_data_offset(g), (const unsigned char *)a->data - b.p);
    }
    CHECK_STR(gguf_tensor_at(g, 1)->name, "b");
    CHECK_STR(gguf_type_name(12), "Q4_K");
    CHECK_INT(gguf_type_block_bytes(14), 210);
    CHECK_INT(gguf_type_block_elems(4), 0);
    gguf_close(g);

    /* Through a file and mmap too. */
    const char *dir = check_tmpdir("test_gguf");
    char p[4096];
    fs_join(p, sizeof p, dir, "good.gguf");
    CHECK_INT(fs_write_atomic(p, b.p, b.n, 0644, &E), 0);
    CHECK_INT(gguf_open(p, &g, &E), 0);
    if (g) {
        CHECK_STR(gguf_path(g), p);
        CHECK(gguf_find_tensor(g, "c") != NULL);
        gguf_close(g);
    }
    /* Every truncation is refused cleanly. */
    int bad = 0;
    for (size_t cut = 0; cut < b.n; cut++) {
        gguf_file *t = NULL;
        if (gguf_parse_buffer(b.p, cut, "cut.gguf", &t, &E) == 0) bad++;
        gguf_close(t);
    }
    CHECK_INT(bad, 0);
    free(b.p);
}

static void refuse(buf *b, const char *want)
{
    gguf_file *g = NULL;
    err_clear(&E);
    int r = gguf_parse_buffer(b->p, b->n, "bad.gguf", &g, &E);
    CHECK_MSG(r == -1 && !g, "accepted (want '%s')", want);
    CHECK_MSG(strstr(E.msg, want) != NULL, "'%s' lacks '%s'", E.msg, want);
    gguf_close(g);
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* one tensor file with the given info fields and data size */
static buf one_tensor(const char *name, int nd, const int64_t *ne, uint32_t type, uint64_t off, size_t data)
{
    buf b = {0};
    header(&b, 1, 0);
    tinfo(&b, name, nd, ne, type, off);
    pad(&b, 32);
    for (size_t i = 0; i < data; i++) u8(&b, 0);
    return b;
}

static void test_refusals(void)
{
    buf b = {0};
    put(&b, "GGML", 4); u32(&b, 3); u64(&b, 0); u64(&b, 0);
    refuse(&b, "bad magic");
    put(&b, "GGUF", 4); u32(&b, 1); u64(&b, 0); u64(&b, 0);
    refuse(&b, "version 1");
    put(&b, "GGUF", 4); u32(&b, 0x03000000); u64(&b, 0); u64(&b, 0);
    refuse(&b, "big-endian");
    put(&b, "GGUF", 4); u32(&b, 4); u64(&b, 0); u64(&b, 0);
    refuse(&b, "version 4");
    header(&b, 0, 1ull << 60);
    refuse(&b, "key count");
    header(&b, UINT64_MAX, 0);
    refuse(&b, "tensor count");
    header(&b, 0, 1); u64(&b, 1ull << 40); put(&b, "abcdefghijklmnop", 16);
    refuse(&b, "string length");
    header(&b, 0, 1); key(&b, "", GGUF_U8); u8(&b, 0); put(&b, "pad-pad-pad-pad", 15);
    refuse(&b, "empty key");
    header(&b, 0, 2); key(&b, "k", GGUF_U8); u8(&b, 0); key(&b, "k", GGUF_U8); u8(&b, 1);
    put(&b, "pad-pad-pad-pad", 15);
    refuse(&b, "duplicate key 'k'");
    header(&b, 0, 1); key(&b, "k", 13); u64(&b, 0); put(&b, "pad-pad-pad-pad", 15);
    refuse(&b, "unknown value type 13");
    header(&b, 0, 1); key(&b, "k", GGUF_ARR); u32(&b, GGUF_ARR); u64(&b, 1); put(&b, "pad-pad-pad-pad", 15);
    refuse(&b, "nested arrays");
    header(&b, 0, 1); key(&b, "k", GGUF_ARR); u32(&b, GGUF_U32); u64(&b, 1ull << 62); put(&b, "pad-pad-pad-pad", 15);
    refuse(&b, "exceeds");
    header(&b, 0, 1); key(&b, "k", GGUF_ARR); u32(&b, GGUF_STR); u64(&b, 1000); put(&b, "pad-pad-pad-pad", 15);
    refuse(&b, "exceeds");
    header(&b, 0, 1); key(&b, "general.alignment", GGUF_U32); u32(&b, 48); put(&b, "pad-pad-pad-pad", 15);
    refuse(&b, "power of two");
    header(&b, 0, 1); key(&b, "general.alignment", GGUF_I32); u32(&b, 32); put(&b, "pad-pad-pad-pad", 15);
    refuse(&b, "expected u32");

    int64_t ne[5] = {32, 2, 1, 1, 1};
    b = one_tensor("t", 5, ne, 0, 0, 256);
    refuse(&b, "5 dimensions");
    b = one_tensor("t", 2, ne, 4, 0, 256);
    refuse(&b, "unknown ggml type 4");
    b = one_tensor("t", 2, ne, 99, 0, 256);
    refuse(&b, "unknown ggml type 99");
    int64_t ne31[2] = {31, 2};
    b = one_tensor("t", 2, ne31, 8, 0, 256);
    refuse(&b, "not a multiple of the block size 32");
    int64_t big[3] = {1ll << 40, 1ll << 40, 1};
    b = one_tensor("t", 3, big, 0, 0, 256);
    refuse(&b, "overflows");
    int64_t negd[2] = {-4, 2};
    b = one_tensor("t", 2, negd, 0, 0, 256);
    refuse(&b, "negative");
    b = one_tensor("t", 2, ne, 0, 16, 512);
    refuse(&b, "not a multiple of the alignment");
    b = one_tensor("t", 2, ne, 0, 0, 255);
    refuse(&b, "past the end");
    b = one_tensor("t", 2, ne, 0, 1ull << 62, 256);
    refuse(&b, "past the end");
    char longname[80];
    memset(longname, 'x', 64);
    longname[64] = 0;
    b = one_tensor(longname, 2, ne, 0, 0, 256);
    refuse(&b, "limit 63");
    /* duplicate tensor names; overlapping data */
    header(&b, 2, 0);
    tinfo(&b, "t", 2, ne, 0, 0);
    tinfo(&b, "t", 2, ne, 0, 256);
    pad(&b, 32);
    for (int i = 0; i < 512; i++) u8(&b, 0);
    refuse(&b, "duplicate tensor name 't'");
    header(&b, 2, 0);
    tinfo(&b, "t", 2, ne, 0, 0);
    tinfo(&b, "u", 2, ne, 0, 224);
    pad(&b, 32);
    for (int i = 0; i < 512; i++) u8(&b, 0);
    refuse(&b, "overlaps");
    /* v2 still readable; zero tensors need no data section */
    put(&b, "GGUF", 4); u32(&b, 2); u64(&b, 0); u64(&b, 1); key(&b, "k", GGUF_U8); u8(&b, 5);
    gguf_file *g;
    CHECK_INT(gguf_parse_buffer(b.p, b.n, "v2.gguf", &g, &E), 0);
    if (g) CHECK_INT(gguf_version(g), 2);
    gguf_close(g);
    free(b.p);
}

int main(void)
{
    test_good();
    test_refusals();
    return check_done();
}
