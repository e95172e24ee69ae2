/* ingest — a document's image sections into its store's blob store.
 *
 * Every DOC_IMAGE section, whether a `::image path=... alt=...::` fence
 * (path relative to the document's directory, or absolute) or an image file
 * reached by training.sources (doc_expand_sources_images), is read, decoded
 * (media/image.h: the pixel bound, truncated and corrupt files) and hashed;
 * only when every one of them is good are the bytes written, each to
 * <store>/blobs/<sha[:2]>/<sha><ext> (media/blob.h), and the section gets
 * its blob sha and the original's id sha256("image\n" path "\n" sha)[:16].
 * An error names the document line (the fence, or the directive) and the
 * file, and leaves the store as it was. */
#ifndef DLM_MEDIA_INGEST_H
#define DLM_MEDIA_INGEST_H

#include <stddef.h>

#include "doc/doc.h"

typedef struct media_ingest_stats {
    int images;         /* image sections */
    int written;        /* blobs this call wrote (the rest were stored before) */
    size_t bytes;       /* their bytes, all images */
    int clips;          /* audio sections (media_ingest_audio) */
} media_ingest_stats;

/* The number of sections of one type in d (DOC_IMAGE, DOC_AUDIO). */
int media_count(const dlm_doc *d, doc_section_type type);
/* The number of image sections in d. */
int media_count_images(const dlm_doc *d);
/* The file behind a media section: media_src for one reached by
 * training.sources, else the fence's path against the document's folder. */
void media_section_file(const dlm_doc *d, const doc_section *s, char *out, size_t cap);

/* store NULL: check only (read, decode, hash; set the sections' blob sha and
 * id), write nothing. */
int media_ingest_images(dlm_doc *d, const char *store, media_ingest_stats *st, dlm_err *e);

/* ---- audio (media/ingest_audio.c) ----------------------------------------
 *
 * Every DOC_AUDIO section (a `::audio path=... transcript=...::` fence, or a
 * .wav/.flac/.ogg file with its <stem>.txt sidecar reached by
 * training.sources) must have a transcript and decode (media/audio.h) at
 * the base's rate, or be resampled when auto_resample is set; then, only
 * when every clip is good, its bytes are streamed into the blob store, its
 * truncated waveform written to the store's audio-waveform-cache, and the
 * section gets the original's id sha256("audio\n" path "\n" sha)[:16].
 * Errors name the document line and the file and write nothing. */
typedef struct media_audio_opts {
    int rate;               /* the base's: 16000 */
    double max_seconds;     /* 30 */
    int auto_resample;      /* training.audio.auto_resample */
} media_audio_opts;

int media_count_audio(const dlm_doc *d);
/* store NULL: check only. */
int media_ingest_audio(dlm_doc *d, const char *store, const media_audio_opts *o, media_ingest_stats *st, dlm_err *e);

#endif
