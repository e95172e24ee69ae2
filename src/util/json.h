/* json — jansson plus a writer that matches Python's
 * json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False), so the
 * files we share with the original tool (manifest.json, dlm.lock, ...) look
 * the same, and floats print as the shortest string that round-trips. */
#ifndef DLM_JSON_H
#define DLM_JSON_H

#include <jansson.h>
#include "util/err.h"
#include "util/str.h"

enum {
    JW_SORT = 1,      /* sort object keys (otherwise insertion order) */
    JW_COMPACT = 2,   /* one line, "," and ":" separators (JSONL) */
    JW_SPACED = 4,    /* one line, ", " and ": " separators (Python default) */
};

/* Serialize v (indent 2 unless COMPACT/SPACED) into sb. No trailing newline. */
int json_write(strbuf *sb, const json_t *v, int flags);
/* Serialize with JW_SORT + indent 2 + trailing "\n" and write atomically. */
int json_save_file(const char *path, const json_t *v, dlm_err *e);
/* Load a JSON file (size-capped); errors carry file:line:col. */
json_t *json_load_path(const char *path, size_t max_bytes, dlm_err *e);

/* Shortest "%.{15,16,17}g" that round-trips, with ".0" added to integers
 * the way Python's repr(float) does; nan/inf as NaN/Infinity. buf >= 32. */
void json_fmt_double(double d, char *buf, size_t cap);

/* Typed getters: NULL/def when missing or of another type. */
const char *jget_str(const json_t *o, const char *key);
int jget_int(const json_t *o, const char *key, long long *out);   /* 0 ok, -1 */
int jget_num(const json_t *o, const char *key, double *out);      /* int or real */
int jget_bool(const json_t *o, const char *key, int *out);

#endif
