/* fuzz_grow — what `dlm synth` and `dlm harvest` read from outside: a
 * teacher's reply (synth_parse_reply), the difflib ratio over arbitrary
 * UTF-8 (synth_ratio, synth_normalize), and the text-level edits of
 * doc/grow on any document that parses (remove every other fenced section,
 * append an auto-synth section). Input: reply text, then after a NUL byte
 * a document. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "doc/grow.h"
#include "infer/synth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16) return 0;
    char *a = malloc(size + 1);
    if (!a) return 0;
    memcpy(a, data, size);
    a[size] = 0;
    size_t la = strlen(a);
    const char *b = la < size ? a + la + 1 : a + size;
    size_t lb = la < size ? size - la - 1 : 0;
    dlm_err e;
    synth_pair *v;
    int n, rej, found;
    if (!synth_parse_reply(a, la, &v, &n, &rej, &found, &e)) {
        for (int i = 0; i + 1 < n; i++) synth_is_near_dup(v[i].question, v[i].answer, v[i + 1].question, v[i + 1].answer);
        synth_pairs_free(v, n);
    }
    if (la < 2048 && strlen(b) < 2048) synth_ratio(a, b);
    strbuf sb = STRBUF_INIT;
    synth_normalize(&sb, a);
    sb_free(&sb);
    dlm_doc *d = doc_parse("<fuzz>", b, lb, &e);
    if (d) {
        int ns = doc_nsections(d), removed;
        unsigned char *drop = calloc((size_t)ns + 1, 1);
        for (int i = 0; drop && i < ns; i++) drop[i] = (i % 2) && doc_section_at(d, i)->fenced;
        strbuf out = STRBUF_INIT;
        if (drop) doc_grow_remove(d, drop, &out, &removed, &e);
        free(drop);
        sb_free(&out);
        strbuf body = STRBUF_INIT;
        if (!doc_grow_qa_content(&body, "What is X?", a, 0, &e)) {
            doc_section s;
            memset(&s, 0, sizeof s);
            s.type = DOC_INSTRUCTION;
            s.content = body.buf;
            s.content_len = body.len;
            s.auto_synth = 1;
            s.synth_teacher = "self";
            s.synth_strategy = "extraction";
            s.synth_at = "2026-01-01T00:00:00Z";
            s.source_section_id = "0123456789abcdef";
            doc_grow_append(d, &s, 1, &out, &e);
            sb_free(&out);
        }
        sb_free(&body);
        doc_free(d);
    }
    free(a);
    return 0;
}
