/* vocab — the embedded base's tokenizer as files and arrays: a trained BPE
 * plus the ChatML special tokens, written as an HF tokenizer.json +
 * tokenizer_config.json and as the tok_spec (= GGUF tokenizer.ggml.*)
 * arrays, so both roads into src/tok give the same tokenizer. */
#ifndef DLM_TINY_VOCAB_H
#define DLM_TINY_VOCAB_H

#include <stdint.h>
#include "bpe.h"
#include "tokens/tok.h"

/* Plain ChatML, no default system turn (chat.h's "chatml" dialect). */
#define TINY_CHAT_TEMPLATE                                                                                 \
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "       \
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

typedef struct tiny_vocab {
    int n_tokens;
    char **tokens;          /* ByteLevel form; specials as their content */
    int32_t *types;         /* TOK_TYPE_* */
    int n_merges;
    char **merges;          /* "a b" in rank order */
    int32_t eot, im_start, im_end;  /* <|endoftext|> <|im_start|> <|im_end|> */
    int model_max_length;
} tiny_vocab;

/* BPE tokens (ids 0..n-1) then the three specials. */
int tiny_vocab_from_bpe(const bpe_trainer *t, int model_max_length, tiny_vocab *v, dlm_err *e);
void tiny_vocab_free(tiny_vocab *v);
/* A spec pointing into v (valid while v lives): bos = pad = <|endoftext|>,
 * eos = <|im_end|>, no BOS/EOS added, pre "gpt2", the ChatML template. */
void tiny_vocab_spec(const tiny_vocab *v, tok_spec *s);
/* dir/tokenizer.json and dir/tokenizer_config.json (atomic writes). */
int tiny_vocab_write_hf(const tiny_vocab *v, const char *dir, dlm_err *e);

#endif
