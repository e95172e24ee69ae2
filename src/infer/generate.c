#include "infer/generate.h"

#include <stdlib.h>
#include <string.h>

static int is_stop(const gen_opts *o, int32_t id)
{
    for (int i = 0; i < o->n_stops; i++)
        if (o->stops[i] == id) return 1;
    return 0;
}

int generate(session *s, tok *t, const int32_t *prompt, int n, const gen_opts *o, int32_t *out_ids, int *n_out,
             int32_t *stopped_by, dlm_err *e)
{
    *n_out = 0;
    *stopped_by = -1;
    int V = (int)tok_vocab_size(t);
    size_t ctx = (size_t)session_n_ctx(s);
    /* the model may have more rows than the tokenizer has tokens (padding) */
    int MV = session_vocab(s);
    if (V > MV) V = MV;
    float *logits = malloc((size_t)MV * sizeof(float));
    void *scratch = malloc(sample_scratch_bytes(MV));
    int32_t *hist = malloc(((size_t)n + (size_t)o->max_tokens + 1) * sizeof(int32_t));
    unsigned char *pend = malloc(4096);
    size_t npend = 0;
    int rc = -1;
    if (!logits || !scratch || !hist || !pend) { err_set(e, "MemoryError", "out of memory"); goto out; }
    memcpy(hist, prompt, (size_t)n * sizeof(int32_t));
    int nh = n;
    if (o->splice ? session_eval_splice(s, prompt, n, o->splice, logits, 0, e) : session_eval(s, prompt, n, logits, 0, e))
        goto out;
    for (int i = 0; i < o->max_tokens; i++) {
        if (o->cancel && *o->cancel) break;
        /* ids the tokenizer does not know (embedding padding) are never drawn */
        for (int k = V; k < MV; k++) logits[k] = -1e30f;
        int32_t id = sample_next(&o->sp, logits, MV, hist, nh, (uint64_t)nh, scratch);
        if (is_stop(o, id)) { *stopped_by = id; break; }
        if (out_ids) out_ids[*n_out] = id;
        (*n_out)++;
        hist[nh++] = id;
        if (o->emit && !tok_is_special(t, id)) {
            size_t bl;
            const char *b = tok_token_bytes(t, id, &bl);
            if (b && bl) {
                if (npend + bl > 4096) { o->emit(o->emit_ctx, (const char *)pend, npend); npend = 0; }
                if (bl > 4096) { o->emit(o->emit_ctx, b, bl); }
                else {
                    memcpy(pend + npend, b, bl);
                    npend += bl;
                    size_t ok = str_utf8_complete(pend, npend);
                    if (ok && o->emit(o->emit_ctx, (const char *)pend, ok)) { rc = 0; goto out; }
                    memmove(pend, pend + ok, npend - ok);
                    npend -= ok;
                }
            }
        }
        if ((size_t)session_n_past(s) >= ctx) break;
        if (session_eval(s, &id, 1, logits, 0, e)) goto out;
    }
    if (o->emit && npend) o->emit(o->emit_ctx, (const char *)pend, npend);
    rc = 0;
out:
    free(logits);
    free(scratch);
    free(hist);
    free(pend);
    return rc;
}

int gen_stop_ids(const tok *t, const char *const *stop_strings, int32_t *out, int cap)
{
    int n = 0;
#define ADD(id) do { int32_t _i = (id); int dup = 0; for (int _k = 0; _k < n; _k++) dup |= out[_k] == _i; \
                     if (_i >= 0 && !dup && n < cap) out[n++] = _i; } while (0)
    ADD(tok_eos(t));
    for (int i = 0; stop_strings && stop_strings[i]; i++) ADD(tok_find(t, stop_strings[i]));
    /* llama.cpp's end-of-generation texts, forced to stop whatever eos says */
    static const char *EOG[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<|endoftext|>", "<|eom_id|>",
                                "<|end_of_text|>", "<end_of_turn>", NULL};
    for (int i = 0; EOG[i]; i++) ADD(tok_find(t, EOG[i]));
#undef ADD
    return n;
}
