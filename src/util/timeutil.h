/* timeutil — wall and monotonic clocks, ISO-8601 stamps. */
#ifndef DLM_TIMEUTIL_H
#define DLM_TIMEUTIL_H

#include <stddef.h>
#include <stdint.h>

double time_now(void);            /* wall clock, seconds since the epoch */
double time_mono(void);           /* monotonic seconds */
/* Naive UTC ISO-8601, seconds precision: "2026-11-29T23:10:00" (as the
 * original's manifest). buf >= 20. */
void time_iso_utc(double t, char *buf, size_t cap);
/* Compact stamp for file names: "20261129T231000". */
void time_stamp_utc(double t, char *buf, size_t cap);
/* "2m13s", "1h02m", "45s", "0.8s". */
void time_fmt_duration(double secs, char *buf, size_t cap);
uint64_t time_ms(void);           /* wall clock, ms since the epoch */

#endif
