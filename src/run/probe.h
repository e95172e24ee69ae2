/* probe — what this host can do: CPU, ISA, caches, memory (with container
 * limits), disk, accelerators. Read once from /proc, /sys and cpuid; no
 * external tools.
 *
 * Memory budget. A process may use the smaller of
 *   - MemAvailable (/proc/meminfo): what the kernel can hand out without
 *     swapping, page cache included;
 *   - the tightest cgroup memory limit on the way from this process's
 *     cgroup to the root (v2 memory.max, v1 memory.limit_in_bytes), minus
 *     what the cgroup already uses, not counting its inactive page cache
 *     (inactive_file), which the kernel reclaims before it OOM-kills: the
 *     "working set" rule container runtimes use.
 * Cores: the CPUs this process may run on (affinity), capped by a cgroup
 * CPU quota (v2 cpu.max, v1 cfs_quota_us/cfs_period_us) rounded up. */
#ifndef DLM_PROBE_H
#define DLM_PROBE_H

#include <stdint.h>

#define PROBE_MAX_GPUS 8

typedef struct host_info {
    char cpu_model[128];
    int cores_online;         /* logical CPUs this process may run on */
    int cores_physical;       /* distinct (package, core) among them; = cores_online when unknown */
    int cores_quota;          /* cgroup CPU quota in cores (rounded up), 0 = none */
    int cores_usable;         /* min(cores_online, quota): what `auto` threads uses */
    char isa[128];            /* "avx512 +bf16 +vnni +f16c" */
    int avx2, avx512, avx512bf16, vnni, f16c;
    int amx, amx_tile, amx_bf16, amx_int8;  /* amx: tiles usable by this process (kern/cpu.h) */
    char amx_reason[96];      /* why not, or the AMX features when usable */
    uint64_t l1d, l2, l3;     /* bytes, 0 unknown */
    uint64_t ram_total, ram_available;   /* /proc/meminfo */
    int cgroup_version;       /* 0 none found, 1, 2 */
    uint64_t cgroup_limit;    /* 0 = no limit */
    uint64_t cgroup_usage;    /* usage of the limiting cgroup */
    uint64_t cgroup_inactive_file; /* reclaimable page cache inside it */
    uint64_t budget;          /* bytes a run may use (see above) */
    const char *budget_from;  /* "MemAvailable" or "cgroup v2 memory.max" ... */
    uint64_t disk_free;       /* at the probed path, 0 unknown */
    char disk_path[512];
    int n_gpus;
    char gpus[PROBE_MAX_GPUS][96];  /* "NVIDIA H200", "AMD GPU 0x740f" */
    char kernel[96];          /* uname -sr */
    const char *determinism;  /* "strong": CPU kernels are bit-exact across thread counts */
} host_info;

/* Probe; disk_path may be NULL (skip disk). Never fails: unknowns are 0. */
void probe_host(host_info *h, const char *disk_path);

/* Probe with another root for /proc and /sys (tests: a fake tree). */
void probe_host_at(host_info *h, const char *disk_path, const char *root);

/* ---- parse helpers, exposed for unit tests -------------------------------- */
uint64_t probe_parse_meminfo(const char *text, const char *key);      /* "Key:   123 kB" → bytes, 0 absent */
/* cgroup memory.max / memory.limit_in_bytes → bytes, 0 = unlimited ("max",
 * v1's huge "no limit" value, empty or garbage). */
uint64_t probe_parse_cgroup_max(const char *text);
/* /proc/self/cgroup → the v2 path ("0::/x" line) into buf. 0 ok, -1 none. */
int probe_parse_cgroup_path(const char *text, char *buf, int cap);
/* /proc/self/cgroup → the v1 path of the hierarchy carrying `controller`
 * ("4:memory:/docker/abc", "7:cpu,cpuacct:/x"). 0 ok, -1 none. */
int probe_parse_cgroup_v1_path(const char *text, const char *controller, char *buf, int cap);
/* "key value" lines (memory.stat): the value of key, or 0. */
uint64_t probe_parse_kv(const char *text, const char *key);
/* cgroup v2 cpu.max ("max 100000" / "150000 100000") → cores rounded up, 0 = none. */
int probe_parse_cpu_max(const char *text);
/* v1 cfs quota/period texts → cores rounded up, 0 = none (quota -1). */
int probe_parse_cfs(const char *quota, const char *period);
/* Sizes like "48K", "2048K", "32768K", "1M" (sysfs cache size). */
uint64_t probe_parse_cache_size(const char *text);
/* /proc/cpuinfo → distinct (physical id, core id) pairs among the listed
 * processors (only those whose bit is set in `allowed`, a bitmap over
 * processor numbers 0..allowed_bits-1; NULL = all). 0 when the file has
 * no topology fields. */
int probe_parse_cpuinfo_cores(const char *text, const unsigned char *allowed, int allowed_bits);
/* "Model: \t NVIDIA H200" line of /proc/driver/nvidia/gpus/x/information. */
int probe_parse_nvidia_model(const char *text, char *buf, int cap);

#endif
