/* audio_cache — the original's waveform cache as an .npz (media/audio.h).
 *
 * numpy.savez writes a zip of stored (uncompressed) members, one .npy per
 * array. The writer here makes exactly that for one float32 vector; the
 * reader takes the first member of any such zip (numpy's own adds a zip64
 * extra field, whose length the local header gives) and checks its .npy
 * header. */
#include "media/audio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/fs.h"

static uint32_t crc32_buf(uint32_t crc, const unsigned char *p, size_t n)
{
    uint32_t t[256];   /* built per call (no shared state): 2 KiB of work next to a 1.9 MB entry */
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[i] = c;
    }
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = t[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static void w16(unsigned char *p, unsigned v) { p[0] = (unsigned char)v; p[1] = (unsigned char)(v >> 8); }
static void w32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static unsigned r16(const unsigned char *p) { return p[0] | (unsigned)p[1] << 8; }
static uint32_t r32(const unsigned char *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

int audio_cache_path(const char *store, const char *blob_sha, int rate, int max_ms, int auto_resample, char *out,
                     size_t cap, dlm_err *e)
{
    if ((size_t)snprintf(out, cap, "%s/audio-waveform-cache/%.2s/%s.%d.%d%s.wav.npz", store, blob_sha, blob_sha, rate,
                         max_ms, auto_resample ? ".rs" : "") >= cap)
        return err_set(e, "CacheError", "store path too long: %s", store);
    return 0;
}

#define NPZ_NAME "waveform.npy"

int audio_cache_put(const char *path, const float *x, size_t n, dlm_err *e)
{
    char hdr[128];
    int hl = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu,), }", n);
    int total = 10 + hl + 1;
    int pad = (64 - total % 64) % 64;   /* numpy aligns the data to 64 bytes */
    size_t npy_len = (size_t)(10 + hl + pad + 1) + n * 4;
    size_t nl = sizeof NPZ_NAME - 1;
    size_t len = 30 + nl + npy_len + 46 + nl + 22;
    if (npy_len > 0xFFFFFFF0u) return err_set(e, "CacheError", "waveform too long for the cache (%zu samples)", n);
    unsigned char *z = calloc(1, len);
    if (!z) return err_set(e, "MemoryError", "out of memory");
    unsigned char *npy = z + 30 + nl;
    memcpy(npy, "\x93NUMPY\x01\x00", 8);
    w16(npy + 8, (unsigned)(hl + pad + 1));
    memcpy(npy + 10, hdr, (size_t)hl);
    memset(npy + 10 + hl, ' ', (size_t)pad);
    npy[10 + hl + pad] = '\n';
    unsigned char *d = npy + 10 + hl + pad + 1;
    for (size_t i = 0; i < n; i++) {   /* little-endian float32 */
        uint32_t u;
        memcpy(&u, &x[i], 4);
        w32(d + 4 * i, u);
    }
    uint32_t crc = crc32_buf(0, npy, npy_len);
    /* local header */
    w32(z, 0x04034b50); w16(z + 4, 20); w16(z + 8, 0);
    w32(z + 14, crc); w32(z + 18, (uint32_t)npy_len); w32(z + 22, (uint32_t)npy_len); w16(z + 26, (unsigned)nl);
    memcpy(z + 30, NPZ_NAME, nl);
    /* central directory */
    unsigned char *c = npy + npy_len;
    w32(c, 0x02014b50); w16(c + 4, 20); w16(c + 6, 20);
    w32(c + 16, crc); w32(c + 20, (uint32_t)npy_len); w32(c + 24, (uint32_t)npy_len); w16(c + 28, (unsigned)nl);
    w32(c + 38, 0644u << 16);
    memcpy(c + 46, NPZ_NAME, nl);
    unsigned char *end = c + 46 + nl;
    w32(end, 0x06054b50); w16(end + 8, 1); w16(end + 10, 1);
    w32(end + 12, (uint32_t)(46 + nl)); w32(end + 16, (uint32_t)(c - z));
    char dir[4200];
    fs_dirname(dir, sizeof dir, path);
    int rc = fs_mkdir_p(dir, e) || fs_write_atomic(path, z, len, 0644, e) ? -1 : 0;
    free(z);
    return rc;
}

int audio_cache_get(const char *path, float **x, size_t *n, dlm_err *e)
{
    if (!fs_is_file(path)) return 1;
    char *buf = NULL;
    size_t len = 0;
    dlm_err ie;
    if (fs_read_all(path, 1u << 30, &buf, &len, &ie)) return err_set(e, "CacheError", "%s: %s", path, ie.msg);
    const unsigned char *z = (const unsigned char *)buf;
    int rc = 1;   /* anything unexpected is a miss: the entry is rebuilt */
    if (len < 30 || r32(z) != 0x04034b50 || r16(z + 8) != 0) goto out;
    size_t nl = r16(z + 26), xl = r16(z + 28), at = 30 + nl + xl;
    if (at + 10 > len || memcmp(z + at, "\x93NUMPY", 6)) goto out;
    size_t hl = z[at + 6] == 1 ? r16(z + at + 8) : (at + 12 <= len ? r32(z + at + 8) : len);
    size_t ho = at + (z[at + 6] == 1 ? 10 : 12);
    if (ho + hl > len || hl > 4096) goto out;
    char h[4097];
    memcpy(h, z + ho, hl);
    h[hl] = 0;
    const char *s = strstr(h, "'shape': (");
    if (!strstr(h, "'descr': '<f4'") || !strstr(h, "'fortran_order': False") || !s) goto out;
    char *endp;
    unsigned long long cnt = strtoull(s + 10, &endp, 10);
    if (*endp != ',' || endp[1] != ')' || ho + hl + cnt * 4 > len) goto out;
    float *v = malloc((cnt + 1) * sizeof *v);
    if (!v) { rc = err_set(e, "MemoryError", "out of memory"); goto out; }
    const unsigned char *d = z + ho + hl;
    for (size_t i = 0; i < cnt; i++) {
        uint32_t u = r32(d + 4 * i);
        memcpy(&v[i], &u, 4);
    }
    *x = v;
    *n = (size_t)cnt;
    rc = 0;
out:
    free(buf);
    return rc;
}
