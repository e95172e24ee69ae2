/* st_write — safetensors writer (PEFT adapters, merged models, test files).
 *
 * Byte layout is the Rust reference writer's, so a file we write from the
 * same tensors is identical to what `safetensors.torch.save_file` writes. */
#include "weights/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/str.h"

/* serde_json's string escaping: the two mandatory escapes, short forms for
 * \b \f \n \r \t, \u00xx for other control bytes, everything else raw. */
static void put_json_string(strbuf *sb, const char *s)
{
    sb_putc(sb, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': sb_puts(sb, "\\\""); break;
        case '\\': sb_puts(sb, "\\\\"); break;
        case '\b': sb_puts(sb, "\\b"); break;
        case '\f': sb_puts(sb, "\\f"); break;
        case '\n': sb_puts(sb, "\\n"); break;
        case '\r': sb_puts(sb, "\\r"); break;
        case '\t': sb_puts(sb, "\\t"); break;
        default:
            if (*p < 0x20) sb_printf(sb, "\\u%04x", *p);
            else sb_putc(sb, (char)*p);
        }
    }
    sb_putc(sb, '"');
}

static int cmp_out(const void *a, const void *b)
{
    const st_out *x = *(const st_out *const *)a, *y = *(const st_out *const *)b;
    if (x->dtype != y->dtype) return x->dtype > y->dtype ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Validate the inputs, order them, and build the padded header. */
static int prepare(const st_out *t, int n, const char *const *metadata, const st_out ***order,
                   strbuf *hdr, uint64_t **sizes, dlm_err *e)
{
    *order = NULL;
    *sizes = NULL;
    const st_out **ord = malloc((size_t)(n > 0 ? n : 1) * sizeof *ord);
    uint64_t *sz = malloc((size_t)(n > 0 ? n : 1) * sizeof *sz);
    const char **mk = NULL;
    if (!ord || !sz) goto oom;
    for (int i = 0; i < n; i++) {
        if (!t[i].name || !t[i].name[0]) { err_set(e, NULL, "safetensors: tensor %d has no name", i); goto fail; }
        if (!strcmp(t[i].name, "__metadata__")) { err_set(e, NULL, "safetensors: '__metadata__' is reserved"); goto fail; }
        int bits = st_dtype_bits(t[i].dtype);
        if (bits == 0 || bits % 8 || t[i].ndim < 0 || t[i].ndim > ST_MAX_DIMS) {
            err_set(e, NULL, "safetensors: tensor '%s' has an unsupported dtype or rank", t[i].name);
            goto fail;
        }
        uint64_t nel = 1;
        for (int d = 0; d < t[i].ndim; d++) {
            uint64_t dim = (uint64_t)t[i].shape[d];
            if (t[i].shape[d] < 0 || (dim && nel > UINT64_MAX / dim / 8)) {
                err_set(e, NULL, "safetensors: tensor '%s' has an invalid shape", t[i].name);
                goto fail;
            }
            nel *= dim;
        }
        sz[i] = nel * (uint64_t)(bits / 8);
        if (sz[i] && !t[i].data) { err_set(e, NULL, "safetensors: tensor '%s' has no data", t[i].name); goto fail; }
        ord[i] = &t[i];
    }
    if (n > 1) qsort(ord, (size_t)n, sizeof *ord, cmp_out);
    for (int i = 1; i < n; i++)
        if (!strcmp(ord[i - 1]->name, ord[i]->name)) {
            err_set(e, NULL, "safetensors: tensor '%s' given twice", ord[i]->name);
            goto fail;
        }

    sb_putc(hdr, '{');
    int nm = 0;
    while (metadata && metadata[2 * nm]) {
        if (!metadata[2 * nm + 1]) { err_set(e, NULL, "safetensors: metadata key without value"); goto fail; }
        nm++;
    }
    if (nm) {
        mk = malloc((size_t)nm * sizeof *mk);
        if (!mk) goto oom;
        for (int i = 0; i < nm; i++) mk[i] = metadata[2 * i];
        qsort(mk, (size_t)nm, sizeof *mk, cmp_cstr);
        for (int i = 1; i < nm; i++)
            if (!strcmp(mk[i - 1], mk[i])) {
                err_set(e, NULL, "safetensors: metadata key '%s' given twice", mk[i]);
                goto fail;
            }
        sb_puts(hdr, "\"__metadata__\":{");
        for (int i = 0; i < nm; i++) {
            const char *v = NULL;
            for (int j = 0; j < nm; j++)
                if (metadata[2 * j] == mk[i]) v = metadata[2 * j + 1];
            if (i) sb_putc(hdr, ',');
            put_json_string(hdr, mk[i]);
            sb_putc(hdr, ':');
            put_json_string(hdr, v);
        }
        sb_putc(hdr, '}');
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const st_out *o = ord[i];
        uint64_t size = sz[o - t];
        if (nm || i) sb_putc(hdr, ',');
        put_json_string(hdr, o->name);
        sb_printf(hdr, ":{\"dtype\":\"%s\",\"shape\":[", st_dtype_name(o->dtype));
        for (int d = 0; d < o->ndim; d++) sb_printf(hdr, "%s%lld", d ? "," : "", (long long)o->shape[d]);
        sb_printf(hdr, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                  (unsigned long long)(off + size));
        off += size;
    }
    sb_putc(hdr, '}');
    while (hdr->len % 8) sb_putc(hdr, ' ');
    if (hdr->oom) goto oom;
    if (hdr->len > ST_MAX_HEADER) { err_set(e, NULL, "safetensors: header too large"); goto fail; }
    free(mk);
    *order = ord;
    *sizes = sz;
    return 0;
oom:
    err_set(e, "MemoryError", "out of memory building a safetensors header");
fail:
    free(ord);
    free(sz);
    free(mk);
    return -1;
}

static void put_u64le(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

int st_serialize(const st_out *t, int n, const char *const *metadata, unsigned char **buf,
                 size_t *len, dlm_err *e)
{
    const st_out **ord;
    uint64_t *sz;
    strbuf hdr = STRBUF_INIT;
    *buf = NULL;
    if (prepare(t, n, metadata, &ord, &hdr, &sz, e)) { sb_free(&hdr); return -1; }
    size_t total = 8 + hdr.len;
    for (int i = 0; i < n; i++) total += (size_t)sz[i];
    unsigned char *out = malloc(total ? total : 1);
    if (!out) {
        free(ord); free(sz); sb_free(&hdr);
        return err_set(e, "MemoryError", "out of memory serializing safetensors");
    }
    put_u64le(out, hdr.len);
    memcpy(out + 8, hdr.buf, hdr.len);
    size_t pos = 8 + hdr.len;
    for (int i = 0; i < n; i++) {
        size_t s = (size_t)sz[ord[i] - t];
        if (s) memcpy(out + pos, ord[i]->data, s);
        pos += s;
    }
    free(ord); free(sz); sb_free(&hdr);
    *buf = out;
    *len = total;
    return 0;
}

static int write_full(int fd, const void *data, uint64_t len)
{
    const char *p = data;
    while (len) {
        size_t chunk = len > (1u << 30) ? (1u << 30) : (size_t)len;
        ssize_t w = write(fd, p, chunk);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        len -= (uint64_t)w;
    }
    return 0;
}

int st_write(const char *path, const st_out *t, int n, const char *const *metadata, dlm_err *e)
{
    const st_out **ord;
    uint64_t *sz;
    strbuf hdr = STRBUF_INIT;
    if (prepare(t, n, metadata, &ord, &hdr, &sz, e)) { sb_free(&hdr); return -1; }

    char dir[4096], tmp[4200];
    fs_dirname(dir, sizeof dir, path);
    unsigned char nonce[4];
    randombytes_buf(nonce, sizeof nonce);
    int fd = -1, r = snprintf(tmp, sizeof tmp, "%s.tmp.%d.%02x%02x%02x%02x", path, (int)getpid(),
                              nonce[0], nonce[1], nonce[2], nonce[3]);
    if (r < 0 || (size_t)r >= sizeof tmp) {
        free(ord); free(sz); sb_free(&hdr);
        return err_set(e, NULL, "path too long: '%s'", path);
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(ord); free(sz); sb_free(&hdr);
        return err_sys(e, "cannot create '%s'", tmp);
    }
    unsigned char lenb[8];
    put_u64le(lenb, hdr.len);
    if (write_full(fd, lenb, 8) || write_full(fd, hdr.buf, hdr.len)) goto fail;
    for (int i = 0; i < n; i++)
        if (write_full(fd, ord[i]->data, sz[ord[i] - t])) goto fail;
    if (fsync(fd) != 0) goto fail;
    if (close(fd) != 0) { fd = -1; goto fail; }
    fd = -1;
    if (fs_fault_injected(path)) { errno = EIO; goto fail; }
    if (rename(tmp, path) != 0) goto fail;
    free(ord); free(sz); sb_free(&hdr);
    return fs_fsync_dir(dir, e);
fail:;
    int saved = errno;
    if (fd >= 0) close(fd);
    unlink(tmp);
    uint64_t need = 8 + hdr.len;
    for (int i = 0; i < n; i++) need += sz[i];
    free(ord); free(sz); sb_free(&hdr);
    errno = saved;
    return fs_err_write(e, path, need);
}
