/* precision — see precision.h. */
#include "run/precision.h"

#include <stdio.h>
#include <string.h>

#include "kern/cpu.h"
#include "kern/kern.h"

void precision_cpu_probe(prec_cpu *c)
{
    const cpu_features *f = cpu_get_features();
    /* AMX tiles as the run-time probe found them (kern/cpu.c: CPUID, XCR0,
     * the tile-data permission) and the back end the kernels picked from
     * them (kern/gemm_bf16.c; $DLM_BF16_BACKEND may have forced one) */
    *c = (prec_cpu){.isa = cpu_level_name(cpu_level()), .amx_bf16 = cpu_get_amx()->usable,
                    .avx512bf16 = f->avx512bf16, .tile_kernels = kern_bf16_available(KERN_BF16_AMX),
                    .backend = kern_bf16_backend_name(kern_bf16_backend())};
}

int precision_decide(doc_precision asked, const prec_cpu *cpu, prec_choice *out, dlm_err *e)
{
    memset(out, 0, sizeof *out);
    const char *be = cpu->backend ? cpu->backend : "fma";
    int amx = !strcmp(be, "amx"), dp = !strcmp(be, "avx512bf16"), fast = amx || dp;
    if (asked == DOC_PREC_FP16) {
        err_set(e, "PrecisionError", "training.precision: fp16 is not supported: dlm has no fp16 training path");
        return err_hint(e, "use bf16 (bf16 numerics, f32 master weights) or fp32 (exact), or null to let dlm pick");
    }
    out->picked = asked == DOC_PREC_AUTO;
    out->bf16 = asked == DOC_PREC_BF16 || (asked == DOC_PREC_AUTO && fast);
    out->name = out->bf16 ? "bf16" : "fp32";
    if (!out->bf16)
        snprintf(out->how, sizeof out->how, "fp32 (exact f32 numerics%s)",
                 out->picked ? "; training.precision null: fp32 on CPUs without AMX-BF16 or AVX512-BF16" : "");
    else if (fast)
        snprintf(out->how, sizeof out->how, "bf16 (%s%s)",
                 amx ? "AMX tiles, tdpbf16ps" : "AVX512-BF16, vdpbf16ps", out->picked ? "; training.precision null" : "");
    else if (!strcmp(be, "amx-model"))
        snprintf(out->how, sizeof out->how,
                 "bf16 on the C model of the AMX tile unit (DLM_BF16_BACKEND=amx-model: for tests, very slow)");
    else
        snprintf(out->how, sizeof out->how,
                 "bf16 emulated on %s%s: GEMM inputs rounded to bf16 on the f32 FMA units, the slow path "
                 "(no faster than fp32; bf16 pays off with AMX or AVX512-BF16)", cpu->isa,
                 cpu->avx512bf16 || cpu->amx_bf16 ? " (bf16 instructions present, back end fma forced)"
                                                  : " (no AMX, no AVX512-BF16)");
    return 0;
}

int precision_key_line(const char *raw, size_t len)
{
    int line = 1, fences = 0;
    size_t i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && raw[j] != '\n') j++;
        if (j - i >= 3 && !strncmp(raw + i, "---", 3)) {
            if (++fences == 2) return 0;
        } else if (fences == 1) {
            size_t k = i;
            while (k < j && raw[k] == ' ') k++;
            if (k > i && j - k >= 10 && !strncmp(raw + k, "precision:", 10)) return line;
        }
        i = j + 1;
        line++;
    }
    return 0;
}
