/* blob — content-addressed media files in a store (media/blob.h). */
#include "media/blob.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "util/fs.h"
#include "util/hash.h"

void blob_ext(const char *name, char out[8])
{
    static const char *const known[] = {".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp", ".tiff",
                                        ".wav", ".flac", ".ogg", NULL};
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    const char *dot = strrchr(base, '.');
    snprintf(out, 8, ".bin");
    if (!dot || dot == base) return;   /* Path.suffix: a leading dot is no suffix */
    for (int i = 0; known[i]; i++)
        if (!strcasecmp(dot, known[i])) { snprintf(out, 8, "%s", known[i]); return; }
}

static int sha_ok(const char *sha)
{
    if (strlen(sha) != 64) return 0;
    for (int i = 0; i < 64; i++)
        if (!((sha[i] >= '0' && sha[i] <= '9') || (sha[i] >= 'a' && sha[i] <= 'f'))) return 0;
    return 1;
}

int blob_put(const char *store, const void *data, size_t n, const char *ext, blob_handle *h, dlm_err *e)
{
    memset(h, 0, sizeof *h);
    sha256_hex(data, n, h->sha);
    blob_ext(ext, h->ext);
    h->size = n;
    char dir[4200], path[4300];
    if ((size_t)snprintf(dir, sizeof dir, "%s/blobs/%.2s", store, h->sha) >= sizeof dir ||
        (size_t)snprintf(path, sizeof path, "%s/%s%s", dir, h->sha, h->ext) >= sizeof path)
        return err_set(e, "BlobError", "store path too long: %s", store);
    if (fs_is_file(path)) return 0;    /* same bytes, same name: written before */
    if (fs_mkdir_p(dir, e) || fs_write_atomic(path, data, n, 0644, e)) return -1;
    h->written = 1;
    return 0;
}

int blob_find(const char *store, const char *sha, char *out, size_t cap, dlm_err *e)
{
    if (!sha_ok(sha)) return err_set(e, "BlobError", "blob sha must be 64 lowercase hex, got '%s'", sha);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/blobs/%.2s", store, sha);
    DIR *d = opendir(dir);
    if (!d) return 1;
    struct dirent *de;
    int found = 0;
    while (!found && (de = readdir(d))) {
        const char *dot = strrchr(de->d_name, '.');
        if (dot && dot - de->d_name == 64 && !memcmp(de->d_name, sha, 64)) {
            snprintf(out, cap, "%s/%s", dir, de->d_name);
            found = 1;
        }
    }
    closedir(d);
    return found ? 0 : 1;
}

/* Streamed: a recording may be far larger than anything dlm reads whole.
 * The bytes are hashed as they are copied to a temp name beside the blob;
 * only when their sha is the one the caller checked (want_sha) is the
 * temp renamed into place. */
int blob_put_file(const char *store, const char *src, const char *want_sha, blob_handle *h, dlm_err *e)
{
    memset(h, 0, sizeof *h);
    if (!sha_ok(want_sha)) return err_set(e, "BlobError", "blob sha must be 64 lowercase hex, got '%s'", want_sha);
    snprintf(h->sha, sizeof h->sha, "%s", want_sha);
    blob_ext(src, h->ext);
    char dir[4200], path[4300], tmp[4400];
    if ((size_t)snprintf(dir, sizeof dir, "%s/blobs/%.2s", store, h->sha) >= sizeof dir ||
        (size_t)snprintf(path, sizeof path, "%s/%s%s", dir, h->sha, h->ext) >= sizeof path)
        return err_set(e, "BlobError", "store path too long: %s", store);
    int64_t sz = fs_file_size(src);
    h->size = sz > 0 ? (size_t)sz : 0;
    if (fs_is_file(path)) return 0;
    if (fs_mkdir_p(dir, e)) return -1;
    unsigned rnd = 0;
    for (const char *c = src; *c; c++) rnd = rnd * 31u + (unsigned char)*c;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%08x", path, (long)getpid(), rnd ^ (unsigned)time(NULL));
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) return err_sys(e, "cannot open %s", src);
    int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) { close(in); return err_sys(e, "cannot create %s", tmp); }
    sha256_ctx c;
    sha256_init(&c);
    char buf[1 << 15];
    size_t total = 0;
    int rc = 0;
    for (;;) {
        ssize_t k = read(in, buf, sizeof buf);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) { rc = err_sys(e, "cannot read %s", src); break; }
        if (k == 0) break;
        sha256_update(&c, buf, (size_t)k);
        for (ssize_t off = 0; off < k;) {
            ssize_t w = write(out, buf + off, (size_t)(k - off));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) { rc = fs_err_write(e, tmp, (uint64_t)(k - off)); break; }
            off += w;
        }
        if (rc) break;
        total += (size_t)k;
    }
    close(in);
    if (!rc && fsync(out)) rc = err_sys(e, "cannot fsync %s", tmp);
    if (close(out) && !rc) rc = err_sys(e, "cannot close %s", tmp);
    if (!rc) {
        unsigned char d[32];
        char hex[65];
        sha256_final(&c, d);
        hex_encode(d, 32, hex);
        if (strcmp(hex, want_sha)) {
            rc = err_set(e, "BlobError", "%s changed while dlm read it", src);
            err_hint(e, "train again once the file is written");
        }
    }
    if (!rc && rename(tmp, path)) rc = err_sys(e, "cannot rename %s", tmp);
    if (rc) { unlink(tmp); return -1; }
    h->size = total;
    h->written = 1;
    return fs_fsync_dir(dir, e);
}
