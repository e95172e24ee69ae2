/* batch — what the decoder eats: B sequences of T token ids with their
 * next-token targets, RoPE positions and packing segments. Made by the
 * dataset (tokens/dataset.c), read by the decoder and its backward.
 *
 * The multimodal splice (docs/images.md): optional fields, NULL = a text
 * batch, whose passes are bit for bit what they were without them.
 *  - embeds / embed_row: rows whose input is not the token table's row but
 *    a vision (or audio) tower's output, already projected to d_model. They
 *    replace the table's row before the model's embedding scale (gemma's
 *    √hidden multiplies them too, as HF scales inputs_embeds). The towers
 *    are frozen: no gradient reaches embeds.
 *  - pos3: Qwen2-VL's M-RoPE positions, three streams (temporal, height,
 *    width) of B·T each; needs a config with mrope sections. pos is then
 *    unused by the rotary (vision/mrope.h makes both).
 *  - prefix: PaliGemma's prefix-LM, per sequence the length of the leading
 *    bidirectional block (image + prompt tokens attend to each other, the
 *    rest is causal). Not built yet: decoder_batch_check refuses it. */
#ifndef DLM_BATCH_H
#define DLM_BATCH_H

#include <stdint.h>

typedef struct token_batch {
    int B, T;
    const int32_t *tokens;   /* [B,T] input ids */
    const int32_t *targets;  /* [B,T] next-token ids, -1 = no loss */
    const int32_t *pos;      /* [B,T] RoPE positions (restart at 0 per packed row) */
    const int32_t *seg;      /* [B,T] segment ids (packing), NULL = one per sequence */
    const float *embeds;     /* [n_embeds, d_model] spliced input rows, or NULL */
    const int32_t *embed_row; /* [B,T] -1 = the token's table row, k >= 0 = embeds row k; NULL = all tokens */
    int n_embeds;            /* rows of embeds */
    const int32_t *pos3;     /* [3][B·T] M-RoPE positions (t, h, w streams), or NULL = pos */
    const int32_t *prefix;   /* [B] bidirectional prefix length (prefix-LM), or NULL = causal */
} token_batch;

#endif
