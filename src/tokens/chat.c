/* chat — the dialect registry and one renderer per template family. Each
 * renderer is a line-by-line transcription of what the family's Jinja
 * template emits for system/user/assistant messages; tests/ref/r0102 renders
 * the real templates with @huggingface/jinja and compares byte for byte. */
#include <stdlib.h>
#include <string.h>

#include "tokens/chat.h"
#include "tokens/jinja.h"

enum { STYLE_CHATML = 1, STYLE_QWEN3, STYLE_LLAMA3, STYLE_LLAMA3_NODATE, STYLE_LLAMA3_NODATE_ALWAYS, STYLE_GEMMA, STYLE_PHI3,
       STYLE_PHI4MINI, STYLE_QWEN3_THINKING, STYLE_MISTRAL, STYLE_MISTRAL_V3, STYLE_MISTRAL_LEGACY, STYLE_OLMO2,
       STYLE_SMOLLM3, STYLE_SMOLLM3_THINKING };

static const char *const STOPS_CHATML[] = {"<|im_end|>", "<|endoftext|>", "<|im_start|>", NULL};
static const char *const STOPS_GEMMA[] = {"<end_of_turn>", "<eos>", "<start_of_turn>", NULL};
static const char *const STOPS_PHI[] = {"<|end|>", "<|endoftext|>", "<|user|>", "<|assistant|>", "<|system|>", NULL};
static const char PHI4MINI_SYSTEM[] = "Your name is Phi, an AI math expert developed by Microsoft.";
/* the original's mistral row (src/dlm/export/ollama/template_registry.py) */
static const char *const STOPS_MISTRAL[] = {"</s>", "[/INST]", "[INST]", NULL};
static const char *const STOPS_LLAMA3[] = {"<|eot_id|>", "<|end_of_text|>", "<|start_header_id|>", "<|eom_id|>", NULL};
/* the original's olmo2 and smollm3 rows (template_registry.py) */
static const char *const STOPS_OLMO2[] = {"<|endoftext|>", "<|user|>", "<|assistant|>", "<|system|>", NULL};
static const char *const STOPS_SMOLLM3[] = {"<|im_end|>", "<|end_of_text|>", "<|im_start|>", NULL};

/* Ollama Go templates: chatml from docs/reference/original-spec.md §6.2, llama3 from docs/reference/formats.md §5.3. */

static const char SYS_SMOLLM2[] = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";
static const char SYS_QWEN25[] = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
/* SmolLM3's template writes "Today Date: " + strftime_now("%d %B %Y"); dlm
 * pins the day (the model's release, 8 July 2025) as it pins Llama 3's, so
 * prompts and training rows do not change with the day. */
static const char SMOLLM3_TODAY[] = "08 July 2025";
/* SmolLM3's defaults for the Custom Instructions section when the system
 * message brings none, by reasoning mode (its chat template). */
static const char SMOLLM3_SYS[] = "You are a helpful AI assistant named SmolLM, trained by Hugging Face.";
static const char SMOLLM3_SYS_THINK[] =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an assistant involves thoroughly "
    "exploring questions through a systematic thinking process before providing the final precise and accurate solutions. "
    "This requires engaging in a comprehensive cycle of analysis, summarizing, exploration, reassessment, reflection, "
    "backtracking, and iteration to develop well-considered thinking process. Please structure your response into two main "
    "sections: Thought and Solution using the specified format: <think> Thought section </think> Solution section. In the "
    "Thought section, detail your reasoning process in steps. Each step should include detailed considerations such as "
    "analysing questions, summarizing relevant findings, brainstorming new ideas, verifying the accuracy of the current "
    "steps, refining any errors, and revisiting previous steps. In the Solution section, based on various attempts, "
    "explorations, and reflections from the Thought section, systematically present the final solution that you deem "
    "correct. The Solution section should be logical, accurate, and concise and detail necessary steps needed to reach the "
    "conclusion.";

static const chat_dialect DIALECTS[] = {
    {"chatml", "chatml", NULL, STOPS_CHATML, 0.9, STYLE_CHATML},
    {"chatml-smollm2", "chatml", SYS_SMOLLM2, STOPS_CHATML, 0.9, STYLE_CHATML},
    {"chatml-qwen2.5", "chatml", SYS_QWEN25, STOPS_CHATML, 0.9, STYLE_CHATML},
    {"qwen3", "chatml", NULL, STOPS_CHATML, 0.9, STYLE_QWEN3},
    /* top_p 0.95: the original's reasoning profile (docs/reference/original-spec.md) */
    {"qwen3thinking", "chatml", NULL, STOPS_CHATML, 0.95, STYLE_QWEN3_THINKING},
    {"llama3", "llama3", NULL, STOPS_LLAMA3, 0.9, STYLE_LLAMA3},
    {"llama3-nodate", "llama3", NULL, STOPS_LLAMA3, 0.9, STYLE_LLAMA3_NODATE},
    {"llama3-nodate-always", "llama3", NULL, STOPS_LLAMA3, 0.9, STYLE_LLAMA3_NODATE_ALWAYS},
    {"gemma2", "gemma", NULL, STOPS_GEMMA, 0.9, STYLE_GEMMA},
    {"phi3", "phi3", NULL, STOPS_PHI, 0.9, STYLE_PHI3},
    {"phi4mini", "phi3", NULL, STOPS_PHI, 0.9, STYLE_PHI4MINI},
    {"mistral", "mistral", NULL, STOPS_MISTRAL, 0.9, STYLE_MISTRAL},
    {"mistral-v3", "mistral", NULL, STOPS_MISTRAL, 0.9, STYLE_MISTRAL_V3},
    {"mistral-legacy", "mistral", NULL, STOPS_MISTRAL, 0.9, STYLE_MISTRAL_LEGACY},
    {"olmo2", "olmo2", NULL, STOPS_OLMO2, 0.9, STYLE_OLMO2},
    /* top_p 0.95: the original's smollm3 row; the defaults are what the
     * template writes as custom instructions without a system prompt (the
     * export's Modelfile SYSTEM) */
    {"smollm3", "smollm3", SMOLLM3_SYS, STOPS_SMOLLM3, 0.95, STYLE_SMOLLM3},
    {"smollm3thinking", "smollm3", SMOLLM3_SYS_THINK, STOPS_SMOLLM3, 0.95, STYLE_SMOLLM3_THINKING},
};
#define N_DIALECTS (sizeof DIALECTS / sizeof DIALECTS[0])

size_t chat_dialect_count(void) { return N_DIALECTS; }

const chat_dialect *chat_dialect_at(size_t i) { return i < N_DIALECTS ? &DIALECTS[i] : NULL; }

const chat_dialect *chat_dialect_find(const char *name)
{
    for (size_t i = 0; name && i < N_DIALECTS; i++)
        if (!strcmp(DIALECTS[i].name, name)) return &DIALECTS[i];
    return NULL;
}

json_t *chat_dialect_vars(const chat_dialect *d)
{
    /* Qwen3's template: `enable_thinking is defined and enable_thinking is
     * false` adds the empty think block to the generation prompt */
    if (d && (d->style == STYLE_QWEN3 || d->style == STYLE_QWEN3_THINKING))
        return json_pack("{s:b}", "enable_thinking", d->style == STYLE_QWEN3_THINKING);
    /* SmolLM3's: enable_thinking undefined means true (reasoning mode /think) */
    if (d && (d->style == STYLE_SMOLLM3 || d->style == STYLE_SMOLLM3_THINKING))
        return json_pack("{s:b, s:s}", "enable_thinking", d->style == STYLE_SMOLLM3_THINKING, "strftime_now", SMOLLM3_TODAY);
    return NULL;
}

const chat_dialect *chat_dialect_refine(const chat_dialect *detected, const char *named)
{
    const chat_dialect *n = chat_dialect_find(named);
    if (detected && n && detected->style == STYLE_QWEN3 && n->style == STYLE_QWEN3_THINKING) return n;
    if (detected && n && detected->style == STYLE_SMOLLM3 && n->style == STYLE_SMOLLM3_THINKING) return n;
    return detected;
}

const chat_dialect *chat_dialect_detect(const char *j)
{
    if (!j) return NULL;
    if (strstr(j, "<|start_header_id|>")) {
        if (strstr(j, "Cutting Knowledge Date")) return chat_dialect_find("llama3");
        if (strstr(j, "add_generation_prompt")) return chat_dialect_find("llama3-nodate");
        return chat_dialect_find("llama3-nodate-always");
    }
    if (strstr(j, "<start_of_turn>")) return chat_dialect_find("gemma2");
    /* Mistral: mistral-common's 'v1' template (Mixtral-8x7B-Instruct-v0.1,
     * Mistral-7B-Instruct-v0.2: ' [INST] ' ... ' [/INST]', the system text
     * in the first user turn) and 'v3' (Mistral-7B-Instruct-v0.3: '[INST] '
     * ... '[/INST]', the system text in the last user turn); the pre-v1
     * one without a system message (Mistral-7B-Instruct-v0.1, the first
     * Mixtral snapshots: '[INST] ' ... ' [/INST]', answers without a
     * leading space). Others (v7's [SYSTEM_PROMPT], tekken's '[INST]'
     * without a space) are none of these. */
    if (strstr(j, "'[INST] ' + message['content'] + ' [/INST]'") && !strstr(j, "system_message") &&
        !strstr(j, "[SYSTEM_PROMPT]"))
        return chat_dialect_find("mistral-legacy");
    if (strstr(j, "[INST]") && !strstr(j, "[SYSTEM_PROMPT]") && strstr(j, "system_message")) {
        if (strstr(j, "' [INST] '") && strstr(j, "' [/INST]'") && strstr(j, "loop.first and system_message"))
            return chat_dialect_find("mistral");
        if (strstr(j, "\"[INST] \"") && strstr(j, "\"[/INST]\"") && strstr(j, "loop.last and system_message"))
            return chat_dialect_find("mistral-v3");
    }
    /* OLMo 2 Instruct (the Tulu 3 template): "<|user|>\n" turns without
     * Phi's "<|end|>", answers closed by the eos token */
    if (strstr(j, "<|user|>\\n") && strstr(j, "<|assistant|>\\n") && strstr(j, "eos_token") && !strstr(j, "<|end|>"))
        return chat_dialect_find("olmo2");
    if (strstr(j, "<|end|>") && strstr(j, PHI4MINI_SYSTEM)) return chat_dialect_find("phi4mini");
    if (strstr(j, "<|end|>") && strstr(j, "<|user|>\n")) return chat_dialect_find("phi3");
    if (strstr(j, "<|im_start|>")) {
        /* SmolLM3's metadata header; before SmolLM2, whose default system
         * text starts SmolLM3's */
        if (strstr(j, "Reasoning Mode: ") && strstr(j, "/no_think")) return chat_dialect_find("smollm3");
        if (strstr(j, SYS_SMOLLM2)) return chat_dialect_find("chatml-smollm2");
        if (strstr(j, SYS_QWEN25)) return chat_dialect_find("chatml-qwen2.5");
        if (strstr(j, "</think>") && strstr(j, "last_query_index")) return chat_dialect_find("qwen3");
        return chat_dialect_find("chatml");
    }
    return NULL;
}

/* ---- string helpers with Jinja (Python str) semantics --------------------------------- */

static size_t dec(const char *s, size_t n, unsigned *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80 || n < 2) { *cp = u[0]; return 1; }
    if ((u[0] & 0xE0) == 0xC0) { *cp = ((u[0] & 0x1Fu) << 6) | (u[1] & 0x3F); return 2; }
    if ((u[0] & 0xF0) == 0xE0 && n >= 3) { *cp = ((u[0] & 0x0Fu) << 12) | ((u[1] & 0x3Fu) << 6) | (u[2] & 0x3F); return 3; }
    if (n >= 4) { *cp = ((u[0] & 0x07u) << 18) | ((u[1] & 0x3Fu) << 12) | ((u[2] & 0x3Fu) << 6) | (u[3] & 0x3F); return 4; }
    *cp = u[0];
    return 1;
}

/* Python str.isspace (what jinja2's |trim strips). */
static int py_space(unsigned c)
{
    return (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* |trim: [*a, *b) of s without leading/trailing whitespace. */
static void trim(const char *s, size_t *a, size_t *b)
{
    size_t i = *a, j = *b;
    while (i < j) {
        unsigned c;
        size_t l = dec(s + i, j - i, &c);
        if (!py_space(c)) break;
        i += l;
    }
    while (j > i) {
        size_t k = j - 1;
        while (k > i && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
        unsigned c;
        dec(s + k, j - k, &c);
        if (!py_space(c)) break;
        j = k;
    }
    *a = i;
    *b = j;
}

static const char *find_last(const char *s, size_t n, const char *pat)
{
    size_t pl = strlen(pat);
    for (size_t i = n >= pl ? n - pl + 1 : 0; i-- > 0;)
        if (!memcmp(s + i, pat, pl)) return s + i;
    return NULL;
}

static const char *find_first(const char *s, size_t n, const char *pat)
{
    return memmem(s, n, pat, strlen(pat));
}

/* ---- renderers ------------------------------------------------------------------------- */

typedef struct render {
    strbuf *out;
    chat_span *spans;
    size_t n_spans;
    size_t base;           /* out->len when rendering started */
} render;

static void span_add(render *r, size_t msg, size_t start, size_t end, size_t turn_end)
{
    if (r->spans) r->spans[r->n_spans] = (chat_span){msg, start, end, turn_end};
    r->n_spans++;
}

/* "<|im_start|>{role}\n" + content + "<|im_end|>" + "\n", recording the span
 * of an assistant turn. */
static void chatml_turn(render *r, const char *role, const char *c, size_t cn, size_t msg, const char *prefix)
{
    sb_printf(r->out, "<|im_start|>%s\n", role);
    if (prefix) sb_puts(r->out, prefix);
    size_t start = r->out->len;
    sb_append(r->out, c, cn);
    size_t end = r->out->len;
    sb_puts(r->out, "<|im_end|>");
    if (!strcmp(role, "assistant")) span_add(r, msg, start, end, r->out->len);
    sb_putc(r->out, '\n');
}

static void render_chatml(render *r, const chat_dialect *d, const chat_msg *m, size_t n, const size_t *idx)
{
    /* SmolLM2 puts the default before the first message, Qwen2.5 before
     * everything; with at least one message that is the same place. */
    if (d->default_system && n && strcmp(m[0].role, "system"))
        sb_printf(r->out, "<|im_start|>system\n%s<|im_end|>\n", d->default_system);
    for (size_t i = 0; i < n; i++) chatml_turn(r, m[i].role, m[i].content, strlen(m[i].content), idx[i], NULL);
}

static void render_qwen3(render *r, const chat_msg *m, size_t n, const size_t *idx)
{
    if (n && !strcmp(m[0].role, "system")) sb_printf(r->out, "<|im_start|>system\n%s<|im_end|>\n", m[0].content);
    /* The last user turn that is not a wrapped tool response. */
    size_t last_query = n ? n - 1 : 0;
    for (size_t k = n; k-- > 0;) {
        const char *c = m[k].content;
        size_t cl = strlen(c);
        int tool = cl >= 15 && !strncmp(c, "<tool_response>", 15) && cl >= 16 && !strcmp(c + cl - 16, "</tool_response>");
        if (!strcmp(m[k].role, "user") && !tool) {
            last_query = k;
            break;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const char *role = m[i].role, *c = m[i].content;
        size_t cl = strlen(c);
        if (!strcmp(role, "user") || (!strcmp(role, "system") && i > 0)) {
            chatml_turn(r, role, c, cl, idx[i], NULL);
            continue;
        }
        if (strcmp(role, "assistant")) continue;
        size_t ca = 0, cb = cl, ra = 0, rb = 0;
        const char *ct = find_last(c, cl, "</think>");
        if (ct) {
            /* content = split('</think>')[-1].lstrip('\n');
             * reasoning = split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') */
            ca = (size_t)(ct - c) + 8;
            while (ca < cb && c[ca] == '\n') ca++;
            rb = (size_t)(find_first(c, cl, "</think>") - c);
            while (rb > 0 && c[rb - 1] == '\n') rb--;
            const char *ot = find_last(c, rb, "<think>");
            ra = ot ? (size_t)(ot - c) + 7 : 0;
            while (ra < rb && c[ra] == '\n') ra++;
        }
        if (i > last_query && (i == n - 1 || rb > ra)) {
            while (rb > ra && c[rb - 1] == '\n') rb--;  /* reasoning.strip('\n') */
            while (ca < cb && c[ca] == '\n') ca++;      /* content.lstrip('\n') */
            strbuf think = STRBUF_INIT;
            sb_puts(&think, "<think>\n");
            sb_append(&think, c + ra, rb - ra);
            sb_puts(&think, "\n</think>\n\n");
            chatml_turn(r, role, c + ca, cb - ca, idx[i], sb_str(&think));
            sb_free(&think);
        } else {
            chatml_turn(r, role, c + ca, cb - ca, idx[i], NULL);
        }
    }
}

static void llama3_turn(render *r, const char *role, const char *c, size_t msg)
{
    size_t a = 0, b = strlen(c);
    trim(c, &a, &b);
    sb_printf(r->out, "<|start_header_id|>%s<|end_header_id|>\n\n", role);
    size_t start = r->out->len;
    sb_append(r->out, c + a, b - a);
    size_t end = r->out->len;
    sb_puts(r->out, "<|eot_id|>");
    if (!strcmp(role, "assistant")) span_add(r, msg, start, end, r->out->len);
}

static void render_llama3(render *r, const chat_dialect *d, const chat_msg *m, size_t n, const size_t *idx, int gen)
{
    if (d->style == STYLE_LLAMA3) {
        sb_puts(r->out, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                        "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n");
        size_t first = 0;
        if (n && !strcmp(m[0].role, "system")) {
            size_t a = 0, b = strlen(m[0].content);
            trim(m[0].content, &a, &b);
            sb_append(r->out, m[0].content + a, b - a);
            first = 1;
        }
        sb_puts(r->out, "<|eot_id|>");
        for (size_t i = first; i < n; i++) llama3_turn(r, m[i].role, m[i].content, idx[i]);
    } else {
        for (size_t i = 0; i < n; i++) {
            if (i == 0) sb_puts(r->out, "<|begin_of_text|>");
            llama3_turn(r, m[i].role, m[i].content, idx[i]);
        }
    }
    if (gen || d->style == STYLE_LLAMA3_NODATE_ALWAYS) sb_puts(r->out, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Dialects that fold the system message into the first (or last) user
 * turn: *sys is its content or NULL; returns the index of the first
 * non-system message. */
static size_t split_system(const chat_msg *m, size_t n, const char **sys)
{
    int has = n && !strcmp(m[0].role, "system");
    *sys = has ? m[0].content : NULL;
    return has ? 1 : 0;
}

/* Gemma 2 (google/gemma-2-2b-it's chat_template): "<bos>", then per message
 * "<start_of_turn>" + (assistant: "model") + "\n" + content|trim +
 * "<end_of_turn>\n"; the generation prompt "<start_of_turn>model\n". The
 * template has no system role (it raises); a system prompt is carried as
 * Gemma 3's template carries it, the system text + "\n\n" before the
 * first user message's text in its turn (tests/ref/r0408 renders both
 * templates). */
static void render_gemma(render *r, const chat_msg *m, size_t n, const size_t *idx, int gen)
{
    sb_puts(r->out, "<bos>");
    const char *sys;
    size_t first = split_system(m, n, &sys);
    for (size_t i = first; i < n; i++) {
        const char *role = !strcmp(m[i].role, "assistant") ? "model" : m[i].role;
        sb_printf(r->out, "<start_of_turn>%s\n", role);
        if (sys && i == first) sb_printf(r->out, "%s\n\n", sys);
        size_t a = 0, b = strlen(m[i].content);
        trim(m[i].content, &a, &b);
        size_t start = r->out->len;
        sb_append(r->out, m[i].content + a, b - a);
        size_t end = r->out->len;
        sb_puts(r->out, "<end_of_turn>");
        if (!strcmp(m[i].role, "assistant")) span_add(r, idx[i], start, end, r->out->len);
        sb_putc(r->out, '\n');
    }
    if (gen) sb_puts(r->out, "<start_of_turn>model\n");
}

/* Phi-3 / Phi-3.5 (microsoft/Phi-3.5-mini-instruct's chat_template):
 * "<|role|>\n" + content + "<|end|>\n" per message (a system message only
 * when its content is not empty; no trimming), then "<|assistant|>\n" as
 * the generation prompt or else the eos token "<|endoftext|>". Phi-4-mini-
 * reasoning (the original's reference template, quoted in tests/ref/r0409):
 * "<|system|>" + its fixed preamble + " " + each system message + "<|end|>",
 * then "<|role|>" + content + "<|end|>" with no newlines, then
 * "<|assistant|>" or "<|endoftext|>". */
static void render_phi(render *r, const chat_msg *m, size_t n, const size_t *idx, int gen, int phi4)
{
    if (phi4) {
        sb_printf(r->out, "<|system|>%s", PHI4MINI_SYSTEM);
        for (size_t i = 0; i < n; i++)
            if (!strcmp(m[i].role, "system")) sb_printf(r->out, " %s", m[i].content);
        sb_puts(r->out, "<|end|>");
    }
    for (size_t i = 0; i < n; i++) {
        int sys = !strcmp(m[i].role, "system");
        if (sys && (phi4 || !*m[i].content)) continue;
        sb_printf(r->out, phi4 ? "<|%s|>" : "<|%s|>\n", m[i].role);
        size_t start = r->out->len;
        sb_puts(r->out, m[i].content);
        size_t end = r->out->len;
        sb_puts(r->out, "<|end|>");
        if (!strcmp(m[i].role, "assistant")) span_add(r, idx[i], start, end, r->out->len);
        if (!phi4) sb_putc(r->out, '\n');
    }
    sb_puts(r->out, gen ? (phi4 ? "<|assistant|>" : "<|assistant|>\n") : "<|endoftext|>");
}

/* Mistral (the two templates of chat_dialect_detect): bos, then after an
 * optional leading system message, per user turn
 *   v1: " [INST] " + [system + "\n\n" if it is the first message] + content + " [/INST]"
 *   v3: "[INST] " + [system + "\n\n" if it is the last message] + content + "[/INST]"
 * and per assistant turn " " + content + eos (v3: content|trim); nothing
 * for the generation prompt (the answer follows "[/INST]"). Both raise on
 * roles that do not alternate user/assistant and on a later system
 * message; dlm renders those as the same shapes rather than failing (a
 * later system message as a user turn). The training target is
 * " " + content + eos: the space belongs to the answer (the prompt ends
 * at "[/INST]"). The pre-v1 template (legacy): "[INST] " + content + " [/INST]",
 * answers content + eos; it raises on a system message, so dlm carries the
 * system prompt as v1 does (+ "\n\n" at the head of the first user turn). */
static void render_mistral(render *r, const chat_msg *m, size_t n, const size_t *idx, int v3, int legacy)
{
    sb_puts(r->out, "<s>");
    const char *sys;
    size_t first = split_system(m, n, &sys);
    for (size_t i = first; i < n; i++) {
        if (strcmp(m[i].role, "assistant")) {
            sb_puts(r->out, v3 || legacy ? "[INST] " : " [INST] ");
            if (sys && i == (v3 ? n - 1 : first)) sb_printf(r->out, "%s\n\n", sys);
            sb_puts(r->out, m[i].content);
            sb_puts(r->out, v3 ? "[/INST]" : " [/INST]");
            continue;
        }
        size_t start = r->out->len, a = 0, b = strlen(m[i].content);
        if (v3) trim(m[i].content, &a, &b);
        if (!legacy) sb_putc(r->out, ' ');
        sb_append(r->out, m[i].content + a, b - a);
        size_t end = r->out->len;
        sb_puts(r->out, "</s>");
        span_add(r, idx[i], start, end, r->out->len);
    }
}

/* OLMo 2 Instruct (allenai/OLMo-2-1124-*-Instruct's chat_template, the Tulu 3
 * one): bos ("<|endoftext|>"), then per message "<|system|>\n" / "<|user|>\n"
 * + content + "\n", or "<|assistant|>\n" + content + eos ("<|endoftext|>")
 * + "\n" unless it is the last message; the generation prompt
 * "<|assistant|>\n" only after at least one message. No trimming, no
 * default system prompt. */
static void render_olmo2(render *r, const chat_msg *m, size_t n, const size_t *idx, int gen)
{
    sb_puts(r->out, "<|endoftext|>");
    for (size_t i = 0; i < n; i++) {
        if (strcmp(m[i].role, "assistant")) {
            sb_printf(r->out, "<|%s|>\n%s\n", m[i].role, m[i].content);
            continue;
        }
        sb_puts(r->out, "<|assistant|>\n");
        size_t start = r->out->len;
        sb_puts(r->out, m[i].content);
        size_t end = r->out->len;
        sb_puts(r->out, "<|endoftext|>");
        span_add(r, idx[i], start, end, r->out->len);
        if (i + 1 < n) sb_putc(r->out, '\n');
    }
    if (gen && n) sb_puts(r->out, "<|assistant|>\n");
}

/* s with every occurrence of pat removed (Python str.replace(pat, "")). */
static void remove_all(strbuf *s, const char *pat)
{
    size_t pl = strlen(pat), w = 0;
    for (size_t i = 0; i < s->len;) {
        if (i + pl <= s->len && !memcmp(s->buf + i, pat, pl)) {
            i += pl;
            continue;
        }
        s->buf[w++] = s->buf[i++];
    }
    s->len = w;
    if (s->buf) s->buf[w] = 0;
}

/* rstrip (Python whitespace, as trim() reads it) of s, in place. */
static void rstrip_sb(strbuf *s)
{
    size_t b = s->len;
    while (b > 0) {
        size_t k = b - 1;
        while (k > 0 && ((unsigned char)s->buf[k] & 0xC0) == 0x80) k--;
        unsigned c;
        dec(s->buf + k, b - k, &c);
        if (!py_space(c)) break;
        b = k;
    }
    s->len = b;
    if (s->buf) s->buf[b] = 0;
}

/* SmolLM3 (HuggingFaceTB/SmolLM3-3B's chat_template, without tools). A
 * system turn always opens: "## Metadata" with the knowledge cutoff, the
 * day (SMOLLM3_TODAY) and the reasoning mode, then "## Custom
 * Instructions": the first system message's text with "/no_think" and
 * "/think" removed and rstripped, or the mode's default when that is empty,
 * and a blank line. The template closes that turn with <|im_end|> only in
 * its tools branch, so without tools the first user turn follows directly.
 * "/system_override" in the system message replaces the whole header with
 * the instructions (the flag removed) and <|im_end|>. The flags switch the
 * mode ("/no_think" wins); enable_thinking (the dialect: smollm3 false,
 * smollm3thinking true) sets it otherwise. Other system messages are not
 * rendered. Answers are lstrip('\n')ed; with thinking off each opens with an
 * empty think block, which the generation prompt ends with too. */
static void render_smollm3(render *r, const chat_msg *m, size_t n, const size_t *idx, int gen, int think)
{
    strbuf custom = STRBUF_INIT;
    int override = 0;
    if (n && !strcmp(m[0].role, "system")) {
        const char *sys = m[0].content;
        if (strstr(sys, "/no_think")) think = 0;
        else if (strstr(sys, "/think")) think = 1;
        override = strstr(sys, "/system_override") != NULL;
        sb_puts(&custom, sys);
        remove_all(&custom, "/no_think");
        remove_all(&custom, "/think");
        rstrip_sb(&custom);
    }
    if (override) {
        remove_all(&custom, "/system_override");
        rstrip_sb(&custom);
        sb_printf(r->out, "<|im_start|>system\n%s<|im_end|>\n", sb_str(&custom));
    } else {
        sb_printf(r->out, "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: %s\n"
                          "Reasoning Mode: %s\n\n## Custom Instructions\n\n%s\n\n",
                  SMOLLM3_TODAY, think ? "/think" : "/no_think",
                  custom.len ? sb_str(&custom) : think ? SMOLLM3_SYS_THINK : SMOLLM3_SYS);
    }
    sb_free(&custom);
    for (size_t i = 0; i < n; i++) {
        const char *c = m[i].content;
        if (!strcmp(m[i].role, "user")) chatml_turn(r, "user", c, strlen(c), idx[i], NULL);
        if (strcmp(m[i].role, "assistant")) continue;
        while (*c == '\n') c++;
        chatml_turn(r, "assistant", c, strlen(c), idx[i], think ? NULL : "<think>\n\n</think>\n");
    }
    if (gen) sb_puts(r->out, think ? "<|im_start|>assistant\n" : "<|im_start|>assistant\n<think>\n\n</think>\n");
}

int chat_render(const chat_dialect *d, const char *system_prompt, const chat_msg *msgs, size_t n,
                int add_generation_prompt, strbuf *out, chat_span *spans, size_t *n_spans, dlm_err *e)
{
    if (n_spans) *n_spans = 0;
    if (!d) return err_set(e, "ChatTemplateError", "no chat dialect");
    for (size_t i = 0; i < n; i++) {
        const char *r = msgs[i].role;
        if (!r || !msgs[i].content) return err_set(e, "ChatTemplateError", "message %zu has no role or content", i);
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant"))
            return err_set(e, "ChatTemplateError", "message %zu: role '%s' is not supported (system, user, assistant)", i, r);
    }
    /* The document's system prompt becomes the first message unless the
     * conversation brings its own. */
    int add_sys = system_prompt && (n == 0 || strcmp(msgs[0].role, "system"));
    size_t total = n + (size_t)add_sys;
    chat_msg local[64];
    size_t lidx[64];
    chat_msg *m = local;
    size_t *idx = lidx;
    if (total > 64) {
        m = malloc(total * sizeof *m);
        idx = malloc(total * sizeof *idx);
        if (!m || !idx) {
            free(m == local ? NULL : m);
            free(idx == lidx ? NULL : idx);
            return err_set(e, "OOMError", "out of memory");
        }
    }
    size_t k = 0;
    if (add_sys) {
        m[k] = (chat_msg){"system", system_prompt};
        idx[k++] = (size_t)-1;
    }
    for (size_t i = 0; i < n; i++) {
        m[k] = msgs[i];
        idx[k++] = i;
    }
    render r = {out, spans, 0, out->len};
    switch (d->style) {
    case STYLE_CHATML:
        render_chatml(&r, d, m, total, idx);
        if (add_generation_prompt) sb_puts(out, "<|im_start|>assistant\n");
        break;
    case STYLE_QWEN3:
    case STYLE_QWEN3_THINKING:
        render_qwen3(&r, m, total, idx);
        if (add_generation_prompt) sb_puts(out, "<|im_start|>assistant\n");
        /* thinking off: the answer follows an empty think block, as every
         * final answer in training does (render_qwen3) */
        if (add_generation_prompt && d->style == STYLE_QWEN3) sb_puts(out, "<think>\n\n</think>\n\n");
        break;
    case STYLE_PHI3:
    case STYLE_PHI4MINI:
        render_phi(&r, m, total, idx, add_generation_prompt, d->style == STYLE_PHI4MINI);
        break;
    case STYLE_GEMMA:
        render_gemma(&r, m, total, idx, add_generation_prompt);
        break;
    case STYLE_MISTRAL:
    case STYLE_MISTRAL_V3:
    case STYLE_MISTRAL_LEGACY:
        render_mistral(&r, m, total, idx, d->style == STYLE_MISTRAL_V3, d->style == STYLE_MISTRAL_LEGACY);
        break;
    case STYLE_OLMO2:
        render_olmo2(&r, m, total, idx, add_generation_prompt);
        break;
    case STYLE_SMOLLM3:
    case STYLE_SMOLLM3_THINKING:
        render_smollm3(&r, m, total, idx, add_generation_prompt, d->style == STYLE_SMOLLM3_THINKING);
        break;
    default:
        render_llama3(&r, d, m, total, idx, add_generation_prompt);
        break;
    }
    if (m != local) {
        free(m);
        free(idx);
    }
    if (n_spans) *n_spans = r.n_spans;
    if (out->oom) return err_set(e, "OOMError", "out of memory rendering the chat");
    return 0;
}

int chat_render_template(const char *tmpl, const char *system_prompt, const chat_msg *msgs, size_t n,
                         int add_generation_prompt, const char *bos, const char *eos, const json_t *extra_vars,
                         strbuf *out, dlm_err *e)
{
    if (!tmpl) return err_set(e, "TemplateError", "the base has no chat_template");
    json_t *vars = json_object(), *ms = json_array();
    if (!vars || !ms) {
        json_decref(vars);
        json_decref(ms);
        return err_set(e, "OOMError", "out of memory");
    }
    if (extra_vars && json_is_object(extra_vars)) json_object_update(vars, (json_t *)extra_vars);
    if (system_prompt && !(n && msgs[0].role && !strcmp(msgs[0].role, "system")))
        json_array_append_new(ms, json_pack("{s:s,s:s}", "role", "system", "content", system_prompt));
    for (size_t i = 0; i < n; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            json_decref(vars);
            json_decref(ms);
            return err_set(e, "ChatError", "message %zu has no role or content", i);
        }
        json_array_append_new(ms, json_pack("{s:s,s:s}", "role", msgs[i].role, "content", msgs[i].content));
    }
    json_object_set_new(vars, "messages", ms);
    json_object_set_new(vars, "add_generation_prompt", json_boolean(add_generation_prompt));
    json_object_set_new(vars, "bos_token", json_string(bos ? bos : ""));
    json_object_set_new(vars, "eos_token", json_string(eos ? eos : ""));
    jinja_tmpl *t;
    int rc = jinja_parse(tmpl, strlen(tmpl), &t, e);
    if (!rc) {
        rc = jinja_render(t, vars, out, e);
        jinja_free(t);
    }
    json_decref(vars);
    return rc;
}
