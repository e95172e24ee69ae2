/* Unit tests for the Ollama side of the export (src/export/gotmpl.c,
 * ollama.c, proc.c): the Go-template subset with hand-worked renderings
 * (trim markers, if/else if/else, range, eq/ne/and/or/not, comments,
 * literals, refusals), Ollama's SYSTEM injection and message collation, the
 * dialect templates, the drift check (passes for dlm's templates, catches a
 * template that prints the system prompt twice or drops Llama 3.2's date
 * header), the Modelfile text, stops, names, the launch script, and running
 * a program with a timeout.
 *
 * Tool modes for tests/ref/r0503 (checked against Go's text/template):
 *   test_export_ollama --render-go TEMPLATE CONVS.json     JSON array of renderings
 *   test_export_ollama --templates OUTDIR                  every dialect's template + dialects.json
 *   test_export_ollama --tokenize TOKENIZER TEXTS.json ADD  ids of each text, specials parsed; ADD 1: BOS/EOS
 *                                                           as the tokenizer's post-processor adds them, 2: BOS */
#include "check.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "export/gotmpl.h"
#include "export/ollama.h"
#include "export/export.h"
#include "tokens/tok_gguf.h"
#include "util/fs.h"
#include "util/json.h"

static const char *render(const char *tmpl, const char *sys, const chat_msg *m, size_t n)
{
    static strbuf out;
    sb_reset(&out);
    dlm_err e;
    gotmpl_values v = {sys, m, n, "", ""};
    if (gotmpl_render(tmpl, &v, &out, &e)) {
        sb_reset(&out);
        sb_printf(&out, "ERROR: %s", e.msg);
    }
    return sb_str(&out);
}

static const char *render_ollama(const char *tmpl, const char *mf_sys, const chat_msg *m, size_t n)
{
    static strbuf out;
    sb_reset(&out);
    dlm_err e;
    if (gotmpl_render_ollama(tmpl, mf_sys, m, n, &out, &e)) {
        sb_reset(&out);
        sb_printf(&out, "ERROR: %s", e.msg);
    }
    return sb_str(&out);
}

static void test_gotmpl(void)
{
    const chat_msg m[] = {{"user", "hi"}, {"assistant", "yo"}, {"user", "bye"}};
    CHECK_STR(render("plain text\n", "", m, 0), "plain text\n");
    CHECK_STR(render("a {{ .System }} b", "S", m, 0), "a S b");
    CHECK_STR(render("a {{.System}} b", "S", m, 0), "a S b");
    /* trim markers eat all adjacent spaces, tabs and newlines */
    CHECK_STR(render("a \n\t {{- .System -}} \n b", "S", m, 0), "aSb");
    CHECK_STR(render("a \n{{- .System }}\n b", "S", m, 0), "aS\n b");
    /* "{{-3}}" is not a trim marker (no space after the dash): the number -3, as Go prints it */
    CHECK_STR(render("{{-3}}", "", m, 0), "-3");
    CHECK_STR(render("{{ if .System }}[{{ .System }}]{{ else }}none{{ end }}", "S", m, 0), "[S]");
    CHECK_STR(render("{{ if .System }}[{{ .System }}]{{ else }}none{{ end }}", "", m, 0), "none");
    CHECK_STR(render("{{ if .Prompt }}p{{ else if .System }}s{{ else }}n{{ end }}", "x", m, 0), "s");
    CHECK_STR(render("{{ range .Messages }}<{{ .Role }}:{{ .Content }}>{{ end }}", "", m, 3), "<user:hi><assistant:yo><user:bye>");
    CHECK_STR(render("{{ range .Messages }}{{ if eq .Role \"user\" }}U{{ else }}A{{ end }}{{ end }}", "", m, 3), "UAU");
    CHECK_STR(render("{{ range .Messages }}{{ if ne .Role \"user\" }}{{ $.System }}{{ end }}{{ end }}", "S", m, 3), "S");
    CHECK_STR(render("{{ range .Messages }}{{ if eq .Role \"system\" \"assistant\" }}x{{ end }}{{ end }}", "", m, 3), "x");
    CHECK_STR(render("{{ range .Messages }}x{{ else }}empty{{ end }}", "", m, 0), "empty");
    CHECK_STR(render("{{ if and .System (eq .System \"S\") }}y{{ end }}{{ if or .Prompt .System }}z{{ end }}", "S", m, 0), "yz");
    CHECK_STR(render("{{ if not .System }}no{{ end }}{{ if not .Prompt }}np{{ end }}", "S", m, 0), "np");
    CHECK_STR(render("a{{/* a comment */}}b{{- /* trimmed */ -}}  c", "", m, 0), "abc");
    CHECK_STR(render("{{ \"q\\n\\\"\" }}", "", m, 0), "q\n\"");
    CHECK_STR(render("{{ if true }}t{{ end }}{{ if false }}f{{ end }}", "", m, 0), "t");
    CHECK_STR(render("{{ .Tools }}", "", m, 0), "<no value>");
    /* variables: := declares, = sets one of an enclosing scope (it outlives
     * the range body), a body's own declarations end with it */
    CHECK_STR(render("{{ $f := true }}{{ range .Messages }}{{ if $f }}first:{{ .Content }};{{ end }}{{ $f = false }}{{ end }}{{ $f }}",
                     "", m, 3), "first:hi;false");
    CHECK_STR(render("{{ range $i, $m := .Messages }}{{ $i }}={{ $m.Role }}/{{ .Content }} {{ end }}", "", m, 3),
              "0=user/hi 1=assistant/yo 2=user/bye ");
    CHECK_STR(render("{{ range $m := .Messages }}{{ $m.Content }}{{ end }}", "", m, 3), "hiyobye");
    CHECK_STR(render("{{ if .System }}{{ $x := \"in\" }}{{ $x }}{{ end }}{{ $x := \"out\" }}{{ $x }}", "S", m, 3), "inout");
    /* len, slice, index and integers */
    CHECK_STR(render("{{ len .Messages }} {{ len .System }} {{ len (slice .Messages 1) }} {{ (index .Messages 2).Content }}",
                     "abc", m, 3), "3 3 2 bye");
    CHECK_STR(render("{{ range $i, $_ := .Messages }}{{ if eq (len (slice $.Messages $i)) 1 }}last:{{ .Content }}{{ end }}{{ end }}",
                     "", m, 3), "last:bye");
    CHECK_STR(render("{{ slice .System 1 3 }}|{{ range slice .Messages 1 2 }}{{ .Role }}{{ end }}|{{ if eq 0 0 }}z{{ end }}",
                     "abcd", m, 3), "bc|assistant|z");
    CHECK_STR(render("{{ range slice .Messages 3 }}x{{ else }}none{{ end }}", "", m, 3), "none");
    /* refusals: what Go would do differently or what the subset lacks */
    const char *bad[] = {"{{ .Nope }}", "{{ $nope }}", "{{ $nope = 1 }}", "{{ slice .Messages 4 }}", "{{ index .Messages 3 }}",
                         "{{ slice .Messages 2 1 }}", "{{ eq 1 \"1\" }}", "{{ len 3 }}", "{{ range $i = .Messages }}{{ end }}",
                         "{{ if .System }}{{ $y := 1 }}{{ end }}{{ $y }}", "{{ 1.5 }}", "{{ 0x10 }}",
                         "{{ if .System }}x", "{{ end }}", "{{ .System", "{{ .Messages }}",
                         "{{ range .Messages }}{{ .Nope }}{{ end }}", "{{ template \"x\" }}", "{{ .System | printf }}",
                         "{{ if .System }}a{{ else }}b{{ else }}c{{ end }}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(!strncmp(render(bad[i], "S", m, 3), "ERROR", 5), "%s renders '%s'", bad[i], render(bad[i], "S", m, 3));
}

static void test_ollama_values(void)
{
    const char *t = "[{{ .System }}]{{ range .Messages }}<{{ .Role }}:{{ .Content }}>{{ end }}";
    const chat_msg a[] = {{"user", "hi"}};
    /* SYSTEM becomes the first message when the request has none */
    CHECK_STR(render_ollama(t, "S", a, 1), "[S]<system:S><user:hi>");
    CHECK_STR(render_ollama(t, NULL, a, 1), "[]<user:hi>");
    const chat_msg b[] = {{"system", "mine"}, {"user", "hi"}};
    CHECK_STR(render_ollama(t, "S", b, 2), "[mine]<system:mine><user:hi>");
    /* collate: consecutive messages of one role merge with a blank line;
     * .System joins every system message */
    const chat_msg c[] = {{"system", "s1"}, {"user", "a"}, {"user", "b"}, {"system", "s2"}, {"assistant", "x"}};
    CHECK_STR(render_ollama(t, NULL, c, 5), "[s1\n\ns2]<system:s1><user:a\n\nb><system:s2><assistant:x>");
}

static const chat_dialect *D(const char *n) { return chat_dialect_find(n); }

static void test_dialect_templates(void)
{
    const chat_msg m[] = {{"user", "What?"}};
    CHECK_STR(render_ollama(export_ollama_template(D("chatml-qwen2.5")), D("chatml-qwen2.5")->default_system, m, 1),
              "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
              "<|im_start|>user\nWhat?<|im_end|>\n<|im_start|>assistant\n");
    CHECK_STR(render_ollama(export_ollama_template(D("chatml")), NULL, m, 1),
              "<|im_start|>user\nWhat?<|im_end|>\n<|im_start|>assistant\n");
    CHECK_STR(render_ollama(export_ollama_template(D("llama3")), "Be brief.", m, 1),
              "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
              "Today Date: 26 Jul 2024\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
              "What?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    CHECK_STR(render_ollama(export_ollama_template(D("llama3-nodate")), NULL, m, 1),
              "<|start_header_id|>user<|end_header_id|>\n\nWhat?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    /* Qwen3 with thinking off: the generation prompt ends in an empty think block */
    CHECK_STR(render_ollama(export_ollama_template(D("qwen3")), NULL, m, 1),
              "<|im_start|>user\nWhat?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    CHECK(export_ollama_template(D("qwen3thinking")) == export_ollama_template(D("chatml")));
    CHECK(export_ollama_template(D("llama3-nodate-always")) == export_ollama_template(D("llama3-nodate")));
    /* written out from the Jinja templates (tokens/chat.c); r0503 checks them against Go and @huggingface/jinja */
    const chat_msg c[] = {{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Joke?"}};
    CHECK_STR(render_ollama(export_ollama_template(D("gemma2")), "Be brief.", c, 3),
              "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
              "<start_of_turn>user\nJoke?<end_of_turn>\n<start_of_turn>model\n");
    CHECK_STR(render_ollama(export_ollama_template(D("gemma2")), NULL, m, 1),
              "<start_of_turn>user\nWhat?<end_of_turn>\n<start_of_turn>model\n");
    CHECK_STR(render_ollama(export_ollama_template(D("phi3")), "Be brief.", c, 3),
              "<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\nHello!<|end|>\n<|user|>\nJoke?<|end|>\n"
              "<|assistant|>\n");
    CHECK_STR(render_ollama(export_ollama_template(D("phi4mini")), "Be brief.", m, 1),
              "<|system|>Your name is Phi, an AI math expert developed by Microsoft. Be brief.<|end|><|user|>What?<|end|>"
              "<|assistant|>");
    CHECK_STR(render_ollama(export_ollama_template(D("mistral")), "Be brief.", c, 3),
              " [INST] Be brief.\n\nHi [/INST] Hello!</s> [INST] Joke? [/INST]");
    CHECK_STR(render_ollama(export_ollama_template(D("mistral-v3")), "Be brief.", c, 3),
              "[INST] Hi[/INST] Hello!</s>[INST] Be brief.\n\nJoke?[/INST]");
    CHECK_STR(render_ollama(export_ollama_template(D("mistral-legacy")), "Be brief.", c, 3),
              "[INST] Be brief.\n\nHi [/INST]Hello!</s>[INST] Joke? [/INST]");
    CHECK_STR(render_ollama(export_ollama_template(D("olmo2")), "Be brief.", c, 3),
              "<|endoftext|><|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\nHello!<|endoftext|>\n<|user|>\nJoke?\n"
              "<|assistant|>\n");
    CHECK_STR(render_ollama(export_ollama_template(D("smollm3")), D("smollm3")->default_system, c, 3),
              "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: 08 July 2025\n"
              "Reasoning Mode: /no_think\n\n"
              "## Custom Instructions\n\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face.\n\n"
              "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\nHello!<|im_end|>\n"
              "<|im_start|>user\nJoke?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n");
    /* every dialect has one */
    for (size_t i = 0; i < chat_dialect_count(); i++)
        CHECK_MSG(export_ollama_template(chat_dialect_at(i)) != NULL, "%s has no Ollama TEMPLATE", chat_dialect_at(i)->name);
}

/* A byte-level tokenizer with the given special tokens (CONTROL), built
 * like a GGUF's tokenizer.ggml.* keys. */
/* chat_template the next byte_tok carries (NULL none). */
static const char *g_template;

static tok *byte_tok(const char *const *specials, int n_sp, int add_bos)
{
    static char bytes[256][4];
    const char *toks[300];
    int32_t types[300];
    int n = 0;
    /* GPT-2 byte table: printable bytes stand for themselves, the rest map to U+0100.. */
    int k = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        unsigned cp = printable ? (unsigned)b : 256u + (unsigned)k++;
        if (cp < 0x80) { bytes[b][0] = (char)cp; bytes[b][1] = 0; }
        else { bytes[b][0] = (char)(0xC0 | cp >> 6); bytes[b][1] = (char)(0x80 | (cp & 63)); bytes[b][2] = 0; }
        toks[n] = bytes[b];
        types[n++] = TOK_TYPE_NORMAL;
    }
    for (int i = 0; i < n_sp; i++) {
        toks[n] = specials[i];
        types[n++] = TOK_TYPE_CONTROL;
    }
    tok_spec s = {0};
    s.chat_template = g_template;
    s.n_tokens = (size_t)n;
    s.tokens = toks;
    s.token_types = types;
    s.pre = "llama-bpe";
    s.bos_id = 256;
    s.eos_id = 257;
    s.pad_id = s.unk_id = -1;
    s.add_bos = add_bos;
    tok *t = NULL;
    dlm_err e;
    if (tok_build(&s, &t, &e)) fprintf(stderr, "tok_build: %s\n", e.msg);
    return t;
}

static void test_drift(void)
{
    const char *chatml_sp[] = {"<|endoftext|>", "<|im_end|>", "<|im_start|>"};
    const char *llama_sp[] = {"<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>", "<|end_of_text|>"};
    tok *tc = byte_tok(chatml_sp, 3, 0), *tl = byte_tok(llama_sp, 5, 1);
    if (!tc || !tl) { CHECK(0); return; }
    int n;
    dlm_err e;
    const char *names[] = {"chatml", "chatml-smollm2", "chatml-qwen2.5", "qwen3", "qwen3thinking", "smollm3", "smollm3thinking"};
    for (int i = 0; i < 7; i++)
        for (int s = 0; s < 2; s++) {
            const chat_dialect *d = D(names[i]);
            const char *sys = s ? "You are a pirate." : NULL, *mf = sys ? sys : d->default_system;
            CHECK_MSG(export_drift_check(d, export_ollama_template(d), sys, mf, tc, -1, -1, &n, &e) == 0 && n == 5, "%s: %s",
                      names[i], e.msg);
        }
    const char *lnames[] = {"llama3", "llama3-nodate", "llama3-nodate-always"};
    for (int i = 0; i < 3; i++)
        for (int s = 0; s < 2; s++) {
            const chat_dialect *d = D(lnames[i]);
            const char *sys = s ? "You are a pirate." : NULL;
            CHECK_MSG(export_drift_check(d, export_ollama_template(d), sys, sys, tl, 256, -1, &n, &e) == 0 && n == 5, "%s: %s",
                      lnames[i], e.msg);
        }
    /* OLMo 2: the template's own BOS text, llama.cpp adds none */
    const char *olmo_sp[] = {"<|endoftext|>", "<|user|>", "<|assistant|>", "<|system|>"};
    tok *to = byte_tok(olmo_sp, 4, 0);
    for (int s = 0; to && s < 2; s++) {
        const char *sys = s ? "You are a pirate." : NULL;
        CHECK_MSG(export_drift_check(D("olmo2"), export_ollama_template(D("olmo2")), sys, sys, to, -1, -1, &n, &e) == 0 &&
                      n == 5, "olmo2: %s", e.msg);
    }
    /* SmolLM3: a system prompt with a /think flag switches the Jinja mode, which Go cannot */
    CHECK(export_drift_check(D("smollm3"), export_ollama_template(D("smollm3")), "Be brief. /think", "Be brief. /think", tc, -1,
                             -1, &n, &e) == -1 && !strcmp(e.kind, "TemplateDriftError"));
    tok_free(to);
    /* a template that prints .System and also ranges over the system
     * message: the system prompt twice under Ollama → drift */
    const char *twice = "{{- if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}"
                        "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}<|im_start|>assistant\n";
    CHECK(export_drift_check(D("chatml"), twice, "S", "S", tc, -1, -1, &n, &e) == -1 && !strcmp(e.kind, "TemplateDriftError") &&
          strstr(e.msg, "template drift") && n == 0);
    /* without a system prompt the same template is fine until a conversation brings one */
    CHECK(export_drift_check(D("chatml"), twice, NULL, NULL, tc, -1, -1, &n, &e) == -1 && n == 1);
    /* Ollama's stock llama3 template lacks Llama 3.2's dated system header */
    CHECK(export_drift_check(D("llama3"), export_ollama_template(D("llama3-nodate")), NULL, NULL, tl, 256, -1, &n, &e) == -1 &&
          strstr(e.hint, "--no-template"));
    /* llama.cpp not adding the BOS the Jinja template writes is drift too */
    CHECK(export_drift_check(D("llama3"), export_ollama_template(D("llama3")), NULL, NULL, tl, -1, -1, &n, &e) == -1);
    /* the default system prompt must come in through SYSTEM */
    CHECK(export_drift_check(D("chatml-qwen2.5"), export_ollama_template(D("chatml")), NULL, NULL, tc, -1, -1, &n, &e) == -1);
    tok_free(tc);
    tok_free(tl);

    /* With a chat_template the tokenizer carries, the check renders that
     * template (the base's own, through the Jinja interpreter), not the
     * dialect: ChatML's real template passes; one that adds a default
     * system turn the chatml dialect and its TEMPLATE lack is drift. */
    g_template = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                 "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
    tc = byte_tok(chatml_sp, 3, 0);
    CHECK_MSG(tc && export_drift_check(D("chatml"), export_ollama_template(D("chatml")), NULL, NULL, tc, -1, -1, &n, &e) == 0 &&
                  n == 5, "%s", e.msg);
    tok_free(tc);
    g_template = "{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nDefault.<|im_end|>\\n' }}{% endif %}"
                 "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                 "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
    tc = byte_tok(chatml_sp, 3, 0);
    CHECK(tc && export_drift_check(D("chatml"), export_ollama_template(D("chatml")), NULL, NULL, tc, -1, -1, &n, &e) == -1 &&
          strstr(e.msg, "Default.") && n == 0);
    tok_free(tc);
    g_template = NULL;
}

static void test_modelfile(void)
{
    const char *stops[] = {"<|im_end|>", "<|im_start|>"};
    export_modelfile m = {"0.1.0", "2026-11-30T00:00:00", "/x/doc.dlm", "01JD", 3, "smollm2-135m", "abc", "Q4_K_M",
                          0, "./base.Q4_K_M.gguf", "./adapter.gguf", "T{{ .Content }}", stops, 2, 0.7, 0.9, 2048,
                          "Be \"brief\".", "Apache-2.0", NULL};
    strbuf out = STRBUF_INIT;
    dlm_err e;
    CHECK(export_modelfile_text(&m, &out, &e) == 0);
    CHECK_STR(sb_str(&out), "# Generated by dlm 0.1.0 on 2026-11-30T00:00:00\n"
                            "# Source: /x/doc.dlm\n# dlm_id: 01JD\n# adapter_version: 3\n"
                            "# base_model: smollm2-135m (revision abc)\n# quant: Q4_K_M\n# merged: False\n\n"
                            "FROM ./base.Q4_K_M.gguf\nADAPTER ./adapter.gguf\n\n"
                            "TEMPLATE \"\"\"T{{ .Content }}\"\"\"\n\n"
                            "PARAMETER stop \"<|im_end|>\"\nPARAMETER stop \"<|im_start|>\"\n"
                            "PARAMETER temperature 0.7\nPARAMETER top_p 0.9\nPARAMETER num_ctx 2048\n\n"
                            "SYSTEM \"\"\"Be \"brief\".\"\"\"\nLICENSE \"\"\"Apache-2.0\"\"\"\n");
    /* a draft: the original's two comment lines after num_ctx
     * (export/ollama/modelfile_shared.py build_param_lines) */
    export_modelfile md = m;
    md.draft = "qwen2.5:0.5b";
    sb_reset(&out);
    CHECK(export_modelfile_text(&md, &out, &e) == 0);
    CHECK(strstr(sb_str(&out), "PARAMETER num_ctx 2048\n# Speculative-decoding draft: `ollama pull qwen2.5:0.5b`\n"
                               "# then run with `OLLAMA_DRAFT_MODEL=qwen2.5:0.5b ollama run <this-model>`\n\nSYSTEM") != NULL);
    /* the original's draft table (export/draft_registry.py DRAFT_PAIRS) */
    CHECK_STR(export_draft_for("qwen2.5-3b"), "qwen2.5:0.5b");
    CHECK_STR(export_draft_for("qwen2.5-coder-1.5b"), "qwen2.5:0.5b");
    CHECK_STR(export_draft_for("llama-3.2-3b"), "llama3.2:1b");
    CHECK_STR(export_draft_for("smollm2-1.7b"), "smollm2:360m");
    CHECK(export_draft_for("smollm2-135m") == NULL && export_draft_for(NULL) == NULL);
    /* merged, no template, no system/license */
    export_modelfile m2 = m;
    m2.merged = 1;
    m2.adapter = NULL;
    m2.template_text = NULL;
    m2.system = m2.license = NULL;
    m2.base_revision = NULL;
    sb_reset(&out);
    CHECK(export_modelfile_text(&m2, &out, &e) == 0);
    CHECK(strstr(sb_str(&out), "# merged: True\n") && !strstr(sb_str(&out), "ADAPTER") && !strstr(sb_str(&out), "TEMPLATE") &&
          !strstr(sb_str(&out), "SYSTEM") && strstr(sb_str(&out), "# base_model: smollm2-135m\n"));
    m2.system = "say \"\"\"hi\"\"\"";
    sb_reset(&out);
    CHECK(export_modelfile_text(&m2, &out, &e) == -1 && strstr(e.msg, "SYSTEM"));
    /* stop strings are quoted as Ollama's parser unquotes them */
    const char *odd[] = {"a\"b\\c\nd"};
    m2.system = NULL;
    m2.stops = odd;
    m2.n_stops = 1;
    sb_reset(&out);
    CHECK(export_modelfile_text(&m2, &out, &e) == 0 && strstr(sb_str(&out), "PARAMETER stop \"a\\\"b\\\\c\\nd\"\n"));
    sb_free(&out);
}

static void test_names_stops_script(void)
{
    /* the default name: the document's file name, sanitized */
    char nm[80];
    export_ollama_doc_name("notes/My Notes (v2).dlm", nm, sizeof nm);
    CHECK_STR(nm, "my-notes-v2");
    export_ollama_doc_name("/a/b/--Ünïcode__draft..dlm", nm, sizeof nm);
    CHECK_STR(nm, "n-code__draft");
    export_ollama_doc_name("/x/???.dlm", nm, sizeof nm);
    CHECK_STR(nm, "");
    export_ollama_doc_name("tutor.dlm", nm, sizeof nm);
    CHECK_STR(nm, "tutor");
    CHECK(export_ollama_name_ok("my-notes-v2:v0001"));
    CHECK(export_ollama_name_ok("dlm-01jd:v0001"));
    CHECK(export_ollama_name_ok("me/my.model_x-1:latest"));
    CHECK(!export_ollama_name_ok(""));
    CHECK(!export_ollama_name_ok("a..b"));
    CHECK(!export_ollama_name_ok("a b"));
    CHECK(!export_ollama_name_ok("a:b:c"));
    CHECK(!export_ollama_name_ok("/a"));
    CHECK(!export_ollama_name_ok("a/b/c"));
    CHECK(!export_ollama_name_ok("a:"));
    char longn[200];
    memset(longn, 'a', 129);
    longn[129] = 0;
    CHECK(!export_ollama_name_ok(longn));

    const char *sp[] = {"<|endoftext|>", "<|im_end|>", "<|im_start|>", "<|eot_id|>"};
    tok *t = byte_tok(sp, 4, 0);
    const char *stops[16];
    int n = export_stop_list(t, D("chatml"), stops, 16);
    /* the dialect's, then EOS (id 257 = <|im_end|>, already there), then EOG specials */
    CHECK_INT(n, 4);
    CHECK(n == 4 && !strcmp(stops[0], "<|im_end|>") && !strcmp(stops[1], "<|endoftext|>") &&
          !strcmp(stops[2], "<|im_start|>") && !strcmp(stops[3], "<|eot_id|>"));
    n = export_stop_list(t, NULL, stops, 16);
    CHECK(n == 3 && !strcmp(stops[0], "<|im_end|>") && !strcmp(stops[1], "<|eot_id|>") && !strcmp(stops[2], "<|endoftext|>"));
    tok_free(t);

    strbuf s = STRBUF_INIT;
    export_llama_server_script(&s, "0.1.0", "base.Q8_0.gguf", "adapter.gguf", "chat-template.jinja", 512);
    CHECK(strstr(sb_str(&s), "#!/bin/sh\n") == sb_str(&s));
    CHECK(strstr(sb_str(&s), "exec llama-server --model ./base.Q8_0.gguf --lora ./adapter.gguf --jinja "
                             "--chat-template-file ./chat-template.jinja --ctx-size 512 --host 127.0.0.1 --port 8000 \"$@\"\n"));
    sb_reset(&s);
    export_llama_server_script(&s, "0.1.0", "merged.F16.gguf", NULL, NULL, 64);
    CHECK(!strstr(sb_str(&s), "--lora") && !strstr(sb_str(&s), "--chat-template-file"));
    sb_free(&s);
}

static void test_proc(void)
{
    char sh[4096];
    CHECK(export_which("sh", sh, sizeof sh) == 1);
    CHECK(export_which("no-such-program-dlm", sh, sizeof sh) == 0);
    CHECK(export_which("sh", sh, sizeof sh) == 1);
    export_proc p;
    dlm_err e;
    char *a1[] = {sh, "-c", "echo out; echo err >&2; pwd; exit 3", NULL};
    CHECK(export_proc_run(a1, "/", 10, &p, &e) == 0);
    CHECK_INT(p.exit_code, 3);
    CHECK_STR(sb_str(&p.out), "out\n/\n");
    CHECK_STR(sb_str(&p.err), "err\n");
    export_proc_free(&p);
    char *a2[] = {sh, "-c", "sleep 20", NULL};
    CHECK(export_proc_run(a2, NULL, 1, &p, &e) == 0 && p.timed_out && p.exit_code == -1);
    export_proc_free(&p);
    char *a3[] = {"/nonexistent/prog", NULL};
    CHECK(export_proc_run(a3, NULL, 5, &p, &e) == 0 && p.exit_code == 127);
    export_proc_free(&p);
}

/* ---- tool modes ------------------------------------------------------------------------------------- */

static int tool_render(const char *tpath, const char *cpath)
{
    char *tmpl;
    size_t n;
    dlm_err e;
    if (fs_read_all(tpath, 1 << 20, &tmpl, &n, &e)) { fprintf(stderr, "%s\n", e.msg); return 2; }
    json_t *convs = json_load_path(cpath, 16 << 20, &e);
    if (!json_is_array(convs)) { fprintf(stderr, "%s: not a list\n", cpath); return 2; }
    json_t *out = json_array();
    size_t i;
    json_t *c;
    json_array_foreach(convs, i, c) {
        json_t *ms = json_object_get(c, "messages");
        size_t nm = json_array_size(ms);
        chat_msg *m = calloc(nm ? nm : 1, sizeof *m);
        for (size_t k = 0; k < nm; k++) {
            m[k].role = jget_str(json_array_get(ms, k), "role");
            m[k].content = jget_str(json_array_get(ms, k), "content");
        }
        strbuf s = STRBUF_INIT;
        if (gotmpl_render_ollama(tmpl, jget_str(c, "system"), m, nm, &s, &e)) {
            sb_reset(&s);
            sb_printf(&s, "ERROR");
        }
        json_array_append_new(out, json_string(sb_str(&s)));
        sb_free(&s);
        free(m);
    }
    strbuf js = STRBUF_INIT;
    json_write(&js, out, JW_COMPACT);
    printf("%s\n", sb_str(&js));
    sb_free(&js);
    json_decref(out);
    json_decref(convs);
    free(tmpl);
    return 0;
}

static int tool_templates(const char *dir)
{
    dlm_err e;
    if (fs_mkdir_p(dir, &e)) return 2;
    json_t *o = json_object();
    for (size_t i = 0; i < chat_dialect_count(); i++) {
        const chat_dialect *d = chat_dialect_at(i);
        char p[4200];
        snprintf(p, sizeof p, "%s/%s.gotmpl", dir, d->name);
        const char *t = export_ollama_template(d);
        if (!t) continue;
        if (fs_write_atomic(p, t, strlen(t), 0644, &e)) return 2;
        json_object_set_new(o, d->name, json_pack("{s:s, s:s, s:o}", "family", d->family, "template", p, "default_system",
                                                  d->default_system ? json_string(d->default_system) : json_null()));
    }
    char p[4200];
    snprintf(p, sizeof p, "%s/dialects.json", dir);
    int rc = json_save_file(p, o, &e);
    json_decref(o);
    return rc ? 2 : 0;
}

static int tool_tokenize(const char *tpath, const char *texts, int add)
{
    tok *t = NULL;
    dlm_err e;
    int rc = fs_is_dir(tpath) ? tok_load_for_model(tpath, &t, &e)
             : str_endswith(tpath, ".json") ? tok_load(tpath, NULL, &t, &e) : tok_load_gguf(tpath, &t, &e);
    if (rc) { fprintf(stderr, "%s\n", e.msg); return 2; }
    json_t *in = json_load_path(texts, 64 << 20, &e), *out = json_array();
    size_t i;
    json_t *x;
    json_array_foreach(in, i, x) {
        int32_t *ids;
        size_t n;
        const char *s = json_string_value(x);
        json_t *a = json_array();
        if (add == 2) json_array_append_new(a, json_integer(tok_bos(t)));
        if (s && tok_encode(t, s, strlen(s), TOK_PARSE_SPECIAL | (add == 1 ? TOK_ADD_SPECIAL : 0), &ids, &n, &e) == 0) {
            for (size_t k = 0; k < n; k++) json_array_append_new(a, json_integer(ids[k]));
            free(ids);
        }
        json_array_append_new(out, a);
    }
    strbuf js = STRBUF_INIT;
    json_write(&js, out, JW_COMPACT);
    printf("%s\n", sb_str(&js));
    sb_free(&js);
    json_decref(in);
    json_decref(out);
    tok_free(t);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && !strcmp(argv[1], "--render-go")) return tool_render(argv[2], argv[3]);
    if (argc == 3 && !strcmp(argv[1], "--templates")) return tool_templates(argv[2]);
    if (argc == 5 && !strcmp(argv[1], "--tokenize")) return tool_tokenize(argv[2], argv[3], atoi(argv[4]));
    test_gotmpl();
    test_ollama_values();
    test_dialect_templates();
    test_drift();
    test_modelfile();
    test_names_stops_script();
    test_proc();
    return check_done();
}
