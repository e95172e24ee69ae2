#include "util/torchpt.h"

#include <stdlib.h>
#include <string.h>

#include "util/hash.h"

/* ---- pickle protocol 2 opcodes (Lib/pickle.py) -------------------------- */
enum {
    P_PROTO = 0x80, P_STOP = '.', P_NONE = 'N', P_TRUE = 0x88, P_FALSE = 0x89,
    P_BININT1 = 'K', P_BININT2 = 'M', P_BININT = 'J', P_LONG1 = 0x8a, P_BINFLOAT = 'G',
    P_BINUNICODE = 'X', P_EMPTY_DICT = '}', P_SETITEMS = 'u', P_EMPTY_LIST = ']', P_APPENDS = 'e',
    P_MARK = '(', P_TUPLE = 't', P_EMPTY_TUPLE = ')', P_GLOBAL = 'c', P_REDUCE = 'R', P_BINPERSID = 'Q',
};

static void put(tpt *w, const void *p, size_t n)
{
    if (!w->oom && sb_append(&w->pkl, p, n)) w->oom = 1;
}
static void put1(tpt *w, int c)
{
    unsigned char b = (unsigned char)c;
    put(w, &b, 1);
}
static void put_le(tpt *w, uint64_t v, int n)
{
    unsigned char b[8];
    for (int i = 0; i < n; i++) b[i] = (unsigned char)(v >> 8 * i);
    put(w, b, (size_t)n);
}
static void put_global(tpt *w, const char *module, const char *name)
{
    put1(w, P_GLOBAL);
    put(w, module, strlen(module));
    put1(w, '\n');
    put(w, name, strlen(name));
    put1(w, '\n');
}

void tpt_init(tpt *w)
{
    memset(w, 0, sizeof *w);
    put1(w, P_PROTO);
    put1(w, 2);
}

void tpt_free(tpt *w)
{
    sb_free(&w->pkl);
    free(w->st);
    memset(w, 0, sizeof *w);
}

/* one more value in the innermost open container */
static void item(tpt *w)
{
    if (w->depth > 0) w->open[w->depth - 1].n++;
}

void tpt_none(tpt *w) { item(w); put1(w, P_NONE); }
void tpt_bool(tpt *w, int v) { item(w); put1(w, v ? P_TRUE : P_FALSE); }

static void put_int(tpt *w, int64_t v)
{
    if (v >= 0 && v < 256) {
        put1(w, P_BININT1);
        put1(w, (int)v);
    } else if (v >= 0 && v < 65536) {
        put1(w, P_BININT2);
        put_le(w, (uint64_t)v, 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        put1(w, P_BININT);
        put_le(w, (uint64_t)(uint32_t)(int32_t)v, 4);
    } else {
        /* LONG1: the shortest little-endian two's complement, as
         * pickle.encode_long */
        uint64_t u = (uint64_t)v;
        int n = 8;
        while (n > 1) {
            int top = (int)(u >> (8 * (n - 1)) & 0xff), next_sign = (int)(u >> (8 * (n - 1) - 1) & 1);
            if ((top == 0 && !next_sign) || (top == 0xff && next_sign)) n--;
            else break;
        }
        put1(w, P_LONG1);
        put1(w, n);
        put_le(w, u, n);
    }
}

void tpt_int(tpt *w, int64_t v)
{
    item(w);
    put_int(w, v);
}

void tpt_float(tpt *w, double v)
{
    item(w);
    uint64_t u;
    memcpy(&u, &v, 8);
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(u >> (56 - 8 * i));   /* big-endian */
    put1(w, P_BINFLOAT);
    put(w, b, 8);
}

static void put_str(tpt *w, const char *s)
{
    size_t n = strlen(s);
    put1(w, P_BINUNICODE);
    put_le(w, n, 4);
    put(w, s, n);
}

void tpt_str(tpt *w, const char *s)
{
    item(w);
    put_str(w, s);
}

/* begin: the container's opcode (none for a tuple), then a MARK that the
 * end drops again when Python writes no MARK for that many values */
static void open_c(tpt *w, int op)
{
    item(w);
    if (op) put1(w, op);
    if (w->depth == (int)(sizeof w->open / sizeof w->open[0])) { w->bad = 1; return; }
    w->open[w->depth].mark = w->pkl.len;
    w->open[w->depth].n = 0;
    w->depth++;
    put1(w, P_MARK);
}

/* end: n values since the MARK; one_op for exactly `one` value (SETITEM
 * after a pair, APPEND, TUPLE1), many_op otherwise; an empty container
 * is its opcode alone (the tuple: EMPTY_TUPLE) */
static int close_c(tpt *w)
{
    if (w->depth == 0) { w->bad = 1; return -1; }
    w->depth--;
    int n = w->open[w->depth].n;
    if (w->oom) return n;
    size_t mk = w->open[w->depth].mark;
    /* drop the MARK byte */
    memmove(w->pkl.buf + mk, w->pkl.buf + mk + 1, w->pkl.len - mk - 1);
    w->pkl.len--;
    return n;
}

void tpt_dict_begin(tpt *w) { open_c(w, P_EMPTY_DICT); }
void tpt_dict_end(tpt *w)
{
    int n = w->depth > 0 ? w->open[w->depth - 1].n : 0;
    if (n == 0 || n == 2) close_c(w);
    else w->depth--;
    if (n == 2) put1(w, 's');   /* SETITEM */
    else if (n > 0) put1(w, P_SETITEMS);
    if (n % 2) w->bad = 1;
}
void tpt_list_begin(tpt *w) { open_c(w, P_EMPTY_LIST); }
void tpt_list_end(tpt *w)
{
    int n = w->depth > 0 ? w->open[w->depth - 1].n : 0;
    if (n <= 1) close_c(w);
    else w->depth--;
    if (n == 1) put1(w, 'a');   /* APPEND */
    else if (n > 1) put1(w, P_APPENDS);
}
void tpt_tuple_begin(tpt *w) { open_c(w, 0); }
void tpt_tuple_end(tpt *w)
{
    int n = w->depth > 0 ? w->open[w->depth - 1].n : 0;
    if (n <= 3) close_c(w);
    else w->depth--;
    static const int SMALL[4] = {P_EMPTY_TUPLE, 0x85, 0x86, 0x87};   /* TUPLE1..3 */
    put1(w, n <= 3 ? SMALL[n] : P_TUPLE);
}

static const char *const STORAGE[] = {"FloatStorage", "LongStorage", "ByteStorage"};
static const size_t ELEM[] = {4, 8, 1};

void tpt_tensor(tpt *w, tpt_dtype dt, const void *data, int ndim, const int64_t *shape)
{
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= (size_t)shape[i];
    if (w->n_st == w->cap_st) {
        int cap = w->cap_st ? 2 * w->cap_st : 16;
        tpt_storage *p = realloc(w->st, (size_t)cap * sizeof *p);
        if (!p) { w->oom = 1; return; }
        w->st = p;
        w->cap_st = cap;
    }
    int key = w->n_st;
    w->st[w->n_st++] = (tpt_storage){dt, data, numel};
    char ks[16];
    snprintf(ks, sizeof ks, "%d", key);
    /* _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks) */
    put_global(w, "torch._utils", "_rebuild_tensor_v2");
    tpt_tuple_begin(w);   /* the arguments: the one value the parent counts */
    tpt_tuple_begin(w);
    put_str(w, "storage"), item(w);
    put_global(w, "torch", STORAGE[dt]), item(w);
    put_str(w, ks), item(w);
    put_str(w, "cpu"), item(w);
    put_int(w, (int64_t)numel), item(w);
    tpt_tuple_end(w);
    put1(w, P_BINPERSID);
    tpt_int(w, 0);
    tpt_tuple_begin(w);
    for (int i = 0; i < ndim; i++) tpt_int(w, shape[i]);
    tpt_tuple_end(w);
    tpt_tuple_begin(w);
    for (int i = 0; i < ndim; i++) {   /* contiguous, row-major */
        int64_t s = 1;
        for (int j = i + 1; j < ndim; j++) s *= shape[j];
        tpt_int(w, s);
    }
    tpt_tuple_end(w);
    tpt_bool(w, 0);
    put_global(w, "collections", "OrderedDict"), item(w);
    put1(w, P_EMPTY_TUPLE);
    put1(w, P_REDUCE);
    tpt_tuple_end(w);
    put1(w, P_REDUCE);
}

/* ---- CRC-32 ------------------------------------------------------------- */
static uint32_t crc_table[256];
static int crc_ready;

uint32_t tpt_crc32(uint32_t crc, const void *p, size_t n)
{
    if (!crc_ready) {   /* idempotent: racing initialisers write the same values */
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            crc_table[i] = c;
        }
        crc_ready = 1;
    }
    const unsigned char *b = p;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* ---- the zip (caffe2/serialize/inline_container.cc over miniz) ------------ */
enum { ALIGN = 64, LOCAL_HDR = 30, CENTRAL_HDR = 46 };

typedef struct zent {
    char name[64];
    uint32_t crc, size;
    uint64_t off;
} zent;

static int zput_le(strbuf *o, uint64_t v, int n)
{
    unsigned char b[8];
    for (int i = 0; i < n; i++) b[i] = (unsigned char)(v >> 8 * i);
    return sb_append(o, b, (size_t)n);
}

/* One stored entry: local header with the 'FB' padding extra that puts the
 * bytes at a multiple of 64, the bytes, the data descriptor. */
static int zip_entry(strbuf *o, zent *z, const char *name, const void *p, size_t n)
{
    snprintf(z->name, sizeof z->name, "archive/%s", name);
    size_t nl = strlen(z->name);
    z->off = o->len;
    z->crc = tpt_crc32(0, p, n);
    z->size = (uint32_t)n;
    size_t start = o->len + LOCAL_HDR + nl + 4, pad = (ALIGN - start % ALIGN) % ALIGN;
    int rc = zput_le(o, 0x04034b50, 4) | zput_le(o, 0, 2) | zput_le(o, 0x0808, 2) | zput_le(o, 0, 2) |
             zput_le(o, 0, 4) /* time, date */ | zput_le(o, 0, 4) | zput_le(o, 0, 4) | zput_le(o, 0, 4) |
             zput_le(o, nl, 2) | zput_le(o, pad + 4, 2) | sb_append(o, z->name, nl) | sb_append(o, "FB", 2) |
             zput_le(o, pad, 2);
    for (size_t i = 0; i < pad && !rc; i++) rc = sb_putc(o, 'Z');
    rc |= sb_append(o, p, n);
    rc |= zput_le(o, 0x08074b50, 4) | zput_le(o, z->crc, 4) | zput_le(o, n, 4) | zput_le(o, n, 4);
    return rc;
}

int tpt_finish(tpt *w, strbuf *out, dlm_err *e)
{
    if (w->depth != 0 || w->bad)
        return err_set(e, "InternalError", "torchpt: unbalanced containers (%d open) or a dict of odd length", w->depth);
    put1(w, P_STOP);
    if (w->oom) return err_set(e, "MemoryError", "out of memory writing a torch pickle");
    size_t total = w->pkl.len;
    for (int i = 0; i < w->n_st; i++) total += w->st[i].numel * ELEM[w->st[i].dtype];
    if (total >= 0xFFFFFFF0u) return err_set(e, "ValueError", "torchpt: %zu bytes is past a 32-bit zip", total);
    int n_ent = w->n_st + 6;
    zent *z = calloc((size_t)n_ent, sizeof *z);
    if (!z) return err_set(e, "MemoryError", "out of memory");
    size_t base = out->len;
    int k = 0, rc = 0;
    rc |= zip_entry(out, &z[k++], "data.pkl", w->pkl.buf, w->pkl.len);
    rc |= zip_entry(out, &z[k++], ".format_version", "1", 1);
    rc |= zip_entry(out, &z[k++], ".storage_alignment", "64", 2);
    rc |= zip_entry(out, &z[k++], "byteorder", "little", 6);
    sha256_ctx hc;
    sha256_init(&hc);
    sha256_update(&hc, w->pkl.buf, w->pkl.len);
    for (int i = 0; i < w->n_st; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "data/%d", i);
        size_t nb = w->st[i].numel * ELEM[w->st[i].dtype];
        rc |= zip_entry(out, &z[k++], nm, nb ? w->st[i].data : "", nb);
        sha256_update(&hc, nb ? w->st[i].data : "", nb);
    }
    rc |= zip_entry(out, &z[k++], "version", "3\n", 2);
    /* torch draws 40 random digits; these are the contents' sha256 as two
     * 20-digit numbers, so the same state is the same file */
    unsigned char d[32];
    sha256_final(&hc, d);
    uint64_t a = 0, b = 0;
    for (int i = 0; i < 8; i++) a = a << 8 | d[i], b = b << 8 | d[8 + i];
    char sid[48];
    snprintf(sid, sizeof sid, "%020llu%020llu", (unsigned long long)a, (unsigned long long)b);
    rc |= zip_entry(out, &z[k++], ".data/serialization_id", sid, 40);
    size_t cd = out->len;
    for (int i = 0; i < k && !rc; i++) {
        size_t nl = strlen(z[i].name);
        rc |= zput_le(out, 0x02014b50, 4) | zput_le(out, 0, 2) | zput_le(out, 0, 2) | zput_le(out, 0x0808, 2) |
              zput_le(out, 0, 2) | zput_le(out, 0, 4) | zput_le(out, z[i].crc, 4) | zput_le(out, z[i].size, 4) |
              zput_le(out, z[i].size, 4) | zput_le(out, nl, 2) | zput_le(out, 0, 2) | zput_le(out, 0, 2) |
              zput_le(out, 0, 2) | zput_le(out, 0, 2) | zput_le(out, 0, 4) | zput_le(out, z[i].off - base, 4) |
              sb_append(out, z[i].name, nl);
    }
    size_t cd_size = out->len - cd, z64 = out->len;
    /* zip64 end of central directory record and locator, then the classic end record */
    rc |= zput_le(out, 0x06064b50, 4) | zput_le(out, 44, 8) | zput_le(out, 0x031e, 2) | zput_le(out, 0x2d, 2) |
          zput_le(out, 0, 4) | zput_le(out, 0, 4) | zput_le(out, (uint64_t)k, 8) | zput_le(out, (uint64_t)k, 8) |
          zput_le(out, cd_size, 8) | zput_le(out, cd - base, 8);
    rc |= zput_le(out, 0x07064b50, 4) | zput_le(out, 0, 4) | zput_le(out, z64 - base, 8) | zput_le(out, 1, 4);
    rc |= zput_le(out, 0x06054b50, 4) | zput_le(out, 0, 2) | zput_le(out, 0, 2) | zput_le(out, (uint64_t)k, 2) |
          zput_le(out, (uint64_t)k, 2) | zput_le(out, cd_size, 4) | zput_le(out, cd - base, 4) | zput_le(out, 0, 2);
    free(z);
    if (rc) return err_set(e, "MemoryError", "out of memory writing a torch zip");
    return 0;
}
