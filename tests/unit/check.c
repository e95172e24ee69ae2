#include "check.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>
#include "util/fs.h"
#include "util/hash.h"

int check_failures;
int check_count;

int check_tensor(const char *label, const float *got, const float *want, size_t n, double rel_tol)
{
    double maxdiff = 0, maxref = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        if (!(d <= maxdiff)) { maxdiff = d; at = i; } /* NaN-safe: NaN wins */
        if (fabs(want[i]) > maxref) maxref = fabs(want[i]);
    }
    double rel = maxdiff / (maxref > 1e-30 ? maxref : 1e-30);
    int ok = rel <= rel_tol;
    check_count++;
    if (!ok) {
        check_failures++;
        fprintf(stderr, "TENSOR %s NOT OK: max|diff| %.3e at %zu (got %.9g want %.9g), max|ref| %.3e, rel %.3e > %.1e\n",
                label, maxdiff, at, (double)got[at], (double)want[at], maxref, rel, rel_tol);
        for (size_t i = 0; i < n && i < 5; i++)
            fprintf(stderr, "   [%zu] got %.9g want %.9g\n", i, (double)got[i], (double)want[i]);
    } else if (getenv("CHECK_VERBOSE")) {
        fprintf(stderr, "TENSOR %s OK: rel %.3e\n", label, rel);
    }
    return ok;
}

const char *check_tmpdir(const char *name)
{
    static char path[4096];
    const char *base = getenv("DLM_TEST_TMP");
    if (!base || !*base) base = "/tmp";
    snprintf(path, sizeof path, "%s/%s.%d", base, name, (int)getpid());
    fs_remove_tree(path, NULL);
    fs_mkdir_p(path, NULL);
    return path;
}

int check_done(void)
{
    if (check_failures) {
        fprintf(stderr, "%d of %d checks FAILED\n", check_failures, check_count);
        return 1;
    }
    printf("all %d checks passed\n", check_count);
    return 0;
}
