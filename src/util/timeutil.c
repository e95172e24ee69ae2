#include "util/timeutil.h"

#include <stdio.h>
#include <time.h>

double time_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double time_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t time_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void time_iso_utc(double t, char *buf, size_t cap)
{
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
}

void time_stamp_utc(double t, char *buf, size_t cap)
{
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(buf, cap, "%Y%m%dT%H%M%S", &tm);
}

void time_fmt_duration(double secs, char *buf, size_t cap)
{
    if (secs < 0) secs = 0;
    if (secs < 10) { snprintf(buf, cap, "%.1fs", secs); return; }
    long s = (long)(secs + 0.5);
    if (s < 60) snprintf(buf, cap, "%lds", s);
    else if (s < 3600) snprintf(buf, cap, "%ldm%02lds", s / 60, s % 60);
    else snprintf(buf, cap, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
}
