#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>

static int g_level = LOG_NORMAL;
static int g_warns;

void log_set_level(int level) { g_level = level; }
int log_level(void) { return g_level; }
int log_warn_count(void) { return g_warns; }

static void vlog(const char *prefix, const char *fmt, va_list ap)
{
    fputs(prefix, stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void log_warn(const char *fmt, ...)
{
    g_warns++;
    if (g_level < LOG_NORMAL) return;
    va_list ap;
    va_start(ap, fmt);
    vlog("dlm: warning: ", fmt, ap);
    va_end(ap);
}

void log_info(const char *fmt, ...)
{
    if (g_level < LOG_NORMAL) return;
    va_list ap;
    va_start(ap, fmt);
    vlog("", fmt, ap);
    va_end(ap);
}

void log_debug(const char *fmt, ...)
{
    if (g_level < LOG_VERBOSE) return;
    va_list ap;
    va_start(ap, fmt);
    vlog("dlm: debug: ", fmt, ap);
    va_end(ap);
}
