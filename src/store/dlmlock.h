/* dlmlock — dlm.lock, the determinism contract of a store (docs/reference/original-spec.md §3.6).
 *
 * Written after each successful run; checked before the next one. Same
 * (.dlm bytes, base revision and weights, dlm version, ISA class, seed) →
 * bit-identical adapter. Drift severities:
 *   base_model, base_model_revision, base_model_sha256, dlm major version → error
 *   dlm version/commit, isa class, determinism class, hardware tier, seed,
 *   precision (fp32/bf16: the numerics, run/precision.h) → warning
 *   dlm_sha256 (the document changed: that is what retraining is for) → allowed
 * Modes: default (errors abort, warnings print), --strict-lock (warnings
 * abort too), --update-lock (no check, rewrite), --ignore-lock (no check, no
 * write). */
#ifndef DLM_DLMLOCK_H
#define DLM_DLMLOCK_H

#include <stdint.h>
#include <jansson.h>
#include "util/err.h"

typedef enum { LOCK_DEFAULT = 0, LOCK_STRICT, LOCK_UPDATE, LOCK_IGNORE } lock_mode;

typedef struct lock_facts {
    const char *dlm_id;
    const char *dlm_sha256;
    const char *base_model;          /* as named in the document */
    const char *base_model_revision; /* commit, or "local" */
    const char *base_model_sha256;
    int64_t seed;
    const char *isa;                 /* kernel dispatch class, e.g. "avx512" */
    const char *determinism_class;   /* "strong" */
    int64_t last_run_id;
    int world_size;                  /* MPI ranks that trained (0 = 1) */
    const char *precision;           /* training numerics used, "fp32" / "bf16" (NULL = "fp32") */
} lock_facts;

/* Compare <store>/dlm.lock (if any) with facts. 0: go on (warnings were
 * printed through log_warn); -1: LockValidationError. A corrupt lock is an
 * error unless mode is UPDATE or IGNORE. */
int dlmlock_check(const char *store, const char *doc_path, const lock_facts *f, lock_mode mode, dlm_err *e);
int dlmlock_write(const char *store, const lock_facts *f, dlm_err *e);

#endif
