/* jinja — an interpreter for the subset of Jinja that Hugging Face chat
 * templates use, rendering what @huggingface/jinja (transformers.js) renders
 * for the same template and variables (docs/chat-templates.md):
 *
 *   statements  if/elif/else, for (loop.index/index0/first/last/length/
 *               revindex/previtem/nextitem, `for x in xs if cond`, else,
 *               tuple targets, break/continue), set (also `ns.attr = ...` and
 *               block set), macro (defaults, caller via call blocks)
 *   expressions literals, lists, dicts, tuples, + - * / // % ** ~, == != <
 *               <= > >=, in / not in, and/or/not, `a if c else b`,
 *               attribute/subscript/slice, calls, filters and tests
 *   whitespace  {%- -%} {{- -}} {#- -#}, trim_blocks and lstrip_blocks on, a
 *               single trailing newline of the template dropped
 *
 * The template is parsed once (jinja_parse) and rendered with variables
 * given as a JSON object (messages, add_generation_prompt, bos_token, tools,
 * ...). Every allocation of a render lives in one arena with a byte limit,
 * and loops, recursion and output are bounded: a hostile template fails with
 * an error, never hangs or exhausts memory (tests/fuzz/fuzz_jinja.c). */
#ifndef DLM_JINJA_H
#define DLM_JINJA_H

#include <stddef.h>
#include <jansson.h>

#include "util/err.h"
#include "util/str.h"

typedef struct jinja_tmpl jinja_tmpl;

/* Limits on one render. */
#define JINJA_MAX_BYTES (64u << 20)      /* arena (values, strings) */
#define JINJA_MAX_OUTPUT (16u << 20)     /* rendered text */
#define JINJA_MAX_STEPS 50000000ull      /* evaluation steps */
#define JINJA_MAX_DEPTH 200              /* nesting of calls/expressions */

/* Parse a template; syntax errors name line:col of the template. */
int jinja_parse(const char *src, size_t n, jinja_tmpl **out, dlm_err *e);
void jinja_free(jinja_tmpl *t);

/* Render with the variables of vars (a JSON object; NULL = none) appended
 * to out. raise_exception(msg) in the template becomes a
 * TemplateError with that message. On error out keeps its old length. */
int jinja_render(const jinja_tmpl *t, const json_t *vars, strbuf *out, dlm_err *e);

#endif
