/* jinja_impl — shared between the parser (jinja.c) and the evaluator
 * (jinja_eval.c). Not for use outside the module. */
#ifndef DLM_JINJA_IMPL_H
#define DLM_JINJA_IMPL_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "util/err.h"
#include "util/str.h"

typedef void *ablk_list;

typedef struct jx {
    jmp_buf jb;
    char msg[512];
    void *arena;
    size_t arena_bytes, arena_limit;
    int depth;
    unsigned long long steps;
} jx;

void *jx_alloc(jx *x, size_t n);
void jx_arena_free(ablk_list *l);
_Noreturn void jx_fail(jx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

typedef struct jstr {
    size_t n;
    char s[];
} jstr;
jstr *jx_str(jx *x, const char *s, size_t n);

enum {
    T_TEXT, T_OPEN_STMT, T_CLOSE_STMT, T_OPEN_EXPR, T_CLOSE_EXPR, T_COMMENT, T_IDENT, T_NUM, T_STR,
    T_LPAREN, T_RPAREN, T_LBRACE, T_RBRACE, T_LBRACK, T_RBRACK, T_COMMA, T_DOT, T_COLON, T_PIPE,
    T_CMP, T_ADD, T_MUL, T_POW, T_EQUALS, T_UNARY,
};

typedef struct jtok {
    int type;
    const char *s;
    size_t n, at;
} jtok;

typedef struct jlex {
    jtok *t;
    size_t n, cap;
} jlex;

enum {
    N_BLOCK, N_TEXT, N_OUT, N_IF, N_FOR, N_SET, N_MACRO, N_CALLBLK, N_BREAK, N_CONTINUE, N_FILTERBLK,
    N_INT, N_FLOAT, N_STR, N_BOOL, N_NONE, N_IDENT, N_LIST, N_DICT, N_TUPLE, N_MEMBER, N_SLICE,
    N_CALL, N_ARGS, N_KWARG, N_FILTER, N_TEST, N_BIN, N_NOT, N_NEG, N_COND,
};

typedef struct jnode jnode;
struct jnode {
    int kind;
    size_t at;
    jnode *a, *b, *c, *d;
    jnode **k;
    size_t nk, capk;
    const char *s;
    size_t sn;
    int64_t i;
    double f;
    int op, neg, dot;
    char opname[8];
};

int jx_render(const jnode *root, const json_t *vars, strbuf *out, dlm_err *e);

#endif
