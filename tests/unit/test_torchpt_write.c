/* test_torchpt_write — util/torchpt against bytes the references write:
 *   - scalars: each value's opcodes as Python's pickle.dumps(v, 2) writes
 *     them (without the PROTO header, STOP and memo puts);
 *   - CRC-32: the standard check value of "123456789" (0xCBF43926);
 *   - the zip: PyTorchStreamWriter's layout (torch 2.15's torch.save of a
 *     dict with two tensors, tests/ref/r1801 loads dlm's files with torch):
 *     the entry names and order, each entry's bytes at a multiple of 64
 *     after an "FB" extra field, stored with a data descriptor, the CRC of
 *     each entry, the zip64 end record and locator and the end record;
 *   - a tensor's pickle as torch 2.15 writes it (the same opcodes, less
 *     its memo puts). */
#include "check.h"

#include <stdlib.h>
#include <string.h>

#include "util/torchpt.h"

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

/* the opcodes after "\x80\x02" of a writer that wrote one value */
static int same_ops(tpt *w, const char *hex)
{
    unsigned char want[256];
    size_t n = unhex(hex, want);
    int ok = w->pkl.len == n + 2 && !memcmp(w->pkl.buf + 2, want, n);
    if (!ok) {
        fprintf(stderr, "  got ");
        for (size_t i = 2; i < w->pkl.len; i++) fprintf(stderr, "%02x", (unsigned char)w->pkl.buf[i]);
        fprintf(stderr, "\n  want %s\n", hex);
    }
    tpt_free(w);
    tpt_init(w);
    return ok;
}

static void test_scalars(void)
{
    static const struct { int64_t v; const char *hex; } I[] = {
        {0, "4b00"}, {255, "4bff"}, {256, "4d0001"}, {65535, "4dffff"}, {65536, "4a00000100"},
        {-1, "4affffffff"}, {2147483647, "4affffff7f"}, {-2147483647 - 1, "4a00000080"},
        {2147483648LL, "8a050000008000"}, {1099511627776LL, "8a06000000000001"},
        {-1099511627776LL, "8a060000000000ff"}, {INT64_MAX, "8a08ffffffffffffff7f"},
        {INT64_MIN, "8a080000000000000080"},
    };
    tpt w;
    tpt_init(&w);
    for (size_t i = 0; i < sizeof I / sizeof I[0]; i++) {
        tpt_int(&w, I[i].v);
        CHECK_MSG(same_ops(&w, I[i].hex), "int %lld", (long long)I[i].v);
    }
    tpt_float(&w, 0.9);
    CHECK(same_ops(&w, "473feccccccccccccd"));
    tpt_float(&w, -2.5e-300);
    CHECK(same_ops(&w, "4781bac9a7b3b7302f"));
    tpt_str(&w, "\xc3\xa9");
    CHECK(same_ops(&w, "5802000000c3a9"));
    tpt_none(&w);
    CHECK(same_ops(&w, "4e"));
    tpt_bool(&w, 1);
    CHECK(same_ops(&w, "88"));
    tpt_bool(&w, 0);
    CHECK(same_ops(&w, "89"));
    tpt_free(&w);
}

static void test_crc(void)
{
    CHECK_INT(tpt_crc32(0, "123456789", 9), 0xCBF43926u);
    /* continued = whole */
    CHECK_INT(tpt_crc32(tpt_crc32(0, "1234", 4), "56789", 5), 0xCBF43926u);
}

static uint32_t rd(const unsigned char *p, int n)
{
    uint32_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void test_zip(void)
{
    /* torch.save({'t': torch.arange(3.), 's': torch.tensor(4.)}) less the memo puts */
    float t[3] = {0, 1, 2}, s = 4;
    int64_t sh = 3;
    tpt w;
    tpt_init(&w);
    tpt_dict_begin(&w);
    tpt_str(&w, "t");
    tpt_tensor(&w, TPT_F32, t, 1, &sh);
    tpt_str(&w, "s");
    tpt_tensor(&w, TPT_F32, &s, 0, NULL);
    tpt_dict_end(&w);
    /* torch 2.15's data.pkl of that dict with its BINPUT/BINGET memo
     * opcodes taken out (a memo is a size optimisation only) */
    static const char TORCH[] =
        "7d2858010000007463746f7263682e5f7574696c730a5f72656275696c645f74656e736f725f76320a282858070000007374"
        "6f7261676563746f7263680a466c6f617453746f726167650a58010000003058030000006370754b0374514b004b03854b01"
        "858963636f6c6c656374696f6e730a4f726465726564446963740a2952745258010000007363746f7263682e5f7574696c73"
        "0a5f72656275696c645f74656e736f725f76320a2828580700000073746f7261676563746f7263680a466c6f617453746f72"
        "6167650a58010000003158030000006370754b0174514b0029298963636f6c6c656374696f6e730a4f726465726564446963"
        "740a2952745275";
    unsigned char want[700];
    size_t nw = unhex(TORCH, want);
    CHECK(w.pkl.len == nw + 2 && !memcmp(w.pkl.buf + 2, want, nw));
    strbuf out = {0};
    dlm_err e;
    CHECK_INT(tpt_finish(&w, &out, &e), 0);
    tpt_free(&w);
    const unsigned char *z = (const unsigned char *)out.buf;
    static const char *const NAMES[] = {"archive/data.pkl", "archive/.format_version", "archive/.storage_alignment",
                                        "archive/byteorder", "archive/data/0", "archive/data/1",
                                        "archive/version", "archive/.data/serialization_id"};
    size_t off = 0;
    uint32_t crcs[8], offs[8];
    for (int i = 0; i < 8; i++) {
        CHECK_INT(rd(z + off, 4), 0x04034b50u);
        CHECK_INT(rd(z + off + 6, 2), 0x0808);    /* data descriptor + UTF-8 names, as miniz */
        CHECK_INT(rd(z + off + 8, 2), 0);         /* stored */
        uint32_t nl = rd(z + off + 26, 2), xl = rd(z + off + 28, 2);
        CHECK(nl == strlen(NAMES[i]) && !memcmp(z + off + 30, NAMES[i], nl));
        CHECK(z[off + 30 + nl] == 'F' && z[off + 31 + nl] == 'B' && rd(z + off + 32 + nl, 2) == xl - 4);
        size_t data = off + 30 + nl + xl;
        CHECK_MSG(data % 64 == 0, "%s at %zu", NAMES[i], data);
        /* the data descriptor after the bytes: find it by the size */
        const unsigned char *dd = NULL;
        size_t len = 0;
        for (size_t k = 0; k + 16 <= out.len - data; k++)
            if (rd(z + data + k, 4) == 0x08074b50u && rd(z + data + k + 8, 4) == k) { dd = z + data + k; len = k; break; }
        CHECK(dd != NULL);
        if (!dd) break;
        crcs[i] = rd(dd + 4, 4);
        offs[i] = (uint32_t)off;
        CHECK_INT(crcs[i], tpt_crc32(0, z + data, len));
        if (i == 1) CHECK(len == 1 && z[data] == '1');
        if (i == 2) CHECK(len == 2 && !memcmp(z + data, "64", 2));
        if (i == 3) CHECK(len == 6 && !memcmp(z + data, "little", 6));
        if (i == 4) CHECK(len == 12 && !memcmp(z + data, t, 12));
        if (i == 5) CHECK(len == 4 && !memcmp(z + data, &s, 4));
        if (i == 6) CHECK(len == 2 && !memcmp(z + data, "3\n", 2));
        if (i == 7) CHECK(len == 40);
        off = (size_t)(dd - z) + 16;
    }
    /* central directory, zip64 end record + locator, end record */
    size_t cd = off;
    for (int i = 0; i < 8; i++) {
        CHECK_INT(rd(z + off, 4), 0x02014b50u);
        CHECK_INT(rd(z + off + 16, 4), crcs[i]);
        CHECK_INT(rd(z + off + 42, 4), offs[i]);
        off += 46 + rd(z + off + 28, 2);
    }
    CHECK_INT(rd(z + off, 4), 0x06064b50u);
    CHECK_INT(rd(z + off + 12, 2), 0x031e);
    CHECK_INT(rd(z + off + 24, 4), 8);
    CHECK_INT(rd(z + off + 48, 4), cd);
    size_t z64 = off;
    off += 56;
    CHECK_INT(rd(z + off, 4), 0x07064b50u);
    CHECK_INT(rd(z + off + 8, 4), z64);
    off += 20;
    CHECK_INT(rd(z + off, 4), 0x06054b50u);
    CHECK_INT(rd(z + off + 10, 2), 8);
    CHECK_INT(rd(z + off + 16, 4), cd);
    CHECK_INT(off + 22, out.len);
    sb_free(&out);
}

static void test_unbalanced(void)
{
    tpt w;
    tpt_init(&w);
    tpt_dict_begin(&w);
    strbuf out = {0};
    dlm_err e;
    CHECK_INT(tpt_finish(&w, &out, &e), -1);
    tpt_free(&w);
    sb_free(&out);
}

int main(void)
{
    test_scalars();
    test_crc();
    test_zip();
    test_unbalanced();
    return check_done();
}
