/* blob — the store's content-addressed media files (images now, audio later).
 *
 *   <store>/blobs/<sha[:2]>/<sha><ext>
 *
 * sha is the sha256 of the raw bytes (lowercase hex), ext the file's
 * lowercased suffix when it is one the original knows (.png .jpg .jpeg .webp
 * .gif .bmp .tiff .wav .flac .ogg), else ".bin" — the original's
 * dlm/store/blobs.py layout, so a store moves between the two. A blob is
 * written once (fs_write_atomic: temp, fsync, rename) and never changed;
 * putting the same bytes again writes nothing. */
#ifndef DLM_MEDIA_BLOB_H
#define DLM_MEDIA_BLOB_H

#include <stddef.h>

#include "util/err.h"

typedef struct blob_handle {
    char sha[65];
    char ext[8];       /* ".png", ..., ".bin" */
    size_t size;
    int written;       /* 1: this put wrote the file; 0: it was there */
} blob_handle;

/* The stored suffix for a file name (".png" for "a/B.PNG"; ".bin" for an
 * unknown or missing suffix). out: 8 bytes. */
void blob_ext(const char *name, char out[8]);

/* Store data under store/blobs/. */
int blob_put(const char *store, const void *data, size_t n, const char *ext, blob_handle *h, dlm_err *e);

/* Store the file src, streamed (never read whole), as want_sha: the sha the
 * caller computed when it checked the file; other bytes now (the file
 * changed) are refused and nothing is written. */
int blob_put_file(const char *store, const char *src, const char *want_sha, blob_handle *h, dlm_err *e);

/* The path of blob sha (any suffix) in store: 0 found, 1 missing, -1 error
 * (a sha that is not 64 lowercase hex). */
int blob_find(const char *store, const char *sha, char *out, size_t cap, dlm_err *e);

#endif
