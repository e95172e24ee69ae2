/* progress — what a long step shows while it runs (loading a base, hashing
 * it for dlm.lock, the imatrix, quantizing and writing a GGUF, pack and
 * unpack, push and pull).
 *
 * On a terminal (stderr is a tty) a bar with done/total, rate and ETA,
 * redrawn at most 10 times a second; otherwise one line per step (a line
 * every 10 s while it runs, and one when it ends), as training prints its
 * steps. Nothing at all for a step that ends before the threshold (2 s
 * unless progress_set_min_seconds says otherwise), and nothing under -q.
 * Lines go to stderr (log.h: stdout stays machine-readable).
 *
 *     progress p;
 *     progress_begin(&p, "hashing base", size, PROGRESS_BYTES);
 *     for (...) progress_update(&p, done);
 *     progress_end(&p);
 *
 * Not thread-safe: call it from the loop that owns the step. */
#ifndef DLM_PROGRESS_H
#define DLM_PROGRESS_H

#include <stdint.h>

typedef enum { PROGRESS_BYTES, PROGRESS_COUNT } progress_unit;

typedef struct progress {
    char label[64];
    const char *count_unit;   /* PROGRESS_COUNT: "tensors", "chunks", ... */
    progress_unit unit;
    uint64_t total;           /* 0 = unknown */
    uint64_t done;
    double start, last;       /* monotonic seconds */
    int mode;                 /* 0 off, 1 lines, 2 bar */
    int drawn;                /* a bar or line was printed */
} progress;

/* Process-wide settings, set by the command layer: the seconds a step runs
 * before it shows anything (default 2; the test-only $DLM_PROGRESS_MIN_S
 * of src/cmd/setup.c lowers it), and the mode: -1 auto (bar on a tty,
 * lines otherwise), 0 off, 1 lines, 2 bar. */
void progress_set_min_seconds(double s);
void progress_set_mode(int mode);

void progress_begin(progress *p, const char *label, uint64_t total, progress_unit unit);
/* Same, counting things ("tensors"). */
void progress_begin_count(progress *p, const char *label, uint64_t total, const char *what);
void progress_update(progress *p, uint64_t done);
void progress_add(progress *p, uint64_t n);
/* The step succeeded: its last line (when it showed anything or ran past
 * the threshold), done = total. */
void progress_end(progress *p);
/* The step failed: end a drawn bar's line, print nothing more (the error
 * follows). */
void progress_abort(progress *p);

#endif
