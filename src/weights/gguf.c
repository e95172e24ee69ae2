/* gguf — reader. See gguf.h for the format and the rules enforced.
 *
 * Parsing is a single forward pass with a bounds-checked cursor: every
 * count is compared with the bytes left before anything is reserved for it,
 * so memory use is bounded by a small multiple of the file size whatever
 * the header claims. */
#include "weights/gguf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define KIND "GGUFError"

/* ---- type tables ------------------------------------------------------------ */

static const size_t VSIZE[GGUF_VTYPE_COUNT] = {
    [GGUF_U8] = 1, [GGUF_I8] = 1, [GGUF_U16] = 2, [GGUF_I16] = 2, [GGUF_U32] = 4,
    [GGUF_I32] = 4, [GGUF_F32] = 4, [GGUF_BOOL] = 1, [GGUF_STR] = 0, [GGUF_ARR] = 0,
    [GGUF_U64] = 8, [GGUF_I64] = 8, [GGUF_F64] = 8,
};
static const char *const VNAME[GGUF_VTYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64",
};

size_t gguf_vtype_size(gguf_vtype t) { return (unsigned)t < GGUF_VTYPE_COUNT ? VSIZE[t] : 0; }
const char *gguf_vtype_name(gguf_vtype t) { return (unsigned)t < GGUF_VTYPE_COUNT ? VNAME[t] : "?"; }

/* ggml's type enum (docs/reference/formats.md §4.2): {name, block elems, block bytes};
 * removed ids have no entry. */
#define NTYPES 43
static const struct { const char *name; unsigned elems, bytes; } TYPES[NTYPES] = {
    [0] = {"F32", 1, 4},          [1] = {"F16", 1, 2},          [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},       [6] = {"Q5_0", 32, 22},       [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},       [9] = {"Q8_1", 32, 36},       [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110},    [12] = {"Q4_K", 256, 144},    [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},    [15] = {"Q8_K", 256, 292},    [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74},   [18] = {"IQ3_XXS", 256, 98},  [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18},    [21] = {"IQ3_S", 256, 110},   [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136},  [24] = {"I8", 1, 1},          [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},         [27] = {"I64", 1, 8},         [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56},    [30] = {"BF16", 1, 2},        [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66},    [39] = {"MXFP4", 32, 17},     [40] = {"NVFP4", 64, 36},
    [41] = {"Q1_0", 128, 18},     [42] = {"Q2_0", 64, 18},
};

size_t gguf_type_block_elems(int t) { return t >= 0 && t < NTYPES ? TYPES[t].elems : 0; }
size_t gguf_type_block_bytes(int t) { return t >= 0 && t < NTYPES ? TYPES[t].bytes : 0; }
const char *gguf_type_name(int t) { return t >= 0 && t < NTYPES && TYPES[t].name ? TYPES[t].name : "?"; }

/* ---- the handle -------------------------------------------------------------- */

typedef struct gguf_kv {
    uint64_t key_off;               /* arena offset until fix-up */
    const char *key;
    gguf_vtype type;
    union { uint64_t u; int64_t i; double d; } v;   /* scalars, sign/zero-extended */
    uint64_t str_off;               /* STR: arena offset */
    size_t str_len;
    const char *str;
    gguf_vtype elem;                /* ARR */
    uint64_t count;
    const unsigned char *raw;       /* numeric ARR elements in the file */
    uint64_t sidx;                  /* string ARR: first index in strs */
} gguf_kv;

typedef struct gguf_sref { uint64_t off; size_t len; } gguf_sref;
typedef struct gguf_sidx { const char *s; uint64_t off; int i; } gguf_sidx;

struct gguf_file {
    const unsigned char *base;
    size_t len;
    int mapped;
    char *path;
    uint32_t version, align;
    uint64_t data_off;
    gguf_kv *kv;
    int nkv;
    gguf_sidx *kv_sorted;      /* by key */
    gguf_tensor *t;
    uint64_t *t_name_off;
    int nt;
    gguf_sidx *t_sorted;       /* by name */
    char *arena;
    size_t arena_len, arena_cap;
    gguf_sref *strs;                /* elements of every string array */
    uint64_t nstrs, strs_cap;
};

void gguf_close(gguf_file *g)
{
    if (!g) return;
    if (g->mapped) munmap((void *)g->base, g->len);
    free(g->path);
    free(g->kv);
    free(g->kv_sorted);
    free(g->t);
    free(g->t_name_off);
    free(g->t_sorted);
    free(g->arena);
    free(g->strs);
    free(g);
}

uint32_t gguf_version(const gguf_file *g) { return g->version; }
uint32_t gguf_alignment(const gguf_file *g) { return g->align; }
uint64_t gguf_data_offset(const gguf_file *g) { return g->data_off; }
const char *gguf_path(const gguf_file *g) { return g->path ? g->path : ""; }
int gguf_kv_count(const gguf_file *g) { return g->nkv; }
int gguf_tensor_count(const gguf_file *g) { return g->nt; }

/* ---- cursor ---------------------------------------------------------------- */

typedef struct rd {
    const unsigned char *p;
    size_t len, pos;
    const char *label;
    dlm_err *e;
} rd;

static int fail(rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(rd *r, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return err_at(r->e, KIND, r->label, 0, 0, "%s (at byte %zu)", msg, r->pos);
}

static size_t left(const rd *r) { return r->len - r->pos; }

static int rd_raw(rd *r, void *dst, size_t n, const char *what)
{
    if (left(r) < n) return fail(r, "truncated file: %s needs %zu bytes, %zu left", what, n, left(r));
    memcpy(dst, r->p + r->pos, n);
    r->pos += n;
    return 0;
}

static uint64_t le(const unsigned char *b, size_t n)
{
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | b[i];
    return v;
}

static int rd_u32(rd *r, uint32_t *out, const char *what)
{
    unsigned char b[4];
    if (rd_raw(r, b, 4, what)) return -1;
    *out = (uint32_t)le(b, 4);
    return 0;
}

static int rd_u64(rd *r, uint64_t *out, const char *what)
{
    unsigned char b[8];
    if (rd_raw(r, b, 8, what)) return -1;
    *out = le(b, 8);
    return 0;
}

static int arena_put(gguf_file *g, const unsigned char *s, size_t n, uint64_t *off, dlm_err *e)
{
    if (g->arena_len + n + 1 > g->arena_cap) {
        size_t nc = g->arena_cap ? g->arena_cap : 4096;
        while (nc < g->arena_len + n + 1) nc *= 2;
        char *na = realloc(g->arena, nc);
        if (!na) return err_set(e, "MemoryError", "out of memory reading GGUF strings");
        g->arena = na;
        g->arena_cap = nc;
    }
    *off = g->arena_len;
    memcpy(g->arena + g->arena_len, s, n);
    g->arena[g->arena_len + n] = 0;
    g->arena_len += n + 1;
    return 0;
}

/* A gguf_string: u64 length (checked against the bytes left), then bytes. */
static int rd_str(rd *r, gguf_file *g, uint64_t *off, size_t *len, const char *what)
{
    uint64_t n;
    if (rd_u64(r, &n, what)) return -1;
    if (n > left(r)) return fail(r, "%s: string length %llu exceeds the %zu bytes left", what, (unsigned long long)n, left(r));
    if (arena_put(g, r->p + r->pos, (size_t)n, off, r->e)) return -1;
    r->pos += (size_t)n;
    *len = (size_t)n;
    return 0;
}

/* ---- parsing ------------------------------------------------------------------ */

static int read_scalar(rd *r, gguf_vtype t, gguf_kv *kv, const char *what)
{
    unsigned char b[8];
    size_t n = VSIZE[t];
    if (rd_raw(r, b, n, what)) return -1;
    uint64_t u = le(b, n);
    switch (t) {
    case GGUF_I8: kv->v.i = (int8_t)u; break;
    case GGUF_I16: kv->v.i = (int16_t)u; break;
    case GGUF_I32: kv->v.i = (int32_t)u; break;
    case GGUF_I64: kv->v.i = (int64_t)u; break;
    case GGUF_F32: { float f; uint32_t w = (uint32_t)u; memcpy(&f, &w, 4); kv->v.d = f; break; }
    case GGUF_F64: { double d; memcpy(&d, &u, 8); kv->v.d = d; break; }
    default: kv->v.u = u;
    }
    return 0;
}

static int read_kv(rd *r, gguf_file *g, gguf_kv *kv)
{
    size_t klen;
    if (rd_str(r, g, &kv->key_off, &klen, "key")) return -1;
    /* the arena may move while this key's strings are read: re-derive */
#define key (g->arena + kv->key_off)
    if (klen == 0) return fail(r, "empty key");
    if (strlen(key) != klen) return fail(r, "key contains a NUL byte");
    uint32_t t;
    if (rd_u32(r, &t, key)) return -1;
    if (t >= GGUF_VTYPE_COUNT) return fail(r, "key '%s': unknown value type %u", key, t);
    kv->type = (gguf_vtype)t;
    if (t == GGUF_STR) return rd_str(r, g, &kv->str_off, &kv->str_len, key);
    if (t != GGUF_ARR) return read_scalar(r, kv->type, kv, key);

    uint32_t et;
    if (rd_u32(r, &et, key) || rd_u64(r, &kv->count, key)) return -1;
    if (et >= GGUF_VTYPE_COUNT) return fail(r, "key '%s': unknown array element type %u", key, et);
    if (et == GGUF_ARR) return fail(r, "key '%s': nested arrays are not allowed", key);
    kv->elem = (gguf_vtype)et;
    if (et != GGUF_STR) {
        size_t es = VSIZE[et];
        if (kv->count > left(r) / es)
            return fail(r, "key '%s': array of %llu elements exceeds the %zu bytes left", key, (unsigned long long)kv->count, left(r));
        kv->raw = r->p + r->pos;
        r->pos += (size_t)kv->count * es;
        return 0;
    }
    /* each string takes at least its 8-byte length */
    if (kv->count > left(r) / 8)
        return fail(r, "key '%s': array of %llu strings exceeds the %zu bytes left", key, (unsigned long long)kv->count, left(r));
    if (g->nstrs + kv->count > g->strs_cap) {
        uint64_t nc = g->strs_cap ? g->strs_cap : 256;
        while (nc < g->nstrs + kv->count) nc *= 2;
        gguf_sref *ns = realloc(g->strs, (size_t)nc * sizeof *ns);
        if (!ns) return err_set(r->e, "MemoryError", "out of memory reading GGUF string array");
        g->strs = ns;
        g->strs_cap = nc;
    }
    kv->sidx = g->nstrs;
    for (uint64_t i = 0; i < kv->count; i++) {
        gguf_sref *s = &g->strs[g->nstrs];
        if (rd_str(r, g, &s->off, &s->len, key)) return -1;
        g->nstrs++;
    }
    return 0;
}
#undef key

/* Sorted views (by name, by offset) without any global sort context. */
static int cmp_by_name(const void *a, const void *b)
{
    return strcmp(((const gguf_sidx *)a)->s, ((const gguf_sidx *)b)->s);
}

static int cmp_by_off(const void *a, const void *b)
{
    uint64_t x = ((const gguf_sidx *)a)->off, y = ((const gguf_sidx *)b)->off;
    return x < y ? -1 : x > y;
}

static gguf_sidx *sorted(int n, dlm_err *e)
{
    gguf_sidx *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) err_set(e, "MemoryError", "out of memory");
    return v;
}

static int parse_tensor_info(rd *r, gguf_file *g, int i)
{
    gguf_tensor *t = &g->t[i];
    size_t nlen;
    if (rd_str(r, g, &g->t_name_off[i], &nlen, "tensor name")) return -1;
    const char *name = g->arena + g->t_name_off[i];
    if (nlen == 0 || strlen(name) != nlen) return fail(r, "tensor %d: empty name or NUL byte in it", i);
    if (nlen >= GGUF_MAX_NAME)
        return fail(r, "tensor '%s': name is %zu bytes (limit %d)", name, nlen, GGUF_MAX_NAME - 1);
    uint32_t nd, type;
    if (rd_u32(r, &nd, name)) return -1;
    if (nd > GGUF_MAX_DIMS) return fail(r, "tensor '%s': %u dimensions (max %d)", name, nd, GGUF_MAX_DIMS);
    t->n_dims = (int)nd;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t v;
        if (rd_u64(r, &v, name)) return -1;
        if (v > (uint64_t)INT64_MAX) return fail(r, "tensor '%s': dimension %u is negative", name, d);
        t->ne[d] = (int64_t)v;
    }
    if (rd_u32(r, &type, name) || rd_u64(r, &t->offset, name)) return -1;
    if (type >= NTYPES || !TYPES[type].name)
        return fail(r, "tensor '%s': unknown ggml type %u", name, type);
    t->type = (int)type;
    /* element count, then bytes, overflow-checked */
    int64_t nel = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        if (t->ne[d] && nel > INT64_MAX / t->ne[d])
            return fail(r, "tensor '%s': element count overflows", name);
        nel *= t->ne[d];
    }
    unsigned be = TYPES[type].elems, bb = TYPES[type].bytes;
    if (t->ne[0] % be)
        return fail(r, "tensor '%s': ne[0] = %lld is not a multiple of the block size %u", name,
                    (long long)t->ne[0], be);
    uint64_t row = (uint64_t)(t->ne[0] / be) * bb;
    uint64_t nb = row;
    for (int d = 1; d < GGUF_MAX_DIMS; d++) {
        if (t->ne[d] && nb > UINT64_MAX / (uint64_t)t->ne[d])
            return fail(r, "tensor '%s': byte size overflows", name);
        nb *= (uint64_t)t->ne[d];
    }
    t->nbytes = nb;
    return 0;
}

static int parse(gguf_file *g, const char *label, dlm_err *e)
{
    rd r = {g->base, g->len, 0, label, e};
    char magic[4];
    if (g->len < 4 || memcmp(g->base, GGUF_MAGIC, 4)) {
        err_at(e, KIND, label, 0, 0, "not a GGUF file (bad magic)");
        return err_hint(e, "expected a llama.cpp GGUF model file");
    }
    if (rd_raw(&r, magic, 4, "magic") || rd_u32(&r, &g->version, "version")) return -1;
    if (g->version == 0x03000000u || g->version == 0x02000000u)
        return err_at(e, KIND, label, 0, 0, "big-endian GGUF files are not supported");
    if (g->version == 1) return err_at(e, KIND, label, 0, 0, "GGUF version 1 is not supported (too old)");
    if (g->version != 2 && g->version != 3)
        return err_at(e, KIND, label, 0, 0, "unsupported GGUF version %u", g->version);
    uint64_t nt, nkv;
    if (rd_u64(&r, &nt, "tensor count") || rd_u64(&r, &nkv, "key count")) return -1;
    /* a key/value takes >= 8+1 (key) + 4 + 1 bytes; a tensor info >= 8+1+4+4+8 */
    if (nkv > left(&r) / 14) return fail(&r, "key count %llu cannot fit in the %zu bytes left", (unsigned long long)nkv, left(&r));
    if (nt > left(&r) / 25) return fail(&r, "tensor count %llu cannot fit in the %zu bytes left", (unsigned long long)nt, left(&r));
    g->nkv = (int)nkv;
    g->nt = (int)nt;
    g->kv = calloc(nkv ? nkv : 1, sizeof *g->kv);
    g->t = calloc(nt ? nt : 1, sizeof *g->t);
    g->t_name_off = calloc(nt ? nt : 1, sizeof *g->t_name_off);
    if (!g->kv || !g->t || !g->t_name_off) return err_set(e, "MemoryError", "out of memory reading GGUF header");
    for (int i = 0; i < g->nkv; i++)
        if (read_kv(&r, g, &g->kv[i])) return -1;
    for (int i = 0; i < g->nt; i++)
        if (parse_tensor_info(&r, g, i)) return -1;

    /* The arena no longer grows: turn offsets into pointers. */
    for (int i = 0; i < g->nkv; i++) {
        g->kv[i].key = g->arena + g->kv[i].key_off;
        if (g->kv[i].type == GGUF_STR) g->kv[i].str = g->arena + g->kv[i].str_off;
    }
    for (int i = 0; i < g->nt; i++) g->t[i].name = g->arena + g->t_name_off[i];

    if (!(g->kv_sorted = sorted(g->nkv, e)) || !(g->t_sorted = sorted(g->nt, e))) return -1;
    for (int i = 0; i < g->nkv; i++) g->kv_sorted[i] = (gguf_sidx){g->kv[i].key, 0, i};
    for (int i = 0; i < g->nt; i++) g->t_sorted[i] = (gguf_sidx){g->t[i].name, 0, i};
    if (g->nkv > 1) qsort(g->kv_sorted, (size_t)g->nkv, sizeof *g->kv_sorted, cmp_by_name);
    if (g->nt > 1) qsort(g->t_sorted, (size_t)g->nt, sizeof *g->t_sorted, cmp_by_name);
    for (int i = 1; i < g->nkv; i++)
        if (!strcmp(g->kv_sorted[i].s, g->kv_sorted[i - 1].s))
            return err_at(e, KIND, label, 0, 0, "duplicate key '%s'", g->kv_sorted[i].s);
    for (int i = 1; i < g->nt; i++)
        if (!strcmp(g->t_sorted[i].s, g->t_sorted[i - 1].s))
            return err_at(e, KIND, label, 0, 0, "duplicate tensor name '%s'", g->t_sorted[i].s);

    g->align = GGUF_DEFAULT_ALIGNMENT;
    int ak = gguf_find_key(g, "general.alignment");
    if (ak >= 0) {
        if (g->kv[ak].type != GGUF_U32)
            return err_at(e, KIND, label, 0, 0, "general.alignment has type %s, expected u32",
                          VNAME[g->kv[ak].type]);
        uint64_t a = g->kv[ak].v.u;
        if (a == 0 || (a & (a - 1)) || a > (1u << 30))
            return err_at(e, KIND, label, 0, 0, "general.alignment %llu is not a power of two",
                          (unsigned long long)a);
        g->align = (uint32_t)a;
    }
    uint64_t pos = r.pos;
    g->data_off = pos + (g->align - pos % g->align) % g->align;
    if (g->nt == 0) return 0;
    if (g->data_off > g->len)
        return err_at(e, KIND, label, 0, 0, "truncated file: the data section would start at byte %llu of %zu",
                      (unsigned long long)g->data_off, g->len);
    uint64_t data_size = g->len - g->data_off;
    gguf_sidx *by_off = sorted(g->nt, e);
    if (!by_off) return -1;
    for (int i = 0; i < g->nt; i++) by_off[i] = (gguf_sidx){g->t[i].name, g->t[i].offset, i};
    if (g->nt > 1) qsort(by_off, (size_t)g->nt, sizeof *by_off, cmp_by_off);
    uint64_t end = 0;
    int rc = 0;
    for (int k = 0; k < g->nt && !rc; k++) {
        gguf_tensor *t = &g->t[by_off[k].i];
        if (t->offset % g->align)
            rc = err_at(e, KIND, label, 0, 0, "tensor '%s': offset %llu is not a multiple of the alignment %u",
                        t->name, (unsigned long long)t->offset, g->align);
        else if (t->offset > data_size || t->nbytes > data_size - t->offset)
            rc = err_at(e, KIND, label, 0, 0,
                        "tensor '%s': data [%llu, +%llu) ends past the end of the file (%llu data bytes; truncated?)",
                        t->name, (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                        (unsigned long long)data_size);
        else if (t->offset < end)
            rc = err_at(e, KIND, label, 0, 0, "tensor '%s': data at offset %llu overlaps the previous tensor",
                        t->name, (unsigned long long)t->offset);
        else {
            end = t->offset + t->nbytes;
            t->data = g->base + g->data_off + t->offset;
        }
    }
    free(by_off);
    return rc;
}

int gguf_parse_buffer(const void *buf, size_t len, const char *label, gguf_file **out, dlm_err *e)
{
    *out = NULL;
    gguf_file *g = calloc(1, sizeof *g);
    if (!g) return err_set(e, "MemoryError", "out of memory");
    g->base = buf;
    g->len = len;
    if (parse(g, label, e)) { gguf_close(g); return -1; }
    *out = g;
    return 0;
}

int gguf_open(const char *path, gguf_file **out, dlm_err *e)
{
    *out = NULL;
    gguf_file *g = calloc(1, sizeof *g);
    if (!g) return err_set(e, "MemoryError", "out of memory");
    g->path = strdup(path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (!g->path || fd < 0) { gguf_close(g); if (fd >= 0) close(fd); return err_sys(e, "cannot open '%s'", path); }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        gguf_close(g);
        return err_set(e, KIND, "'%s' is not a regular file", path);
    }
    g->len = (size_t)st.st_size;
    if (g->len == 0) {
        close(fd);
        gguf_close(g);
        return err_at(e, KIND, path, 0, 0, "empty file");
    }
    void *p = mmap(NULL, g->len, PROT_READ, MAP_PRIVATE, fd, 0);
    int saved = errno;
    close(fd);
    if (p == MAP_FAILED) { gguf_close(g); errno = saved; return err_sys(e, "cannot map '%s'", path); }
    g->base = p;
    g->mapped = 1;
    if (parse(g, path, e)) { gguf_close(g); return -1; }
    *out = g;
    return 0;
}

/* ---- access ------------------------------------------------------------------ */

int gguf_find_key(const gguf_file *g, const char *key)
{
    int lo = 0, hi = g->nkv - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, k = g->kv_sorted[mid].i;
        int c = strcmp(key, g->kv_sorted[mid].s);
        if (!c) return k;
        if (c < 0) hi = mid - 1; else lo = mid + 1;
    }
    return -1;
}

const char *gguf_key(const gguf_file *g, int id) { return id >= 0 && id < g->nkv ? g->kv[id].key : NULL; }
gguf_vtype gguf_kv_type(const gguf_file *g, int id)
{
    return id >= 0 && id < g->nkv ? g->kv[id].type : GGUF_VTYPE_COUNT;
}

static const gguf_kv *want(const gguf_file *g, int id, gguf_vtype t, dlm_err *e)
{
    if (id < 0 || id >= g->nkv) {
        err_at(e, KIND, gguf_path(g), 0, 0, "missing key");
        return NULL;
    }
    const gguf_kv *kv = &g->kv[id];
    if (kv->type != t) {
        err_at(e, KIND, gguf_path(g), 0, 0, "key '%s' has type %s, expected %s", kv->key, VNAME[kv->type], VNAME[t]);
        return NULL;
    }
    return kv;
}

int gguf_get_u32(const gguf_file *g, int id, uint32_t *out, dlm_err *e)
{
    const gguf_kv *kv = want(g, id, GGUF_U32, e);
    if (!kv) return -1;
    *out = (uint32_t)kv->v.u;
    return 0;
}

int gguf_get_i32(const gguf_file *g, int id, int32_t *out, dlm_err *e)
{
    const gguf_kv *kv = want(g, id, GGUF_I32, e);
    if (!kv) return -1;
    *out = (int32_t)kv->v.i;
    return 0;
}

int gguf_get_u64(const gguf_file *g, int id, uint64_t *out, dlm_err *e)
{
    const gguf_kv *kv = want(g, id, GGUF_U64, e);
    if (!kv) return -1;
    *out = kv->v.u;
    return 0;
}

int gguf_get_f32(const gguf_file *g, int id, float *out, dlm_err *e)
{
    const gguf_kv *kv = want(g, id, GGUF_F32, e);
    if (!kv) return -1;
    *out = (float)kv->v.d;
    return 0;
}

int gguf_get_bool(const gguf_file *g, int id, int *out, dlm_err *e)
{
    const gguf_kv *kv = want(g, id, GGUF_BOOL, e);
    if (!kv) return -1;
    *out = kv->v.u != 0;
    return 0;
}

int gguf_get_str(const gguf_file *g, int id, const char **out, size_t *len, dlm_err *e)
{
    const gguf_kv *kv = want(g, id, GGUF_STR, e);
    if (!kv) return -1;
    *out = kv->str;
    if (len) *len = kv->str_len;
    return 0;
}

static int is_int_type(gguf_vtype t)
{
    return t == GGUF_U8 || t == GGUF_I8 || t == GGUF_U16 || t == GGUF_I16 || t == GGUF_U32 ||
           t == GGUF_I32 || t == GGUF_U64 || t == GGUF_I64 || t == GGUF_BOOL;
}
static int is_signed(gguf_vtype t) { return t == GGUF_I8 || t == GGUF_I16 || t == GGUF_I32 || t == GGUF_I64; }

int gguf_get_int(const gguf_file *g, int id, int64_t *out, dlm_err *e)
{
    if (id < 0 || id >= g->nkv) return err_at(e, KIND, gguf_path(g), 0, 0, "missing key");
    const gguf_kv *kv = &g->kv[id];
    if (!is_int_type(kv->type))
        return err_at(e, KIND, gguf_path(g), 0, 0, "key '%s' has type %s, expected an integer", kv->key,
                      VNAME[kv->type]);
    if (!is_signed(kv->type) && kv->v.u > (uint64_t)INT64_MAX)
        return err_at(e, KIND, gguf_path(g), 0, 0, "key '%s' is out of range", kv->key);
    *out = is_signed(kv->type) ? kv->v.i : (int64_t)kv->v.u;
    return 0;
}

int gguf_get_num(const gguf_file *g, int id, double *out, dlm_err *e)
{
    if (id >= 0 && id < g->nkv && (g->kv[id].type == GGUF_F32 || g->kv[id].type == GGUF_F64)) {
        *out = g->kv[id].v.d;
        return 0;
    }
    int64_t v;
    if (gguf_get_int(g, id, &v, e)) return -1;
    *out = (double)v;
    return 0;
}

int gguf_arr_info(const gguf_file *g, int id, gguf_vtype *elem, uint64_t *count, dlm_err *e)
{
    const gguf_kv *kv = want(g, id, GGUF_ARR, e);
    if (!kv) return -1;
    if (elem) *elem = kv->elem;
    if (count) *count = kv->count;
    return 0;
}

static const gguf_kv *arr_elem(const gguf_file *g, int id, uint64_t i)
{
    if (id < 0 || id >= g->nkv || g->kv[id].type != GGUF_ARR || i >= g->kv[id].count) return NULL;
    return &g->kv[id];
}

const char *gguf_arr_str(const gguf_file *g, int id, uint64_t i, size_t *len)
{
    const gguf_kv *kv = arr_elem(g, id, i);
    if (!kv || kv->elem != GGUF_STR) return NULL;
    const gguf_sref *s = &g->strs[kv->sidx + i];
    if (len) *len = s->len;
    return g->arena + s->off;
}

int gguf_arr_int(const gguf_file *g, int id, uint64_t i, int64_t *out)
{
    const gguf_kv *kv = arr_elem(g, id, i);
    if (!kv || !is_int_type(kv->elem)) return -1;
    size_t n = VSIZE[kv->elem];
    uint64_t u = le(kv->raw + i * n, n);
    switch (kv->elem) {
    case GGUF_I8: *out = (int8_t)u; break;
    case GGUF_I16: *out = (int16_t)u; break;
    case GGUF_I32: *out = (int32_t)u; break;
    case GGUF_I64: *out = (int64_t)u; break;
    default:
        if (u > (uint64_t)INT64_MAX) return -1;
        *out = (int64_t)u;
    }
    return 0;
}

int gguf_arr_num(const gguf_file *g, int id, uint64_t i, double *out)
{
    const gguf_kv *kv = arr_elem(g, id, i);
    if (!kv) return -1;
    if (kv->elem == GGUF_F32) {
        uint32_t w = (uint32_t)le(kv->raw + i * 4, 4);
        float f;
        memcpy(&f, &w, 4);
        *out = f;
        return 0;
    }
    if (kv->elem == GGUF_F64) {
        uint64_t w = le(kv->raw + i * 8, 8);
        memcpy(out, &w, 8);
        return 0;
    }
    int64_t v;
    if (gguf_arr_int(g, id, i, &v)) return -1;
    *out = (double)v;
    return 0;
}

const void *gguf_arr_data(const gguf_file *g, int id)
{
    if (id < 0 || id >= g->nkv || g->kv[id].type != GGUF_ARR || g->kv[id].elem == GGUF_STR) return NULL;
    return g->kv[id].raw;
}

const gguf_tensor *gguf_tensor_at(const gguf_file *g, int i)
{
    return i >= 0 && i < g->nt ? &g->t[i] : NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name)
{
    int lo = 0, hi = g->nt - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, k = g->t_sorted[mid].i;
        int c = strcmp(name, g->t_sorted[mid].s);
        if (!c) return &g->t[k];
        if (c < 0) hi = mid - 1; else lo = mid + 1;
    }
    return NULL;
}
