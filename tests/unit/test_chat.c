/* Unit tests for src/tokens/chat: exact renderings of each dialect written
 * out by hand from the templates (docs/reference/formats.md §3), assistant spans, detection.
 *
 * Modes for tests/ref/r0102-chat-templates.sh:
 *   test_chat --detect TEMPLATE_FILE        print the dialect name (or "none")
 *   test_chat --render DIALECT CONVS.json [TEMPLATE]   one JSON string per line: for each
 *       conversation {system, messages}, without then with the generation prompt
 *       (conversations whose "skip" names DIALECT are left out); with TEMPLATE,
 *       that template through dlm's Jinja interpreter with the dialect's
 *       variables (chat_dialect_vars) instead of the dialect */
#include "check.h"

#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "tokens/chat.h"
#include "weights/registry.h"
#include "util/fs.h"
#include "util/json.h"

static void expect(const char *dialect, const char *sys, const chat_msg *m, size_t n, int gen, const char *want)
{
    const chat_dialect *d = chat_dialect_find(dialect);
    CHECK_MSG(d != NULL, "dialect %s", dialect);
    if (!d) return;
    strbuf sb = STRBUF_INIT;
    dlm_err e;
    CHECK_INT(chat_render(d, sys, m, n, gen, &sb, NULL, NULL, &e), 0);
    CHECK_STR(sb_str(&sb), want);
    sb_free(&sb);
}

static void test_chatml(void)
{
    chat_msg conv[] = {{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};
    expect("chatml", NULL, conv, 1, 1, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    expect("chatml", "Be brief.", conv, 1, 0, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
    expect("chatml-smollm2", NULL, conv, 1, 1,
           "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
           "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    expect("chatml-qwen2.5", NULL, conv, 3, 0,
           "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
           "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n");
    /* A system prompt replaces the default line. */
    expect("chatml-qwen2.5", "S", conv, 1, 0, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
    /* Contents are not trimmed in chatml. */
    chat_msg ws[] = {{"user", "  x \n"}};
    expect("chatml", NULL, ws, 1, 0, "<|im_start|>user\n  x \n<|im_end|>\n");
}

static void test_qwen3(void)
{
    chat_msg conv[] = {{"user", "Q1"}, {"assistant", "<think>\nhmm\n</think>\n\nA1"}, {"user", "Q2"}, {"assistant", "A2"}};
    /* Earlier answers lose their think block; the final answer gets one. */
    expect("qwen3", NULL, conv, 4, 0,
           "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n"
           "<|im_start|>assistant\n<think>\n\n</think>\n\nA2<|im_end|>\n");
    /* thinking off (qwen3): the generation prompt opens with the empty think
     * block a trained answer follows; thinking on (qwen3thinking): a bare
     * header, the model writes its reasoning */
    expect("qwen3", "S", conv, 1, 1,
           "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    expect("qwen3thinking", "S", conv, 1, 1, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\n");
    /* both render past turns alike: training data is the same */
    expect("qwen3thinking", NULL, conv, 4, 0,
           "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n"
           "<|im_start|>assistant\n<think>\n\n</think>\n\nA2<|im_end|>\n");
    /* the Jinja variables each stands for, and the registry's variant */
    json_t *v = chat_dialect_vars(chat_dialect_find("qwen3"));
    CHECK(v && json_is_false(json_object_get(v, "enable_thinking")));
    json_decref(v);
    v = chat_dialect_vars(chat_dialect_find("qwen3thinking"));
    CHECK(v && json_is_true(json_object_get(v, "enable_thinking")));
    json_decref(v);
    CHECK(chat_dialect_vars(chat_dialect_find("chatml")) == NULL);
    CHECK(chat_dialect_refine(chat_dialect_find("qwen3"), "qwen3thinking") == chat_dialect_find("qwen3thinking"));
    CHECK(chat_dialect_refine(chat_dialect_find("qwen3"), "chatml") == chat_dialect_find("qwen3"));
    CHECK(chat_dialect_refine(chat_dialect_find("chatml"), "qwen3thinking") == chat_dialect_find("chatml"));
    /* Python's lstrip('\n') (jinja2 in transformers) strips newlines only:
     * the spaces stay. (@huggingface/jinja strips them too; see r0102.) */
    chat_msg pad[] = {{"user", "q"}, {"assistant", "\n  a\t\n"}};
    expect("qwen3", NULL, pad, 2, 0,
           "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n  a\t\n<|im_end|>\n");
    chat_msg think[] = {{"user", "Q"}, {"assistant", "<think>\nplan\n</think>\n\nA"}};
    expect("qwen3", NULL, think, 2, 0,
           "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\nplan\n</think>\n\nA<|im_end|>\n");
}

static void test_llama3(void)
{
    chat_msg conv[] = {{"user", "  Hi \n"}, {"assistant", "Hello"}};
    expect("llama3", NULL, conv, 1, 1,
           "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
           "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect("llama3", " Sys ", conv, 2, 0,
           "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
           "Today Date: 26 Jul 2024\n\nSys<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\nHello<|eot_id|>");
    expect("llama3-nodate", "Sys", conv, 1, 0,
           "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nSys<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
    expect("llama3-nodate-always", NULL, conv, 1, 0,
           "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void test_spans(void)
{
    chat_msg conv[] = {{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "More"}, {"assistant", " ok "}};
    chat_span sp[4];
    size_t ns;
    strbuf sb = STRBUF_INIT;
    dlm_err e;
    CHECK_INT(chat_render(chat_dialect_find("chatml-smollm2"), NULL, conv, 4, 0, &sb, sp, &ns, &e), 0);
    CHECK_INT(ns, 2);
    const char *s = sb_str(&sb);
    CHECK_INT(sp[0].msg, 1);
    CHECK(!strncmp(s + sp[0].start, "Hello!", sp[0].end - sp[0].start) && sp[0].end - sp[0].start == 6);
    CHECK(!strncmp(s + sp[0].end, "<|im_end|>", sp[0].turn_end - sp[0].end));
    CHECK_INT(sp[1].msg, 3);
    CHECK_INT(sp[1].end - sp[1].start, 4);
    sb_reset(&sb);
    CHECK_INT(chat_render(chat_dialect_find("llama3"), "Sys", conv, 4, 0, &sb, sp, &ns, &e), 0);
    s = sb_str(&sb);
    CHECK_INT(ns, 2);
    CHECK_INT(sp[1].end - sp[1].start, 2); /* " ok " trimmed */
    CHECK(!strncmp(s + sp[1].start, "ok<|eot_id|>", 12));
    CHECK_INT(sp[1].turn_end, sb.len);
    sb_reset(&sb);
    CHECK_INT(chat_render(chat_dialect_find("qwen3"), NULL, conv, 4, 0, &sb, sp, &ns, &e), 0);
    s = sb_str(&sb);
    CHECK(!strncmp(s + sp[1].start - 19, "<think>\n\n</think>\n\n ok <|im_end|>", 33));
    /* Errors: unknown role, missing content. */
    chat_msg bad[] = {{"tool", "x"}};
    CHECK_INT(chat_render(chat_dialect_find("chatml"), NULL, bad, 1, 0, &sb, NULL, NULL, &e), -1);
    chat_msg bad2[] = {{"user", NULL}};
    CHECK_INT(chat_render(chat_dialect_find("chatml"), NULL, bad2, 1, 0, &sb, NULL, NULL, &e), -1);
    sb_free(&sb);
}

static void test_registry(void)
{
    CHECK(chat_dialect_count() >= 7);
    for (size_t i = 0; i < chat_dialect_count(); i++) {
        const chat_dialect *d = chat_dialect_at(i);
        CHECK(chat_dialect_find(d->name) == d);
        CHECK(d->stops && d->stops[0]);
    }
    CHECK_STR(chat_dialect_find("chatml")->stops[0], "<|im_end|>");
    CHECK_STR(chat_dialect_find("llama3")->stops[0], "<|eot_id|>");
    CHECK(chat_dialect_find("nope") == NULL);
    CHECK(chat_dialect_detect("{{ messages }}") == NULL);
    CHECK_STR(chat_dialect_detect("{{'<|im_start|>' + m}}")->name, "chatml");
    /* every text row of the base registry names a dialect dlm renders (olmo2
     * and smollm3 were missing: those bases fell back to a wrong one) */
    for (int i = 0; i < registry_count(); i++) {
        const reg_entry *r = registry_at(i);
        if (r->modality == REG_TEXT) CHECK_MSG(chat_dialect_find(r->dialect) != NULL, "%s: dialect %s", r->key, r->dialect);
    }
}

/* Mistral, written out from mistral-common's v1 / v3 templates and the pre-v1 one
 * (tests/ref/chat/mixtral-8x7b-instruct-v0.1.jinja, mistral-7b-instruct-v0.3.jinja,
 * mistral-pre-v1.jinja). */
static void test_mistral(void)
{
    const chat_msg c[] = {{"user", "Hi"}, {"assistant", " Hello! "}, {"user", "Joke?"}};
    expect("mistral", "Be brief.", c, 3, 1, "<s> [INST] Be brief.\n\nHi [/INST]  Hello! </s> [INST] Joke? [/INST]");
    expect("mistral-v3", "Be brief.", c, 3, 1, "<s>[INST] Hi[/INST] Hello!</s>[INST] Be brief.\n\nJoke?[/INST]");
    /* v3: the system prompt rides in the last user turn; after an answer there is none */
    expect("mistral-v3", "Be brief.", c, 2, 0, "<s>[INST] Hi[/INST] Hello!</s>");
    chat_span sp[2];
    size_t ns;
    strbuf sb = STRBUF_INIT;
    dlm_err e;
    CHECK_INT(chat_render(chat_dialect_find("mistral"), NULL, c, 2, 0, &sb, sp, &ns, &e), 0);
    CHECK_INT(ns, 1);
    /* the target is " " + content + "</s>": the prompt ends at "[/INST]" */
    CHECK_STR(sb_str(&sb) + sp[0].start, "  Hello! </s>");
    CHECK_INT(sp[0].turn_end, sb.len);
    CHECK_INT(sp[0].turn_end - sp[0].end, 4);
    strbuf p = STRBUF_INIT;
    CHECK_INT(chat_render(chat_dialect_find("mistral"), NULL, c, 1, 1, &p, NULL, NULL, &e), 0);
    CHECK_INT(p.len, sp[0].start);
    CHECK(!strncmp(sb_str(&sb), sb_str(&p), p.len));
    sb_free(&p);
    sb_free(&sb);
    /* the pre-v1 template: no leading spaces, no system role (dlm puts it where v1 does) */
    expect("mistral-legacy", NULL, c, 3, 1, "<s>[INST] Hi [/INST] Hello! </s>[INST] Joke? [/INST]");
    expect("mistral-legacy", "Be brief.", c, 1, 1, "<s>[INST] Be brief.\n\nHi [/INST]");
    CHECK_STR(chat_dialect_find("mistral")->stops[0], "</s>");
    CHECK(chat_dialect_detect("{{ '[SYSTEM_PROMPT] ' + system_message + '[/SYSTEM_PROMPT]' }}{{ ' [INST] ' }}") == NULL);
}

/* OLMo 2 and SmolLM3, written out from their templates
 * (tests/ref/chat/olmo-2-1124-instruct.jinja, smollm3-3b.jinja). */
static void test_olmo2_smollm3(void)
{
    const chat_msg c[] = {{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Joke?"}};
    expect("olmo2", "Be brief.", c, 3, 1,
           "<|endoftext|><|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\nHello!<|endoftext|>\n<|user|>\nJoke?\n"
           "<|assistant|>\n");
    /* the last answer has no newline after its eos; the prompt of a turn is the text before it */
    chat_span sp[2];
    size_t ns;
    strbuf sb = STRBUF_INIT, p = STRBUF_INIT;
    dlm_err e;
    CHECK_INT(chat_render(chat_dialect_find("olmo2"), NULL, c, 2, 0, &sb, sp, &ns, &e), 0);
    CHECK_STR(sb_str(&sb), "<|endoftext|><|user|>\nHi\n<|assistant|>\nHello!<|endoftext|>");
    CHECK_INT(ns, 1);
    CHECK_STR(sb_str(&sb) + sp[0].start, "Hello!<|endoftext|>");
    CHECK_INT(sp[0].turn_end, sb.len);
    CHECK_INT(chat_render(chat_dialect_find("olmo2"), NULL, c, 1, 1, &p, NULL, NULL, &e), 0);
    CHECK_INT(p.len, sp[0].start);
    sb_free(&sb);
    sb_free(&p);
    static const char HEAD[] = "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: 08 July 2025\n"
                               "Reasoning Mode: ";
    /* the system turn has no <|im_end|>: the template closes it only when it lists tools */
    expect("smollm3", NULL, c, 3, 1,
           "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: 08 July 2025\n"
           "Reasoning Mode: /no_think\n\n"
           "## Custom Instructions\n\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face.\n\n"
           "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\nHello!<|im_end|>\n"
           "<|im_start|>user\nJoke?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n");
    /* /think in the system prompt switches thinking on and leaves the instructions */
    strbuf w = STRBUF_INIT;
    sb_printf(&w, "%s/think\n\n## Custom Instructions\n\nBe brief.\n\n<|im_start|>user\nHi<|im_end|>\n"
                  "<|im_start|>assistant\n", HEAD);
    expect("smollm3", "Be brief. /think \n", c, 1, 1, sb_str(&w));
    sb_free(&w);
    /* /no_think wins over thinking on; an emptied system text takes the default */
    sb_printf(&w, "%s/no_think\n\n## Custom Instructions\n\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
                  "Face.\n\n<|im_start|>user\nHi<|im_end|>\n", HEAD);
    expect("smollm3thinking", "/no_think", c, 1, 0, sb_str(&w));
    sb_free(&w);
    /* /system_override: the instructions alone, closed */
    expect("smollm3", "Only this. /system_override", c, 1, 0,
           "<|im_start|>system\nOnly this.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
    /* answers: lstrip('\n'), and the training span starts after the think block */
    const chat_msg a[] = {{"user", "Q"}, {"assistant", "\n A"}};
    CHECK_INT(chat_render(chat_dialect_find("smollm3"), NULL, a, 2, 0, &sb, sp, &ns, &e), 0);
    CHECK_INT(ns, 1);
    CHECK_STR(sb_str(&sb) + sp[0].start, " A<|im_end|>\n");
    CHECK_INT(chat_render(chat_dialect_find("smollm3"), NULL, a, 1, 1, &p, NULL, NULL, &e), 0);
    CHECK_INT(p.len, sp[0].start);
    sb_free(&sb);
    sb_free(&p);
    json_t *v = chat_dialect_vars(chat_dialect_find("smollm3"));
    CHECK(v && json_is_false(json_object_get(v, "enable_thinking")));
    json_decref(v);
    CHECK(chat_dialect_refine(chat_dialect_find("smollm3"), "smollm3thinking") == chat_dialect_find("smollm3thinking"));
    /* detection: SmolLM3's template quotes SmolLM2's default system text; OLMo 2's has Phi's "<|user|>" without "<|end|>" */
    CHECK_STR(chat_dialect_detect("{{ '<|im_start|>system\\n' }}Reasoning Mode: {{ '/no_think' }} You are a helpful AI "
                                  "assistant named SmolLM, trained by Hugging Face")->name, "smollm3");
    CHECK_STR(chat_dialect_detect("{{ '<|user|>\\n' + c }}{{ '<|assistant|>\\n' + c + eos_token }}")->name, "olmo2");
    CHECK_STR(chat_dialect_detect("{{ '<|user|>\n' + c + '<|end|>' }}{{ '<|assistant|>\n' + eos_token }}")->name, "phi3");
}

/* ---- modes for r0102 ------------------------------------------------------------------------ */

static int mode_detect(const char *path)
{
    char *t;
    size_t n;
    dlm_err e;
    if (fs_read_all(path, 1u << 20, &t, &n, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    const chat_dialect *d = chat_dialect_detect(t);
    printf("%s\n", d ? d->name : "none");
    free(t);
    return 0;
}

static int mode_render(const char *dialect, const char *path, const char *tmpl_path)
{
    /* with a template: the base's own template through dlm's Jinja
     * interpreter, with the variables the dialect stands for */
    char *tmpl = NULL;
    size_t tl;
    json_t *vars = chat_dialect_vars(chat_dialect_find(dialect));
    dlm_err te;
    if (tmpl_path && fs_read_all(tmpl_path, 1u << 20, &tmpl, &tl, &te)) {
        fprintf(stderr, "%s\n", te.msg);
        return 1;
    }
    const chat_dialect *d = chat_dialect_find(dialect);
    dlm_err e;
    json_t *convs = json_load_path(path, 1u << 20, &e);
    if (!d || !json_is_array(convs)) {
        fprintf(stderr, "bad dialect or conversations file\n");
        return 1;
    }
    size_t i;
    json_t *c;
    json_array_foreach(convs, i, c) {
        if (json_object_get(json_object_get(c, "skip"), dialect)) continue;
        json_t *ms = json_object_get(c, "messages");
        size_t n = json_array_size(ms);
        chat_msg *m = calloc(n ? n : 1, sizeof *m);
        for (size_t k = 0; k < n; k++) {
            m[k].role = jget_str(json_array_get(ms, k), "role");
            m[k].content = jget_str(json_array_get(ms, k), "content");
        }
        for (int gen = 0; gen < 2; gen++) {
            strbuf sb = STRBUF_INIT;
            if (tmpl ? chat_render_template(tmpl, jget_str(c, "system"), m, n, gen, "<|begin_of_text|>", "<|eot_id|>", vars,
                                            &sb, &e)
                     : chat_render(d, jget_str(c, "system"), m, n, gen, &sb, NULL, NULL, &e)) {
                fprintf(stderr, "conversation %zu: %s\n", i, e.msg);
                return 1;
            }
            json_t *s = json_stringn(sb_str(&sb), sb.len);
            strbuf o = STRBUF_INIT;
            json_write(&o, s, JW_COMPACT);
            printf("%s\n", sb_str(&o));
            sb_free(&o);
            json_decref(s);
            sb_free(&sb);
        }
        free(m);
    }
    free(tmpl);
    json_decref(vars);
    json_decref(convs);
    return 0;
}

/* The dialects are a fast path: they must render what the interpreter
 * renders from the template they stand for (the committed templates of
 * tests/ref/chat; r0102 checks both against @huggingface/jinja). */
static void test_fast_path(void)
{
    static const struct { const char *file, *dialect, *bos, *eos; } pairs[] = {
        {"smollm2.jinja", "chatml-smollm2", "<|begin_of_text|>", "<|eot_id|>"},
        {"qwen2.5.jinja", "chatml-qwen2.5", "<|begin_of_text|>", "<|eot_id|>"},
        {"llama3.2.jinja", "llama3", "<|begin_of_text|>", "<|eot_id|>"},
        {"chatml.jinja", "chatml", "<|begin_of_text|>", "<|eot_id|>"},
        {"mixtral-8x7b-instruct-v0.1.jinja", "mistral", "<s>", "</s>"},
        {"mistral-7b-instruct-v0.3.jinja", "mistral-v3", "<s>", "</s>"},
        {"mistral-pre-v1.jinja", "mistral-legacy", "<s>", "</s>"},
        {"olmo-2-1124-instruct.jinja", "olmo2", "<|endoftext|>", "<|endoftext|>"},
        {"hub/smollm3-3b.jinja", "smollm3", "<|begin_of_text|>", "<|eot_id|>"},
        {"hub/smollm3-3b.jinja", "smollm3thinking", "<|begin_of_text|>", "<|eot_id|>"}};
    dlm_err e;
    json_t *convs = json_load_path(DLM_SOURCE_DIR "/tests/ref/chat/conversations.json", 1u << 20, &e);
    CHECK(json_is_array(convs));
    size_t compared = 0;
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        char path[4096], *tmpl;
        size_t tl;
        snprintf(path, sizeof path, "%s/tests/ref/chat/%s", DLM_SOURCE_DIR, pairs[p].file);
        if (fs_read_all(path, 1u << 20, &tmpl, &tl, &e)) {
            CHECK_MSG(0, "%s", e.msg);
            continue;
        }
        const chat_dialect *d = chat_dialect_find(pairs[p].dialect);
        json_t *vars = chat_dialect_vars(d);
        size_t i;
        json_t *c;
        json_array_foreach(convs, i, c) {
            /* conversations the template raises on (a skip entry) */
            if (json_object_get(json_object_get(c, "skip"), pairs[p].dialect)) continue;
            json_t *ms = json_object_get(c, "messages");
            size_t n = json_array_size(ms);
            chat_msg *m = calloc(n ? n : 1, sizeof *m);
            for (size_t k = 0; k < n; k++) {
                m[k].role = jget_str(json_array_get(ms, k), "role");
                m[k].content = jget_str(json_array_get(ms, k), "content");
            }
            for (int gen = 0; gen < 2; gen++) {
                strbuf a = STRBUF_INIT, b = STRBUF_INIT;
                int ra = chat_render(d, jget_str(c, "system"), m, n, gen, &a, NULL, NULL, &e);
                int rb = chat_render_template(tmpl, jget_str(c, "system"), m, n, gen, pairs[p].bos, pairs[p].eos,
                                              vars, &b, &e);
                CHECK_MSG(ra == rb, "%s conversation %zu: dialect rc %d, template rc %d (%s)", pairs[p].dialect, i, ra, rb, e.msg);
                if (!ra && !rb)
                    CHECK_MSG(!strcmp(sb_str(&a), sb_str(&b)), "%s conversation %zu gen %d: dialect and template differ",
                              pairs[p].dialect, i, gen);
                compared++;
                sb_free(&a);
                sb_free(&b);
            }
            free(m);
        }
        json_decref(vars);
        free(tmpl);
    }
    CHECK(compared >= 100);
    json_decref(convs);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--detect")) return mode_detect(argv[2]);
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "--render")) return mode_render(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
    test_chatml();
    test_qwen3();
    test_llama3();
    test_spans();
    test_mistral();
    test_olmo2_smollm3();
    test_registry();
    test_fast_path();
    return check_done();
}
