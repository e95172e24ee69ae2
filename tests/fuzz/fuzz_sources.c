/* libFuzzer target: the rule files of training.sources — .dlm/ignore (parse,
 * then match every rule against paths made from the input) and
 * .dlm/training.yaml (validate) — and the glob matcher on input-made
 * patterns. Input: first byte selects the reader, the rest is the file. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "doc/sources.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    log_set_level(LOG_QUIET);
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    if (data[0] & 1) {
        src_yaml y;
        dlm_err e;
        if (!src_yaml_parse("fuzz.yaml", text, len, &y, &e)) src_yaml_free(&y);
        return 0;
    }
    src_ignore_rule *r;
    int n = src_ignore_parse("fuzz.ignore", text, len, &r);
    if (n < 0) return 0;
    /* paths: each line of the input, NUL-free, as a relpath */
    char *buf = malloc(len + 1);
    if (!buf) { src_ignore_free(r, n); return 0; }
    memcpy(buf, text, len);
    buf[len] = 0;
    for (char *line = buf; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        for (int i = 0; i < n && i < 64; i++) {
            src_ignore_match(&r[i], line, 0);
            src_ignore_match(&r[i], line, 1);
            src_glob_match(r[i].pattern, line);
        }
        line = nl ? nl + 1 : NULL;
    }
    free(buf);
    src_ignore_free(r, n);
    return 0;
}
