/* probe — what this host can do: CPU, ISA, caches, memory (with container
 * limits), disk, accelerators. Read once from /proc, /sys and cpuid; no
 * external tools. */
#ifndef DLM_PROBE_H
#define DLM_PROBE_H

#include <stdint.h>

typedef struct host_info {
    char cpu_model[128];
    int cores_online;         /* logical CPUs this process may run on */
    int cores_physical;       /* best effort; = cores_online when unknown */
    char isa[128];            /* "avx512 +bf16 +vnni +f16c" */
    int avx2, avx512, avx512bf16, vnni;
    uint64_t l1d, l2, l3;     /* bytes, 0 unknown */
    uint64_t ram_total, ram_available;   /* /proc/meminfo */
    uint64_t cgroup_limit;    /* 0 = none (v2 memory.max or v1 limit_in_bytes) */
    uint64_t cgroup_usage;    /* current usage if limited */
    int cgroup_version;       /* 0 none, 1, 2 */
    uint64_t budget;          /* min(available, cgroup limit − usage): what we may use */
    uint64_t disk_free;       /* at the probed path */
    char gpu[128];            /* "" = none found */
    const char *determinism;  /* "strong": CPU kernels are bit-exact across threads */
} host_info;

/* Probe; disk_path may be NULL (skip disk). Never fails: unknowns are 0. */
void probe_host(host_info *h, const char *disk_path);

/* Parse helpers, exposed for unit tests. */
uint64_t probe_parse_meminfo(const char *text, const char *key);      /* kB → bytes */
/* cgroup v2 memory.max content ("max\n" or bytes) → bytes, 0 = unlimited. */
uint64_t probe_parse_cgroup_max(const char *text);
/* /proc/self/cgroup text → the v2 path ("0::/x") or NULL; copied into buf. */
int probe_parse_cgroup_path(const char *text, char *buf, int cap);
/* Sizes like "48K", "2048K", "32768K", "1M" (sysfs cache size). */
uint64_t probe_parse_cache_size(const char *text);

#endif
