#include "hw/probe.h"

#include <ctype.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "kern/cpu.h"

static int read_small(const char *path, char *buf, int cap)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, (size_t)cap - 1, f);
    fclose(f);
    buf[n] = 0;
    return (int)n;
}

uint64_t probe_parse_meminfo(const char *text, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = text; p && *p;) {
        if (!strncmp(p, key, kl) && p[kl] == ':') {
            unsigned long long v = strtoull(p + kl + 1, NULL, 10);
            return (uint64_t)v * 1024u;
        }
        p = strchr(p, '\n');
        if (p) p++;
    }
    return 0;
}

uint64_t probe_parse_cgroup_max(const char *text)
{
    while (isspace((unsigned char)*text)) text++;
    if (!strncmp(text, "max", 3) || !*text) return 0;
    unsigned long long v = strtoull(text, NULL, 10);
    /* v1 reports "no limit" as a huge page-aligned number. */
    if (v >= (1ull << 60)) return 0;
    return (uint64_t)v;
}

int probe_parse_cgroup_path(const char *text, char *buf, int cap)
{
    for (const char *p = text; p && *p;) {
        if (!strncmp(p, "0::", 3)) {
            const char *s = p + 3, *e = strchr(s, '\n');
            int n = e ? (int)(e - s) : (int)strlen(s);
            if (n >= cap) return -1;
            memcpy(buf, s, (size_t)n);
            buf[n] = 0;
            return 0;
        }
        p = strchr(p, '\n');
        if (p) p++;
    }
    return -1;
}

uint64_t probe_parse_cache_size(const char *text)
{
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (*end == 'K') v *= 1024;
    else if (*end == 'M') v *= 1024 * 1024;
    else if (*end == 'G') v *= 1024ull * 1024 * 1024;
    return (uint64_t)v;
}

static void probe_cgroup(host_info *h)
{
    char buf[4096], path[1024], file[1400];
    if (read_small("/proc/self/cgroup", buf, sizeof buf) > 0 &&
        probe_parse_cgroup_path(buf, path, sizeof path) == 0) {
        /* v2: walk from our cgroup up to the root; the tightest limit wins. */
        for (;;) {
            snprintf(file, sizeof file, "/sys/fs/cgroup%s/memory.max", path);
            if (read_small(file, buf, sizeof buf) > 0) {
                uint64_t lim = probe_parse_cgroup_max(buf);
                h->cgroup_version = 2;
                if (lim && (!h->cgroup_limit || lim < h->cgroup_limit)) {
                    h->cgroup_limit = lim;
                    snprintf(file, sizeof file, "/sys/fs/cgroup%s/memory.current", path);
                    if (read_small(file, buf, sizeof buf) > 0) h->cgroup_usage = strtoull(buf, NULL, 10);
                }
            }
            char *slash = strrchr(path, '/');
            if (!slash || slash == path) {
                if (path[0] && strcmp(path, "/")) { strcpy(path, "/"); continue; }
                break;
            }
            *slash = 0;
        }
        if (h->cgroup_version) return;
    }
    if (read_small("/sys/fs/cgroup/memory/memory.limit_in_bytes", buf, sizeof buf) > 0) {
        h->cgroup_version = 1;
        h->cgroup_limit = probe_parse_cgroup_max(buf);
        if (h->cgroup_limit && read_small("/sys/fs/cgroup/memory/memory.usage_in_bytes", buf, sizeof buf) > 0)
            h->cgroup_usage = strtoull(buf, NULL, 10);
    }
}

void probe_host(host_info *h, const char *disk_path)
{
    memset(h, 0, sizeof *h);
    char buf[65536];
    if (read_small("/proc/cpuinfo", buf, sizeof buf) > 0) {
        char *p = strstr(buf, "model name");
        if (p && (p = strchr(p, ':'))) {
            p++;
            while (*p == ' ') p++;
            char *e = strchr(p, '\n');
            int n = e ? (int)(e - p) : (int)strlen(p);
            snprintf(h->cpu_model, sizeof h->cpu_model, "%.*s", n, p);
        }
    }
    cpu_set_t set;
    h->cores_online = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (h->cores_online < 1) h->cores_online = 1;
    h->cores_physical = h->cores_online;
    cpu_describe(h->isa, sizeof h->isa);
    const cpu_features *f = cpu_get_features();
    h->avx2 = f->avx2;
    h->avx512 = cpu_level() >= CPU_AVX512;
    h->avx512bf16 = f->avx512bf16;
    h->vnni = f->avx512vnni || f->avxvnni;
    for (int i = 0; i < 8; i++) {
        char p1[128], lvl[16], type[32], size[32];
        snprintf(p1, sizeof p1, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (read_small(p1, lvl, sizeof lvl) <= 0) break;
        snprintf(p1, sizeof p1, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        read_small(p1, type, sizeof type);
        snprintf(p1, sizeof p1, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (read_small(p1, size, sizeof size) <= 0) continue;
        uint64_t sz = probe_parse_cache_size(size);
        int L = atoi(lvl);
        if (L == 1 && !strncmp(type, "Data", 4)) h->l1d = sz;
        else if (L == 2) h->l2 = sz;
        else if (L == 3) h->l3 = sz;
    }
    if (read_small("/proc/meminfo", buf, sizeof buf) > 0) {
        h->ram_total = probe_parse_meminfo(buf, "MemTotal");
        h->ram_available = probe_parse_meminfo(buf, "MemAvailable");
    }
    probe_cgroup(h);
    h->budget = h->ram_available;
    if (h->cgroup_limit) {
        uint64_t room = h->cgroup_limit > h->cgroup_usage ? h->cgroup_limit - h->cgroup_usage : 0;
        if (room < h->budget) h->budget = room;
    }
    if (disk_path) {
        struct statvfs sv;
        if (statvfs(disk_path, &sv) == 0) h->disk_free = (uint64_t)sv.f_bavail * sv.f_frsize;
    }
    if (access("/dev/nvidia0", F_OK) == 0 || access("/proc/driver/nvidia/version", F_OK) == 0)
        snprintf(h->gpu, sizeof h->gpu, "NVIDIA GPU present (dlm trains on the CPU)");
    h->determinism = "strong";
}
