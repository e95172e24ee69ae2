/* err — see err.h. Messages are truncated, never overflowed. */
#include "util/err.h"

#include <errno.h>
#include <string.h>

void err_clear(dlm_err *e)
{
    if (!e) return;
    e->kind[0] = e->file[0] = e->msg[0] = e->hint[0] = 0;
    e->line = e->col = 0;
    e->code = 0;
}

static void set_kind(dlm_err *e, const char *kind)
{
    snprintf(e->kind, sizeof e->kind, "%s", kind ? kind : "");
}

int err_set(dlm_err *e, const char *kind, const char *fmt, ...)
{
    if (!e) return -1;
    err_clear(e);
    set_kind(e, kind);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -1;
}

int err_at(dlm_err *e, const char *kind, const char *file, int line, int col,
           const char *fmt, ...)
{
    if (!e) return -1;
    err_clear(e);
    set_kind(e, kind);
    snprintf(e->file, sizeof e->file, "%s", file ? file : "");
    e->line = line;
    e->col = col;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -1;
}

int err_sys(dlm_err *e, const char *fmt, ...)
{
    int saved = errno;
    if (!e) return -1;
    err_clear(e);
    /* a full disk is its own error kind wherever it shows up */
    int full = saved == ENOSPC || saved == EDQUOT;
    set_kind(e, full ? "DiskFullError" : "");
    int n0 = full ? snprintf(e->msg, sizeof e->msg, "disk full: ") : 0;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(e->msg + n0, sizeof e->msg - (size_t)n0, fmt, ap);
    if (n >= 0) n += n0;
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof e->msg)
        snprintf(e->msg + n, sizeof e->msg - (size_t)n, ": %s", strerror(saved));
    errno = saved;
    return -1;
}

int err_hint(dlm_err *e, const char *fmt, ...)
{
    if (!e) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->hint, sizeof e->hint, fmt, ap);
    va_end(ap);
    return -1;
}

void err_prefix(dlm_err *e, const char *fmt, ...)
{
    if (!e) return;
    char pre[1024], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    snprintf(e->msg, sizeof e->msg, "%s: %s", pre, old);
}

void err_format(const dlm_err *e, char *buf, size_t n)
{
    if (e->file[0] && e->line > 0 && e->col > 0)
        snprintf(buf, n, "%s:%d:%d: %s", e->file, e->line, e->col, e->msg);
    else if (e->file[0] && e->line > 0)
        snprintf(buf, n, "%s:%d: %s", e->file, e->line, e->msg);
    else if (e->file[0])
        snprintf(buf, n, "%s: %s", e->file, e->msg);
    else
        snprintf(buf, n, "%s", e->msg);
}

void err_print(FILE *f, const dlm_err *e, int verbose)
{
    char buf[8192];
    err_format(e, buf, sizeof buf);
    /* The class name leads when the error is not about a located input
     * (e.g. "ResumeIntegrityError: ..."); located parse errors read better
     * without it unless -v asks. */
    if (e->kind[0] && (verbose || !e->file[0]))
        fprintf(f, "dlm: error: %s: %s\n", e->kind, buf);
    else
        fprintf(f, "dlm: error: %s\n", buf);
    if (e->hint[0]) fprintf(f, "hint: %s\n", e->hint);
}
