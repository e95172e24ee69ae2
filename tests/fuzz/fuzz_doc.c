/* libFuzzer target: arbitrary bytes as a .dlm document.
 *
 * Every input must either parse or fail with a located, non-empty message.
 * On success the writer is exercised too: the untouched document must
 * serialise to its normalised text byte for byte and read back to the same
 * sections; removing the first section and appending a new one must keep
 * every other section's id. Any violation traps. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "util/hash.h"
#include "util/log.h"

#define REQUIRE(c) do { if (!(c)) __builtin_trap(); } while (0)

static void same_ids(const dlm_doc *a, const dlm_doc *b, int skip_a)
{
    REQUIRE(doc_nsections(a) - skip_a <= doc_nsections(b));
    for (int i = skip_a; i < doc_nsections(a); i++)
        REQUIRE(!strcmp(doc_section_at(a, i)->id, doc_section_at(b, i - skip_a)->id));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready;
    if (!ready) {
        log_set_level(LOG_QUIET);
        hash_init();
        ready = 1;
    }
    if (size > (1u << 16)) return 0;
    dlm_err e;
    err_clear(&e);
    dlm_doc *d = doc_parse("fuzz.dlm", data, size, &e);
    if (!d) {
        REQUIRE(e.msg[0] != 0);
        REQUIRE(e.kind[0] != 0);
        return 0;
    }
    json_t *j = doc_frontmatter_json(d);
    REQUIRE(j != NULL);
    json_decref(j);

    strbuf sb = STRBUF_INIT;
    REQUIRE(doc_serialize(d, &sb, &e) == 0);
    size_t tlen;
    const char *text = doc_text(d, &tlen);
    REQUIRE(sb.len == tlen && (tlen == 0 || !memcmp(sb.buf, text, tlen)));
    dlm_doc *r = doc_parse("fuzz.dlm", sb.buf ? sb.buf : "", sb.len, &e);
    REQUIRE(r != NULL);
    same_ids(d, r, 0);
    REQUIRE(doc_nsections(d) == doc_nsections(r));
    doc_free(r);
    sb_free(&sb);

    /* edits: drop the first section, append a Q/A section */
    int n = doc_nsections(d);
    dlm_doc *orig = doc_parse("fuzz.dlm", data, size, &e);
    REQUIRE(orig != NULL);
    if (n > 0 && doc_remove_section(d, 0, &e) == 0) same_ids(orig, d, 1);
    doc_section t;
    memset(&t, 0, sizeof t);
    t.type = DOC_INSTRUCTION;
    t.content = "### Q\nfuzz?\n### A\nyes";
    int before = doc_nsections(d);
    if (doc_append_section(d, &t, &e) == 0) {
        REQUIRE(doc_nsections(d) == before + 1);
        sb_reset(&sb);
        REQUIRE(doc_serialize(d, &sb, &e) == 0);
        r = doc_parse("fuzz.dlm", sb.buf, sb.len, &e);
        REQUIRE(r != NULL);
        same_ids(d, r, 0);
        doc_free(r);
        sb_free(&sb);
    }
    doc_free(orig);
    doc_free(d);
    return 0;
}
