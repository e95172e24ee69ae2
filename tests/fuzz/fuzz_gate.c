/* libFuzzer target: a stored adapter gate (adapter/_gate: gate_config.json,
 * then gate.safetensors after the first NUL byte of the input), read by
 * `dlm prompt --gate auto` (src/adapter/gate.h). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "adapter/gate.h"
#include "fuzz_fileio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t n1 = nul ? (size_t)(nul - data) : size;
    char p[4300], q[4300], dir[4300];
    if (fuzz_put("g/gate_config.json", data, n1, p, sizeof p)) return 0;
    fs_dirname(dir, sizeof dir, p);
    if (nul) {
        if (fuzz_put("g/gate.safetensors", nul + 1, size - n1 - 1, q, sizeof q)) return 0;
    } else {
        snprintf(q, sizeof q, "%s/gate.safetensors", dir);
        unlink(q);
    }
    gate *g = NULL;
    dlm_err e;
    if (!gate_load(dir, &g, &e)) {
        float x[4] = {0}, pr[GATE_MAX];
        if (g->uniform || g->in <= 4) gate_forward(g, g->uniform ? NULL : x, 1, pr);
        gate_free(g);
    }
    return 0;
}
