/* optim8 — training.optimizer adamw_bnb_8bit and paged_adamw_8bit: AdamW
 * with 8-bit block-wise moments (Dettmers et al., "8-bit Optimizers via
 * Block-wise Quantization", arXiv 2110.02861; the kernel is kern_adamw8 in
 * kern/kern.h) over the adapter's flat vector.
 *
 * The state is kept per tensor of the adapter (each LoRA A, B and DoRA
 * magnitude, in the slab order of decoder/lora.h), as bitsandbytes keeps it
 * per parameter: a tensor of at least OPTIM8_MIN_SIZE values gets uint8
 * codes of m (signed dynamic map) and v (unsigned map) with one f32 absmax
 * per block of KERN_Q8_BLOCK values counted from the tensor's start;
 * smaller tensors keep f32 m and v (bitsandbytes' Optimizer2State
 * min_8bit_size = 4096), updated by the same equations. paged_adamw_8bit is
 * the same optimizer: paging moves GPU state to host memory under pressure,
 * which has no meaning on a CPU. */
#ifndef DLM_OPTIM8_H
#define DLM_OPTIM8_H

#include <stddef.h>
#include <stdint.h>
#include "decoder/lora.h"
#include "grad/optim.h"
#include "util/err.h"

#define OPTIM8_MIN_SIZE 4096

typedef struct optim8_seg {
    size_t off, len;        /* range of the flat vector */
    int q8;                 /* 8-bit state */
    size_t at;              /* q8: first code (and first block: blk); else first f32 moment */
    size_t blk;
} optim8_seg;

/* Counts of a layout: values in 8-bit tensors, their blocks, values in
 * 32-bit tensors. */
typedef struct optim8_counts {
    uint64_t n8, nblk, n32;
} optim8_counts;

typedef struct optim8 {
    size_t n;
    optim8_counts k;
    int nseg;
    optim8_seg *seg;
    uint8_t *c1, *c2;       /* [n8] */
    float *a1, *a2;         /* [nblk] */
    float *m, *v;           /* [n32] */
} optim8;

/* The counts for an adapter of this shape, without allocating (the plan). */
void optim8_plan_counts(const model_config *c, const lora_config *l, optim8_counts *out);
/* Bytes of the 8-bit state: 2 per 8-bit value, 8 per block, 8 per 32-bit value. */
uint64_t optim8_state_bytes(const optim8_counts *k);
/* Allocate and zero the state for l's layout (every page touched). */
int optim8_create(const lora *l, optim8 **out, dlm_err *e);
void optim8_free(optim8 *o);
/* One step over the whole vector at step t (1-based) with learning rate lr;
 * c gives betas, eps and weight decay. */
void optim8_step(optim8 *o, const optim_config *c, float *p, const float *g, double lr, int64_t t);

#endif
