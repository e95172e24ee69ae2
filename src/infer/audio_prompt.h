/* audio_prompt — a prompt with audio clips for an audio-language base, as
 * the original's `dlm prompt --audio` builds it (dlm/inference/
 * audio_generate.py): the text is used as is (no chat template: the
 * training rows have none either), one <|AUDIO|> per clip is put in front
 * ("<|AUDIO|>" x k + "\n" + text) unless the text already holds exactly as
 * many, and each placeholder becomes the clip's run of placeholder tokens
 * (Qwen2AudioProcessor), whose inputs are the clip's encoder rows
 * (vision/audio_feat.h) through the session's splice. */
#ifndef DLM_INFER_AUDIO_PROMPT_H
#define DLM_INFER_AUDIO_PROMPT_H

#include <stddef.h>
#include <stdint.h>

#include "decoder/session.h"
#include "tokens/tok.h"
#include "util/err.h"
#include "vision/audio_feat.h"

typedef struct audio_prompt {
    tok_ids ids;            /* the prompt, placeholders expanded */
    int32_t *embed_row;     /* [ids.n]: -1, or the row of emb */
    float *emb;             /* [n_emb][width] every clip's rows in order */
    int n_emb;
    int n_clips;
} audio_prompt;

/* The ids and embed_row for clips of n[i] mono 16 kHz samples (no encoder
 * run: the counts come from the lengths); emb is left NULL. A text holding
 * a number of placeholders other than 0 or n_clips is refused, as the
 * processor refuses it. */
int audio_prompt_build(tok *t, const audio_feat *af, const char *text, const size_t *n, int n_clips,
                       audio_prompt *out, dlm_err *e);
/* The clips' encoder rows into p->emb (waves[i]: clip i's samples; the
 * kern pool's driving thread only). */
int audio_prompt_embed(audio_prompt *p, const audio_feat *af, const float *const *waves, const size_t *n, dlm_err *e);
/* The session splice of the whole prompt. */
session_splice audio_prompt_splice(const audio_prompt *p);
void audio_prompt_free(audio_prompt *p);

#endif
