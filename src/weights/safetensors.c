/* safetensors — reader. See safetensors.h for the rules enforced.
 * The writer lives in st_write.c. */
#include "weights/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/json.h"
#include "util/str.h"

#define KIND "SafetensorsError"

static const struct { const char *name; int bits; } DTYPES[ST_DTYPE_COUNT] = {
    [ST_BOOL] = {"BOOL", 8},        [ST_F4] = {"F4", 4},
    [ST_F6_E2M3] = {"F6_E2M3", 6},  [ST_F6_E3M2] = {"F6_E3M2", 6},
    [ST_U8] = {"U8", 8},            [ST_I8] = {"I8", 8},
    [ST_F8_E5M2] = {"F8_E5M2", 8},  [ST_F8_E4M3] = {"F8_E4M3", 8},
    [ST_F8_E8M0] = {"F8_E8M0", 8},  [ST_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8},
    [ST_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8},
    [ST_I16] = {"I16", 16},         [ST_U16] = {"U16", 16},
    [ST_F16] = {"F16", 16},         [ST_BF16] = {"BF16", 16},
    [ST_I32] = {"I32", 32},         [ST_U32] = {"U32", 32},
    [ST_F32] = {"F32", 32},         [ST_C64] = {"C64", 64},
    [ST_F64] = {"F64", 64},         [ST_I64] = {"I64", 64},
    [ST_U64] = {"U64", 64},
};

const char *st_dtype_name(st_dtype t)
{
    return (unsigned)t < ST_DTYPE_COUNT ? DTYPES[t].name : "?";
}

int st_dtype_bits(st_dtype t)
{
    return (unsigned)t < ST_DTYPE_COUNT ? DTYPES[t].bits : 0;
}

int st_dtype_from_name(const char *s, st_dtype *out)
{
    for (int i = 0; i < ST_DTYPE_COUNT; i++)
        if (!strcmp(s, DTYPES[i].name)) { *out = (st_dtype)i; return 0; }
    return -1;
}

typedef struct st_shard {
    const unsigned char *base;
    size_t len;
    int mapped;         /* munmap on close */
    char *path;
} st_shard;

struct st_file {
    st_shard *shards;
    int nshards;
    st_tensor *t;       /* sorted by name after open */
    int n, cap;
    json_t *meta;       /* __metadata__ of the first file (owned), or NULL */
};

void st_close(st_file *f)
{
    if (!f) return;
    for (int i = 0; i < f->nshards; i++) {
        if (f->shards[i].mapped) munmap((void *)f->shards[i].base, f->shards[i].len);
        free(f->shards[i].path);
    }
    free(f->shards);
    for (int i = 0; i < f->n; i++) free((char *)f->t[i].name);
    free(f->t);
    if (f->meta) json_decref(f->meta);
    free(f);
}

int st_count(const st_file *f) { return f->n; }
const st_tensor *st_at(const st_file *f, int i) { return i >= 0 && i < f->n ? &f->t[i] : NULL; }
int st_shard_count(const st_file *f) { return f->nshards; }
const char *st_shard_path(const st_file *f, int i)
{
    return i >= 0 && i < f->nshards && f->shards[i].path ? f->shards[i].path : "";
}

const char *st_metadata(const st_file *f, const char *key)
{
    return f->meta ? jget_str(f->meta, key) : NULL;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

const st_tensor *st_find(const st_file *f, const char *name)
{
    st_tensor key;
    memset(&key, 0, sizeof key);
    key.name = name;
    return f->n ? bsearch(&key, f->t, (size_t)f->n, sizeof *f->t, cmp_name) : NULL;
}

/* ---- header parsing ------------------------------------------------------- */

typedef struct span { uint64_t begin, end; int idx; } span;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* A non-negative JSON integer (reals are refused: offsets and dims are ints). */
static int get_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v)) return -1;
    json_int_t x = json_integer_value(v);
    if (x < 0) return -1;
    *out = (uint64_t)x;
    return 0;
}

static int push_tensor(st_file *f, dlm_err *e)
{
    if (f->n < f->cap) return 0;
    int nc = f->cap ? f->cap * 2 : 64;
    st_tensor *nt = realloc(f->t, (size_t)nc * sizeof *nt);
    if (!nt) return err_set(e, "MemoryError", "out of memory reading safetensors header");
    f->t = nt;
    f->cap = nc;
    return 0;
}

/* Parse the header of shard si and append its tensors to f->t. */
static int parse_shard(st_file *f, int si, const char *label, dlm_err *e)
{
    const unsigned char *buf = f->shards[si].base;
    size_t len = f->shards[si].len;
    json_t *root = NULL;
    span *spans = NULL;
    int rc = -1;

    if (len < 8) {
        err_at(e, KIND, label, 0, 0, "truncated file: %zu bytes, a safetensors file starts with an 8-byte header length", len);
        err_hint(e, "the file is incomplete or not a safetensors file; download it again");
        return -1;
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | buf[i];
    if (n > ST_MAX_HEADER) {
        err_at(e, KIND, label, 0, 0, "header length %llu exceeds the limit of %u bytes",
               (unsigned long long)n, ST_MAX_HEADER);
        return -1;
    }
    if (n > len - 8) {
        err_at(e, KIND, label, 0, 0, "header length %llu exceeds the %zu bytes after it (truncated file?)",
               (unsigned long long)n, len - 8);
        err_hint(e, "the file is incomplete; download it again");
        return -1;
    }
    if (n < 2 || buf[8] != '{') {
        err_at(e, KIND, label, 0, 0, "header is not a JSON object (must start with '{')");
        return -1;
    }
    json_error_t je;
    root = json_loadb((const char *)buf + 8, (size_t)n, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        err_at(e, KIND, label, 0, 0, "invalid JSON header at line %d column %d: %s", je.line, je.column, je.text);
        return -1;
    }
    if (!json_is_object(root)) {
        err_at(e, KIND, label, 0, 0, "header is not a JSON object");
        goto out;
    }
    size_t nkeys = json_object_size(root);
    spans = malloc((nkeys ? nkeys : 1) * sizeof *spans);
    if (!spans) { err_set(e, "MemoryError", "out of memory reading '%s'", label); goto out; }
    size_t ns = 0;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (!strcmp(key, "__metadata__")) {
            if (!json_is_object(val)) {
                err_at(e, KIND, label, 0, 0, "__metadata__ is not an object");
                goto out;
            }
            const char *mk;
            json_t *mv;
            json_object_foreach(val, mk, mv) {
                if (!json_is_string(mv)) {
                    err_at(e, KIND, label, 0, 0, "__metadata__ value of '%s' is not a string", mk);
                    goto out;
                }
            }
            if (si == 0 && !f->meta) f->meta = json_incref(val);
            continue;
        }
        if (!json_is_object(val)) {
            err_at(e, KIND, label, 0, 0, "tensor '%s': entry is not an object", key);
            goto out;
        }
        const json_t *jd = json_object_get(val, "dtype");
        const json_t *js = json_object_get(val, "shape");
        const json_t *jo = json_object_get(val, "data_offsets");
        st_dtype dt;
        if (!json_is_string(jd)) {
            err_at(e, KIND, label, 0, 0, "tensor '%s': missing dtype", key);
            goto out;
        }
        if (st_dtype_from_name(json_string_value(jd), &dt)) {
            err_at(e, KIND, label, 0, 0, "tensor '%s': unknown dtype '%s'", key, json_string_value(jd));
            goto out;
        }
        if (!json_is_array(js)) {
            err_at(e, KIND, label, 0, 0, "tensor '%s': missing or invalid shape", key);
            goto out;
        }
        if (json_array_size(js) > ST_MAX_DIMS) {
            err_at(e, KIND, label, 0, 0, "tensor '%s': %zu dimensions (dlm reads at most %d)", key,
                   json_array_size(js), ST_MAX_DIMS);
            goto out;
        }
        uint64_t begin, end;
        if (!json_is_array(jo) || json_array_size(jo) != 2 || get_u64(json_array_get(jo, 0), &begin) ||
            get_u64(json_array_get(jo, 1), &end)) {
            err_at(e, KIND, label, 0, 0, "tensor '%s': data_offsets must be [begin, end] with non-negative integers", key);
            goto out;
        }
        if (end < begin) {
            err_at(e, KIND, label, 0, 0, "tensor '%s': data_offsets end %llu < begin %llu", key,
                   (unsigned long long)end, (unsigned long long)begin);
            goto out;
        }
        if (push_tensor(f, e)) goto out;
        st_tensor *t = &f->t[f->n];
        memset(t, 0, sizeof *t);
        t->dtype = dt;
        t->ndim = (int)json_array_size(js);
        t->shard = si;
        /* Element count and byte size, every product overflow-checked. */
        uint64_t nel = 1;
        for (int d = 0; d < t->ndim; d++) {
            uint64_t dim;
            if (get_u64(json_array_get(js, (size_t)d), &dim) || dim > (uint64_t)INT64_MAX) {
                err_at(e, KIND, label, 0, 0, "tensor '%s': shape[%d] is not a non-negative integer", key, d);
                goto out;
            }
            t->shape[d] = (int64_t)dim;
            if (dim && nel > UINT64_MAX / dim) {
                err_at(e, KIND, label, 0, 0, "tensor '%s': element count overflows", key);
                goto out;
            }
            nel *= dim;
        }
        uint64_t bits = (uint64_t)st_dtype_bits(dt);
        if (nel > UINT64_MAX / bits) {
            err_at(e, KIND, label, 0, 0, "tensor '%s': byte size overflows", key);
            goto out;
        }
        if ((nel * bits) % 8) {
            err_at(e, KIND, label, 0, 0, "tensor '%s': %llu elements of %s do not fill whole bytes", key,
                   (unsigned long long)nel, st_dtype_name(dt));
            goto out;
        }
        t->nbytes = nel * bits / 8;
        if (end - begin != t->nbytes) {
            err_at(e, KIND, label, 0, 0,
                   "tensor '%s': shape and dtype give %llu bytes but data_offsets [%llu, %llu] span %llu",
                   key, (unsigned long long)t->nbytes, (unsigned long long)begin,
                   (unsigned long long)end, (unsigned long long)(end - begin));
            goto out;
        }
        t->name = strdup(key);
        if (!t->name) { err_set(e, "MemoryError", "out of memory"); goto out; }
        f->n++;
        spans[ns].begin = begin;
        spans[ns].end = end;
        spans[ns].idx = f->n - 1;
        ns++;
    }
    /* Offsets must tile [0, last_end) exactly: sorted by begin, each tensor
     * starts where the previous one ended. */
    qsort(spans, ns, sizeof *spans, cmp_span);
    uint64_t pos = 0;
    for (size_t i = 0; i < ns; i++) {
        if (spans[i].begin != pos) {
            err_at(e, KIND, label, 0, 0, "tensor '%s': data_offsets begin at %llu, expected %llu (%s)",
                   f->t[spans[i].idx].name, (unsigned long long)spans[i].begin, (unsigned long long)pos,
                   spans[i].begin > pos ? "hole in the data buffer" : "overlaps another tensor");
            goto out;
        }
        pos = spans[i].end;
    }
    uint64_t data_len = (uint64_t)(len - 8) - n;
    if (pos != data_len) {
        err_at(e, KIND, label, 0, 0, "data buffer is %llu bytes but the tensors cover %llu%s",
               (unsigned long long)data_len, (unsigned long long)pos,
               pos > data_len ? " (truncated file?)" : " (trailing bytes)");
        if (pos > data_len) err_hint(e, "the file is incomplete; download it again");
        goto out;
    }
    const unsigned char *data = buf + 8 + n;
    for (size_t k = 0; k < ns; k++) f->t[spans[k].idx].data = data + spans[k].begin;
    rc = 0;
out:
    free(spans);
    json_decref(root);
    return rc;
}

/* ---- opening -------------------------------------------------------------- */

static st_file *new_file(int nshards, dlm_err *e)
{
    st_file *f = calloc(1, sizeof *f);
    if (f) f->shards = calloc((size_t)nshards, sizeof *f->shards);
    if (!f || !f->shards) {
        free(f);
        err_set(e, "MemoryError", "out of memory opening safetensors");
        return NULL;
    }
    f->nshards = nshards;
    return f;
}

/* Sort by name and refuse duplicates (within a file jansson already refused
 * them; across shards this is the only check). */
static int finish(st_file *f, const char *label, dlm_err *e)
{
    if (f->n > 1) qsort(f->t, (size_t)f->n, sizeof *f->t, cmp_name);
    for (int i = 1; i < f->n; i++)
        if (!strcmp(f->t[i - 1].name, f->t[i].name))
            return err_at(e, KIND, label, 0, 0, "tensor '%s' appears twice (in '%s' and '%s')",
                          f->t[i].name, fs_basename(st_shard_path(f, f->t[i - 1].shard)),
                          fs_basename(st_shard_path(f, f->t[i].shard)));
    return 0;
}

int st_parse_buffer(const void *buf, size_t len, const char *label, st_file **out, dlm_err *e)
{
    *out = NULL;
    st_file *f = new_file(1, e);
    if (!f) return -1;
    f->shards[0].base = buf;
    f->shards[0].len = len;
    if (parse_shard(f, 0, label, e) || finish(f, label, e)) { st_close(f); return -1; }
    *out = f;
    return 0;
}

/* mmap a whole file read-only into shard si. */
static int map_shard(st_file *f, int si, const char *path, dlm_err *e)
{
    st_shard *s = &f->shards[si];
    s->path = strdup(path);
    if (!s->path) return err_set(e, "MemoryError", "out of memory");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_sys(e, "cannot open '%s'", path);
    struct stat st;
    if (fstat(fd, &st) != 0) { close(fd); return err_sys(e, "cannot stat '%s'", path); }
    if (!S_ISREG(st.st_mode)) { close(fd); return err_set(e, KIND, "'%s' is not a regular file", path); }
    s->len = (size_t)st.st_size;
    if (s->len == 0) { close(fd); s->base = (const unsigned char *)""; return 0; }
    void *p = mmap(NULL, s->len, PROT_READ, MAP_PRIVATE, fd, 0);
    int saved = errno;
    close(fd);
    if (p == MAP_FAILED) { errno = saved; return err_sys(e, "cannot map '%s'", path); }
    s->base = p;
    s->mapped = 1;
    return 0;
}

static int open_single(const char *path, st_file **out, dlm_err *e)
{
    st_file *f = new_file(1, e);
    if (!f) return -1;
    if (map_shard(f, 0, path, e) || parse_shard(f, 0, path, e) || finish(f, path, e)) {
        st_close(f);
        return -1;
    }
    *out = f;
    return 0;
}

/* A shard name from an index must be a plain file name next to the index:
 * no directories, no "..", nothing that could escape the model folder. */
static int safe_shard_name(const char *s)
{
    if (!s[0] || !strcmp(s, ".") || !strcmp(s, "..")) return 0;
    for (const char *p = s; *p; p++)
        if (*p == '/' || *p == '\\') return 0;
    return strlen(s) < 256;
}

static int open_index(const char *index_path, st_file **out, dlm_err *e)
{
    json_t *root = json_load_path(index_path, 64u << 20, e);
    if (!root) return -1;
    st_file *f = NULL;
    const char **names = NULL;
    int rc = -1, nn = 0;
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(wm) || !json_object_size(wm)) {
        err_at(e, KIND, index_path, 0, 0, "missing or empty \"weight_map\" object");
        goto out;
    }
    size_t nmap = json_object_size(wm);
    names = calloc(nmap, sizeof *names);
    if (!names) { err_set(e, "MemoryError", "out of memory"); goto out; }
    const char *key;
    json_t *val;
    json_object_foreach(wm, key, val) {
        if (!json_is_string(val) || !safe_shard_name(json_string_value(val))) {
            err_at(e, KIND, index_path, 0, 0, "weight_map entry '%s' does not name a file in the model folder", key);
            goto out;
        }
        const char *sn = json_string_value(val);
        int seen = 0;
        for (int i = 0; i < nn && !seen; i++) seen = !strcmp(names[i], sn);
        if (!seen) names[nn++] = sn;
    }
    f = new_file(nn, e);
    if (!f) goto out;
    char dir[4096], p[4096];
    fs_dirname(dir, sizeof dir, index_path);
    for (int i = 0; i < nn; i++) {
        if (!fs_join(p, sizeof p, dir, names[i])) { err_set(e, NULL, "path too long"); goto out; }
        if (!fs_exists(p)) {
            err_at(e, KIND, index_path, 0, 0, "shard '%s' listed in the index is missing", names[i]);
            err_hint(e, "the download is incomplete; fetch the missing shard or the whole model again");
            goto out;
        }
        if (map_shard(f, i, p, e) || parse_shard(f, i, p, e)) goto out;
    }
    if (finish(f, index_path, e)) goto out;
    /* Every tensor the index promises must be in the shard it names. */
    json_object_foreach(wm, key, val) {
        const st_tensor *t = st_find(f, key);
        const char *want = json_string_value(val);
        if (!t) {
            err_at(e, KIND, index_path, 0, 0, "tensor '%s' listed in the index is not in '%s'", key, want);
            goto out;
        }
        if (strcmp(fs_basename(f->shards[t->shard].path), want)) {
            err_at(e, KIND, index_path, 0, 0, "tensor '%s' is in '%s', the index says '%s'", key,
                   fs_basename(f->shards[t->shard].path), want);
            goto out;
        }
    }
    *out = f;
    f = NULL;
    rc = 0;
out:
    st_close(f);
    free(names);
    json_decref(root);
    return rc;
}

int st_open(const char *path, st_file **out, dlm_err *e)
{
    *out = NULL;
    if (fs_is_dir(path)) {
        char p[4096];
        if (fs_join(p, sizeof p, path, "model.safetensors") && fs_is_file(p)) return open_single(p, out, e);
        if (fs_join(p, sizeof p, path, "model.safetensors.index.json") && fs_is_file(p))
            return open_index(p, out, e);
        err_set(e, KIND, "'%s' has neither model.safetensors nor model.safetensors.index.json", path);
        return err_hint(e, "dlm reads HF models saved as safetensors (not pytorch_model.bin)");
    }
    if (str_endswith(path, ".index.json")) return open_index(path, out, e);
    return open_single(path, out, e);
}
