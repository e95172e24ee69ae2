/* gguf_out — the embedded base as a llama.cpp GGUF: llama arch keys,
 * F16 matrices (norms F32), Q/K rows permuted for llama.cpp's RoPE, tied
 * embeddings (no output.weight), and the tokenizer as tokenizer.ggml.*. */
#ifndef DLM_TINY_GGUF_OUT_H
#define DLM_TINY_GGUF_OUT_H

#include "weights/gguf.h"
#include "grad/full.h"
#include "vocab.h"

/* tokenizer.ggml.* and tokenizer.chat_template. */
int tiny_gguf_tokenizer(gguf_w *w, const tiny_vocab *v);
/* The whole model (f->m.cfg must be llama arch, tied). name goes to
 * general.name. */
int tiny_gguf_write(const char *path, const full_model *f, const tiny_vocab *v, const char *name, dlm_err *e);

#endif
