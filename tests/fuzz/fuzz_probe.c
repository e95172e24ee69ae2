/* fuzz_probe — the /proc and /sys parsers of src/run/probe.c on arbitrary
 * text: meminfo, cgroup files (memory.max, /proc/self/cgroup v1 and v2,
 * memory.stat, cpu.max, cfs quota/period), cache sizes, cpuinfo topology,
 * the NVIDIA information file. Input is split at the first NUL byte into
 * two texts (the second one feeds the two-argument parsers). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "run/probe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16) return 0;
    char *a = malloc(size + 1), *b;
    if (!a) return 0;
    memcpy(a, data, size);
    a[size] = 0;
    size_t la = strlen(a);
    b = la < size ? a + la + 1 : a + size;
    char buf[256];
    probe_parse_meminfo(a, "MemAvailable");
    probe_parse_cgroup_max(a);
    probe_parse_cgroup_path(a, buf, sizeof buf);
    probe_parse_cgroup_path(a, buf, 4);
    probe_parse_cgroup_v1_path(a, "memory", buf, sizeof buf);
    probe_parse_cgroup_v1_path(a, "cpu", buf, 3);
    probe_parse_kv(a, "inactive_file");
    probe_parse_cpu_max(a);
    probe_parse_cfs(a, b);
    probe_parse_cache_size(a);
    unsigned char allowed[4] = {0x5a, 0xff, 0, 1};
    probe_parse_cpuinfo_cores(a, NULL, 0);
    probe_parse_cpuinfo_cores(a, allowed, 32);
    probe_parse_nvidia_model(a, buf, sizeof buf);
    probe_parse_nvidia_model(b, buf, 2);
    free(a);
    return 0;
}
