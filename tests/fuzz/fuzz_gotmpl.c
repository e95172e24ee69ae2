/* libFuzzer target: dlm's Go-template renderer (src/export/gotmpl.c) on
 * arbitrary template text, with Ollama's values for a small conversation.
 * Every input either renders or fails with an error; none may crash. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "export/gotmpl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *t = malloc(size + 1);
    if (!t) return 0;
    memcpy(t, data, size);
    t[size] = 0;
    const chat_msg m[] = {{"user", "hi"}, {"user", "again"}, {"assistant", "yo"}, {"system", "late"}, {"user", "x"}};
    strbuf out = STRBUF_INIT;
    dlm_err e;
    gotmpl_render_ollama(t, "S", m, 5, &out, &e);
    sb_reset(&out);
    gotmpl_render_ollama(t, NULL, m, 0, &out, &e);
    sb_free(&out);
    free(t);
    return 0;
}
