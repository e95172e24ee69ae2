/* Writer, edits, migration write path and templates. */
#include "check.h"

#include <stdlib.h>
#include <string.h>

#include "doc/doc.h"
#include "doc/templates.h"
#include "util/fs.h"
#include "util/log.h"

#define H "---\ndlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3\nbase_model: smollm2-135m\n"

static const char *DOCS[] = {
    H "# comment kept\n---\n\n# Title\n\nProse.\n\n::instruction::\n### Q\nq\n### A\na\n",
    H "---\nno blank line, no final newline",
    H "---\n\n\n\nleading blanks\n\n\n",
    H "---\n::prose::\nfenced first\n::preference#tone::\n<!-- dlm-auto-harvest: source=\"r1\" -->\n### Prompt\np\n"
      "### Chosen\nc\n### Rejected\nr\n::image path=\"a.png\"::\n::prose::\nafter media\n```\n::instruction::\n```\n",
};

/* Untouched: byte-identical; read → write → read: same structure. */
static void test_round_trip(void)
{
    for (size_t i = 0; i < sizeof DOCS / sizeof *DOCS; i++) {
        dlm_err e;
        dlm_doc *d = doc_parse("t.dlm", DOCS[i], strlen(DOCS[i]), &e);
        CHECK_MSG(d != NULL, "doc %zu: %s", i, e.msg);
        if (!d) continue;
        strbuf sb = STRBUF_INIT;
        CHECK_INT(doc_serialize(d, &sb, &e), 0);
        CHECK_STR(sb_str(&sb), DOCS[i]);
        dlm_doc *r = doc_parse("t.dlm", sb.buf, sb.len, &e);
        CHECK(r != NULL);
        if (r) {
            CHECK_INT(doc_nsections(r), doc_nsections(d));
            for (int k = 0; k < doc_nsections(d) && k < doc_nsections(r); k++)
                CHECK_STR(doc_section_at(r, k)->id, doc_section_at(d, k)->id);
            doc_free(r);
        }
        sb_free(&sb);
        doc_free(d);
    }
}

/* Edits keep every other section's content (and id) exactly. */
static void test_edits(void)
{
    dlm_err e;
    const char *text = DOCS[3];
    dlm_doc *d = doc_parse("t.dlm", text, strlen(text), &e);
    if (!d) { CHECK_MSG(0, "%s", e.msg); return; }
    int n0 = doc_nsections(d);
    char ids[16][17];
    for (int i = 0; i < n0; i++) memcpy(ids[i], doc_section_at(d, i)->id, 17);

    doc_section t;
    memset(&t, 0, sizeof t);
    t.type = DOC_INSTRUCTION;
    t.content = "### Q\nWhat is new?\n### A\nThis.";
    t.auto_harvest = 1;
    t.harvest_source = "run_9";
    CHECK_INT(doc_append_section(d, &t, &e), 0);
    CHECK_INT(doc_nsections(d), n0 + 1);
    CHECK_INT(doc_dirty(d), 1);
    for (int i = 0; i < n0; i++) CHECK_STR(doc_section_at(d, i)->id, ids[i]);
    const doc_section *added = doc_section_at(d, n0);
    CHECK_INT(added->n_pairs, 1);
    CHECK_STR(added->harvest_source, "run_9");
    char want[17];
    doc_section_id(DOC_INSTRUCTION, t.content, strlen(t.content), want);
    CHECK_STR(added->id, want);

    /* A fence line outside a code block cannot be written faithfully. */
    doc_section bad;
    memset(&bad, 0, sizeof bad);
    bad.type = DOC_PROSE;
    bad.content = "text\n::instruction::\nmore";
    CHECK_INT(doc_append_section(d, &bad, &e), -1);
    CHECK_STR(e.kind, "FenceError");
    CHECK_INT(doc_nsections(d), n0 + 1);

    CHECK_INT(doc_remove_section(d, 0, &e), 0);
    CHECK_INT(doc_nsections(d), n0);
    for (int i = 1; i < n0; i++) CHECK_STR(doc_section_at(d, i - 1)->id, ids[i]);

    const char *dir = check_tmpdir("test_doc_write");
    char p[4096];
    fs_join(p, sizeof p, dir, "edited.dlm");
    CHECK_INT(doc_write(d, p, &e), 0);
    dlm_doc *r = doc_load(p, &e);
    CHECK(r != NULL);
    if (r) {
        CHECK_INT(doc_nsections(r), doc_nsections(d));
        for (int i = 0; i < doc_nsections(r); i++) CHECK_STR(doc_section_at(r, i)->id, doc_section_at(d, i)->id);
        /* frontmatter text kept verbatim */
        size_t n;
        CHECK(!strncmp(doc_text(r, &n), text, strlen(H) + 4));
        doc_free(r);
    }
    doc_free(d);
}

static char *write_tmp(const char *name, const char *text)
{
    static char p[4096];
    fs_join(p, sizeof p, check_tmpdir("test_doc_migrate"), name);
    dlm_err e;
    CHECK_INT(fs_write_atomic(p, text, strlen(text), 0644, &e), 0);
    return p;
}

static void test_migrate(void)
{
    dlm_err e;
    doc_migration m;
    /* identity steps: only the number changes; comments and body survive */
    const char *v3 = "---\n# mine\ndlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3\ndlm_version: 3  # old\nbase_model: x\n---\n\n\nBody\n\n";
    char *p = write_tmp("v3.dlm", v3);
    CHECK_INT(doc_migrate_file(p, &m, &e), 0);
    CHECK_INT(m.from_version, 3);
    CHECK_INT(m.applied, 12);
    CHECK_INT(m.rewrote_data, 0);
    CHECK_STR(m.text, "---\n# mine\ndlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3\ndlm_version: 15  # old\nbase_model: x\n---\n\n\nBody\n\n");
    doc_migration_free(&m);

    /* v1 without dlm_version: the line is inserted after dlm_id */
    p = write_tmp("v1.dlm", "---\ndlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3\nbase_model: x\n---\nBody\n");
    CHECK_INT(doc_migrate_file(p, &m, &e), 0);
    CHECK_STR(m.text, "---\ndlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3\ndlm_version: 15\nbase_model: x\n---\nBody\n");
    doc_migration_free(&m);

    /* v1 with training.dpo: re-serialised, explicit keys kept, body verbatim */
    p = write_tmp("dpo.dlm", "---\ndlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3\nbase_model: x\ntraining:\n  lora_r: 8\n"
                             "  dpo:\n    enabled: true\n    beta: 0.2\n    reference: pre_dpo_adapter\n---\n"
                             "::instruction::\n### Q\nq\n### A\na\n\n\n");
    CHECK_INT(doc_migrate_file(p, &m, &e), 0);
    CHECK_INT(m.rewrote_data, 1);
    CHECK_STR(m.text, "---\ndlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3\ndlm_version: 15\nbase_model: x\ntraining:\n  lora_r: 8\n"
                      "  preference:\n    enabled: true\n    method: dpo\n    hyperparams:\n      beta: 0.2\n"
                      "    reference: pre_adapter\n---\n::instruction::\n### Q\nq\n### A\na\n\n\n");
    doc_migration_free(&m);

    /* already current */
    p = write_tmp("cur.dlm", H "dlm_version: 15\n---\n");
    CHECK_INT(doc_migrate_file(p, &m, &e), 0);
    CHECK_INT(m.applied, 0);
    CHECK(m.text == NULL);
    doc_migration_free(&m);

    /* future version refused with the spec's message */
    p = write_tmp("fut.dlm", H "dlm_version: 99\n---\n");
    CHECK_INT(doc_migrate_file(p, &m, &e), -1);
    CHECK_STR(e.msg, "dlm_version 99 is newer than this parser (CURRENT_SCHEMA_VERSION=15); upgrade dlm or check "
                     "the source's schema.");
}

/* Every template renders to a valid v15 document; the embedded copies
 * match templates/ (regenerate with scripts/gen-templates.py). */
static void test_templates(void)
{
    dlm_err e;
    doc_template_set set;
    doc_templates_set_dir("templates");   /* tests run from the source root */
    CHECK_INT(doc_templates_load(&set, &e), 0);
    doc_templates_set_dir(NULL);
    CHECK(set.n >= 3);
    CHECK_INT(set.n, doc_templates_embedded_len);
    for (int i = 0; i < set.n; i++) {
        const doc_template *emb = NULL;
        for (int k = 0; k < doc_templates_embedded_len; k++)
            if (!strcmp(doc_templates_embedded[k].name, set.v[i].name)) emb = &doc_templates_embedded[k];
        CHECK_MSG(emb && !strcmp(emb->text, set.v[i].text) && !strcmp(emb->summary, set.v[i].summary),
                  "template %s: embedded copy differs from templates/ (run scripts/gen-templates.py)", set.v[i].name);
        char *text;
        CHECK_INT(doc_template_render(&set.v[i], "01HZX3K4M5N6P7Q8R9S0T1V2W3", "tiny", &text, &e), 0);
        dlm_doc *d = doc_parse(set.v[i].name, text, strlen(text), &e);
        CHECK_MSG(d != NULL, "template %s: %s", set.v[i].name, e.msg);
        if (d) {
            CHECK_INT(doc_fm(d)->source_version, 15);
            CHECK_STR(doc_fm(d)->base_model, "tiny");
            CHECK(doc_nsections(d) >= 1);
            doc_free(d);
        }
        free(text);
    }
    CHECK(doc_templates_find(&set, "tutor") != NULL);
    CHECK(doc_templates_find(&set, "coding-tutor") != NULL);
    CHECK(doc_templates_find(&set, "notes") != NULL);
    doc_templates_free(&set);
}

static void test_yaml_scalar(void)
{
    const char *vals[] = {"tiny", "hf:Qwen/Qwen2.5-Coder-7B-Instruct@main", "yes", "1.5", "0x10", "a b", "#x", "",
                          "path/with: colon", "~", "null", "-dash", "it's \"q\"", "2020-01-01"};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
        strbuf doc = STRBUF_INIT;
        sb_puts(&doc, "---\ndlm_id: 01HZX3K4M5N6P7Q8R9S0T1V2W3\nbase_model: x\nsystem_prompt: ");
        doc_yaml_scalar(&doc, vals[i]);
        sb_puts(&doc, "\n---\n");
        dlm_err e;
        dlm_doc *d = doc_parse("t.dlm", doc.buf, doc.len, &e);
        CHECK_MSG(d && doc_fm(d)->system_prompt && !strcmp(doc_fm(d)->system_prompt, vals[i]), "scalar '%s' -> %s",
                  vals[i], sb_str(&doc));
        doc_free(d);
        sb_free(&doc);
    }
}

int main(void)
{
    log_set_level(LOG_QUIET);
    test_round_trip();
    test_edits();
    test_migrate();
    test_templates();
    test_yaml_scalar();
    return check_done();
}
