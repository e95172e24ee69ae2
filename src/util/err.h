/* err — the error record every library function fills on failure.
 *
 * Library code never prints errors and never exits: it returns -1 (or NULL)
 * and describes the failure in a `dlm_err`. Only src/cmd/ prints one, as
 *
 *     dlm: error: <file>:<line>:<col>: <message>
 *     hint: <what to do>
 *
 * `kind` is a stable class name (FrontmatterError, OOMError, ...) that
 * scripts and tests can match. It leads the message when the error has no
 * input location ("dlm: error: OOMError: ..."), and always with -v. */
#ifndef DLM_ERR_H
#define DLM_ERR_H

#include <stdarg.h>
#include <stdio.h>

typedef struct dlm_err {
    char kind[64];      /* class name, e.g. "SchemaValidationError"; "" = generic */
    char file[1024];    /* input the error is about; "" = none */
    int line, col;      /* 1-based; 0 = unknown */
    char msg[4096];
    char hint[1024];    /* "" = none */
    int code;           /* exit code the command layer should use (0 = default 1) */
} dlm_err;

/* Reset to "no error". */
void err_clear(dlm_err *e);

/* Fill e (kind may be NULL) and return -1, so `return err_set(...)` works. */
int err_set(dlm_err *e, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Same, with an input location (line/col 0 = omitted). */
int err_at(dlm_err *e, const char *kind, const char *file, int line, int col,
           const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Same, appending strerror(errno) as ": <reason>". */
int err_sys(dlm_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Attach / replace the hint line. Returns -1. */
int err_hint(dlm_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefix the message with "<prefix>: " (keeps kind, location, hint). */
void err_prefix(dlm_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Print as the command layer does (to f, normally stderr). With verbose,
 * the kind is shown too. */
void err_print(FILE *f, const dlm_err *e, int verbose);

/* Format the located message only ("file:line:col: msg") into buf. */
void err_format(const dlm_err *e, char *buf, size_t n);

#endif
