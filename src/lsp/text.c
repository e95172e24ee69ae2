/* text — LSP positions over the editor's text, and the frontmatter outline
 * (which key each frontmatter line holds) that completion, hover and the
 * code actions navigate by.
 *
 * Lines end at "\n", "\r\n" or a lone "\r", as LSP and dlm's parser (which
 * turns CRLF and CR into LF before counting) both count them. Columns:
 * LSP counts UTF-16 code units, dlm's messages count code points (libyaml's
 * marks), so a character outside the BMP is one dlm column and two LSP
 * characters. */
#include "lsp/lsp_internal.h"

#include <stdlib.h>
#include <string.h>

size_t text_line_start(const char *t, size_t len, int line)
{
    size_t i = 0;
    for (int l = 0; l < line; l++) {
        while (i < len && t[i] != '\n' && t[i] != '\r') i++;
        if (i >= len) return len;
        if (t[i] == '\r' && i + 1 < len && t[i + 1] == '\n') i++;
        i++;
    }
    return i;
}

size_t text_line_len(const char *t, size_t len, size_t off)
{
    size_t i = off;
    while (i < len && t[i] != '\n' && t[i] != '\r') i++;
    return i - off;
}

int text_nlines(const char *t, size_t len)
{
    int n = 1;
    for (size_t i = 0; i < len; i++) {
        if (t[i] == '\r' && i + 1 < len && t[i + 1] == '\n') i++;
        if (t[i] == '\n' || t[i] == '\r') n++;
    }
    return n;
}

/* Length of the UTF-8 sequence starting with byte c (1 for stray bytes). */
static size_t u8len(unsigned char c)
{
    if (c >= 0xF0 && c < 0xF8) return 4;
    if (c >= 0xE0) return c < 0xF0 ? 3 : 1;
    if (c >= 0xC0) return 2;
    return 1;
}

int text_utf16_units(const char *s, size_t n)
{
    int u = 0;
    for (size_t i = 0; i < n;) {
        size_t k = u8len((unsigned char)s[i]);
        u += k == 4 ? 2 : 1;
        i += k;
    }
    return u;
}

size_t text_utf16_to_bytes(const char *line, size_t linelen, int units)
{
    size_t i = 0;
    int u = 0;
    while (i < linelen && u < units) {
        size_t k = u8len((unsigned char)line[i]);
        if (i + k > linelen) k = linelen - i;
        u += k == 4 ? 2 : 1;
        i += k;
    }
    return i;
}

size_t text_col_to_bytes(const char *line, size_t linelen, int col)
{
    size_t i = 0;
    for (int c = 1; c < col && i < linelen; c++) {
        size_t k = u8len((unsigned char)line[i]);
        i += i + k > linelen ? linelen - i : k;
    }
    return i;
}

json_t *text_pos(const char *t, size_t len, int line, size_t byte_in_line)
{
    size_t off = text_line_start(t, len, line);
    size_t ll = text_line_len(t, len, off);
    if (byte_in_line > ll) byte_in_line = ll;
    return json_pack("{s:i, s:i}", "line", line, "character", text_utf16_units(t + off, byte_in_line));
}

json_t *text_range(const char *t, size_t len, int l0, size_t b0, int l1, size_t b1)
{
    return json_pack("{s:o, s:o}", "start", text_pos(t, len, l0, b0), "end", text_pos(t, len, l1, b1));
}

int text_offset(const char *t, size_t len, const json_t *pos, size_t *off)
{
    json_t *l = json_object_get(pos, "line"), *c = json_object_get(pos, "character");
    if (!json_is_integer(l) || !json_is_integer(c) || json_integer_value(l) < 0 || json_integer_value(c) < 0)
        return -1;
    json_int_t line = json_integer_value(l);
    if (line > 1 << 30) line = 1 << 30;
    size_t s = text_line_start(t, len, (int)line);
    size_t ll = text_line_len(t, len, s);
    json_int_t ch = json_integer_value(c);
    *off = s + text_utf16_to_bytes(t + s, ll, ch > 1 << 30 ? 1 << 30 : (int)ch);
    return 0;
}

int text_apply_change(char **t, size_t *len, const json_t *change)
{
    json_t *jt = json_object_get(change, "text");
    if (!json_is_string(jt)) return -1;
    const char *nt = json_string_value(jt);
    size_t nl = json_string_length(jt);
    json_t *range = json_object_get(change, "range");
    size_t a = 0, b = *len;
    if (range) {
        if (text_offset(*t, *len, json_object_get(range, "start"), &a) ||
            text_offset(*t, *len, json_object_get(range, "end"), &b))
            return -1;
        if (b < a) return -1;
    }
    if (*len - (b - a) + nl > DOC_MAX_BYTES) return -1;
    size_t out_len = *len - (b - a) + nl;
    char *o = malloc(out_len + 1);
    if (!o) return -1;
    memcpy(o, *t, a);
    memcpy(o + a, nt, nl);
    memcpy(o + a + nl, *t + b, *len - b);
    o[out_len] = 0;
    free(*t);
    *t = o;
    *len = out_len;
    return 0;
}

/* ---- frontmatter outline ---------------------------------------------------- */

static int is_key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.' || c == '*';
}

static int line_is(const char *p, size_t n, const char *s)
{
    size_t k = strlen(s);
    return n == k && !memcmp(p, s, k);
}

void fm_outline_build(const char *t, size_t len, fm_outline *o)
{
    memset(o, 0, sizeof *o);
    o->open_line = o->close_line = -1;
    size_t off = 0;
    size_t l0 = text_line_len(t, len, 0);
    if (!line_is(t, l0, "---")) return;
    o->open_line = 0;
    /* indent stack: columns and path components of the open keys */
    int ind[32];
    char comp[32][64];
    int depth = 0, cap = 0;
    off = text_line_start(t, len, 1);
    for (int line = 1; off < len || line == 1; line++) {
        size_t ll = text_line_len(t, len, off);
        const char *p = t + off;
        if (line_is(p, ll, "---")) { o->close_line = line; break; }
        if (o->n == cap) {
            cap = cap ? cap * 2 : 32;
            fm_line *nv = realloc(o->v, (size_t)cap * sizeof *nv);
            if (!nv) break;
            o->v = nv;
        }
        fm_line *f = &o->v[o->n++];
        memset(f, 0, sizeof *f);
        f->line = line;
        size_t i = 0;
        while (i < ll && p[i] == ' ') i++;
        int item = 0, dc = (int)i;
        if (i < ll && p[i] == '-' && (i + 1 == ll || p[i + 1] == ' ')) {   /* "- key: v": a list item's key */
            item = 1;
            i++;
            while (i < ll && p[i] == ' ') i++;
        }
        f->indent = (int)i;
        size_t k = i;
        while (k < ll && is_key_char(p[k])) k++;
        int is_key = k > i && k < ll && p[k] == ':' && (k + 1 == ll || p[k + 1] == ' ');
        if (!item && (i >= ll || p[i] == '#')) { f->indent = -1; goto next; }   /* blank or comment */
        if (item) {
            /* the item belongs to the innermost key left of its dash (a
             * sequence may sit at its key's own indent) */
            while (depth > 0 && (ind[depth - 1] > dc || (ind[depth - 1] == dc && !strcmp(comp[depth - 1], "[]"))))
                depth--;
            if (depth < 32) { ind[depth] = dc; snprintf(comp[depth], sizeof comp[depth], "[]"); depth++; }
        } else {
            while (depth > 0 && ind[depth - 1] >= f->indent) depth--;
        }
        if (is_key) {
            size_t kl = k - i < sizeof f->key - 1 ? k - i : sizeof f->key - 1;
            memcpy(f->key, p + i, kl);
            f->key[kl] = 0;
            f->key_off = i;
            size_t v = k + 1;
            while (v < ll && p[v] == ' ') v++;
            f->val_off = v;
        }
        {
            size_t pl = 0;
            f->path[0] = 0;
            for (int d = 0; d < depth; d++) {
                int w = snprintf(f->path + pl, sizeof f->path - pl, "%s%s", pl && comp[d][0] != '[' ? "." : "",
                                 comp[d]);
                if (w < 0 || (size_t)w >= sizeof f->path - pl) break;
                pl += (size_t)w;
            }
            if (is_key) snprintf(f->path + pl, sizeof f->path - pl, "%s%s", pl ? "." : "", f->key);
        }
        if (is_key && depth < 32) {
            ind[depth] = f->indent;
            snprintf(comp[depth], sizeof comp[depth], "%s", f->key);
            depth++;
        }
    next:
        if (off >= len) break;
        off += ll;
        if (off < len && t[off] == '\r' && off + 1 < len && t[off + 1] == '\n') off++;
        off++;
    }
}

void fm_outline_free(fm_outline *o)
{
    free(o->v);
    memset(o, 0, sizeof *o);
}

const fm_line *fm_outline_find(const fm_outline *o, const char *path)
{
    for (int i = 0; i < o->n; i++)
        if (o->v[i].key[0] && !strcmp(o->v[i].path, path)) return &o->v[i];
    return NULL;
}

void fm_schema_path(const char *path, char *out, size_t cap)
{
    /* training.adapters.<name>... → training.adapters.*... */
    const char *ad = "training.adapters.";
    size_t adl = strlen(ad);
    if (!strncmp(path, ad, adl) && path[adl]) {
        const char *rest = strchr(path + adl, '.');
        snprintf(out, cap, "training.adapters.*%s", rest ? rest : "");
        return;
    }
    snprintf(out, cap, "%s", path);
}
