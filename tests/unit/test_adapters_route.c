/* Named adapters: the routing table of docs/reference/original-spec.md §3.9
 * (the original's multi_adapter/router.py rules), UnknownAdapterError at the
 * section's file:line at parse time, doc_scope_adapter and the store's
 * per-adapter trees. */
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "store/store.h"
#include "util/fs.h"
#include "util/log.h"

#define H "---\ndlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3\nbase_model: smollm2-135m\n"
#define ADAPTERS "training:\n  adapters:\n    knowledge:\n      lora_r: 4\n      learning_rate: 0.001\n" \
                 "    tone:\n      lora_r: 16\n      lora_alpha: 32\n      target_modules: [q_proj, v_proj]\n"

/* body: one section of each routing rule, lines 12..; expected owners */
static const char *BODY =
    "---\n"                                                   /* line 13 */
    "Shared prose.\n"                                         /* 12: prose, no suffix → both */
    "::prose#tone::\ntone prose\n"                            /* 13: prose #tone → tone */
    "::instruction::\n### Q\nq1\n### A\na1\n"                 /* 15: instruction → first (knowledge) */
    "::instruction#tone::\n### Q\nq2\n### A\na2\n"            /* 20: → tone */
    "::preference::\n### Prompt\np\n### Chosen\nc\n### Rejected\nr\n"   /* 25: → knowledge */
    "::preference#tone::\n### Prompt\np2\n### Chosen\nc2\n### Rejected\nr2\n" /* 32: → tone */
    "::prose#knowledge::\nknowledge prose\n";                 /* 39: → knowledge */

static void test_table(void)
{
    strbuf sb = STRBUF_INIT;
    sb_puts(&sb, H ADAPTERS);
    sb_puts(&sb, BODY);
    dlm_err e;
    dlm_doc *d = doc_parse("t.dlm", sb.buf, sb.len, &e);
    CHECK_MSG(d != NULL, "%s", e.msg);
    if (!d) { sb_free(&sb); return; }
    /*                      prose  p#tone  instr  i#tone  pref  pf#tone  p#knowledge */
    static const int K[] = {1,     0,      1,     0,      1,    0,       1};
    static const int T[] = {1,     1,      0,     1,      0,    1,       0};
    static const int LINES[] = {14, 15, 17, 22, 27, 34, 41};
    CHECK_INT(doc_nsections(d), 7);
    const doc_frontmatter *fm = doc_fm(d);
    CHECK_INT(doc_adapter_index(fm, "knowledge"), 0);
    CHECK_INT(doc_adapter_index(fm, "tone"), 1);
    CHECK_INT(doc_adapter_index(fm, "nope"), -1);
    for (int i = 0; i < doc_nsections(d) && i < 7; i++) {
        const doc_section *s = doc_section_at(d, i);
        CHECK_INT(s->line, LINES[i]);
        CHECK_MSG(doc_section_routes_to(fm, s, "knowledge") == K[i], "section %d → knowledge", i);
        CHECK_MSG(doc_section_routes_to(fm, s, "tone") == T[i], "section %d → tone", i);
        CHECK(!doc_section_routes_to(fm, s, "nope"));
    }
    /* scoping: the routed sections in order, the adapter's LoRA config in
     * the flat fields, and no writing */
    char *ids[7];
    for (int i = 0; i < 7; i++) ids[i] = strdup(doc_section_at(d, i)->id);
    CHECK_INT(doc_scope_adapter(d, "nope", &e), -1);
    CHECK_STR(e.kind, "UnknownAdapterError");
    CHECK_STR(e.msg, "adapter 'nope' not declared (declared: ['knowledge', 'tone'])");
    CHECK_INT(doc_scope_adapter(d, "tone", &e), 0);
    CHECK_STR(doc_scoped_adapter(d), "tone");
    CHECK_INT(doc_nsections(d), 4);
    int want[] = {0, 1, 3, 5};
    for (int i = 0; i < 4 && i < doc_nsections(d); i++) CHECK_STR(doc_section_at(d, i)->id, ids[want[i]]);
    const doc_training *t = &doc_fm(d)->training;
    CHECK_INT(t->lora_r, 16);
    CHECK_INT(t->lora_alpha, 32);
    CHECK_INT(t->target_modules_auto, 0);
    CHECK_INT(t->target_modules.n, 2);
    if (t->target_modules.n == 2) CHECK_STR(t->target_modules.v[1], "v_proj");
    CHECK_NEAR(t->learning_rate, 2e-4, 0);
    strbuf out = STRBUF_INIT;
    CHECK_INT(doc_serialize(d, &out, &e), -1);
    sb_free(&out);
    doc_free(d);
    d = doc_parse("t.dlm", sb.buf, sb.len, &e);
    CHECK_INT(doc_scope_adapter(d, "knowledge", &e), 0);
    CHECK_INT(doc_nsections(d), 4);
    int wantk[] = {0, 2, 4, 6};
    for (int i = 0; i < 4 && i < doc_nsections(d); i++) CHECK_STR(doc_section_at(d, i)->id, ids[wantk[i]]);
    CHECK_INT(doc_fm(d)->training.lora_r, 4);
    CHECK_NEAR(doc_fm(d)->training.learning_rate, 0.001, 0);
    CHECK_INT(doc_fm(d)->training.target_modules_auto, 1);
    doc_free(d);
    for (int i = 0; i < 7; i++) free(ids[i]);
    sb_free(&sb);
}

/* An undeclared suffix stops the parse at its fence line, for every
 * section type that takes a suffix; flat documents keep suffixes (the
 * original's dlm train trains them into its one adapter). */
static void test_errors(void)
{
    static const char *fences[] = {"::prose#sql::\nx\n", "::instruction#sql::\n### Q\nq\n### A\na\n",
                                   "::preference#sql::\n### Prompt\np\n### Chosen\nc\n### Rejected\nr\n"};
    for (int i = 0; i < 3; i++) {
        strbuf sb = STRBUF_INIT;
        sb_puts(&sb, H ADAPTERS "---\nintro\n\n");   /* the fence is on line 16 */
        sb_puts(&sb, fences[i]);
        dlm_err e;
        dlm_doc *d = doc_parse("t.dlm", sb.buf, sb.len, &e);
        CHECK(d == NULL);
        doc_free(d);
        CHECK_STR(e.kind, "UnknownAdapterError");
        CHECK_STR(e.file, "t.dlm");
        CHECK_INT(e.line, 16);
        CHECK_STR(e.msg, "section at line 16 routes to adapter '#sql' which is not declared in training.adapters "
                         "(declared: ['knowledge', 'tone'])");
        CHECK(strstr(e.hint, "declare 'sql' under training.adapters") != NULL);
        sb_free(&sb);
        /* the same section in a flat document parses; it routes to "any" */
        sb_puts(&sb, H "---\nintro\n\n");
        sb_puts(&sb, fences[i]);
        d = doc_parse("t.dlm", sb.buf, sb.len, &e);
        CHECK_MSG(d != NULL, "%s", e.msg);
        if (d) {
            CHECK(doc_section_routes_to(doc_fm(d), doc_section_at(d, 1), "default"));
            CHECK_INT(doc_scope_adapter(d, "sql", &e), -1);
            CHECK_STR(e.kind, "UnknownAdapterError");
        }
        doc_free(d);
        sb_free(&sb);
    }
    /* appending a section with an undeclared suffix is refused too */
    strbuf sb = STRBUF_INIT;
    sb_puts(&sb, H ADAPTERS "---\nintro\n");
    dlm_err e;
    dlm_doc *d = doc_parse("t.dlm", sb.buf, sb.len, &e);
    CHECK(d != NULL);
    if (d) {
        doc_section s;
        memset(&s, 0, sizeof s);
        s.type = DOC_PROSE;
        s.adapter = "sql";
        s.content = "more";
        s.content_len = 4;
        CHECK_INT(doc_append_section(d, &s, &e), -1);
        CHECK_MSG(!strcmp(e.kind, "UnknownAdapterError"), "%s: %s", e.kind, e.msg);
        s.adapter = "tone";
        CHECK_INT(doc_append_section(d, &s, &e), 0);
        CHECK_INT(doc_nsections(d), 2);
    }
    doc_free(d);
    sb_free(&sb);
}

/* adapter/<name>/{current.txt, versions/vNNNN} beside the flat tree */
static void test_store_trees(void)
{
    char tmpl[] = "/tmp/dlm-adapters-XXXXXX";
    CHECK(mkdtemp(tmpl) != NULL);
    dlm_err e;
    char p[4400], dir[4200];
    CHECK_INT(store_create_skeleton(tmpl, &e), 0);
    CHECK_INT(store_adapter_dir(tmpl, "tone", dir, sizeof dir, &e), 0);
    snprintf(p, sizeof p, "%s/adapter/tone", tmpl);
    CHECK_STR(dir, p);
    CHECK_INT(store_adapter_dir(tmpl, "../x", dir, sizeof dir, &e), -1);
    CHECK_INT(store_adapter_dir(tmpl, "Tone", dir, sizeof dir, &e), -1);
    CHECK_INT(store_current_version_of(tmpl, "tone", &e), 0);
    CHECK_INT(store_next_version_of(tmpl, "tone", &e), 1);
    snprintf(p, sizeof p, "%s/adapter/tone/versions/v0001", tmpl);
    CHECK_INT(fs_mkdir_p(p, &e), 0);
    snprintf(p, sizeof p, "%s/adapter/tone/versions/v0002", tmpl);
    CHECK_INT(fs_mkdir_p(p, &e), 0);
    CHECK_INT(store_set_current_of(tmpl, "tone", 2, &e), 0);
    CHECK_INT(store_set_current_of(tmpl, "tone", 3, &e), -1);
    snprintf(p, sizeof p, "%s/adapter/tone/current.txt", tmpl);
    char *buf = NULL;
    size_t len = 0;
    CHECK_INT(fs_read_all(p, 4096, &buf, &len, &e), 0);
    CHECK_STR(buf, "adapter/tone/versions/v0002\n");
    free(buf);
    CHECK_INT(store_current_version_of(tmpl, "tone", &e), 2);
    CHECK_INT(store_next_version_of(tmpl, "tone", &e), 3);
    /* the flat tree and another name are untouched */
    CHECK_INT(store_current_version(tmpl, &e), 0);
    CHECK_INT(store_next_version(tmpl, &e), 1);
    CHECK_INT(store_current_version_of(tmpl, "knowledge", &e), 0);
    /* a pointer into another tree is corrupt */
    CHECK_INT(fs_write_atomic(p, "adapter/versions/v0001\n", 23, 0644, &e), 0);
    CHECK_INT(store_current_version_of(tmpl, "tone", &e), -1);
    CHECK_STR(e.kind, "ManifestCorruptError");
    fs_remove_tree(tmpl, NULL);
}

int main(void)
{
    log_set_level(LOG_QUIET);
    test_table();
    test_errors();
    test_store_trees();
    return check_done();
}
