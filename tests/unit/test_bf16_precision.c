/* training.precision's decision (run/precision.h): precision_decide over
 * the bf16 back ends (fma, avx512bf16, amx, the tile model, fma forced on a
 * CPU with the instructions), the refusal of fp16, and the key's line for
 * errors. */
#include "check.h"

#include <string.h>

#include "run/precision.h"

static void test_decide(void)
{
    const prec_cpu plain = {"avx2", 0, 0, 0, "fma"}, bf16isa = {"avx512", 0, 1, 0, "avx512bf16"};
    const prec_cpu forced_fma = {"avx512", 0, 1, 0, "fma"}, amx = {"avx512", 1, 1, 1, "amx"};
    const prec_cpu model = {"avx2", 0, 0, 0, "amx-model"};
    prec_choice c;
    dlm_err e;
    /* null: fp32 unless the back end runs on bf16 instructions */
    CHECK_INT(precision_decide(DOC_PREC_AUTO, &plain, &c, &e), 0);
    CHECK(!c.bf16 && c.picked);
    CHECK_STR(c.name, "fp32");
    CHECK(strstr(c.how, "training.precision null") != NULL);
    CHECK_INT(precision_decide(DOC_PREC_AUTO, &bf16isa, &c, &e), 0);
    CHECK(c.bf16 && c.picked);
    CHECK_STR(c.how, "bf16 (AVX512-BF16, vdpbf16ps; training.precision null)");
    CHECK_INT(precision_decide(DOC_PREC_AUTO, &forced_fma, &c, &e), 0);
    CHECK(!c.bf16);
    CHECK_INT(precision_decide(DOC_PREC_AUTO, &model, &c, &e), 0);
    CHECK(!c.bf16);                     /* the tile model is for tests, never picked */
    CHECK_INT(precision_decide(DOC_PREC_AUTO, &amx, &c, &e), 0);
    CHECK(c.bf16 && c.picked);
    CHECK_STR(c.name, "bf16");
    CHECK(strstr(c.how, "AMX tiles, tdpbf16ps") != NULL && !strstr(c.how, "emulated"));
    /* explicit values are honoured on every CPU; bf16 without the instructions says it is emulated */
    CHECK_INT(precision_decide(DOC_PREC_BF16, &plain, &c, &e), 0);
    CHECK(c.bf16 && !c.picked);
    CHECK(!strncmp(c.how, "bf16 emulated on avx2 (no AMX, no AVX512-BF16)", 46));
    CHECK_INT(precision_decide(DOC_PREC_BF16, &bf16isa, &c, &e), 0);
    CHECK_STR(c.how, "bf16 (AVX512-BF16, vdpbf16ps)");
    CHECK_INT(precision_decide(DOC_PREC_BF16, &forced_fma, &c, &e), 0);
    CHECK(strstr(c.how, "emulated on avx512 (bf16 instructions present, back end fma forced)") != NULL);
    CHECK_INT(precision_decide(DOC_PREC_BF16, &model, &c, &e), 0);
    CHECK(c.bf16 && strstr(c.how, "model of the AMX tile unit") != NULL);
    CHECK_INT(precision_decide(DOC_PREC_FP32, &amx, &c, &e), 0);
    CHECK(!c.bf16 && !c.picked);
    CHECK_STR(c.how, "fp32 (exact f32 numerics)");
    /* fp16: refused with a hint, on any CPU */
    CHECK_INT(precision_decide(DOC_PREC_FP16, &amx, &c, &e), -1);
    CHECK_STR(e.kind, "PrecisionError");
    CHECK(strstr(e.msg, "fp16 is not supported") != NULL);
    CHECK(strstr(e.hint, "bf16") && strstr(e.hint, "fp32"));
}

static void test_key_line(void)
{
    const char *d = "---\ndlm_id: X\ntraining:\n  sequence_len: 64\n  precision: fp16\n---\nprecision: in the body\n";
    CHECK_INT(precision_key_line(d, strlen(d)), 5);
    const char *n = "---\ndlm_id: X\n---\n  precision: bf16\n";
    CHECK_INT(precision_key_line(n, strlen(n)), 0);      /* only the frontmatter counts */
    const char *top = "---\nprecision: bf16\n---\n";
    CHECK_INT(precision_key_line(top, strlen(top)), 0);  /* a top-level key is not training's */
}

int main(void)
{
    test_decide();
    test_key_line();
    return check_done();
}
