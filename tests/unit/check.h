/* check — the unit-test harness. Each tests/unit/test_<mod>.c is one
 * executable: CHECK macros count failures and print file:line; main returns
 * check_done(), which is non-zero if anything failed. */
#ifndef DLM_CHECK_H
#define DLM_CHECK_H

#include <stdio.h>
#include <string.h>
#include <stddef.h>

extern int check_failures;
extern int check_count;

#define CHECK(cond) do { check_count++; if (!(cond)) { check_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } } while (0)

#define CHECK_MSG(cond, ...) do { check_count++; if (!(cond)) { check_failures++; \
    fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
    fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

#define CHECK_INT(a, b) do { long long _a = (long long)(a), _b = (long long)(b); check_count++; \
    if (_a != _b) { check_failures++; fprintf(stderr, "%s:%d: CHECK_INT failed: %s == %lld, expected %lld\n", \
    __FILE__, __LINE__, #a, _a, _b); } } while (0)

#define CHECK_STR(a, b) do { const char *_a = (a), *_b = (b); check_count++; \
    if (!_a || !_b || strcmp(_a, _b)) { check_failures++; \
    fprintf(stderr, "%s:%d: CHECK_STR failed: %s\n  got:      \"%s\"\n  expected: \"%s\"\n", \
    __FILE__, __LINE__, #a, _a ? _a : "(null)", _b ? _b : "(null)"); } } while (0)

#define CHECK_NEAR(a, b, tol) do { double _a = (a), _b = (b); check_count++; \
    if (!(_a - _b <= (tol) && _b - _a <= (tol))) { check_failures++; \
    fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s = %.9g, expected %.9g (tol %g)\n", \
    __FILE__, __LINE__, #a, _a, _b, (double)(tol)); } } while (0)

/* Compare two float arrays: max |a-b| / max(max|b|, tiny) <= rel_tol.
 * Prints the first few pairs and the max diff like llm.c's check_tensor.
 * Returns 1 if ok. */
int check_tensor(const char *label, const float *got, const float *want, size_t n, double rel_tol);

/* A fresh empty directory under $DLM_TEST_TMP (or /tmp) for this test. */
const char *check_tmpdir(const char *name);

/* Print summary, return exit code. */
int check_done(void);

#endif
