/* libFuzzer target: the store lock file (<store>/.lock, written by dlm or
 * by the original tool, and read by every writer, `show` and `status`). */
#include <stddef.h>
#include <stdint.h>
#include "store/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    store_lock_info info;
    if (store_lock_parse((const char *)data, size, &info) == 0) {
        volatile size_t n = 0;
        for (const char *p = info.host; *p; p++) n++;
        for (const char *p = info.command; *p; p++) n++;
        (void)n;
    }
    return 0;
}
