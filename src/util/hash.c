#include "util/hash.h"
#include "util/progress.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

_Static_assert(sizeof(crypto_hash_sha256_state) <= sizeof(sha256_ctx), "sha256_ctx too small");

int hash_init(void) { return sodium_init() < 0 ? -1 : 0; }

void sha256_init(sha256_ctx *c) { crypto_hash_sha256_init((crypto_hash_sha256_state *)c->opaque); }

void sha256_update(sha256_ctx *c, const void *p, size_t n)
{
    crypto_hash_sha256_update((crypto_hash_sha256_state *)c->opaque, p, n);
}

void sha256_final(sha256_ctx *c, unsigned char out[32])
{
    crypto_hash_sha256_final((crypto_hash_sha256_state *)c->opaque, out);
}

void sha256(const void *p, size_t n, unsigned char out[32]) { crypto_hash_sha256(out, p, n); }

void blake2b_n(unsigned char *out, size_t outlen, const void *p, size_t n)
{
    crypto_generichash_blake2b(out, outlen, p, n, NULL, 0);
}

void hex_encode(const unsigned char *p, size_t n, char *out)
{
    static const char hx[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hx[p[i] >> 4];
        out[2 * i + 1] = hx[p[i] & 15];
    }
    out[2 * n] = 0;
}

void sha256_hex(const void *p, size_t n, char hex[65])
{
    unsigned char d[32];
    sha256(p, n, d);
    hex_encode(d, 32, hex);
}

static int file_hex(const char *path, const char *label, char hex[65], dlm_err *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_sys(e, "cannot open '%s'", path);
    struct stat st;
    progress p;
    if (label) progress_begin(&p, label, fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0, PROGRESS_BYTES);
    sha256_ctx c;
    sha256_init(&c);
    static __thread unsigned char buf[1 << 16];
    uint64_t done = 0;
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0) {
            if (errno == EINTR) continue;
            close(fd);
            if (label) progress_abort(&p);
            return err_sys(e, "cannot read '%s'", path);
        }
        if (r == 0) break;
        sha256_update(&c, buf, (size_t)r);
        done += (uint64_t)r;
        if (label && (done & ((1u << 22) - 1)) < (uint64_t)r) progress_update(&p, done);  /* every 4 MiB */
    }
    close(fd);
    if (label) {
        p.done = done;
        progress_end(&p);
    }
    unsigned char d[32];
    sha256_final(&c, d);
    hex_encode(d, 32, hex);
    return 0;
}

int sha256_file_hex(const char *path, char hex[65], dlm_err *e) { return file_hex(path, NULL, hex, e); }

int sha256_file_hex_progress(const char *path, const char *label, char hex[65], dlm_err *e)
{
    return file_hex(path, label, hex, e);
}
