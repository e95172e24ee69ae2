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
        uint64_t nm = s.optim_kind ? s.n32 : s.n;   /* 8-bit state: m, v hold the 32-bit tensors only */
        if (s.n) sum += s.params[s.n - 1] + (s.best ? s.best[s.n - 1] : 0);
        if (nm) sum += s.m[nm - 1] + s.v[nm - 1];
        if (s.optim_kind && s.n8) sum += s.c1[s.n8 - 1] + s.c2[s.n8 - 1] + s.a1[s.nblk - 1] + s.a2[s.nblk - 1];
        (void)sum;
        state_free(&s);
    }
    return 0;
}
