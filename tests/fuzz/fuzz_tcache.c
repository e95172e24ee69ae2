/* libFuzzer target: a tokenization-cache entry (src/tokens/tcache.h) as
 * tcache_get reads it from the store. Input: the bytes after the magic;
 * the entry gets "DLMTC001" in front and the true sha256 behind, so the
 * decoder behind the checksum sees every input (a first byte 0x5a breaks
 * the checksum now and then, for the mismatch path). A hit must survive a
 * put and a second get unchanged. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "tokens/tcache.h"
#include "util/hash.h"
#include "fuzz_fileio.h"

#define KEY "ab00000000000000000000000000000000000000000000000000000000000000"
#define KEY2 "cd00000000000000000000000000000000000000000000000000000000000000"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20)) return 0;
    unsigned char *b = malloc(8 + size + 32);
    if (!b) return 0;
    memcpy(b, "DLMTC001", 8);
    if (size) memcpy(b + 8, data, size);
    sha256(b, 8 + size, b + 8 + size);
    if (size && data[0] == 0x5a) b[8 + size] ^= 1;
    char p[4300], store[4300];
    snprintf(store, sizeof store, "%s/store", fuzz_dir());
    int rc = fuzz_put("store/" TCACHE_DIR "/entries/ab/" KEY ".bin", b, 8 + size + 32, p, sizeof p);
    free(b);
    if (rc) return 0;
    tcache *c;
    dlm_err e;
    if (tcache_open(store, &c, &e)) return 0;
    tcache_row *rows, *again;
    int n, n2;
    if (tcache_get(c, KEY, &rows, &n) == 1) {
        if (tcache_put(c, KEY2, rows, n, &e) == 0) {
            if (tcache_get(c, KEY2, &again, &n2) != 1 || n2 != n) abort();
            for (int i = 0; i < n; i++)
                if (again[i].n != rows[i].n || memcmp(again[i].ids, rows[i].ids, 4 * (size_t)rows[i].n) ||
                    memcmp(again[i].mask, rows[i].mask, (size_t)rows[i].n))
                    abort();
            tcache_rows_free(again, n2);
        }
        tcache_rows_free(rows, n);
    }
    tcache_close(c);
    return 0;
}
