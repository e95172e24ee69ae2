/* libFuzzer target: training_state.bin (a checkpoint's optimizer state).
 * The sidecar gets the bytes' true sha256, so the parser behind the
 * checksum sees every input; the first byte chooses a wrong sidecar now
 * and then so the mismatch path runs too. */
#include <stddef.h>
#include <stdint.h>
#include "adapter/state.h"
#include "util/hash.h"
#include "fuzz_fileio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char p[4300], side[4300], hex[65];
    if (fuzz_put("ck/training_state.bin", data, size, p, sizeof p)) return 0;
    sha256_hex(data, size, hex);
    if (size && data[0] == 0x5a) hex[0] = hex[0] == '0' ? '1' : '0';
    if (fuzz_put("ck/training_state.bin.sha256", hex, 64, side, sizeof side)) return 0;
    train_state s;
    dlm_err e;
    if (state_load(p, &s, &e) == 0) {
        volatile float sum = 0;
        if (s.n) sum += s.params[s.n - 1] + s.m[s.n - 1] + s.v[s.n - 1] + (s.best ? s.best[s.n - 1] : 0);
        (void)sum;
        state_free(&s);
    }
    return 0;
}
