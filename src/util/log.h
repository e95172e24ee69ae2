/* log — process-wide verbosity and the few lines library code may print.
 *
 * Library code reports failures through dlm_err, never here. These are for
 * warnings the user must see even on success (a BOM was stripped, a tiny
 * dataset) and for progress/debug chatter. Everything goes to stderr so that
 * stdout stays machine-readable (--json, streamed tokens). */
#ifndef DLM_LOG_H
#define DLM_LOG_H

enum { LOG_QUIET = -1, LOG_NORMAL = 0, LOG_VERBOSE = 1 };

void log_set_level(int level);
int log_level(void);

void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));  /* unless quiet */
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));  /* unless quiet */
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2))); /* only verbose */

/* Count of warnings printed (or suppressed) so far; tests use it. */
int log_warn_count(void);

#endif
