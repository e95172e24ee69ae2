/* gotmpl — the part of Go's text/template that Ollama chat templates use,
 * and Ollama's way of feeding a conversation to one (template.Execute,
 * server/routes.go), so that dlm can render a Modelfile TEMPLATE exactly
 * as `ollama` will and compare its tokens with the base's Jinja template
 * (the template drift check).
 *
 * Supported: text; actions {{ ... }} with the trim markers "{{- " and
 * " -}}"; comment actions (slash-star ... star-slash); {{ .Field }},
 * {{ $.Field }}, {{ . }};
 * string literals and decimal integers; if / else if / else / end; range /
 * else / end over .Messages or a slice of it, with "range $m := ..." and
 * "range $i, $m := ..."; variables: {{ $x := v }} declares (scoped to the
 * if / range body it is in), {{ $x = v }} sets an enclosing one (so it
 * carries across range iterations), $x and $x.Field read them; the
 * functions eq, ne, not, and, or, len, slice, index, and (pipeline).Field.
 * Anything else fails with "unsupported template construct" rather than
 * rendering something Go would not (an undefined variable fails when it
 * is reached; Go refuses the template when it parses it). Values: the root
 * (System, Messages, Prompt, Response, Tools), messages (Role, Content),
 * strings, booleans and integers, with Go's truth rules (empty string /
 * empty list / false / 0 are false). */
#ifndef DLM_EXPORT_GOTMPL_H
#define DLM_EXPORT_GOTMPL_H

#include <stddef.h>
#include "tokens/chat.h"
#include "util/err.h"
#include "util/str.h"

typedef struct gotmpl_values {
    const char *system;         /* .System ("" when none) */
    const chat_msg *msgs;       /* .Messages */
    size_t n_msgs;
    const char *prompt;         /* .Prompt */
    const char *response;       /* .Response */
} gotmpl_values;

/* Render tmpl with v into out (appended). */
int gotmpl_render(const char *tmpl, const gotmpl_values *v, strbuf *out, dlm_err *e);

/* What Ollama renders for a chat request: the Modelfile's SYSTEM becomes a
 * leading system message when the request has none; consecutive messages
 * of one role are merged with "\n\n" (template.collate); .System is every
 * system message joined with "\n\n"; .Response is "". */
int gotmpl_render_ollama(const char *tmpl, const char *modelfile_system, const chat_msg *msgs, size_t n,
                         strbuf *out, dlm_err *e);

#endif
