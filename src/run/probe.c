#include "run/probe.h"

#include <ctype.h>
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
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

/* root + path into out ("" root = the real one). */
static const char *at(char *out, size_t cap, const char *root, const char *path)
{
    snprintf(out, cap, "%s%s", root ? root : "", path);
    return out;
}

static const char *next_line(const char *p)
{
    p = strchr(p, '\n');
    return p ? p + 1 : NULL;
}

uint64_t probe_parse_meminfo(const char *text, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = text; p && *p; p = next_line(p)) {
        if (!strncmp(p, key, kl) && p[kl] == ':') {
            unsigned long long v = strtoull(p + kl + 1, NULL, 10);
            if (v > (UINT64_MAX >> 10)) return 0;
            return (uint64_t)v * 1024u;
        }
    }
    return 0;
}

uint64_t probe_parse_cgroup_max(const char *text)
{
    while (isspace((unsigned char)*text)) text++;
    if (!strncmp(text, "max", 3) || !isdigit((unsigned char)*text)) return 0;
    unsigned long long v = strtoull(text, NULL, 10);
    /* v1 reports "no limit" as a huge page-aligned number (2^63 - 4096). */
    if (v >= (1ull << 60)) return 0;
    return (uint64_t)v;
}

int probe_parse_cgroup_path(const char *text, char *buf, int cap)
{
    for (const char *p = text; p && *p; p = next_line(p)) {
        if (!strncmp(p, "0::", 3)) {
            const char *s = p + 3, *e = strchr(s, '\n');
            int n = e ? (int)(e - s) : (int)strlen(s);
            if (n >= cap) return -1;
            memcpy(buf, s, (size_t)n);
            buf[n] = 0;
            return 0;
        }
    }
    return -1;
}

int probe_parse_cgroup_v1_path(const char *text, const char *controller, char *buf, int cap)
{
    size_t cl = strlen(controller);
    for (const char *p = text; p && *p; p = next_line(p)) {
        const char *c1 = strchr(p, ':'), *e = strchr(p, '\n');
        if (!c1 || (e && c1 > e)) continue;
        const char *c2 = strchr(c1 + 1, ':');
        if (!c2 || (e && c2 > e)) continue;
        /* the controller list is comma-separated: "cpu,cpuacct" */
        int found = 0;
        for (const char *s = c1 + 1; s < c2;) {
            const char *comma = memchr(s, ',', (size_t)(c2 - s));
            const char *end = comma ? comma : c2;
            if ((size_t)(end - s) == cl && !strncmp(s, controller, cl)) found = 1;
            s = end + 1;
        }
        if (!found) continue;
        const char *s = c2 + 1;
        int n = e ? (int)(e - s) : (int)strlen(s);
        if (n >= cap) return -1;
        memcpy(buf, s, (size_t)n);
        buf[n] = 0;
        return 0;
    }
    return -1;
}

uint64_t probe_parse_kv(const char *text, const char *key)
{
    size_t kl = strlen(key);
    for (const char *p = text; p && *p; p = next_line(p))
        if (!strncmp(p, key, kl) && p[kl] == ' ') return strtoull(p + kl + 1, NULL, 10);
    return 0;
}

static int cores_ceil(unsigned long long quota, unsigned long long period)
{
    if (!period || !quota) return 0;
    unsigned long long c = (quota + period - 1) / period;
    return c > 65536 ? 65536 : (int)c;
}

int probe_parse_cpu_max(const char *text)
{
    while (isspace((unsigned char)*text)) text++;
    if (!isdigit((unsigned char)*text)) return 0; /* "max ..." */
    char *end;
    unsigned long long q = strtoull(text, &end, 10), per = 100000;
    if (isspace((unsigned char)*end)) {
        unsigned long long p2 = strtoull(end, NULL, 10);
        if (p2) per = p2;
    }
    return cores_ceil(q, per);
}

int probe_parse_cfs(const char *quota, const char *period)
{
    long long q = strtoll(quota, NULL, 10), p = strtoll(period, NULL, 10);
    if (q <= 0 || p <= 0) return 0;
    return cores_ceil((unsigned long long)q, (unsigned long long)p);
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

int probe_parse_cpuinfo_cores(const char *text, const unsigned char *allowed, int allowed_bits)
{
    /* (package, core) pairs seen, kept small: a 2-socket 128-core box has 256 */
    enum { MAXP = 2048 };
    long pairs[MAXP][2];
    int np = 0, proc = -1, have_topo = 0;
    long pkg = 0, core = -1;
    for (const char *p = text;; p = next_line(p)) {
        int blank = !p || !*p || *p == '\n';
        if (blank) {
            /* end of one processor's block */
            int ok = proc >= 0 && core >= 0 &&
                     (!allowed || (proc < allowed_bits && (allowed[proc / 8] >> (proc % 8) & 1)));
            if (ok) {
                int dup = 0;
                for (int i = 0; i < np && !dup; i++) dup = pairs[i][0] == pkg && pairs[i][1] == core;
                if (!dup && np < MAXP) { pairs[np][0] = pkg; pairs[np][1] = core; np++; }
            }
            proc = -1;
            core = -1;
            pkg = 0;
            if (!p || !*p) break;
            continue;
        }
        const char *colon = strchr(p, ':'), *e = strchr(p, '\n');
        if (!colon || (e && colon > e)) continue;
        if (!strncmp(p, "processor", 9)) proc = atoi(colon + 1);
        else if (!strncmp(p, "physical id", 11)) { pkg = atol(colon + 1); have_topo = 1; }
        else if (!strncmp(p, "core id", 7)) { core = atol(colon + 1); have_topo = 1; }
    }
    return have_topo ? np : 0;
}

int probe_parse_nvidia_model(const char *text, char *buf, int cap)
{
    for (const char *p = text; p && *p; p = next_line(p)) {
        if (strncmp(p, "Model:", 6)) continue;
        const char *s = p + 6, *e = strchr(s, '\n');
        while (*s == ' ' || *s == '\t') s++;
        int n = e ? (int)(e - s) : (int)strlen(s);
        while (n > 0 && isspace((unsigned char)s[n - 1])) n--;
        if (n <= 0) return -1;
        snprintf(buf, (size_t)cap, "%.*s", n, s);
        return 0;
    }
    return -1;
}

/* ---- cgroups ---------------------------------------------------------------- */

/* Consider a limit found at dir (v2 layout or v1 memory hierarchy). */
static void take_limit(host_info *h, const char *root, const char *dir, int v2)
{
    char file[1600], buf[8192];
    snprintf(file, sizeof file, "%s%s/%s", root, dir, v2 ? "memory.max" : "memory.limit_in_bytes");
    if (read_small(file, buf, sizeof buf) <= 0) return;
    if (!h->cgroup_version) h->cgroup_version = v2 ? 2 : 1;
    uint64_t lim = probe_parse_cgroup_max(buf);
    if (!lim || (h->cgroup_limit && lim >= h->cgroup_limit)) return;
    h->cgroup_limit = lim;
    h->cgroup_version = v2 ? 2 : 1;
    h->cgroup_usage = h->cgroup_inactive_file = 0;
    snprintf(file, sizeof file, "%s%s/%s", root, dir, v2 ? "memory.current" : "memory.usage_in_bytes");
    if (read_small(file, buf, sizeof buf) > 0) h->cgroup_usage = strtoull(buf, NULL, 10);
    snprintf(file, sizeof file, "%s%s/memory.stat", root, dir);
    if (read_small(file, buf, sizeof buf) > 0)
        h->cgroup_inactive_file = probe_parse_kv(buf, v2 ? "inactive_file" : "total_inactive_file");
}

static void take_cpu(host_info *h, const char *root, const char *dir, int v2)
{
    char file[1600], buf[256], per[256];
    int c = 0;
    if (v2) {
        snprintf(file, sizeof file, "%s%s/cpu.max", root, dir);
        if (read_small(file, buf, sizeof buf) > 0) c = probe_parse_cpu_max(buf);
    } else {
        snprintf(file, sizeof file, "%s%s/cpu.cfs_quota_us", root, dir);
        if (read_small(file, buf, sizeof buf) > 0) {
            snprintf(file, sizeof file, "%s%s/cpu.cfs_period_us", root, dir);
            if (read_small(file, per, sizeof per) > 0) c = probe_parse_cfs(buf, per);
        }
    }
    if (c > 0 && (!h->cores_quota || c < h->cores_quota)) h->cores_quota = c;
}

/* Walk from path up to "/" calling fn at each level: a limit set on a
 * parent binds the children too. */
static void walk_up(host_info *h, const char *root, const char *mount, const char *path,
                    void (*fn)(host_info *, const char *, const char *, int), int v2)
{
    char p[1024], dir[1400];
    snprintf(p, sizeof p, "%s", path[0] == '/' ? path : "/");
    for (int guard = 0; guard < 64; guard++) {
        snprintf(dir, sizeof dir, "%s%s", mount, strcmp(p, "/") ? p : "");
        fn(h, root, dir, v2);
        char *slash = strrchr(p, '/');
        if (!slash || !strcmp(p, "/")) break;
        if (slash == p) strcpy(p, "/");
        else *slash = 0;
    }
}

static void probe_cgroup(host_info *h, const char *root)
{
    char buf[8192], path[1024], file[1200], ctl[512];
    if (read_small(at(file, sizeof file, root, "/proc/self/cgroup"), buf, sizeof buf) <= 0) buf[0] = 0;
    /* pure v2: a "0::" line and the unified hierarchy mounted at /sys/fs/cgroup
     * (hybrid systems mount it at .../unified and keep memory on v1) */
    if (probe_parse_cgroup_path(buf, path, sizeof path) == 0 &&
        read_small(at(file, sizeof file, root, "/sys/fs/cgroup/cgroup.controllers"), ctl, sizeof ctl) >= 0) {
        walk_up(h, root, "/sys/fs/cgroup", path, take_limit, 1);
        walk_up(h, root, "/sys/fs/cgroup", path, take_cpu, 1);
        if (!h->cgroup_version) h->cgroup_version = 2;
        return;
    }
    /* v1: the memory hierarchy; in a container its own cgroup is often
     * mounted as the hierarchy root, so also look at the mount itself */
    if (probe_parse_cgroup_v1_path(buf, "memory", path, sizeof path)) strcpy(path, "/");
    walk_up(h, root, "/sys/fs/cgroup/memory", path, take_limit, 0);
    if (probe_parse_cgroup_v1_path(buf, "cpu", path, sizeof path)) strcpy(path, "/");
    walk_up(h, root, "/sys/fs/cgroup/cpu", path, take_cpu, 0);
    walk_up(h, root, "/sys/fs/cgroup/cpu,cpuacct", path, take_cpu, 0);
}

static void probe_gpus(host_info *h, const char *root)
{
    char dirp[1200], file[1600], buf[4096];
    DIR *d = opendir(at(dirp, sizeof dirp, root, "/proc/driver/nvidia/gpus"));
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) && h->n_gpus < PROBE_MAX_GPUS) {
            if (de->d_name[0] == '.') continue;
            snprintf(file, sizeof file, "%s/%s/information", dirp, de->d_name);
            if (read_small(file, buf, sizeof buf) > 0 &&
                probe_parse_nvidia_model(buf, h->gpus[h->n_gpus], sizeof h->gpus[0]) == 0)
                h->n_gpus++;
        }
        closedir(d);
    }
    if (h->n_gpus) return;
    /* other vendors: PCI display controllers under /sys/class/drm */
    d = opendir(at(dirp, sizeof dirp, root, "/sys/class/drm"));
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d)) && h->n_gpus < PROBE_MAX_GPUS) {
        if (strncmp(de->d_name, "card", 4) || strchr(de->d_name, '-')) continue;
        char ven[32] = "", dev[32] = "";
        snprintf(file, sizeof file, "%s/%s/device/vendor", dirp, de->d_name);
        if (read_small(file, ven, sizeof ven) <= 0) continue;
        snprintf(file, sizeof file, "%s/%s/device/device", dirp, de->d_name);
        read_small(file, dev, sizeof dev);
        long v = strtol(ven, NULL, 16);
        const char *name = v == 0x10de ? "NVIDIA" : v == 0x1002 ? "AMD" : v == 0x8086 ? "Intel" : NULL;
        if (!name) continue;
        dev[strcspn(dev, "\n")] = 0;
        snprintf(h->gpus[h->n_gpus++], sizeof h->gpus[0], "%s GPU %s", name, dev);
    }
    closedir(d);
}

void probe_host_at(host_info *h, const char *disk_path, const char *root)
{
    memset(h, 0, sizeof *h);
    if (!root) root = "";
    /* /proc/cpuinfo of a big box is several hundred KB */
    enum { CAP = 1 << 20 };
    char *buf = malloc(CAP), file[1200];
    if (!buf) return;
    int n = read_small(at(file, sizeof file, root, "/proc/cpuinfo"), buf, CAP);
    cpu_set_t set;
    int have_set = !root[0] && sched_getaffinity(0, sizeof set, &set) == 0;
    h->cores_online = have_set ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (h->cores_online < 1) h->cores_online = 1;
    if (n > 0) {
        char *p = strstr(buf, "model name");
        if (p && (p = strchr(p, ':'))) {
            p++;
            while (*p == ' ' || *p == '\t') p++;
            char *e = strchr(p, '\n');
            int len = e ? (int)(e - p) : (int)strlen(p);
            snprintf(h->cpu_model, sizeof h->cpu_model, "%.*s", len, p);
        }
        unsigned char allowed[CPU_SETSIZE / 8];
        memset(allowed, 0, sizeof allowed);
        for (int i = 0; have_set && i < CPU_SETSIZE; i++)
            if (CPU_ISSET(i, &set)) allowed[i / 8] |= (unsigned char)(1u << (i % 8));
        h->cores_physical = probe_parse_cpuinfo_cores(buf, have_set ? allowed : NULL, CPU_SETSIZE);
    }
    if (h->cores_physical < 1 || h->cores_physical > h->cores_online) h->cores_physical = h->cores_online;
    cpu_describe(h->isa, sizeof h->isa);
    const cpu_features *f = cpu_get_features();
    h->avx2 = f->avx2;
    h->avx512 = f->avx512f && f->avx512bw && f->avx512dq && f->avx512vl;
    h->avx512bf16 = f->avx512bf16;
    h->vnni = f->avx512vnni || f->avxvnni;
    h->f16c = f->f16c;
    const cpu_amx *amx = cpu_get_amx();
    h->amx = amx->usable;
    h->amx_tile = amx->tile;
    h->amx_bf16 = amx->bf16;
    h->amx_int8 = amx->int8;
    snprintf(h->amx_reason, sizeof h->amx_reason, "%s", amx->reason);
    for (int i = 0; i < 8; i++) {
        char p1[1400], lvl[16], type[32] = "", size[32];
        snprintf(p1, sizeof p1, "%s/sys/devices/system/cpu/cpu0/cache/index%d/level", root, i);
        if (read_small(p1, lvl, sizeof lvl) <= 0) break;
        snprintf(p1, sizeof p1, "%s/sys/devices/system/cpu/cpu0/cache/index%d/type", root, i);
        read_small(p1, type, sizeof type);
        snprintf(p1, sizeof p1, "%s/sys/devices/system/cpu/cpu0/cache/index%d/size", root, i);
        if (read_small(p1, size, sizeof size) <= 0) continue;
        uint64_t sz = probe_parse_cache_size(size);
        int L = atoi(lvl);
        if (L == 1 && !strncmp(type, "Data", 4)) h->l1d = sz;
        else if (L == 2) h->l2 = sz;
        else if (L == 3) h->l3 = sz;
    }
    if (read_small(at(file, sizeof file, root, "/proc/meminfo"), buf, CAP) > 0) {
        h->ram_total = probe_parse_meminfo(buf, "MemTotal");
        h->ram_available = probe_parse_meminfo(buf, "MemAvailable");
        if (!h->ram_available) h->ram_available = probe_parse_meminfo(buf, "MemFree");
    }
    free(buf);
    probe_cgroup(h, root);
    h->cores_usable = h->cores_online;
    if (h->cores_quota && h->cores_quota < h->cores_usable) h->cores_usable = h->cores_quota;
    h->budget = h->ram_available;
    h->budget_from = "MemAvailable";
    if (h->cgroup_limit) {
        uint64_t used = h->cgroup_usage > h->cgroup_inactive_file ? h->cgroup_usage - h->cgroup_inactive_file : 0;
        uint64_t room = h->cgroup_limit > used ? h->cgroup_limit - used : 0;
        if (room < h->budget || !h->budget) {
            h->budget = room;
            h->budget_from = h->cgroup_version == 2 ? "cgroup v2 memory.max" : "cgroup v1 memory.limit_in_bytes";
        }
    }
    if (disk_path) {
        struct statvfs sv;
        snprintf(h->disk_path, sizeof h->disk_path, "%s", disk_path);
        if (statvfs(disk_path, &sv) == 0) h->disk_free = (uint64_t)sv.f_bavail * sv.f_frsize;
    }
    probe_gpus(h, root);
    struct utsname u;
    if (!root[0] && uname(&u) == 0) snprintf(h->kernel, sizeof h->kernel, "%s %s", u.sysname, u.release);
    h->determinism = "strong";
}

void probe_host(host_info *h, const char *disk_path) { probe_host_at(h, disk_path, NULL); }
