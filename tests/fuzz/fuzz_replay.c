/* libFuzzer target: the replay store (replay/index.json and the zstd
 * corpus it points into). Input: a 2-byte length of the index, the index,
 * then the corpus bytes. Every entry an accepted index names is read. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include "tokens/replay.h"
#include "fuzz_fileio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    size_t n = (size_t)data[0] | (size_t)data[1] << 8;
    if (n > size - 2) n = size - 2;
    char p[4300], store[4300];
    if (fuzz_put("st/replay/index.json", data + 2, n, p, sizeof p) ||
        fuzz_put("st/replay/corpus.zst", data + 2 + n, size - 2 - n, p, sizeof p))
        return 0;
    snprintf(store, sizeof store, "%s/st", fuzz_dir());
    replay *r;
    dlm_err e;
    if (replay_open(store, &r, &e)) return 0;
    for (int i = 0; i < replay_count(r) && i < 64; i++) {
        char *c;
        size_t len;
        if (replay_read(r, i, &c, &len, &e) == 0) free(c);
    }
    replay_free(r);
    return 0;
}
