/* teacher — the model or program that `dlm synth` asks for instruction
 * pairs and `dlm preference mine` asks for samples and scores.
 *
 * A teacher spec is one of
 *   self          the document's current adapter (base + LoRA), in process;
 *   openai:URL    any OpenAI-compatible chat-completions server (dlm's own,
 *                 llama-server, vLLM): URL is the server root, the /v1 root
 *                 or the full .../chat/completions address;
 *   vllm-server:URL  the original's spelling of the same; without a model
 *                 name it asks the server for its first (GET .../v1/models);
 *   anthropic:MODEL  Anthropic's Messages API (POST {base}/v1/messages,
 *                 x-api-key + anthropic-version 2023-06-01; base
 *                 https://api.anthropic.com unless base_url; body model,
 *                 max_tokens, system, messages, and temperature / top_p
 *                 only when the user gave them: current models and API
 *                 versions refuse sampling parameters), retried as
 *                 Anthropic's SDK does (2 retries on 408/409/429/5xx and
 *                 connection failures, retry-after honoured);
 *   hf:MODEL      another base in process, without an adapter (a registry
 *                 key, ORG/NAME or a local model folder), prompted as the
 *                 original's HF teacher prompts (see self_ask);
 *   cli:CMD       a program run through /bin/sh: stdin gets one JSON object
 *                 {"system", "prompt", "max_new_tokens", "temperature",
 *                 "top_p", "seed"}, stdout is the reply text.
 * teacher_ask sends one system + user turn and returns the reply text.
 *
 * A judge spec (`preference mine --judge`) is
 *   cli:CMD       the original's interface: per candidate, stdin gets
 *                 {"prompt", "candidate"} and stdout must be a JSON object
 *                 {"score": number, "reasoning"?: string};
 *   ref           the candidate's difflib ratio to the section's reference
 *                 answer (no program needed);
 *   sway          the original's default (dlm-sway's preference judge): the
 *                 candidate's log-probability after the prompt under the
 *                 document's base + adapter, per 4 characters; it needs the
 *                 self teacher (judge_bind_teacher). Named
 *                 "sway:preference_judge" in markers, as the original. */
#ifndef DLM_TEACHER_H
#define DLM_TEACHER_H

#include <stdint.h>
#include "util/err.h"

typedef struct teacher teacher;

typedef struct teacher_opts {
    const char *spec;            /* self | openai:URL | vllm-server:URL | anthropic:MODEL | hf:MODEL | cli:CMD */
    const char *doc_path;        /* self: the document */
    const char *home;            /* self: the store root */
    const char *adapter_dir;     /* self: a specific adapter version dir, NULL = current */
    const char *adapter_name;    /* self: that adapter of training.adapters (its current version) */
    const char *model;           /* openai: "model" field (NULL = "default") */
    const char *api_key;         /* openai: Bearer token, NULL = none; anthropic: x-api-key (required) */
    const char *base_url;        /* anthropic: the API root (NULL = https://api.anthropic.com) */
    int offline;                 /* hf: the HF cache only */
    double temp, top_p;          /* top_p 1 = off */
    int temp_set, top_p_set;     /* anthropic: send temperature / top_p only when given */
    int max_new_tokens;
    uint64_t seed;
    double timeout_s;            /* openai / cli: per request (0 = 300) */
} teacher_opts;

int teacher_open(const teacher_opts *o, teacher **out, dlm_err *e);
/* The reply to system + user; *reply is malloc'd. sample_index varies the
 * seed of repeated samples of one prompt (0 for the first). */
int teacher_ask(teacher *t, const char *system, const char *user, int sample_index, char **reply, dlm_err *e);
/* "self", "openai:http://...", "cli:..." as given (for markers and logs). */
const char *teacher_name(const teacher *t);
void teacher_close(teacher *t);

typedef struct judge judge;
int judge_open(const char *spec, double timeout_s, judge **out, dlm_err *e);
/* Score one candidate answer to prompt; reference is the section's answer
 * (used by `ref`). */
int judge_score(judge *j, const char *prompt, const char *candidate, const char *reference, double *score,
                dlm_err *e);
const char *judge_name(const judge *j);
/* sway: score with t (a self teacher, open); a no-op for other judges. */
int judge_bind_teacher(judge *j, teacher *t, dlm_err *e);
/* The margin below which a pair is not worth keeping (the original's 0.1). */
double judge_default_threshold(const judge *j);
void judge_close(judge *j);

#endif
