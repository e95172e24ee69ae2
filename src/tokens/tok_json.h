/* tok_json — a small, fast, read-only JSON reader for tokenizer.json.
 *
 * Why not jansson (util/json.h)? A tokenizer.json is 10 MB of one object
 * with ~150k keys and an array of ~300k merges; jansson builds a hash table
 * and a malloc'd node per value and spends ~0.35 s on it, twice what the
 * tokenizer's own tables take. This reader parses into one flat node array
 * and one string arena (no per-value allocation, no hashing), about 5x
 * faster, and objects are looked up by linear scan, which is what a loader
 * that walks each object once needs. Strict RFC 8259 input: UTF-8 checked,
 * escapes decoded (\u0000 allowed: strings carry their length), depth capped. */
#ifndef DLM_TOK_JSON_H
#define DLM_TOK_JSON_H

#include <stddef.h>
#include <stdint.h>
#include "util/err.h"

enum { TJ_NONE = 0, TJ_NULL, TJ_FALSE, TJ_TRUE, TJ_INT, TJ_REAL, TJ_STR, TJ_ARR, TJ_OBJ };

typedef struct tj_node {
    uint8_t type;
    uint32_t next;      /* next sibling (array element / object key or value), 0 = none */
    uint32_t child;     /* first child: array element, or first key of an object */
    uint32_t count;     /* array elements or object members */
    union {
        int64_t i;
        double d;
        struct { uint32_t off, len; } s;   /* string in the arena */
    } v;
} tj_node;

/* Node 0 is "none"; the root is node 1. Object children alternate
 * key (TJ_STR), value, key, value ... along `next`. */
typedef struct tj_doc {
    tj_node *nodes;
    size_t n, cap;
    char *str;
    size_t str_len, str_cap;
} tj_doc;

int tj_parse(tj_doc *d, const char *s, size_t n, const char *name, dlm_err *e);
void tj_free(tj_doc *d);

static inline int tj_type(const tj_doc *d, uint32_t i) { return i ? d->nodes[i].type : TJ_NONE; }
/* Value of key in object o; 0 when o is not an object or has no such key. */
uint32_t tj_get(const tj_doc *d, uint32_t o, const char *key);
/* String node: pointer (NUL-terminated in the arena) and length; NULL otherwise. */
const char *tj_str(const tj_doc *d, uint32_t i, size_t *len);
/* Boolean value, or def when i is not a boolean. */
int tj_bool(const tj_doc *d, uint32_t i, int def);
/* Integer value: 0 ok, -1 when i is not an integer. */
int tj_int(const tj_doc *d, uint32_t i, int64_t *out);
/* Number (integer or real) as double: 0 ok, -1 otherwise. */
int tj_num(const tj_doc *d, uint32_t i, double *out);
/* Array element k (0-based), 0 when out of range. */
uint32_t tj_at(const tj_doc *d, uint32_t a, size_t k);

/* Iterate an array: for (uint32_t x = tj_first(d, a); x; x = tj_next(d, x)).
 * An object: for (uint32_t k = tj_first(d, o); k; k = tj_next(d, tj_next(d, k)))
 * with the value at tj_next(d, k). */
static inline uint32_t tj_first(const tj_doc *d, uint32_t i)
{
    return (tj_type(d, i) == TJ_ARR || tj_type(d, i) == TJ_OBJ) ? d->nodes[i].child : 0;
}
static inline uint32_t tj_next(const tj_doc *d, uint32_t i) { return i ? d->nodes[i].next : 0; }

#endif
