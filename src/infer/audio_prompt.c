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

int audio_prompt_build(tok *t, const audio_feat *af, const char *text, const size_t *n, int n_clips,
                       audio_prompt *out, dlm_err *e)
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
    for (int i = 0; i < n_clips; i++)
        if (audio_feat_tokens(af, n[i]) < 1)
            return err_set(e, "AudioError", "clip %d: %zu samples give no audio token (at least %d are needed)",
                           i + 1, n[i], 2 * af->fe.hop + 1);
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
    for (int i = 0; i < n_clips; i++) out->n_emb += audio_feat_tokens(af, n[i]);
    size_t total = raw.n + (size_t)out->n_emb;
    out->ids.v = malloc((total + 1) * sizeof *out->ids.v);
    out->ids.cap = total + 1;
    out->embed_row = malloc((total + 1) * sizeof *out->embed_row);
    if (!out->ids.v || !out->embed_row) { rc = err_set(e, "MemoryError", "out of memory"); goto out; }
    int clip = 0, row = 0;
    for (size_t i = 0; i < raw.n; i++) {
        if (raw.v[i] != af->audio_token) {
            out->embed_row[out->ids.n] = -1;
            out->ids.v[out->ids.n++] = raw.v[i];
            continue;
        }
        if (clip >= n_clips) { rc = err_set(e, "PromptError", "more %s tokens than clips", PLACEHOLDER); goto out; }
        int k = audio_feat_tokens(af, n[clip++]);
        for (int j = 0; j < k; j++) {
            out->embed_row[out->ids.n] = row + j;
            out->ids.v[out->ids.n++] = af->audio_token;
        }
        row += k;
    }
    if (clip != n_clips) rc = err_set(e, "PromptError", "%d %s token(s) for %d clip(s)", clip, PLACEHOLDER, n_clips);
    out->n_clips = n_clips;
out:
    tok_ids_free(&raw);
    if (rc) audio_prompt_free(out);
    return rc;
}

int audio_prompt_embed(audio_prompt *p, const audio_feat *af, const float *const *waves, const size_t *n, dlm_err *e)
{
    free(p->emb);
    p->emb = malloc(((size_t)p->n_emb * af->width + 1) * sizeof *p->emb);
    if (!p->emb) return err_set(e, "MemoryError", "out of memory");
    int row = 0;
    for (int i = 0; i < p->n_clips; i++) {
        float *x = NULL;
        int k = 0;
        if (audio_feat_embed(af, waves[i], n[i], &x, &k, e)) return -1;
        if (row + k > p->n_emb) { free(x); return err_set(e, "PromptError", "clip %d: more rows than counted", i + 1); }
        memcpy(p->emb + (size_t)row * af->width, x, (size_t)k * af->width * sizeof *x);
        free(x);
        row += k;
    }
    return row == p->n_emb ? 0 : err_set(e, "PromptError", "the clips gave %d rows, %d were counted", row, p->n_emb);
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
