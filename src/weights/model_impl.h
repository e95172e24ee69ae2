/* model_impl — what load.c, load_hf.c, load_gguf.c and names.c share.
 * Private to src/model. */
#ifndef DLM_MODEL_IMPL_H
#define DLM_MODEL_IMPL_H

#include "weights/gguf.h"
#include "weights/model.h"
#include "weights/safetensors.h"

/* The tensors a llama/qwen2/qwen3/olmo2 model is built from, in both namings. */
typedef enum tensor_role {
    T_EMBD, T_OUT_NORM, T_OUTPUT, T_ROPE_FREQS,
    T_ATTN_NORM, T_Q, T_K, T_V, T_O, T_QB, T_KB, T_VB,
    T_FFN_NORM, T_GATE, T_UP, T_DOWN, T_QN, T_KN, T_ATTN_POST, T_FFN_POST, T_FFN_PRE,
    T_QKV, T_GATE_UP, T_ROPE_LONG, T_ROPE_SHORT,
    T_ROLE_COUNT
} tensor_role;

/* Name of a role for layer il (ignored for global roles) in HF (gguf=0) or
 * GGUF naming. Returns NULL if the role has no name there. */
const char *model_role_name(tensor_role r, int il, int gguf, char *buf, size_t cap);

/* A tensor as the common builder sees it, whatever the source. */
typedef struct src_tensor {
    const char *name;
    int type;               /* dtype id, -1 if none */
    const char *type_name;
    int n_dims;
    int64_t ne[4];          /* ggml order */
    const void *data;
    uint64_t nbytes;
} src_tensor;

struct model_storage {
    st_file *st;
    gguf_file *gg;
    void **owned;
    int nowned, owned_cap;
    model_tensor *tensors;
    int ntensors;
};

/* Owned, zeroed, freed by model_free. NULL (with e set) on failure. */
void *model_alloc(model *m, size_t n, dlm_err *e);
/* Record a string for the lifetime of the model. */
const char *model_strdup(model *m, const char *s, dlm_err *e);

/* Shared ranges check for a parsed config (both sources). */
int model_config_validate(const model_config *cfg, const char *path, dlm_err *e);

/* Build layers from a source (load.c). find returns 0 and fills t when the
 * tensor exists, 1 when it does not. */
typedef struct loader {
    model *m;
    const char *path;
    int gguf;
    void *ctx;
    int (*find)(void *ctx, const char *name, src_tensor *t);
    dlm_err *e;
} loader;
int model_build(loader *L);

int model_load_hf(const char *dir, model *m, dlm_err *e);
int model_load_gguf(const char *path, model *m, dlm_err *e);

/* half floats, private to the loader (kern has the fast ones) */
float model_f16_to_f32(uint16_t h);
float model_bf16_to_f32(uint16_t h);

#endif
