/* precision — training.precision: which numerics a run trains with.
 *
 *   fp32  the exact f32 path (every PyTorch parity test at 1e-4);
 *   bf16  bf16 training numerics: each GEMM's inputs (frozen weights,
 *         activations, gradients flowing in, LoRA factors) rounded to bf16,
 *         f32 accumulation and outputs; the LoRA master weights, gradients
 *         and AdamW moments stay f32 (kern_set_bf16, src/kern/kern.h);
 *   fp16  refused: dlm has no fp16 path;
 *   null  dlm picks: precision_decide below.
 * docs/training.md ("Precision") has the rounding points and the
 * reference they are checked against (tests/ref/engine/torch_bf16.py). */
#ifndef DLM_RUN_PRECISION_H
#define DLM_RUN_PRECISION_H

#include "doc/doc.h"
#include "util/err.h"

/* What the decision reads of the CPU (filled by precision_cpu_probe from
 * src/kern/cpu.h; a test passes its own). */
typedef struct prec_cpu {
    const char *isa;        /* kernel dispatch level, e.g. "avx2" */
    int amx_bf16;           /* AMX tiles with TDPBF16PS usable by this process */
    int avx512bf16;         /* AVX512-BF16 (VDPBF16PS) */
    int tile_kernels;       /* dlm was built with the native AMX tile kernel */
    const char *backend;    /* the bf16 GEMM back end in use (kern_bf16_backend_name):
                             * amx, avx512bf16 (the fast ones), fma, amx-model */
} prec_cpu;

typedef struct prec_choice {
    int bf16;               /* 1: bf16 numerics; 0: the exact f32 path */
    const char *name;       /* "bf16" / "fp32": what records, banner and doctor show */
    int picked;             /* training.precision was null: precision_decide chose */
    char how[256];          /* one line for the banner and doctor */
} prec_choice;

/* THE decision of the precision a run uses, from the document's key and
 * the CPU. null → bf16 where the bf16 back end runs on bf16 instructions
 * (amx: AMX-BF16 tiles; avx512bf16: VDPBF16PS — then bf16 is the fast
 * path), fp32 everywhere else; an explicit fp32/bf16 is honoured on every
 * CPU (bf16 on the fma back end is emulated on the f32 FMA units: the same
 * numerics, no faster than fp32; "how" says so); fp16 → PrecisionError
 * with a hint. 0 or -1. */
int precision_decide(doc_precision asked, const prec_cpu *cpu, prec_choice *out, dlm_err *e);

/* This machine's prec_cpu (the kernels' dispatch level and features). */
void precision_cpu_probe(prec_cpu *c);

/* 1-based line of "precision:" inside the frontmatter of raw (0: none),
 * for errors that point at the key. */
int precision_key_line(const char *raw, size_t len);

#endif
