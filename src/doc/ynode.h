/* ynode — YAML frontmatter → a tree of typed nodes, as PyYAML's safe_load
 * would see it (YAML 1.1 implicit types: yes/no/on/off booleans, 0x/0b/0
 * prefixed ints, floats only with a dot, timestamps, merge keys `<<`), with
 * every node's file line:col kept for error messages.
 *
 * libyaml does the scanning and parsing; this file composes the events into
 * nodes and resolves scalar types with PyYAML's resolver rules. Aliases share
 * nodes (no copying); the total expanded size is capped so a "billion
 * laughs" document is refused instead of walked. All memory lives in one
 * arena freed by ydoc_free. */
#ifndef DLM_DOC_YNODE_H
#define DLM_DOC_YNODE_H

#include <stddef.h>
#include <stdint.h>
#include "util/err.h"
#include "util/str.h"

typedef enum {
    YN_NULL, YN_BOOL, YN_INT, YN_FLOAT, YN_STR, YN_TIMESTAMP, YN_SEQ, YN_MAP,
} yn_kind;

typedef struct ynode ynode;
struct ynode {
    yn_kind kind;
    int line, col;        /* 1-based position in the document */
    const char *text;     /* scalars: the value as written (escapes resolved) */
    size_t len;
    int b;                /* YN_BOOL */
    int64_t i;            /* YN_INT */
    int big;              /* YN_INT outside int64: i saturated, text is decimal */
    char *bigtext;        /* decimal digits (with '-') for big ints */
    double f;             /* YN_FLOAT */
    int date_only;        /* YN_TIMESTAMP: a date without time */
    ynode **keys;         /* YN_MAP: keys (scalars) */
    ynode **vals;         /* YN_MAP: values; YN_SEQ: items */
    size_t n;
    uint64_t weight;      /* nodes reachable, counting shared ones again */
    int synthetic;        /* made by a migration, not read from the file */
};

typedef struct yarena yarena;

typedef struct ydoc {
    yarena *arena;
    ynode *root;          /* NULL for an empty/comment-only frontmatter */
} ydoc;

/* Parse text (the lines between the delimiters); first_line is the file line
 * of text's first line. Errors: FrontmatterError "invalid YAML: ..." at the
 * file position libyaml reports. */
int ydoc_parse(const char *text, size_t len, int first_line, const char *path, ydoc *out, dlm_err *e);
void ydoc_free(ydoc *d);

/* Value for string key (NULL if absent); *key_out gets the key node. */
ynode *ymap_get(const ynode *map, const char *key, ynode **key_out);
/* Python type name of the value a node constructs to (str, int, float,
 * bool, NoneType, list, dict, date, datetime). */
const char *ynode_pytype(const ynode *n);
/* str(value) as Python prints a dict key. */
void ynode_pystr(const ynode *n, strbuf *sb);
int ynode_is_str(const ynode *n, const char *s);
/* 1 when a plain (unquoted) scalar with this text reads back as a string. */
int ynode_plain_is_str(const char *s, size_t n);

/* Nodes made by migrations (allocated in d's arena). */
ynode *ynode_new(ydoc *d, yn_kind kind, int line, int col);
ynode *ynode_new_str(ydoc *d, const char *s, int line, int col);
/* Append or replace (keeping position) key → val in a map node. */
int ymap_set(ydoc *d, ynode *map, ynode *key, ynode *val);
/* Copy of a map node's entries (so a shared node is never edited). */
ynode *ymap_clone(ydoc *d, const ynode *map);
/* Remove key (no-op when absent). */
void ymap_del(ynode *map, const char *key);

#endif
