#include "weights/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sodium.h>

#include "kern/dtype.h"
#include "util/fs.h"
#include "util/str.h"

enum { V_U8 = 0, V_I8, V_U16, V_I16, V_U32, V_I32, V_F32, V_BOOL, V_STR, V_ARR, V_U64, V_I64, V_F64 };

typedef struct wtensor {
    char name[64];
    int type, n_dims;
    int64_t ne[4];
    size_t nbytes;
    uint64_t offset;
    const void *data;
    gguf_fill_fn fill;
    void *ctx;
} wtensor;

struct gguf_w {
    strbuf kv;          /* serialized KV section */
    int n_kv;
    char **keys;
    wtensor *t;
    int n_t, cap_t;
    uint32_t alignment;
    char err[512];
};

gguf_w *gguf_w_new(void)
{
    gguf_w *w = calloc(1, sizeof *w);
    if (w) w->alignment = 32;
    return w;
}

void gguf_w_free(gguf_w *w)
{
    if (!w) return;
    sb_free(&w->kv);
    for (int i = 0; i < w->n_kv; i++) free(w->keys[i]);
    free(w->keys);
    free(w->t);
    free(w);
}

static void put(strbuf *b, const void *p, size_t n) { sb_append(b, p, n); }
static void put_u32(strbuf *b, uint32_t v) { put(b, &v, 4); }   /* little-endian host */
static void put_u64(strbuf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(strbuf *b, const char *s, size_t n)
{
    put_u64(b, (uint64_t)n);
    put(b, s, n);
}

static int add_key(gguf_w *w, const char *key, uint32_t type)
{
    if (w->err[0]) return -1;
    if (!key || !*key) { snprintf(w->err, sizeof w->err, "empty GGUF key"); return -1; }
    for (int i = 0; i < w->n_kv; i++)
        if (!strcmp(w->keys[i], key)) { snprintf(w->err, sizeof w->err, "duplicate GGUF key '%s'", key); return -1; }
    char **k = realloc(w->keys, (size_t)(w->n_kv + 1) * sizeof *k);
    if (!k) { snprintf(w->err, sizeof w->err, "out of memory"); return -1; }
    w->keys = k;
    w->keys[w->n_kv] = strdup(key);
    if (!w->keys[w->n_kv]) { snprintf(w->err, sizeof w->err, "out of memory"); return -1; }
    w->n_kv++;
    put_str(&w->kv, key, strlen(key));
    put_u32(&w->kv, type);
    return 0;
}

int gguf_w_str(gguf_w *w, const char *key, const char *val)
{
    if (add_key(w, key, V_STR)) return -1;
    put_str(&w->kv, val, strlen(val));
    return 0;
}
int gguf_w_u32(gguf_w *w, const char *key, uint32_t v)
{
    if (add_key(w, key, V_U32)) return -1;
    if (!strcmp(key, "general.alignment")) {
        if (!v || (v & (v - 1))) { snprintf(w->err, sizeof w->err, "general.alignment must be a power of two"); return -1; }
        w->alignment = v;
    }
    put_u32(&w->kv, v);
    return 0;
}
int gguf_w_i32(gguf_w *w, const char *key, int32_t v)
{
    if (add_key(w, key, V_I32)) return -1;
    put(&w->kv, &v, 4);
    return 0;
}
int gguf_w_u64(gguf_w *w, const char *key, uint64_t v)
{
    if (add_key(w, key, V_U64)) return -1;
    put_u64(&w->kv, v);
    return 0;
}
int gguf_w_f32(gguf_w *w, const char *key, float v)
{
    if (add_key(w, key, V_F32)) return -1;
    put(&w->kv, &v, 4);
    return 0;
}
int gguf_w_bool(gguf_w *w, const char *key, int v)
{
    if (add_key(w, key, V_BOOL)) return -1;
    uint8_t b = v ? 1 : 0;
    put(&w->kv, &b, 1);
    return 0;
}
int gguf_w_arr_str(gguf_w *w, const char *key, const char *const *v, const size_t *lens, size_t n)
{
    if (add_key(w, key, V_ARR)) return -1;
    put_u32(&w->kv, V_STR);
    put_u64(&w->kv, n);
    for (size_t i = 0; i < n; i++) put_str(&w->kv, v[i], lens ? lens[i] : strlen(v[i]));
    return 0;
}
int gguf_w_arr_i32(gguf_w *w, const char *key, const int32_t *v, size_t n)
{
    if (add_key(w, key, V_ARR)) return -1;
    put_u32(&w->kv, V_I32);
    put_u64(&w->kv, n);
    put(&w->kv, v, n * 4);
    return 0;
}
int gguf_w_arr_f32(gguf_w *w, const char *key, const float *v, size_t n)
{
    if (add_key(w, key, V_ARR)) return -1;
    put_u32(&w->kv, V_F32);
    put_u64(&w->kv, n);
    put(&w->kv, v, n * 4);
    return 0;
}

int gguf_w_tensor(gguf_w *w, const char *name, int type, int n_dims, const int64_t *ne, const void *data,
                  gguf_fill_fn fill, void *fill_ctx)
{
    if (w->err[0]) return -1;
    if (!name || strlen(name) >= 64) { snprintf(w->err, sizeof w->err, "tensor name '%s' is too long (llama.cpp allows 63 bytes)", name ? name : ""); return -1; }
    if (n_dims < 1 || n_dims > 4) { snprintf(w->err, sizeof w->err, "tensor '%s': %d dims", name, n_dims); return -1; }
    for (int i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name)) { snprintf(w->err, sizeof w->err, "duplicate tensor '%s'", name); return -1; }
    size_t be = dtype_block_elems((dtype)type), bb = dtype_block_bytes((dtype)type);
    if (!be || ne[0] % (int64_t)be) { snprintf(w->err, sizeof w->err, "tensor '%s': %lld columns do not fit type %d", name, (long long)ne[0], type); return -1; }
    uint64_t rows = 1;
    for (int i = 1; i < n_dims; i++) rows *= (uint64_t)ne[i];
    size_t nbytes = (size_t)((uint64_t)ne[0] / be * bb * rows);
    if (w->n_t == w->cap_t) {
        int cap = w->cap_t ? w->cap_t * 2 : 64;
        wtensor *t = realloc(w->t, (size_t)cap * sizeof *t);
        if (!t) { snprintf(w->err, sizeof w->err, "out of memory"); return -1; }
        w->t = t;
        w->cap_t = cap;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->type = type;
    t->n_dims = n_dims;
    for (int i = 0; i < 4; i++) t->ne[i] = i < n_dims ? ne[i] : 1;
    t->nbytes = nbytes;
    t->data = data;
    t->fill = fill;
    t->ctx = fill_ctx;
    return w->n_t++;
}

int gguf_w_n_tensors(const gguf_w *w) { return w->n_t; }

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t r = write(fd, c, n);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

int gguf_w_write(gguf_w *w, const char *path, dlm_err *e)
{
    if (w->err[0]) return err_set(e, "GGUFWriteError", "%s: %s", path, w->err);
    if (w->kv.oom) return err_set(e, "MemoryError", "out of memory building GGUF metadata");
    uint64_t align = w->alignment, off = 0;
    strbuf h = STRBUF_INIT;
    put(&h, "GGUF", 4);
    put_u32(&h, 3);
    put_u64(&h, (uint64_t)w->n_t);
    put_u64(&h, (uint64_t)w->n_kv);
    put(&h, w->kv.buf ? w->kv.buf : "", w->kv.len);
    for (int i = 0; i < w->n_t; i++) {
        wtensor *t = &w->t[i];
        put_str(&h, t->name, strlen(t->name));
        put_u32(&h, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) put_u64(&h, (uint64_t)t->ne[d]);
        put_u32(&h, (uint32_t)t->type);
        t->offset = off;
        put_u64(&h, off);
        off += (t->nbytes + align - 1) / align * align;
    }
    if (w->n_t) while (h.len % align) sb_putc(&h, 0);
    if (h.oom) { sb_free(&h); return err_set(e, "MemoryError", "out of memory"); }
    uint64_t need = (uint64_t)h.len + off;   /* the whole file */

    char tmp[4200], dir[4096];
    unsigned char nonce[4];
    randombytes_buf(nonce, sizeof nonce);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d.%02x%02x%02x%02x", path, (int)getpid(), nonce[0], nonce[1], nonce[2], nonce[3]);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) { sb_free(&h); return err_sys(e, "cannot create '%s'", tmp); }
    int rc = write_all(fd, h.buf, h.len);
    sb_free(&h);
    void *buf = NULL;
    size_t cap = 0;
    static const char zeros[64];
    for (int i = 0; i < w->n_t && !rc; i++) {
        wtensor *t = &w->t[i];
        const void *src = t->data;
        if (!src) {
            if (t->nbytes > cap) {
                free(buf);
                cap = t->nbytes;
                buf = malloc(cap ? cap : 1);
                if (!buf) { close(fd); unlink(tmp); return err_set(e, "MemoryError", "out of memory writing '%s'", t->name); }
            }
            if (!t->fill || t->fill(t->ctx, i, buf, t->nbytes, e)) {
                if (!t->fill) err_set(e, "GGUFWriteError", "tensor '%s' has no data", t->name);
                free(buf);
                close(fd);
                unlink(tmp);
                return -1;
            }
            src = buf;
        }
        rc = write_all(fd, src, t->nbytes);
        size_t pad = (size_t)((t->nbytes + align - 1) / align * align - t->nbytes);
        while (!rc && pad) {
            size_t k = pad < sizeof zeros ? pad : sizeof zeros;
            rc = write_all(fd, zeros, k);
            pad -= k;
        }
    }
    free(buf);
    if (rc || fsync(fd) != 0) {
        int saved = errno;
        close(fd);
        unlink(tmp);
        errno = saved;
        return fs_err_write(e, path, need);
    }
    close(fd);
    if (fs_fault_injected(path)) { unlink(tmp); errno = EIO; return err_sys(e, "cannot write '%s'", path); }
    if (rename(tmp, path) != 0) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
        return err_sys(e, "cannot rename '%s' to '%s'", tmp, path);
    }
    fs_dirname(dir, sizeof dir, path);
    return fs_fsync_dir(dir, e);
}
