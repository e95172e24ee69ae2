/* chat — chat-template dialects: a conversation rendered into the exact
 * prompt string a base's own Jinja chat_template produces (HF
 * apply_chat_template), without a Jinja engine.
 *
 * Each dialect reproduces one family of templates for plain conversations
 * (system / user / assistant messages, no tools):
 *
 *   chatml           <|im_start|>{role}\n{content}<|im_end|>\n ..., no default system turn
 *   chatml-smollm2   chatml + "You are a helpful AI assistant named SmolLM, trained by
 *                    Hugging Face" when the conversation has no system message
 *   chatml-qwen2.5   chatml + "You are Qwen, created by Alibaba Cloud. You are a helpful
 *                    assistant." when it has none
 *   qwen3            Qwen3's template with enable_thinking=false: an empty
 *                    <think>\n\n</think>\n\n block opens the final assistant answer after
 *                    the last user turn and the generation prompt (so a prompt continues
 *                    where a trained answer starts); <think> parts of answers before the
 *                    last user turn are dropped, later ones kept
 *   qwen3thinking    the same template with enable_thinking=true: the generation prompt is
 *                    a bare assistant header and the model writes its own <think> block
 *                    (the registry's qwen3-1.7b-thinking row)
 *   llama3           Llama 3.1/3.2: BOS, a system header that always carries
 *                    "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024"
 *                    (the date is pinned so prompts do not change with the day), contents trimmed
 *   llama3-nodate    Llama 3.0 Instruct: BOS, one header per message, contents trimmed
 *   llama3-nodate-always  the same, but the assistant header is always appended (the
 *                    template of Meta-Llama-3 base repositories ignores add_generation_prompt)
 *   gemma2, phi3, phi4mini  see the renderers in chat.c
 *   mistral          mistral-common's 'v1' template (Mixtral-8x7B-Instruct-v0.1): <s>, then
 *                    " [INST] " + content + " [/INST]" per user turn (the system prompt +
 *                    "\n\n" in the first), " " + content + "</s>" per answer
 *   mistral-v3       its 'v3' template (Mistral-7B-Instruct-v0.3): "[INST] " + content +
 *                    "[/INST]", the system prompt in the LAST user turn (so a conversation
 *                    that ends with an answer carries none), answers trimmed
 *   mistral-legacy   the pre-v1 template (Mistral-7B-Instruct-v0.1, early Mixtral snapshots):
 *                    "[INST] " + content + " [/INST]", answers content + "</s>"; it has no
 *                    system role, so the system prompt goes where v1 puts it
 *   olmo2            OLMo 2 Instruct (the Tulu 3 template): <|endoftext|>, then
 *                    "<|role|>\n" + content + "\n" per system / user message, answers
 *                    "<|assistant|>\n" + content + "<|endoftext|>" (+ "\n" unless last)
 *   smollm3          SmolLM3 with enable_thinking=false: a system turn with a metadata
 *                    block (reasoning mode) and the custom instructions (the system text
 *                    without its /think and /no_think flags, which switch the mode), answers
 *                    after an empty <think>\n\n</think>\n block, as the generation prompt
 *   smollm3thinking  the same with enable_thinking=true (no think block added)
 *
 * The rendered string contains special-token text (BOS too, for llama3);
 * tokenize it with TOK_PARSE_SPECIAL and without TOK_ADD_SPECIAL, as
 * transformers' apply_chat_template(tokenize=True) does. */
#ifndef DLM_CHAT_H
#define DLM_CHAT_H

#include <stddef.h>
#include <jansson.h>
#include "util/err.h"
#include "util/str.h"

typedef struct chat_msg {
    const char *role;     /* "system" | "user" | "assistant" */
    const char *content;
} chat_msg;

typedef struct chat_dialect {
    const char *name;              /* "chatml", "chatml-qwen2.5", "llama3", ... */
    const char *family;            /* export family: chatml, llama3, gemma, phi3, mistral (src/export/ollama.c) */
    const char *default_system;    /* injected when there is no system message; NULL none */
    const char *const *stops;      /* stop strings, NULL-terminated (docs/reference/original-spec.md §6.2) */
    double top_p;                  /* export default */
    int style;                     /* private: which renderer */
} chat_dialect;

/* Registry. */
size_t chat_dialect_count(void);
const chat_dialect *chat_dialect_at(size_t i);
const chat_dialect *chat_dialect_find(const char *name);       /* NULL if unknown */
/* Pick the dialect a base's Jinja chat_template text implements; NULL when
 * it looks like none of them. */
const chat_dialect *chat_dialect_detect(const char *jinja);

/* The Jinja variables a dialect stands for beyond the conversation (Qwen3:
 * enable_thinking), as a new JSON object, or NULL when none. Rendering the
 * base's own template with them gives what the dialect renders. */
json_t *chat_dialect_vars(const chat_dialect *d);
/* A registry row may name a variant of the dialect the template was
 * detected as (qwen3 -> qwen3thinking); otherwise the detected one stands. */
const chat_dialect *chat_dialect_refine(const chat_dialect *detected, const char *named);

/* Where an assistant message landed in the rendered string: its content is
 * out[start, end); the turn (content + end-of-turn token, the training
 * target) ends at turn_end. Byte offsets. */
typedef struct chat_span {
    size_t msg;            /* index into the messages given */
    size_t start, end, turn_end;
} chat_span;

/* Render msgs into out (appended). system_prompt (may be NULL) is used as
 * the system message when msgs does not start with one. spans (capacity
 * n, may be NULL) receives one entry per assistant message, *n_spans the
 * count. Unknown roles and NULL contents are errors. */
int chat_render(const chat_dialect *d, const char *system_prompt, const chat_msg *msgs, size_t n,
                int add_generation_prompt, strbuf *out, chat_span *spans, size_t *n_spans, dlm_err *e);

/* Render a base's own Jinja chat_template with dlm's interpreter
 * (tokens/jinja.h), as transformers' apply_chat_template does: variables
 * messages (system_prompt first when msgs does not start with a system
 * message), add_generation_prompt, bos_token and eos_token (NULL = ""), plus
 * the members of extra_vars (a JSON object, e.g. tools or date_string; may
 * be NULL). Works for any family's template; the dialects above are the
 * fast path for the ones dlm knows (test_chat checks both agree). */
int chat_render_template(const char *tmpl, const char *system_prompt, const chat_msg *msgs, size_t n,
                         int add_generation_prompt, const char *bos, const char *eos, const json_t *extra_vars,
                         strbuf *out, dlm_err *e);

#endif
