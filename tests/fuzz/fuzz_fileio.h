/* Shared by the fuzz targets whose readers take a path: a private temp
 * folder per process and a helper that writes one file into it. */
#ifndef FUZZ_FILEIO_H
#define FUZZ_FILEIO_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "util/fs.h"

static const char *fuzz_dir(void)
{
    static char dir[256];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/dlm-fuzz.%d", (int)getpid());
        fs_mkdir_p(dir, NULL);
    }
    return dir;
}

/* Write bytes to <fuzz_dir>/<rel> (parents made); the path into out. */
static int fuzz_put(const char *rel, const void *data, size_t n, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s", fuzz_dir(), rel);
    char parent[4096];
    fs_dirname(parent, sizeof parent, out);
    if (fs_mkdir_p(parent, NULL)) return -1;
    FILE *f = fopen(out, "wb");
    if (!f) return -1;
    size_t w = n ? fwrite(data, 1, n, f) : 0;
    fclose(f);
    return w == n ? 0 : -1;
}
#endif
