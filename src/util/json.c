#include "util/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/fs.h"

void json_fmt_double(double d, char *buf, size_t cap)
{
    if (isnan(d)) { snprintf(buf, cap, "NaN"); return; }
    if (isinf(d)) { snprintf(buf, cap, d > 0 ? "Infinity" : "-Infinity"); return; }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
    }
    /* Python repr uses exponent form only outside 1e-4 <= |d| < 1e16; %g
     * switches at 1e-5 / 1e<prec>. Re-render positional where Python would. */
    double ad = fabs(d);
    if (strchr(buf, 'e') && ad >= 1e-4 && ad < 1e16) {
        char tmp[64];
        for (int prec = 0; prec <= 20; prec++) {
            snprintf(tmp, sizeof tmp, "%.*f", prec, d);
            if (strtod(tmp, NULL) == d) break;
        }
        snprintf(buf, cap, "%s", tmp);
    }
    if (!strchr(buf, '.') && !strchr(buf, 'e') && !strchr(buf, 'n') && !strchr(buf, 'I')) {
        size_t n = strlen(buf);
        if (n + 2 < cap) { buf[n] = '.'; buf[n + 1] = '0'; buf[n + 2] = 0; }
    }
    /* Python writes "1e-05" where C writes "1e-05" too; "1e+16" both. */
}

static void put_string(strbuf *sb, const char *s, size_t n)
{
    sb_putc(sb, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': sb_puts(sb, "\\\""); break;
        case '\\': sb_puts(sb, "\\\\"); break;
        case '\n': sb_puts(sb, "\\n"); break;
        case '\r': sb_puts(sb, "\\r"); break;
        case '\t': sb_puts(sb, "\\t"); break;
        case '\b': sb_puts(sb, "\\b"); break;
        case '\f': sb_puts(sb, "\\f"); break;
        default:
            if (c < 0x20 || c == 0x7f) sb_printf(sb, "\\u%04x", c);
            else sb_putc(sb, (char)c);
        }
    }
    sb_putc(sb, '"');
}

static int cmp_keys(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void indent(strbuf *sb, int depth)
{
    sb_putc(sb, '\n');
    for (int i = 0; i < depth * 2; i++) sb_putc(sb, ' ');
}

static int write_value(strbuf *sb, const json_t *v, int flags, int depth)
{
    int pretty = !(flags & (JW_COMPACT | JW_SPACED));
    const char *comma = (flags & JW_COMPACT) ? "," : (pretty ? "," : ", ");
    const char *colon = (flags & JW_COMPACT) ? ":" : ": ";
    char num[64];
    switch (json_typeof(v)) {
    case JSON_NULL: return sb_puts(sb, "null");
    case JSON_TRUE: return sb_puts(sb, "true");
    case JSON_FALSE: return sb_puts(sb, "false");
    case JSON_INTEGER: return sb_printf(sb, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    case JSON_REAL:
        json_fmt_double(json_real_value(v), num, sizeof num);
        return sb_puts(sb, num);
    case JSON_STRING:
        put_string(sb, json_string_value(v), json_string_length(v));
        return 0;
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        if (!n) return sb_puts(sb, "[]");
        sb_putc(sb, '[');
        for (size_t i = 0; i < n; i++) {
            if (i) sb_puts(sb, comma);
            if (pretty) indent(sb, depth + 1);
            write_value(sb, json_array_get(v, i), flags, depth + 1);
        }
        if (pretty) indent(sb, depth);
        return sb_putc(sb, ']');
    }
    case JSON_OBJECT: {
        size_t n = json_object_size(v);
        if (!n) return sb_puts(sb, "{}");
        const char **keys = malloc(n * sizeof *keys);
        if (!keys) { sb->oom = 1; return -1; }
        size_t k = 0;
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)v, key, val) keys[k++] = key;
        if (flags & JW_SORT) qsort(keys, n, sizeof *keys, cmp_keys);
        sb_putc(sb, '{');
        for (size_t i = 0; i < n; i++) {
            if (i) sb_puts(sb, comma);
            if (pretty) indent(sb, depth + 1);
            put_string(sb, keys[i], strlen(keys[i]));
            sb_puts(sb, colon);
            write_value(sb, json_object_get(v, keys[i]), flags, depth + 1);
        }
        free(keys);
        if (pretty) indent(sb, depth);
        return sb_putc(sb, '}');
    }
    }
    return -1;
}

int json_write(strbuf *sb, const json_t *v, int flags)
{
    write_value(sb, v, flags, 0);
    return sb->oom ? -1 : 0;
}

int json_save_file(const char *path, const json_t *v, dlm_err *e)
{
    strbuf sb = STRBUF_INIT;
    json_write(&sb, v, JW_SORT);
    sb_putc(&sb, '\n');
    if (sb.oom) { sb_free(&sb); return err_set(e, "MemoryError", "out of memory writing '%s'", path); }
    int r = fs_write_atomic(path, sb.buf, sb.len, 0644, e);
    sb_free(&sb);
    return r;
}

json_t *json_load_path(const char *path, size_t max_bytes, dlm_err *e)
{
    char *buf;
    size_t len;
    if (fs_read_all(path, max_bytes, &buf, &len, e)) return NULL;
    json_error_t je;
    json_t *v = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    free(buf);
    if (!v) {
        err_at(e, "JSONError", path, je.line > 0 ? je.line : 0, je.column > 0 ? je.column : 0,
               "invalid JSON: %s", je.text);
        return NULL;
    }
    return v;
}

const char *jget_str(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

int jget_int(const json_t *o, const char *key, long long *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v)) return -1;
    *out = json_integer_value(v);
    return 0;
}

int jget_num(const json_t *o, const char *key, double *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_number(v)) return -1;
    *out = json_number_value(v);
    return 0;
}

int jget_bool(const json_t *o, const char *key, int *out)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_boolean(v)) return -1;
    *out = json_is_true(v);
    return 0;
}
