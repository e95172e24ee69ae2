/* registry — the base models dlm knows by name (docs/reference/original-spec.md §9).
 *
 * A compiled-in table generated from docs/reference/base-registry.tsv by
 * scripts/gen-registry.py (src/weights/registry_table.c), plus
 * qwen2.5-coder-7b / -14b and the pseudo-entry `tiny` (the small base dlm
 * ships, models/tiny.gguf). Vision and audio rows are listed so that they
 * can be named in messages, but dlm trains text bases only.
 *
 * A `--base` value (and a document's base_model) is one of:
 *   a registry key            qwen2.5-1.5b
 *   hf:org/name[@revision]    hf:Qwen/Qwen2.5-Coder-7B-Instruct@main
 *   a path                    ./models/my-base, /data/x.gguf, ~/m (has a '/', or starts with '.' or '~')
 *   tiny                      the embedded base */
#ifndef DLM_STORE_REGISTRY_H
#define DLM_STORE_REGISTRY_H

#include <stdint.h>
#include "util/err.h"

typedef enum { REG_TEXT = 0, REG_VISION, REG_AUDIO } reg_modality;

typedef struct reg_entry {
    const char *key;
    const char *hf_id;            /* NULL for tiny */
    const char *revision;         /* pinned 40-hex sha ("main" for the coder-7b/14b rows) */
    const char *architecture;     /* HF class, e.g. Qwen2ForCausalLM */
    int64_t params;
    const char *dialect;          /* chat template family: chatml, llama3, ... */
    const char *gguf_arch;
    const char *tokenizer_pre;
    const char *license;          /* SPDX-ish */
    int requires_acceptance;      /* gated: needs --i-accept-license */
    int redistributable;
    int context_length;
    const char *const *target_modules;
    int n_target_modules;
    reg_modality modality;
    const char *license_url;
    double size_gb_fp16;
    int recommended_seq_len;
    int reasoning_tuned;
    int context_length_effective; /* 0 = same as context_length */
    const char *path;             /* tiny only: relative to the install */
} reg_entry;

extern const reg_entry registry_table[];
extern const int registry_table_len;

int registry_count(void);
const reg_entry *registry_at(int i);
const reg_entry *registry_lookup(const char *key);
/* Up to max keys closest to `key` (edit distance <= 3, or containing it),
 * closest first. Returns how many. */
int registry_suggest(const char *key, const char **out, int max);
const char *registry_modality_name(reg_modality m);

typedef enum { BASE_REGISTRY = 0, BASE_HF, BASE_PATH, BASE_TINY } base_kind;

typedef struct base_ref {
    base_kind kind;
    const reg_entry *entry;       /* registry and tiny */
    char hf_id[256];              /* BASE_HF: org/name */
    char revision[128];           /* BASE_HF: "" = default branch */
    char path[4096];              /* BASE_PATH: as given (~ expanded) */
} base_ref;

/* Parse a --base value. Unknown key → UnknownBaseModelError listing known
 * keys, with close matches in the hint. */
int registry_parse_base(const char *s, base_ref *out, dlm_err *e);
/* Refuse bases dlm cannot train: vision/audio rows. */
int registry_check_trainable(const base_ref *b, dlm_err *e);
/* Gated bases need explicit acceptance: GatedModelError unless accepted. */
int registry_check_license(const base_ref *b, int accepted, dlm_err *e);
/* The canonical spelling stored in a document's base_model. */
void registry_base_string(const base_ref *b, char *out, size_t cap);

#endif
