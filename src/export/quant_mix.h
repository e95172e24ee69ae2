/* quant_mix — which ggml type every tensor of an exported model gets, as
 * llama.cpp's llama-quantize decides it (docs/reference/formats.md §6.1, src/llama-quant.cpp
 * llama_tensor_get_type, no imatrix, no overrides), plus the two quantizers
 * kern does not have (Q4_1, Q5_1: the fallback of Q5_K for rows that are
 * not a multiple of 256).
 *
 * A mix is a llama_ftype: a default type and the per-tensor rules. The
 * rules depend on the order tensors are visited (attn_v counter), so the
 * caller walks tensors in the output order (export_tensor_cmp) through one
 * export_qstate. */
#ifndef DLM_EXPORT_QUANT_MIX_H
#define DLM_EXPORT_QUANT_MIX_H

#include <stddef.h>
#include <stdint.h>
#include "kern/dtype.h"

typedef struct export_mix {
    const char *name;       /* "Q4_K_M" */
    uint32_t ftype;         /* general.file_type (LlamaFileType) */
    dtype def;              /* default type of a quantizable tensor */
    int k_mix;              /* llama_tensor_get_type applies (quantized default) */
} export_mix;

/* Mixes dlm writes, in the order `dlm export --help` lists them. */
size_t export_mix_count(void);
const export_mix *export_mix_at(size_t i);
/* Case-insensitive lookup ("q4_k_m"); NULL if unknown. */
const export_mix *export_mix_find(const char *name);

/* What the rules need to know about the model before the walk. */
typedef struct export_qstate {
    int has_output;         /* the model has its own output.weight (not tied) */
    int n_attention_wv;     /* number of attn_v.weight tensors */
    int n_layer;            /* hparams.n_layer (ffn_down's n) */
    int i_attention_wv;     /* counters, advanced by export_tensor_type */
    int i_ffn_down;
    int n_fallback;         /* tensors that took a %256 fallback */
} export_qstate;

/* llama.cpp's use_more_bits(i, n): the layers Q4_K_M/Q5_K_M give Q6_K. */
int export_use_more_bits(int i, int n);

/* The type of tensor `name` (GGUF name) with ne0 columns and n_dims dims
 * under mix m. 1-D tensors, names not ending in "weight" and *_norm.weight
 * stay F32. Advances the counters in s. Never returns an unsupported
 * type: a row width no fallback fits becomes F16 (llama.cpp refuses it). */
dtype export_tensor_type(const export_mix *m, export_qstate *s, const char *name, int64_t ne0, int n_dims);

/* llama.cpp's weight_name_comparer: by the layer of "blk.%d." (others -1
 * first), then by name. For qsort over const char *. */
int export_name_cmp(const char *a, const char *b);

/* Quantize n elements into dst with llama.cpp's reference algorithm for
 * every type kern_quant_row has plus Q4_1 and Q5_1. Returns bytes written,
 * 0 if the type is unsupported or n is not a multiple of its block. */
size_t export_quant_row(dtype t, const float *src, void *dst, int64_t n);
/* The same with per-column importance qw[n] (NULL: export_quant_row):
 * ggml_quantize_chunk with an imatrix (kern_quant_row_w). */
size_t export_quant_row_w(dtype t, const float *src, void *dst, int64_t n, const float *qw);

#endif
