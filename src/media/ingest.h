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
} media_ingest_stats;

/* The number of image sections in d. */
int media_count_images(const dlm_doc *d);

/* store NULL: check only (read, decode, hash; set the sections' blob sha and
 * id), write nothing. */
int media_ingest_images(dlm_doc *d, const char *store, media_ingest_stats *st, dlm_err *e);

#endif
