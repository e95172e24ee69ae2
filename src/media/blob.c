/* blob — content-addressed media files in a store (media/blob.h). */
#include "media/blob.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

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
