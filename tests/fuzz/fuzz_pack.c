/* fuzz_pack — the bounded pack reader (src/share/pack_read.c) on arbitrary
 * bytes: the zstd stream, the tar headers libarchive parses from it, member
 * names and types, CHECKSUMS.sha256, PACK_HEADER.json, manifest.json and
 * provenance.json. Nothing is written (dest = NULL); limits are small so
 * the size and ratio checks are reached. */
#include <stdint.h>
#include <stdlib.h>

#include "share/pack.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pack_limits lim;
    pack_limits_default(&lim);
    lim.max_member = 1 << 20;
    lim.max_total = 4 << 20;
    lim.ratio_floor = 1 << 20;
    lim.max_entries = 2000;
    lim.window_log_max = 20;
    dlm_err e;
    err_clear(&e);
    pack_contents *c = pack_read_mem(data, size, NULL, &lim, &e);
    if (c) {
        pack_find(c, "store/manifest.json");
        pack_contents_free(c);
    }
    return 0;
}
