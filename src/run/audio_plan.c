/* audio_plan — an audio document's clips in the plan (run/prepare.h). */
#include "run/prepare.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "media/audio.h"
#include "media/ingest.h"
#include "media/mel.h"
#include "vision/qwen2audio.h"

int prep_audio_counts(const dlm_doc *doc, const char *model_path, int auto_resample, prep_audio *a, dlm_err *e)
{
    memset(a, 0, sizeof *a);
    char p[PATH_MAX + 64];
    whisper_fe fe;
    qwen2audio_cfg qc;
    snprintf(p, sizeof p, "%s/preprocessor_config.json", model_path);
    if (whisper_fe_load(p, &fe, e)) return -1;
    snprintf(p, sizeof p, "%s/config.json", model_path);
    if (qwen2audio_cfg_load(p, &qc, e)) { whisper_fe_free(&fe); return -1; }
    a->width = qc.text_hidden;
    int n = doc_nsections(doc), rc = 0;
    a->ntok = calloc((size_t)n + 1, sizeof *a->ntok);
    if (!a->ntok) rc = err_set(e, "MemoryError", "out of memory");
    char file[PATH_MAX + 4096];
    for (int i = 0; i < n && !rc; i++) {
        const doc_section *s = doc_section_at(doc, i);
        if (s->type != DOC_AUDIO) continue;
        media_section_file(doc, s, file, sizeof file);
        audio_wave w;
        dlm_err ie;
        err_clear(&ie);
        if (audio_load(file, fe.rate, AUDIO_MAX_SECONDS, auto_resample, &w, &ie)) {
            err_at(e, ie.kind[0] ? ie.kind : "AudioError", doc_path(doc), s->line, 1, "audio '%s' (%s): %s",
                   s->media_path, file, ie.msg);
            if (ie.hint[0]) err_hint(e, "%s", ie.hint);
            rc = -1;
            break;
        }
        size_t f = (w.n + (size_t)fe.hop - 1) / (size_t)fe.hop;
        int t = qwen2audio_out_len(f > (size_t)fe.frames ? fe.frames : (int)f);
        a->ntok[i] = t;
        a->clips++;
        a->tokens += t;
        if (t > a->max_tokens) a->max_tokens = t;
        a->wave_cache_bytes += (uint64_t)w.n * 4 + 250;
        a->feat_cache_bytes += 16 + (uint64_t)t * (uint64_t)a->width * 4;
        audio_wave_free(&w);
    }
    whisper_fe_free(&fe);
    if (rc) prep_audio_free(a);
    return rc;
}

void prep_audio_free(prep_audio *a)
{
    free(a->ntok);
    memset(a, 0, sizeof *a);
}

int prep_audio_plan(const char *model_path, int tokens, plan_in *in, dlm_err *e)
{
    char p[PATH_MAX + 64];
    qwen2audio_cfg qc;
    snprintf(p, sizeof p, "%s/config.json", model_path);
    if (qwen2audio_cfg_load(p, &qc, e)) return -1;
    qwen2audio_plan_bytes(&qc, &in->audio_encoder_bytes, &in->audio_scratch_bytes);
    in->audio_feature_bytes = (uint64_t)tokens * (uint64_t)qc.text_hidden * 4;
    return 0;
}
