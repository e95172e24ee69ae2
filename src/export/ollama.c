/* ollama — Modelfile, dialect Go templates, stops, drift check, launch
 * script (see ollama.h). */
#include "export/ollama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/gotmpl.h"

/* ---- Go templates ----------------------------------------------------------------------
 * Ollama executes a TEMPLATE with .Messages holding every message, the
 * Modelfile SYSTEM injected first when the request has no system message,
 * and .System their system contents (template.go collate). So a template
 * must not print .System and range over the system messages both, or the
 * system prompt appears twice. */

/* ChatML (SmolLM2, Qwen2.5, plain ChatML): Ollama's own chatml.gotmpl. The
 * default system prompts of SmolLM2 / Qwen2.5 come in through SYSTEM. */
static const char GO_CHATML[] = "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n"
                                "{{ end }}<|im_start|>assistant\n";

/* Qwen3 with thinking off (the qwen3 dialect): the generation prompt ends
 * in the empty think block its template adds for enable_thinking=false.
 * Earlier assistant turns carry no think block in either (the template
 * drops them before the last user turn). */
static const char GO_QWEN3[] = "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n"
                               "{{ end }}<|im_start|>assistant\n<think>\n\n</think>\n\n";

/* Llama 3.1/3.2: the Jinja template always opens with a system header that
 * carries the knowledge/today dates (pinned by dlm's dialect), then the
 * first system message's text; later turns are plain headers. BOS comes
 * from llama.cpp (add_bos_token). */
static const char GO_LLAMA3[] =
    "<|start_header_id|>system<|end_header_id|>\n\n"
    "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
    "{{ .System }}<|eot_id|>\n"
    "{{- range .Messages }}{{ if ne .Role \"system\" }}<|start_header_id|>{{ .Role }}<|end_header_id|>\n\n"
    "{{ .Content }}<|eot_id|>\n"
    "{{- end }}{{ end }}<|start_header_id|>assistant<|end_header_id|>\n\n";

/* Llama 3.0: Ollama's llama3-instruct.gotmpl. */
static const char GO_LLAMA3_NODATE[] = "{{- range .Messages }}<|start_header_id|>{{ .Role }}<|end_header_id|>\n\n"
                                       "{{ .Content }}<|eot_id|>\n"
                                       "{{- end }}<|start_header_id|>assistant<|end_header_id|>\n\n";

/* Gemma 2 (tokens/chat.c render_gemma): no system turn; the leading system
 * message's text + a blank line opens the first other turn ($first, set
 * once a non-system message is printed). BOS from llama.cpp. The Jinja
 * template trims contents, Go cannot: the drift check counts on contents
 * without surrounding whitespace. */
static const char GO_GEMMA2[] =
    "{{- $first := true }}"
    "{{- range .Messages }}{{- if ne .Role \"system\" }}"
    "<start_of_turn>{{ if eq .Role \"assistant\" }}model{{ else }}{{ .Role }}{{ end }}\n"
    "{{ if and $first $.System }}{{ $.System }}\n\n{{ end }}{{ .Content }}<end_of_turn>\n"
    "{{ $first = false }}{{- end }}{{- end }}<start_of_turn>model\n";

/* Phi-3.5-mini: a system message only when it has content. */
static const char GO_PHI3[] = "{{- range .Messages }}{{- if or (ne .Role \"system\") .Content }}<|{{ .Role }}|>\n"
                              "{{ .Content }}<|end|>\n{{ end }}{{- end }}<|assistant|>\n";

/* Phi-4-mini-reasoning: the fixed preamble, then " " + each system
 * message, then the other turns without newlines. */
static const char GO_PHI4MINI[] =
    "<|system|>Your name is Phi, an AI math expert developed by Microsoft."
    "{{- range .Messages }}{{ if eq .Role \"system\" }} {{ .Content }}{{ end }}{{ end }}<|end|>"
    "{{- range .Messages }}{{ if ne .Role \"system\" }}<|{{ .Role }}|>{{ .Content }}<|end|>{{ end }}{{ end }}<|assistant|>";

/* Mistral v1 (Mixtral-8x7B-Instruct-v0.1): the system text in the first
 * user turn. BOS from llama.cpp; nothing after the last " [/INST]". */
static const char GO_MISTRAL[] =
    "{{- $first := true }}"
    "{{- range .Messages }}"
    "{{- if eq .Role \"user\" }} [INST] {{ if and $first $.System }}{{ $.System }}\n\n{{ end }}{{ .Content }} [/INST]"
    "{{- $first = false }}"
    "{{- else if eq .Role \"assistant\" }} {{ .Content }}</s>{{ $first = false }}"
    "{{- end }}{{- end }}";

/* Mistral v3 (Mistral-7B-Instruct-v0.3): the system text in the user turn
 * that is the last message (len of the rest of .Messages is 1). Answers
 * are trimmed by the Jinja template, not here (see GO_GEMMA2). */
static const char GO_MISTRAL_V3[] =
    "{{- range $i, $_ := .Messages }}"
    "{{- if eq .Role \"user\" }}[INST] {{ if and $.System (eq (len (slice $.Messages $i)) 1) }}{{ $.System }}\n\n{{ end }}"
    "{{ .Content }}[/INST]"
    "{{- else if eq .Role \"assistant\" }} {{ .Content }}</s>"
    "{{- end }}{{- end }}";

/* Mistral pre-v1: no leading spaces, answers without one; the system
 * prompt where v1 puts it (tokens/chat.c render_mistral). */
static const char GO_MISTRAL_LEGACY[] =
    "{{- $first := true }}"
    "{{- range .Messages }}"
    "{{- if eq .Role \"user\" }}[INST] {{ if and $first $.System }}{{ $.System }}\n\n{{ end }}{{ .Content }} [/INST]"
    "{{- $first = false }}"
    "{{- else if eq .Role \"assistant\" }}{{ .Content }}</s>{{ $first = false }}"
    "{{- end }}{{- end }}";

/* OLMo 2 Instruct: BOS is the template's own "<|endoftext|>" text (llama.cpp
 * adds none for its vocabulary); an answer is followed by "\n" unless it is
 * the last message. */
static const char GO_OLMO2[] =
    "<|endoftext|>{{- range $i, $_ := .Messages }}"
    "{{- if eq .Role \"assistant\" }}<|assistant|>\n{{ .Content }}<|endoftext|>"
    "{{- if ne (len (slice $.Messages $i)) 1 }}\n{{ end }}"
    "{{- else }}<|{{ .Role }}|>\n{{ .Content }}\n{{ end }}"
    "{{- end }}<|assistant|>\n";

/* SmolLM3 (tokens/chat.c render_smollm3): the metadata header with the
 * day dlm pins, the system text (.System: the Modelfile SYSTEM, which is
 * the mode's default instructions when the document has no system prompt,
 * or the request's system messages; the Jinja template takes the first)
 * and a blank line (no <|im_end|>: the template closes the system turn
 * only when it lists tools), then ChatML turns without the system
 * messages. Go cannot remove /think, /no_think or /system_override from
 * the system text: a system prompt carrying them is template drift, which
 * the export's check reports. SYSTEM is trimmed (export.c) as the
 * template rstrips it. */
#define GO_SMOLLM3(mode, think)                                                                                 \
    "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: 08 July 2025\n"          \
    "Reasoning Mode: " mode "\n\n## Custom Instructions\n\n{{ .System }}\n\n"                                    \
    "{{ range .Messages }}{{ if eq .Role \"user\" }}<|im_start|>user\n{{ .Content }}<|im_end|>\n"               \
    "{{ else if eq .Role \"assistant\" }}<|im_start|>assistant\n" think "{{ .Content }}<|im_end|>\n{{ end }}"    \
    "{{ end }}<|im_start|>assistant\n" think
static const char GO_SMOLLM3_NOTHINK[] = GO_SMOLLM3("/no_think", "<think>\n\n</think>\n");
static const char GO_SMOLLM3_THINKING[] = GO_SMOLLM3("/think", "");

const char *export_ollama_template(const chat_dialect *d)
{
    if (!d) return NULL;
    if (!strcmp(d->name, "qwen3")) return GO_QWEN3;
    if (!strcmp(d->family, "chatml")) return GO_CHATML;
    if (!strcmp(d->name, "llama3")) return GO_LLAMA3;
    if (!strcmp(d->family, "llama3")) return GO_LLAMA3_NODATE;
    if (!strcmp(d->name, "gemma2")) return GO_GEMMA2;
    if (!strcmp(d->name, "phi3")) return GO_PHI3;
    if (!strcmp(d->name, "phi4mini")) return GO_PHI4MINI;
    if (!strcmp(d->name, "mistral")) return GO_MISTRAL;
    if (!strcmp(d->name, "mistral-v3")) return GO_MISTRAL_V3;
    if (!strcmp(d->name, "mistral-legacy")) return GO_MISTRAL_LEGACY;
    if (!strcmp(d->name, "olmo2")) return GO_OLMO2;
    if (!strcmp(d->name, "smollm3")) return GO_SMOLLM3_NOTHINK;
    if (!strcmp(d->name, "smollm3thinking")) return GO_SMOLLM3_THINKING;
    return NULL;
}

/* ---- stops -------------------------------------------------------------------------------- */

/* Texts llama.cpp treats as end of generation (llama-vocab.cpp). */
static const char *const EOG[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|endoftext|>", "<|eom_id|>",
                                  "<|end_of_text|>", "<end_of_turn>", "</s>", "<|return|>", "<EOT>",
                                  "<|END_OF_TURN_TOKEN|>", NULL};

static int push_unique(const char **out, int n, int cap, const char *s)
{
    if (!s || !*s || n >= cap) return n;
    for (int i = 0; i < n; i++)
        if (!strcmp(out[i], s)) return n;
    out[n] = s;
    return n + 1;
}

int export_stop_list(const tok *t, const chat_dialect *d, const char **out, int cap)
{
    int n = 0;
    for (int i = 0; d && d->stops && d->stops[i]; i++) n = push_unique(out, n, cap, d->stops[i]);
    int32_t eos = tok_eos(t);
    if (eos >= 0 && tok_is_special(t, eos)) n = push_unique(out, n, cap, tok_token_str(t, eos, NULL));
    for (int i = 0; EOG[i]; i++) {
        int32_t id = tok_find(t, EOG[i]);
        if (id >= 0 && tok_is_special(t, id)) n = push_unique(out, n, cap, EOG[i]);
    }
    return n;
}

int export_ollama_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (!n || n > 128 || strstr(s, "..")) return 0;
    int slash = 0, colon = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '/') {
            if (slash++ || colon || i == 0 || i + 1 == n) return 0;
        } else if (c == ':') {
            if (colon++ || i == 0 || i + 1 == n || s[i - 1] == '/') return 0;
        } else if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                     c == '-' || c == '_')) {
            return 0;
        }
    }
    return 1;
}

void export_ollama_doc_name(const char *doc_path, char *out, size_t cap)
{
    const char *b = strrchr(doc_path, '/');
    b = b ? b + 1 : doc_path;
    size_t n = strlen(b);
    if (n > 4 && !strcmp(b + n - 4, ".dlm")) n -= 4;
    size_t k = 0, max = cap - 1 < 64 ? cap - 1 : 64;
    int dash = 0;
    for (size_t i = 0; i < n && k < max; i++) {
        unsigned char c = (unsigned char)b[i];
        if (c >= 'A' && c <= 'Z') c = (unsigned char)(c - 'A' + 'a');
        int ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_';
        if (ok && !(c == '.' && k && out[k - 1] == '.')) { out[k++] = (char)c; dash = 0; }
        else if (k && !dash) { out[k++] = '-'; dash = 1; }
    }
    while (k && (out[k - 1] == '-' || out[k - 1] == '.' || out[k - 1] == '_')) k--;
    size_t s0 = 0;
    while (s0 < k && (out[s0] == '-' || out[s0] == '.' || out[s0] == '_')) s0++;
    memmove(out, out + s0, k - s0);
    out[k - s0] = 0;
}

/* ---- Modelfile ------------------------------------------------------------------------------ */

static int triple(strbuf *out, const char *key, const char *v, dlm_err *e)
{
    if (strstr(v, "\"\"\"")) {
        err_set(e, "ExportError", "the %s contains three double quotes in a row, which a Modelfile cannot quote", key);
        if (!strcmp(key, "SYSTEM")) return err_hint(e, "remove the \"\"\" from the document's system_prompt");
        if (!strcmp(key, "TEMPLATE")) return err_hint(e, "pass --no-template to leave the chat template out");
        return -1;
    }
    sb_printf(out, "%s \"\"\"%s\"\"\"\n", key, v);
    return 0;
}

/* A JSON-style quoted string (what Ollama's parser unquotes). */
static void quoted(strbuf *out, const char *s)
{
    sb_putc(out, '"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { sb_putc(out, '\\'); sb_putc(out, (char)c); }
        else if (c == '\n') sb_puts(out, "\\n");
        else if (c == '\t') sb_puts(out, "\\t");
        else if (c < 0x20) sb_printf(out, "\\u%04x", c);
        else sb_putc(out, (char)c);
    }
    sb_putc(out, '"');
}

int export_modelfile_text(const export_modelfile *m, strbuf *out, dlm_err *e)
{
    sb_printf(out, "# Generated by dlm %s on %s\n", m->version, m->created_at);
    sb_printf(out, "# Source: %s\n", m->source ? m->source : "");
    sb_printf(out, "# dlm_id: %s\n", m->dlm_id ? m->dlm_id : "");
    sb_printf(out, "# adapter_version: %d\n", m->adapter_version);
    if (m->base_revision && *m->base_revision) sb_printf(out, "# base_model: %s (revision %s)\n", m->base_model, m->base_revision);
    else sb_printf(out, "# base_model: %s\n", m->base_model);
    sb_printf(out, "# quant: %s\n", m->quant);
    sb_printf(out, "# merged: %s\n\n", m->merged ? "True" : "False");
    sb_printf(out, "FROM %s\n", m->from);
    if (m->adapter) sb_printf(out, "ADAPTER %s\n", m->adapter);
    sb_putc(out, '\n');
    if (m->template_text) {
        if (triple(out, "TEMPLATE", m->template_text, e)) return -1;
        sb_putc(out, '\n');
    }
    for (int i = 0; i < m->n_stops; i++) {
        sb_puts(out, "PARAMETER stop ");
        quoted(out, m->stops[i]);
        sb_putc(out, '\n');
    }
    sb_printf(out, "PARAMETER temperature %g\n", m->temperature);
    sb_printf(out, "PARAMETER top_p %g\n", m->top_p);
    sb_printf(out, "PARAMETER num_ctx %d\n", m->num_ctx);
    if (m->draft) {
        sb_printf(out, "# Speculative-decoding draft: `ollama pull %s`\n", m->draft);
        sb_printf(out, "# then run with `OLLAMA_DRAFT_MODEL=%s ollama run <this-model>`\n", m->draft);
    }
    if (m->system || m->license) sb_putc(out, '\n');
    if (m->system && triple(out, "SYSTEM", m->system, e)) return -1;
    if (m->license && triple(out, "LICENSE", m->license, e)) return -1;
    return out->oom ? err_set(e, "MemoryError", "out of memory") : 0;
}

/* ---- template drift check -------------------------------------------------------------------- */

static const chat_msg C1[] = {{"user", "Hello."}};
static const chat_msg C2[] = {{"system", "You answer in one short sentence."}, {"user", "What is the capital of France?"}};
static const chat_msg C3[] = {{"user", "Hi"}, {"assistant", "Hello! How can I help?"}, {"user", "Tell me a joke."}};
static const chat_msg C4[] = {{"system", "Be kind."},
                              {"user", "first question"},
                              {"assistant", "first answer"},
                              {"user", "a second line\nwith <b>tags</b> & \"quotes\""}};
static const chat_msg C5[] = {{"user", "Gr\xc3\xbc\xc3\x9f" "e, \xe4\xb8\x96\xe7\x95\x8c! \xc2\xbfQu\xc3\xa9 tal? 12345"}};
static const struct { const chat_msg *m; size_t n; } CONVS[] = {{C1, 1}, {C2, 2}, {C3, 3}, {C4, 4}, {C5, 1}};

static void excerpt(strbuf *out, const char *s)
{
    for (size_t i = 0; s[i] && i < 240; i++) {
        if (s[i] == '\n') sb_puts(out, "\\n");
        else sb_putc(out, s[i]);
    }
}

/* What the base itself renders: its own chat_template through dlm's Jinja
 * interpreter (as the original compares with transformers'
 * apply_chat_template), with the date pinned as the dialects pin it; the
 * dialect when the tokenizer carries no template or the interpreter cannot
 * run it. */
static int render_base(const chat_dialect *d, const tok *t, const char *system_prompt, const chat_msg *m, size_t n,
                       strbuf *out, dlm_err *e)
{
    const char *tmpl = tok_chat_template(t);
    if (tmpl) {
        const char *bos = tok_bos(t) >= 0 ? tok_token_str(t, tok_bos(t), NULL) : "";
        const char *eos = tok_eos(t) >= 0 ? tok_token_str(t, tok_eos(t), NULL) : "";
        json_t *extra = json_pack("{s:s}", "date_string", "26 Jul 2024"), *dv = chat_dialect_vars(d);
        if (dv) json_object_update(extra, dv);
        json_decref(dv);
        size_t len0 = out->len;
        dlm_err je;
        int rc = chat_render_template(tmpl, system_prompt, m, n, 1, bos, eos, extra, out, &je);
        json_decref(extra);
        if (!rc) return 0;
        out->len = len0;
        if (out->buf) out->buf[len0] = 0;
    }
    return chat_render(d, system_prompt, m, n, 1, out, NULL, NULL, e);
}

int export_drift_check(const chat_dialect *d, const char *go_template, const char *system_prompt,
                       const char *modelfile_system, tok *t, int32_t bos_id, int32_t eos_id, int *n_checked,
                       dlm_err *e)
{
    *n_checked = 0;
    int rc = -1;
    strbuf j = STRBUF_INIT, g = STRBUF_INIT;
    tok_ids a = {0}, b = {0};
    for (size_t c = 0; c < sizeof CONVS / sizeof CONVS[0]; c++) {
        sb_reset(&j);
        sb_reset(&g);
        a.n = b.n = 0;
        if (render_base(d, t, system_prompt, CONVS[c].m, CONVS[c].n, &j, e) ||
            gotmpl_render_ollama(go_template, modelfile_system, CONVS[c].m, CONVS[c].n, &g, e))
            goto done;
        if ((bos_id >= 0 && tok_ids_push(&b, bos_id)) || tok_encode_append(t, j.buf, j.len, TOK_PARSE_SPECIAL, &a, e) ||
            tok_encode_append(t, g.buf, g.len, TOK_PARSE_SPECIAL, &b, e) || (eos_id >= 0 && tok_ids_push(&b, eos_id))) {
            if (!e->msg[0]) err_set(e, "MemoryError", "out of memory");
            goto done;
        }
        size_t k = 0;
        while (k < a.n && k < b.n && a.v[k] == b.v[k]) k++;
        if (k != a.n || k != b.n) {
            strbuf msg = STRBUF_INIT;
            sb_printf(&msg, "template drift: for conversation %zu the Ollama TEMPLATE gives %zu tokens and the base's "
                            "chat template %zu, first difference at token %zu; Jinja renders \"",
                      c + 1, b.n, a.n, k);
            excerpt(&msg, j.buf);
            sb_puts(&msg, "\", the TEMPLATE \"");
            excerpt(&msg, g.buf);
            sb_puts(&msg, "\"");
            err_set(e, "TemplateDriftError", "%s", sb_str(&msg));
            sb_free(&msg);
            err_hint(e, "--no-template leaves TEMPLATE out of the Modelfile (Ollama then picks a template itself)");
            goto done;
        }
        (*n_checked)++;
    }
    rc = 0;
done:
    sb_free(&j);
    sb_free(&g);
    tok_ids_free(&a);
    tok_ids_free(&b);
    return rc;
}

/* ---- llama-server -------------------------------------------------------------------------- */

void export_llama_server_script(strbuf *out, const char *version, const char *model_file, const char *adapter_file,
                                const char *template_file, int ctx_size)
{
    sb_printf(out, "#!/bin/sh\n# Generated by dlm %s: serve this export with llama.cpp's llama-server.\n"
                   "# Extra arguments are passed on (e.g. --port 8080). Needs llama-server on PATH.\n"
                   "set -e\ncd \"$(dirname \"$0\")\"\n"
                   "exec llama-server --model ./%s",
              version, model_file);
    if (adapter_file) sb_printf(out, " --lora ./%s", adapter_file);
    if (template_file) sb_printf(out, " --jinja --chat-template-file ./%s", template_file);
    sb_printf(out, " --ctx-size %d --host 127.0.0.1 --port 8000 \"$@\"\n", ctx_size);
}
