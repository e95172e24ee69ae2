/* dist — data-parallel training over MPI behind a five-call interface.
 *
 * An MPI build (cmake -DDLM_MPI=ON) implements it with Open MPI; the
 * default build implements it as one process (rank 0 of 1), so the trainer
 * has no #ifdef. docs/mpi.md has the model: every rank builds the same
 * data, an optimizer step's micro-batches are cut into contiguous blocks
 * (rank r takes block r), and the gradients are summed in micro-batch
 * order by a chain through the ranks, so N ranks give the bytes of one
 * process doing all the micro-batches. */
#ifndef DLM_DIST_H
#define DLM_DIST_H

#include <stddef.h>
#include "util/err.h"

/* 1 when this binary was built with MPI. */
int dist_compiled(void);
/* Join the job (MPI_Init). Without MPI compiled in this is an error. */
int dist_init(int *argc, char ***argv, dlm_err *e);
int dist_rank(void);                /* 0 when not initialised */
int dist_size(void);                /* 1 when not initialised */
/* The MPI library's name and version, or NULL without MPI. */
const char *dist_library(void);

/* The ordered sum: acc = (((0 + rank0.parts[0]) + rank0.parts[1]) + ...
 * + rank1.parts[0]) + ..., every addition in that order, element by
 * element; on return every rank holds the same acc. With one process this
 * is acc = 0 + parts[0] + parts[1] + ... . n_parts may differ per rank.
 * `scal` (k doubles per part) is summed the same way into scal_acc. */
int dist_allreduce_sum(float *acc, const float *const *parts, int n_parts, size_t n,
                       double *scal_acc, const double *scal, int k, dlm_err *e);
/* Rank 0's value of flag / x, on every rank. */
int dist_bcast_flag(int flag);
double dist_bcast_f64(double x);
/* End every rank of the job now (MPI_Abort); no-op with one process. */
void dist_abort(int code);
/* Leave the job cleanly (MPI_Finalize); no-op when not initialised. */
void dist_finalize(void);

#endif
