/* state — training_state.bin: everything a run needs to continue exactly.
 *
 * Layout (little-endian, fields in this order; no struct is written raw):
 *   u8[8]  magic "DLMSTATE"
 *   u32    version (1)
 *   u32    flags (bit 0: has best params)
 *   u64    step            optimizer steps completed
 *   u64    total_steps
 *   u64    micro           micro-batches consumed (the data cursor)
 *   u64    seed
 *   u64    n               parameter count
 *   f64    best_val        +inf when no eval yet
 *   u64    best_step
 *   u32    bad_evals       evals since the best (early-stopping patience)
 *   u32    reserved
 *   f64    last_loss
 *   f32[n] params, f32[n] adam m, f32[n] adam v, [f32[n] best params]
 * Version 2 (training.optimizer adamw_bnb_8bit / paged_adamw_8bit, whose
 * moments are 8-bit block-wise: grad/optim8.h): the same header with
 * "reserved" = 1 (the optimizer state kind), then
 *   u64 n8, u64 nblk, u64 n32    values in 8-bit tensors, their blocks, values in 32-bit tensors
 *   f32[n] params, u8[n8] m codes, u8[n8] v codes, f32[nblk] m absmax,
 *   f32[nblk] v absmax, f32[n32] m, f32[n32] v, [f32[n] best params]
 * (n8 + n32 = n). Version 1 files are the 32-bit AdamW state (kind 0).
 * A sidecar "<file>.sha256" holds the hex sha256 of the file plus "\n".
 * Random draws are pure functions of (seed, purpose, step, index), so no
 * generator state is needed beyond the counters above. */
#ifndef DLM_STATE_H
#define DLM_STATE_H

#include <stddef.h>
#include <stdint.h>
#include "util/err.h"

struct strbuf;

typedef struct train_state {
    uint64_t step, total_steps, micro, seed, n;
    double best_val;
    uint64_t best_step;
    uint32_t bad_evals;
    double last_loss;
    float *params, *m, *v, *best;   /* best may be NULL; m, v hold n (kind 0) or n32 (kind 1) floats */
    uint32_t optim_kind;            /* STATE_OPTIM_* */
    uint64_t n8, nblk, n32;         /* kind 1 */
    uint8_t *c1, *c2;               /* kind 1: [n8] codes of m and v */
    float *a1, *a2;                 /* kind 1: [nblk] block absmax of m and v */
} train_state;

enum { STATE_OPTIM_ADAMW = 0, STATE_OPTIM_ADAMW8 = 1 };

/* Write path and path.sha256 atomically (the sidecar last). */
int state_save(const char *path, const train_state *s, dlm_err *e);
/* The same through a caller's buffer: reserved once with
 * sb_reserve(buf, state_bytes(n, has_best)) before the step loop, it is
 * reused without allocating (the trainer's checkpoints). */
int state_save_buf(const char *path, const train_state *s, struct strbuf *buf, dlm_err *e);
/* Bytes of the serialised state (the buffer state_save_buf needs). */
size_t state_bytes(uint64_t n, int has_best);
/* The same for any kind (s's arrays are not read). */
size_t state_size(const train_state *s);
/* Verify the sidecar, then parse. Arrays are malloc'ed (state_free). A
 * checksum mismatch is ResumeIntegrityError with a hint naming --fresh. */
int state_load(const char *path, train_state *s, dlm_err *e);
void state_free(train_state *s);

#endif
