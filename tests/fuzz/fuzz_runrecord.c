/* libFuzzer target: a run record as `dlm status` reads it
 * (run/heartbeat.json and run/exit.json). Input: a 2-byte length of the
 * heartbeat, the heartbeat, then the exit record. */
#include <stddef.h>
#include <stdint.h>
#include "run/heartbeat.h"
#include "fuzz_fileio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    size_t n = (size_t)data[0] | (size_t)data[1] << 8;
    if (n > size - 2) n = size - 2;
    char p[4300], store[4300];
    if (fuzz_put("rr/run/heartbeat.json", data + 2, n, p, sizeof p) ||
        fuzz_put("rr/run/exit.json", data + 2 + n, size - 2 - n, p, sizeof p))
        return 0;
    snprintf(store, sizeof store, "%s/rr", fuzz_dir());
    run_report r;
    dlm_err e;
    (void)hb_read(store, &r, &e);
    return 0;
}
