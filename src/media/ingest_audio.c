/* ingest_audio — audio sections into the blob store and the waveform cache
 * (media/ingest.h). */
#include "media/ingest.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "media/audio.h"
#include "media/blob.h"
#include "util/fs.h"
#include "util/hash.h"

int media_count_audio(const dlm_doc *d) { return media_count(d, DOC_AUDIO); }

static int blank(const char *t)
{
    for (; t && *t; t++)
        if (!isspace((unsigned char)*t)) return 0;
    return 1;
}

/* Check one clip: transcript, file, decoding at the base's rate; its sha. */
static int check_one(const dlm_doc *d, const doc_section *s, const char *file, const media_audio_opts *o,
                     audio_wave *w, char sha[65], dlm_err *e)
{
    dlm_err ie;
    err_clear(&ie);
    if (blank(s->media_transcript)) {
        err_at(e, "AudioError", doc_path(d), s->line, 1, "audio '%s' has an empty transcript", s->media_path);
        return err_hint(e, "%s", s->media_src ? "write what is said into the clip's <stem>.txt sidecar"
                                              : "write what is said in transcript=\"...\"; the transcript is what trains");
    }
    if (!fs_is_file(file)) {
        err_at(e, "AudioError", doc_path(d), s->line, 1, "audio '%s' not found (looked for %s)", s->media_path, file);
        return err_hint(e, s->media_src ? "the file went away during the walk; train again"
                                        : "a fence's path is relative to the document's directory; put the clip there or fix the path");
    }
    if (audio_load(file, o->rate, o->max_seconds, o->auto_resample, w, &ie)) {
        err_at(e, !strcmp(ie.kind, "AudioSampleRateError") ? ie.kind : "AudioError", doc_path(d), s->line, 1,
               "audio '%s' (%s): %s", s->media_path, file, ie.msg);
        return err_hint(e, "%s", ie.hint[0] ? ie.hint : "re-export the clip as WAV or FLAC, or remove the section");
    }
    if (w->n < AUDIO_MIN_SAMPLES) {
        err_at(e, "AudioError", doc_path(d), s->line, 1,
               "audio '%s' (%s): %zu samples at %d Hz give no audio token (at least %d are needed)", s->media_path, file,
               w->n, o->rate, AUDIO_MIN_SAMPLES);
        audio_wave_free(w);
        return err_hint(e, "Qwen2-Audio's encoder needs 3 mel frames (20 ms); use a longer clip");
    }
    if (sha256_file_hex(file, sha, &ie)) {
        audio_wave_free(w);
        err_at(e, "AudioError", doc_path(d), s->line, 1, "audio '%s' (%s): %s", s->media_path, file, ie.msg);
        return -1;
    }
    return 0;
}

int media_ingest_audio(dlm_doc *d, const char *store, const media_audio_opts *o, media_ingest_stats *st, dlm_err *e)
{
    memset(st, 0, sizeof *st);
    int n = doc_nsections(d);
    char (*shas)[65] = calloc((size_t)n + 1, sizeof *shas);
    audio_wave *waves = calloc((size_t)n + 1, sizeof *waves);
    if (!shas || !waves) { free(shas); free(waves); return err_set(e, "MemoryError", "out of memory"); }
    int rc = -1;
    char file[PATH_MAX + 4096];
    /* every clip is checked first, so that one bad file leaves the store
     * untouched; each keeps only its truncated waveform (30 s: 1.9 MB) */
    for (int i = 0; i < n; i++) {
        const doc_section *s = doc_section_at(d, i);
        if (s->type != DOC_AUDIO) continue;
        media_section_file(d, s, file, sizeof file);
        if (check_one(d, s, file, o, &waves[i], shas[i], e)) goto out;
        st->clips++;
        int64_t sz = fs_file_size(file);
        st->bytes += sz > 0 ? (size_t)sz : 0;
    }
    int max_ms = (int)lround(o->max_seconds * 1000);
    for (int i = 0; i < n; i++) {
        const doc_section *s = doc_section_at(d, i);
        if (s->type != DOC_AUDIO) continue;
        if (store) {
            media_section_file(d, s, file, sizeof file);
            blob_handle h;
            dlm_err ie;
            err_clear(&ie);
            if (blob_put_file(store, file, shas[i], &h, &ie)) {
                err_at(e, "AudioError", doc_path(d), s->line, 1, "audio '%s' (%s): %s", s->media_path, file, ie.msg);
                if (ie.hint[0]) err_hint(e, "%s", ie.hint);
                goto out;
            }
            st->written += h.written;
            char cp[4400];
            if (audio_cache_path(store, shas[i], o->rate, max_ms, o->auto_resample, cp, sizeof cp, e)) goto out;
            if (!fs_is_file(cp) && audio_cache_put(cp, waves[i].x, waves[i].n, e)) goto out;
        }
        doc_set_media_blob(d, i, shas[i]);
    }
    rc = 0;
out:
    for (int i = 0; i < n; i++) audio_wave_free(&waves[i]);
    free(waves);
    free(shas);
    return rc;
}
