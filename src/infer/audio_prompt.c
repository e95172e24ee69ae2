/* audio_prompt — a prompt with audio clips (infer/audio_prompt.h). */
#include "infer/audio_prompt.h"

#include <stdlib.h>
#include <string.h>

#include "util/str.h"

#define PLACEHOLDER "<|AUDIO|>"

static int count_ph(const char *s)
{
    int k = 0;
    for (const char *p = strstr(s, PLACEHOLDER); p; p = strstr(p + 1, PLACEHOLDER)) k++;
    return k;
}

int audio_prompt_build(tok *t, const audio_feat *af, const char *text, const float *const *waves, const size_t *n,
                       int n_clips, audio_prompt *out, dlm_err *e)
{
    memset(out, 0, sizeof *out);
    int have = count_ph(text);
    if (have && have != n_clips) {
        err_set(e, "PromptError", "the prompt holds %d %s placeholder(s) for %d audio clip(s)", have, PLACEHOLDER,
                n_clips);
        return err_hint(e, "write one %s per clip where it belongs, or none (they go in front)", PLACEHOLDER);
    }
    if (tok_find(t, PLACEHOLDER) != af->audio_token) {
        err_set(e, "PromptError", "the base's tokenizer has no %s token with the config's id %d", PLACEHOLDER,
                af->audio_token);
        return -1;
    }
    strbuf sb = STRBUF_INIT;
    if (!have) {
        for (int i = 0; i < n_clips; i++) sb_append(&sb, PLACEHOLDER, strlen(PLACEHOLDER));
        if (*text) sb_append(&sb, "\n", 1);
    }
    sb_append(&sb, text, strlen(text));
    tok_ids raw = {0};
    int rc = tok_encode_append(t, sb_str(&sb), sb.len, TOK_PARSE_SPECIAL | TOK_ADD_SPECIAL, &raw, e);
    sb_free(&sb);
    if (rc) return -1;
    int *ntok = calloc((size_t)n_clips + 1, sizeof *ntok);
    float **rows = calloc((size_t)n_clips + 1, sizeof *rows);
    if (!ntok || !rows) { rc = err_set(e, "MemoryError", "out of memory"); goto out; }
    for (int i = 0; i < n_clips && !rc; i++) {
        rc = audio_feat_embed(af, waves[i], n[i], &rows[i], &ntok[i], e);
        out->n_emb += ntok[i];
    }
    if (rc) goto out;
    size_t total = raw.n - (size_t)n_clips + (size_t)out->n_emb;
    out->ids.v = malloc((total + 1) * sizeof *out->ids.v);
    out->ids.cap = total + 1;
    out->embed_row = malloc((total + 1) * sizeof *out->embed_row);
    out->emb = malloc(((size_t)out->n_emb * af->width + 1) * sizeof *out->emb);
    if (!out->ids.v || !out->embed_row || !out->emb) { rc = err_set(e, "MemoryError", "out of memory"); goto out; }
    int clip = 0, row = 0;
    for (size_t i = 0; i < raw.n; i++) {
        if (raw.v[i] != af->audio_token) {
            out->embed_row[out->ids.n] = -1;
            out->ids.v[out->ids.n++] = raw.v[i];
            continue;
        }
        if (clip >= n_clips) { rc = err_set(e, "PromptError", "more %s tokens than clips", PLACEHOLDER); goto out; }
        memcpy(out->emb + (size_t)row * af->width, rows[clip], (size_t)ntok[clip] * af->width * sizeof *out->emb);
        for (int k = 0; k < ntok[clip]; k++) {
            out->embed_row[out->ids.n] = row + k;
            out->ids.v[out->ids.n++] = af->audio_token;
        }
        row += ntok[clip++];
    }
    if (clip != n_clips) rc = err_set(e, "PromptError", "%d %s token(s) for %d clip(s)", clip, PLACEHOLDER, n_clips);
    out->n_clips = n_clips;
out:
    for (int i = 0; rows && i < n_clips; i++) free(rows[i]);
    free(rows);
    free(ntok);
    tok_ids_free(&raw);
    if (rc) audio_prompt_free(out);
    return rc;
}

session_splice audio_prompt_splice(const audio_prompt *p)
{
    return (session_splice){.embeds = p->emb, .n_embeds = p->n_emb, .embed_row = p->embed_row};
}

void audio_prompt_free(audio_prompt *p)
{
    tok_ids_free(&p->ids);
    free(p->embed_row);
    free(p->emb);
    memset(p, 0, sizeof *p);
}
