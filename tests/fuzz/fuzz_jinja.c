/* Fuzz target: jinja_parse on arbitrary bytes, then, when it parses,
 * jinja_render with a fixed conversation (or, after a NUL byte, the JSON
 * variables that follow). Nothing may crash, leak, hit UB or run past the
 * interpreter's limits. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <jansson.h>

#include "tokens/jinja.h"

static const char VARS[] =
    "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi <think>x</think>\"},"
    "{\"role\":\"assistant\",\"content\":\"\\n hello \"}],\"add_generation_prompt\":true,\"bos_token\":\"<s>\","
    "\"eos_token\":\"</s>\",\"tools\":[{\"name\":\"f\",\"parameters\":{\"a\":1.5}}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t tn = nul ? (size_t)(nul - data) : size;
    dlm_err e;
    jinja_tmpl *t;
    if (jinja_parse((const char *)data, tn, &t, &e)) return 0;
    json_t *vars = nul ? json_loadb((const char *)nul + 1, size - tn - 1, 0, NULL) : json_loads(VARS, 0, NULL);
    strbuf out = STRBUF_INIT;
    jinja_render(t, vars, &out, &e);
    sb_free(&out);
    json_decref(vars);
    jinja_free(t);
    return 0;
}
