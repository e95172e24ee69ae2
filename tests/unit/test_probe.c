/* probe: the /proc and /sys parsers on real-world samples, and the budget
 * from fake cgroup v1 / v2 trees (nested limits, page cache not counted,
 * CPU quotas). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "run/probe.h"
#include "util/fs.h"

static void put(const char *root, const char *rel, const char *text)
{
    char p[4096], dir[4096];
    snprintf(p, sizeof p, "%s%s", root, rel);
    fs_dirname(dir, sizeof dir, p);
    CHECK(fs_mkdir_p(dir, NULL) == 0);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static const char *MEMINFO = "MemTotal:       24681844 kB\nMemFree:         1000000 kB\n"
                             "MemAvailable:   20000000 kB\nBuffers:          123456 kB\n";

static void test_parsers(void)
{
    CHECK_INT(probe_parse_meminfo(MEMINFO, "MemTotal"), 24681844ull * 1024);
    CHECK_INT(probe_parse_meminfo(MEMINFO, "MemAvailable"), 20000000ull * 1024);
    CHECK_INT(probe_parse_meminfo(MEMINFO, "Mem"), 0);          /* a prefix is not a key */
    CHECK_INT(probe_parse_meminfo(MEMINFO, "SwapTotal"), 0);
    CHECK_INT(probe_parse_meminfo("MemTotal: 99999999999999999999 kB\n", "MemTotal"), 0); /* overflow */

    CHECK_INT(probe_parse_cgroup_max("max\n"), 0);
    CHECK_INT(probe_parse_cgroup_max("8589934592\n"), 8589934592ull);
    CHECK_INT(probe_parse_cgroup_max("9223372036854771712\n"), 0); /* v1 "no limit" */
    CHECK_INT(probe_parse_cgroup_max(""), 0);
    CHECK_INT(probe_parse_cgroup_max("garbage"), 0);
    CHECK_INT(probe_parse_cgroup_max("-1"), 0);

    char buf[256];
    CHECK_INT(probe_parse_cgroup_path("0::/user.slice/user-0.slice/session-3.scope\n", buf, sizeof buf), 0);
    CHECK_STR(buf, "/user.slice/user-0.slice/session-3.scope");
    CHECK_INT(probe_parse_cgroup_path("12:memory:/docker/abc\n1:name=systemd:/x\n", buf, sizeof buf), -1);
    CHECK_INT(probe_parse_cgroup_path("0::/\n", buf, sizeof buf), 0);
    CHECK_STR(buf, "/");
    CHECK_INT(probe_parse_cgroup_path("0::/aaaaaaaaaaaaaaaa\n", buf, 8), -1); /* does not fit: refused */

    const char *v1 = "12:pids:/docker/abc\n11:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n0::/\n";
    CHECK_INT(probe_parse_cgroup_v1_path(v1, "memory", buf, sizeof buf), 0);
    CHECK_STR(buf, "/docker/abc");
    CHECK_INT(probe_parse_cgroup_v1_path(v1, "cpu", buf, sizeof buf), 0);
    CHECK_STR(buf, "/docker/abc");
    CHECK_INT(probe_parse_cgroup_v1_path(v1, "cpuacct", buf, sizeof buf), 0);
    CHECK_INT(probe_parse_cgroup_v1_path(v1, "cpus", buf, sizeof buf), -1);   /* whole names only */
    CHECK_INT(probe_parse_cgroup_v1_path("garbage", "memory", buf, sizeof buf), -1);

    const char *stat2 = "anon 1000\nfile 5000\ninactive_anon 10\nactive_file 2000\ninactive_file 3000\n";
    CHECK_INT(probe_parse_kv(stat2, "inactive_file"), 3000);
    CHECK_INT(probe_parse_kv(stat2, "file"), 5000);
    CHECK_INT(probe_parse_kv(stat2, "total_inactive_file"), 0);

    CHECK_INT(probe_parse_cpu_max("max 100000\n"), 0);
    CHECK_INT(probe_parse_cpu_max("150000 100000\n"), 2);
    CHECK_INT(probe_parse_cpu_max("50000 100000\n"), 1);
    CHECK_INT(probe_parse_cpu_max("400000 100000\n"), 4);
    CHECK_INT(probe_parse_cpu_max("200000\n"), 2); /* period defaults to 100000 */
    CHECK_INT(probe_parse_cfs("-1\n", "100000\n"), 0);
    CHECK_INT(probe_parse_cfs("250000\n", "100000\n"), 3);
    CHECK_INT(probe_parse_cfs("100000\n", "0\n"), 0);

    CHECK_INT(probe_parse_cache_size("48K\n"), 48 * 1024);
    CHECK_INT(probe_parse_cache_size("2048K"), 2048 * 1024);
    CHECK_INT(probe_parse_cache_size("32M"), 32u << 20);
    CHECK_INT(probe_parse_cache_size("12345"), 12345);

    /* 4 logical CPUs on 2 cores (hyper-threading), one socket */
    const char *cpuinfo = "processor\t: 0\nphysical id\t: 0\ncore id\t\t: 0\n\n"
                          "processor\t: 1\nphysical id\t: 0\ncore id\t\t: 1\n\n"
                          "processor\t: 2\nphysical id\t: 0\ncore id\t\t: 0\n\n"
                          "processor\t: 3\nphysical id\t: 0\ncore id\t\t: 1\n\n";
    CHECK_INT(probe_parse_cpuinfo_cores(cpuinfo, NULL, 0), 2);
    unsigned char only02 = 0x05; /* CPUs 0 and 2: the same core */
    CHECK_INT(probe_parse_cpuinfo_cores(cpuinfo, &only02, 8), 1);
    unsigned char only01 = 0x03;
    CHECK_INT(probe_parse_cpuinfo_cores(cpuinfo, &only01, 8), 2);
    /* two sockets with the same core ids */
    const char *two = "processor : 0\nphysical id : 0\ncore id : 0\n\nprocessor : 1\nphysical id : 1\ncore id : 0\n";
    CHECK_INT(probe_parse_cpuinfo_cores(two, NULL, 0), 2);
    /* no topology lines (some VMs, ARM): unknown */
    CHECK_INT(probe_parse_cpuinfo_cores("processor : 0\nmodel name : x\n\n", NULL, 0), 0);

    CHECK_INT(probe_parse_nvidia_model("Model: \t\t NVIDIA H200\nIRQ: 45\n", buf, sizeof buf), 0);
    CHECK_STR(buf, "NVIDIA H200");
    CHECK_INT(probe_parse_nvidia_model("IRQ: 45\n", buf, sizeof buf), -1);
}

static void test_tree_v2(void)
{
    const char *r = check_tmpdir("probe_v2");
    put(r, "/proc/meminfo", MEMINFO);
    put(r, "/proc/cpuinfo", "processor : 0\nmodel name : Test CPU\nphysical id : 0\ncore id : 0\n\n");
    put(r, "/proc/self/cgroup", "0::/jobs/job1/task\n");
    put(r, "/sys/fs/cgroup/cgroup.controllers", "cpu memory\n");
    /* the task itself is unlimited; its parent holds 8 GiB, the
     * grandparent 16 GiB: the tightest one binds */
    put(r, "/sys/fs/cgroup/jobs/job1/task/memory.max", "max\n");
    put(r, "/sys/fs/cgroup/jobs/job1/memory.max", "8589934592\n");
    put(r, "/sys/fs/cgroup/jobs/job1/memory.current", "3221225472\n");          /* 3 GiB used ... */
    put(r, "/sys/fs/cgroup/jobs/job1/memory.stat", "anon 1\ninactive_file 1073741824\n"); /* 1 GiB of it cache */
    put(r, "/sys/fs/cgroup/jobs/memory.max", "17179869184\n");
    put(r, "/sys/fs/cgroup/jobs/job1/cpu.max", "150000 100000\n");
    put(r, "/sys/fs/cgroup/jobs/cpu.max", "max 100000\n");
    host_info h;
    probe_host_at(&h, NULL, r);
    CHECK_INT(h.cgroup_version, 2);
    CHECK_INT(h.cgroup_limit, 8ull << 30);
    CHECK_INT(h.cgroup_usage, 3ull << 30);
    CHECK_INT(h.cgroup_inactive_file, 1ull << 30);
    /* room = 8 − (3 − 1) = 6 GiB, less than MemAvailable's ~19 GiB */
    CHECK_INT(h.budget, 6ull << 30);
    CHECK_STR(h.budget_from, "cgroup v2 memory.max");
    CHECK_INT(h.ram_available, 20000000ull * 1024);
    CHECK_INT(h.cores_quota, 2);
    CHECK(h.cores_usable <= 2);
    CHECK_STR(h.cpu_model, "Test CPU");

    /* a limit above MemAvailable: MemAvailable binds */
    put(r, "/sys/fs/cgroup/jobs/job1/memory.max", "max\n");
    put(r, "/sys/fs/cgroup/jobs/memory.max", "107374182400\n");
    put(r, "/sys/fs/cgroup/jobs/memory.current", "0\n");
    probe_host_at(&h, NULL, r);
    CHECK_INT(h.cgroup_limit, 100ull << 30);
    CHECK_INT(h.budget, 20000000ull * 1024);
    CHECK_STR(h.budget_from, "MemAvailable");
}

static void test_tree_v1(void)
{
    const char *r = check_tmpdir("probe_v1");
    put(r, "/proc/meminfo", MEMINFO);
    put(r, "/proc/self/cgroup", "11:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n1:name=systemd:/docker/abc\n");
    put(r, "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes", "4294967296\n");
    put(r, "/sys/fs/cgroup/memory/docker/abc/memory.usage_in_bytes", "1073741824\n");
    put(r, "/sys/fs/cgroup/memory/docker/abc/memory.stat", "cache 5\ntotal_inactive_file 536870912\n");
    put(r, "/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    put(r, "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "300000\n");
    put(r, "/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
    host_info h;
    probe_host_at(&h, NULL, r);
    CHECK_INT(h.cgroup_version, 1);
    CHECK_INT(h.cgroup_limit, 4ull << 30);
    /* 4 − (1 − 0.5) = 3.5 GiB */
    CHECK_INT(h.budget, (4ull << 30) - (1ull << 30) + (512ull << 20));
    CHECK_STR(h.budget_from, "cgroup v1 memory.limit_in_bytes");
    CHECK_INT(h.cores_quota, 3);

    /* a container whose own cgroup is mounted as the hierarchy root */
    const char *r2 = check_tmpdir("probe_v1_root");
    put(r2, "/proc/meminfo", MEMINFO);
    put(r2, "/proc/self/cgroup", "4:memory:/docker/zzz\n");
    put(r2, "/sys/fs/cgroup/memory/memory.limit_in_bytes", "2147483648\n");
    put(r2, "/sys/fs/cgroup/memory/memory.usage_in_bytes", "0\n");
    probe_host_at(&h, NULL, r2);
    CHECK_INT(h.cgroup_limit, 2ull << 30);
    CHECK_INT(h.budget, 2ull << 30);

    /* no cgroup files at all: MemAvailable */
    const char *r3 = check_tmpdir("probe_none");
    put(r3, "/proc/meminfo", MEMINFO);
    probe_host_at(&h, NULL, r3);
    CHECK_INT(h.cgroup_limit, 0);
    CHECK_INT(h.budget, 20000000ull * 1024);
}

static void test_real_host(void)
{
    host_info h;
    probe_host(&h, "/");
    CHECK(h.cores_online >= 1);
    CHECK(h.cores_physical >= 1 && h.cores_physical <= h.cores_online);
    CHECK(h.cores_usable >= 1);
    CHECK(h.ram_total > 0);
    CHECK(h.budget > 0 && h.budget <= h.ram_total);
    CHECK(h.disk_free > 0);
    CHECK_STR(h.determinism, "strong");
}

int main(void)
{
    test_parsers();
    test_tree_v2();
    test_tree_v1();
    test_real_host();
    return check_done();
}
