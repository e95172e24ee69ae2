/* tok_gguf — a tokenizer rebuilt from a GGUF file's tokenizer.ggml.* keys
 * (docs/reference/formats.md §4.4), giving the same ids as the tokenizer.json it came from. */
#ifndef DLM_TOK_GGUF_H
#define DLM_TOK_GGUF_H

#include "weights/gguf.h"
#include "tokens/tok.h"

int tok_from_gguf(const gguf_file *g, tok **out, dlm_err *e);
/* Open path and build; convenience for the CLI. */
int tok_load_gguf(const char *path, tok **out, dlm_err *e);
/* The tokenizer of a model source: tokenizer.json(+config) in an HF folder,
 * or the GGUF metadata of a .gguf file. */
int tok_load_for_model(const char *model_path, tok **out, dlm_err *e);
/* sha256 of what tok_load_for_model reads the tokenizer from (the
 * tokenization cache's key): tokenizer.json + tokenizer_config.json of a
 * folder, or a GGUF's metadata (the bytes before its tensor data). */
int tok_source_sha256(const char *model_path, char out[65], dlm_err *e);

#endif
