/* batch — what the decoder eats: B sequences of T token ids with their
 * next-token targets, RoPE positions and packing segments. Made by the
 * dataset (tokens/dataset.c), read by the decoder and its backward. */
#ifndef DLM_BATCH_H
#define DLM_BATCH_H

#include <stdint.h>

typedef struct token_batch {
    int B, T;
    const int32_t *tokens;   /* [B,T] input ids */
    const int32_t *targets;  /* [B,T] next-token ids, -1 = no loss */
    const int32_t *pos;      /* [B,T] RoPE positions (restart at 0 per packed row) */
    const int32_t *seg;      /* [B,T] segment ids (packing), NULL = one per sequence */
} token_batch;

#endif
