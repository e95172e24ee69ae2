/* amx: the run-time AMX decision (kern/cpu.h). Every branch of the pure
 * cpu_amx_decide on made-up facts (no AMX hardware needed), then the real
 * probe against the kernel's own view of the CPU: the flags line of
 * /proc/cpuinfo (amx_tile, amx_bf16, amx_int8), an independent reading of
 * the same CPUID bits. On a CPU without AMX (the AMD EPYC these tests run
 * on) the verdict must be "no" with the cpuid reason. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kern/cpu.h"

#define EDX_TILE (1u << 24)
#define EDX_BF16 (1u << 22)
#define EDX_INT8 (1u << 25)
#define XCR0_AVX512 0xe7ull   /* x87 SSE AVX opmask ZMM_Hi256 Hi16_ZMM */

/* a machine that says yes at every gate */
static cpu_amx_facts all_yes(void)
{
    return (cpu_amx_facts){
        .has_leaf7 = 1,
        .leaf7_edx = EDX_TILE | EDX_BF16 | EDX_INT8,
        .osxsave = 1,
        .xcr0 = XCR0_AVX512 | CPU_AMX_XCR0_TILECFG | CPU_AMX_XCR0_TILEDATA,
        .prctl_tried = 1,
        .perm = 0x602e7ull,   /* what Linux reports on a Sapphire Rapids after the request */
    };
}

static void expect(const cpu_amx_facts *f, int usable, const char *reason)
{
    cpu_amx v;
    cpu_amx_decide(f, &v);
    CHECK_INT(v.usable, usable);
    CHECK_STR(v.reason, reason);
}

static void test_decide(void)
{
    cpu_amx_facts f = all_yes();
    expect(&f, 1, "amx_tile amx_bf16 amx_int8");
    cpu_amx v;
    cpu_amx_decide(&f, &v);
    CHECK(v.tile && v.bf16 && v.int8);

    f = all_yes(); f.leaf7_edx &= ~EDX_INT8;           /* int8 is for inference only */
    expect(&f, 1, "amx_tile amx_bf16");
    cpu_amx_decide(&f, &v);
    CHECK_INT(v.int8, 0);

    f = all_yes(); f.has_leaf7 = 0;
    expect(&f, 0, "cpuid: no leaf 7");
    f = all_yes(); f.leaf7_edx = 0;
    expect(&f, 0, "cpuid: no amx_tile");
    f = all_yes(); f.leaf7_edx = EDX_BF16 | EDX_INT8;
    expect(&f, 0, "cpuid: no amx_tile");
    f = all_yes(); f.leaf7_edx = EDX_TILE | EDX_INT8;
    expect(&f, 0, "cpuid: no amx_bf16");
    f = all_yes(); f.osxsave = 0; f.xcr0 = 0;
    expect(&f, 0, "cpuid: no osxsave (xcr0 unreadable)");
    f = all_yes(); f.xcr0 = XCR0_AVX512;
    expect(&f, 0, "xcr0: tile state off (bit 17 0, bit 18 0)");
    f = all_yes(); f.xcr0 = XCR0_AVX512 | CPU_AMX_XCR0_TILECFG;
    expect(&f, 0, "xcr0: tile state off (bit 17 1, bit 18 0)");
    f = all_yes(); f.xcr0 = XCR0_AVX512 | CPU_AMX_XCR0_TILEDATA;
    expect(&f, 0, "xcr0: tile state off (bit 17 0, bit 18 1)");
    f = all_yes(); f.capped = 1;
    expect(&f, 0, "capped: dispatch level below avx512");
    f = all_yes(); f.prctl_tried = 0;
    expect(&f, 0, "arch_prctl not tried");
    f = all_yes(); f.req_rc = -1; f.req_errno = EPERM;
    expect(&f, 0, "arch_prctl refused: EPERM");
    f = all_yes(); f.req_rc = -1; f.req_errno = EINVAL;   /* a kernel before 5.16 */
    expect(&f, 0, "arch_prctl refused: EINVAL");
    f = all_yes(); f.req_rc = -1; f.req_errno = ENOSYS;
    expect(&f, 0, "arch_prctl refused: ENOSYS");
    f = all_yes(); f.req_rc = -1; f.req_errno = 4242;
    expect(&f, 0, "arch_prctl refused: errno 4242");
    f = all_yes(); f.get_rc = -1; f.get_errno = EFAULT;
    expect(&f, 0, "arch_prctl get failed: EFAULT");
    f = all_yes(); f.perm = 0x602e7ull & ~(1ull << 18);
    expect(&f, 0, "arch_prctl: xtiledata not granted");

    /* the first failing gate is the one reported */
    f = all_yes(); f.leaf7_edx = 0; f.xcr0 = 0; f.req_rc = -1; f.req_errno = EPERM;
    expect(&f, 0, "cpuid: no amx_tile");
    f = all_yes(); f.xcr0 = 0; f.req_rc = -1; f.req_errno = EPERM;
    expect(&f, 0, "xcr0: tile state off (bit 17 0, bit 18 0)");
}

/* 1 when /proc/cpuinfo's first flags line lists `flag` as a whole word */
static int cpuinfo_flag(const char *text, const char *flag)
{
    const char *p = strstr(text, "\nflags");
    if (!p) return -1;
    const char *e = strchr(p + 1, '\n');
    size_t n = strlen(flag);
    for (const char *q = p; (q = strstr(q, flag)) && (!e || q < e); q += n)
        if (q[-1] == ' ' && (q[n] == ' ' || q[n] == '\n' || q[n] == 0)) return 1;
    return 0;
}

static void test_real_probe(void)
{
    static char buf[1 << 20];
    FILE *fp = fopen("/proc/cpuinfo", "r");
    if (!fp) { fprintf(stderr, "test_amx: no /proc/cpuinfo, real probe not checked\n"); return; }
    size_t n = fread(buf + 1, 1, sizeof buf - 2, fp);
    fclose(fp);
    buf[0] = '\n';
    buf[n + 1] = 0;
    int tile = cpuinfo_flag(buf, "amx_tile"), bf16 = cpuinfo_flag(buf, "amx_bf16"),
        int8 = cpuinfo_flag(buf, "amx_int8");
    if (tile < 0) { fprintf(stderr, "test_amx: no flags line, real probe not checked\n"); return; }

    cpu_amx_facts f;
    cpu_amx_probe(&f);
    cpu_amx v;
    cpu_amx_decide(&f, &v);
    const cpu_amx *g = cpu_get_amx();
    CHECK_INT(g->usable, v.usable);
    CHECK_STR(g->reason, v.reason);
    CHECK_INT(v.tile, tile);
    CHECK_INT(v.bf16, bf16);
    CHECK_INT(v.int8, int8);
    fprintf(stderr, "test_amx: this CPU: amx %s (%s)\n", v.usable ? "yes" : "no", v.reason);
    if (!tile) {
        CHECK_INT(v.usable, 0);
        CHECK_STR(v.reason, "cpuid: no amx_tile");
        CHECK_INT(f.prctl_tried, 0);   /* no request without the hardware */
    } else if (!bf16) {
        CHECK_INT(v.usable, 0);
        CHECK_STR(v.reason, "cpuid: no amx_bf16");
    } else if (!v.usable) {
        /* hardware present: only the OS (xcr0), the kernel (arch_prctl) or a cap may refuse */
        CHECK(!strncmp(v.reason, "xcr0:", 5) || !strncmp(v.reason, "arch_prctl", 10) ||
              !strncmp(v.reason, "capped:", 7));
    } else {
        CHECK((f.xcr0 & CPU_AMX_XCR0_TILEDATA) && ((f.perm >> 18) & 1));
    }
    char d[160];
    cpu_amx_describe(d, sizeof d);
    CHECK(!strncmp(d, v.usable ? "yes (" : "no (", v.usable ? 5 : 4));
}

int main(void)
{
    test_decide();
    test_real_probe();
    return check_done();
}
