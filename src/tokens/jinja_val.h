/* jinja_val — the interpreter's values and the library over them (filters,
 * tests, string methods, printing), shared by jinja_val.c and the evaluator
 * jinja_eval.c. Not for use outside the module. */
#ifndef DLM_JINJA_VAL_H
#define DLM_JINJA_VAL_H

#include <stdint.h>
#include <jansson.h>

#include "tokens/jinja.h"
#include "tokens/jinja_impl.h"

enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_MACRO, V_METHOD, V_FUNC };

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jenv jenv;
typedef struct jmeth jmeth;

typedef struct jval {
    int k;
    union {
        int64_t i;
        double f;
        jstr *s;
        jlist *l;
        jdict *d;
        jmeth *m;
    };
} jval;

struct jlist {
    size_t n, cap;
    jval *v;
};
struct jdict {
    size_t n, cap;
    jstr **key;
    jval *v;
};
struct jmeth {
    jval self;
    const char *name;     /* method or builtin name */
    const jnode *macro;   /* V_MACRO */
    jenv *env;            /* macro closure */
    const jnode *caller;  /* call block body (for `caller()`) */
    jenv *caller_env;
};
struct jenv {
    jenv *parent;
    jdict *vars;
};

typedef struct jbuf {
    char *p;
    size_t n, cap;
} jbuf;

typedef struct rt {
    jx x;
    jenv *globals;
} rt;

#define X (&r->x)
static const jval UNDEF = {V_UNDEF, {0}};
static const jval NONE = {V_NONE, {0}};

typedef struct jargs {
    jval pos[8];
    int np;
    const char *kw[8];
    size_t kwn[8];
    jval kwv[8];
    int nk;
} jargs;

void jv_step(rt *r);
void jv_buf_add(rt *r, jbuf *b, const char *s, size_t n);
void jv_buf_puts(rt *r, jbuf *b, const char *s);
jval jv_vstr(rt *r, const char *s, size_t n);
jval jv_vcs(rt *r, const char *s);
jval jv_vbuf(rt *r, const jbuf *b);
jval jv_vint(int64_t i);
jval jv_vbool(int b);
jval jv_vfloat(double f);
jval jv_vlist(rt *r);
void jv_list_push(rt *r, jlist *l, jval x);
jval jv_vdict(rt *r);
jval *jv_dict_find(const jdict *d, const char *k, size_t kn);
void jv_dict_set(rt *r, jdict *d, const char *k, size_t kn, jval v);
jval jv_from_json(rt *r, const json_t *j, int depth);
void jv_fmt_float(char *b, size_t cap, double f);
void jv_json_str(rt *r, jbuf *o, const char *s, size_t n);
void jv_to_json(rt *r, jbuf *o, jval v, int indent, int depth, int undef_null);
void jv_to_text(rt *r, jbuf *o, jval v);
jstr *jv_str_of(rt *r, jval v);
int jv_truthy(jval v);
int64_t jv_to_i64(double d);
int jv_is_num(jval v);
double jv_num(jval v);
int jv_equal(jval a, jval b);
int jv_py_space(unsigned char c);
jval jv_strip(rt *r, jstr *s, const jstr *chars, int left, int right);
jval jv_case_map(rt *r, jstr *s, int mode /* 0 lower 1 upper 2 title 3 capitalize */);
jval jv_replace_str(rt *r, jstr *s, jstr *a, jstr *b, int64_t count);
jval jv_split_str(rt *r, jstr *s, jval sep, int64_t maxsplit);
jval jv_arg(const jargs *a, int i, const char *name, jval def);
jstr *jv_arg_str(rt *r, const jargs *a, int i, const char *name, const char *fn);
size_t jv_seq_len(rt *r, jval v);
jval jv_attr_of(rt *r, jval item, jstr *attr);
int jv_cmp_vals(rt *r, jval a, jval b);
jval jv_filter(rt *r, jval v, const char *f, size_t fn, const jargs *a);
int jv_test(rt *r, jval v, const char *name, const jargs *a);

#endif
