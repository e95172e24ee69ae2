/* base — naming a base model: a registry key (pinned HF id + revision), an
 * `hf:org/name[@rev]` spec, a local HF model folder, or a .gguf file; and
 * turning that into a local path model_load can read (HF cache first,
 * download when missing and allowed; see hub.h). */
#ifndef DLM_BASE_H
#define DLM_BASE_H

#include <stddef.h>
#include "model/hub.h"
#include "util/err.h"

/* One row of the original tool's registry (shared/reference/base-registry.tsv). */
typedef struct base_entry {
    const char *key;
    const char *hf_id;
    const char *revision;               /* pinned commit */
    const char *architecture;           /* HF class name */
    const char *dialect;                /* chat template family */
    const char *gguf_arch, *tokenizer_pre, *license;
    int requires_acceptance;            /* gated: licence must be accepted */
    int redistributable;
    int context_length;
    int supported;                      /* dlm can run it (llama / qwen2) */
} base_entry;

int base_registry_count(void);
const base_entry *base_registry_at(int i);
const base_entry *base_registry_find(const char *key);

typedef enum base_kind { BASE_REGISTRY, BASE_HF, BASE_DIR, BASE_GGUF } base_kind;

typedef struct base_ref {
    base_kind kind;
    char repo[256];                     /* REGISTRY, HF */
    char rev[256];                      /* "main" when not given */
    char path[4096];                    /* DIR, GGUF */
    const base_entry *entry;            /* REGISTRY */
} base_ref;

/* Classify a spec (stat only, no network). Unknown keys get a "did you
 * mean"; registry rows of unsupported architectures are refused here. */
int base_parse(const char *spec, base_ref *ref, dlm_err *e);
/* Parse, then produce a path for model_load: the folder / file itself, or
 * the HF cache snapshot (downloaded if missing and o allows). */
int base_resolve(const char *spec, const hub_opts *o, base_ref *ref, char *path, size_t cap, dlm_err *e);

#endif
