/* ingest — image sections into the blob store (media/ingest.h). */
#include "media/ingest.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "media/blob.h"
#include "media/image.h"
#include "util/fs.h"
#include "util/hash.h"

int media_count(const dlm_doc *d, doc_section_type type)
{
    int n = 0;
    for (int i = 0; i < doc_nsections(d); i++) n += doc_section_at(d, i)->type == type;
    return n;
}

int media_count_images(const dlm_doc *d) { return media_count(d, DOC_IMAGE); }

void media_section_file(const dlm_doc *d, const doc_section *s, char *out, size_t cap)
{
    if (s->media_src) { snprintf(out, cap, "%s", s->media_src); return; }
    if (s->media_path[0] == '/') { snprintf(out, cap, "%s", s->media_path); return; }
    char dir[PATH_MAX];
    fs_dirname(dir, sizeof dir, doc_path(d));
    snprintf(out, cap, "%s/%s", dir, s->media_path);
}

/* Read one image and check it decodes; fills sha. */
static int load_one(const dlm_doc *d, const doc_section *s, const char *file, char **buf, size_t *len, char sha[65],
                    dlm_err *e)
{
    dlm_err ie;
    if (!fs_is_file(file)) {
        err_at(e, "ImageError", doc_path(d), s->line, 1, "image '%s' not found (looked for %s)", s->media_path, file);
        return err_hint(e, s->media_src ? "the file went away during the walk; train again"
                                        : "a fence's path is relative to the document's directory; put the image there or fix the path");
    }
    if (fs_read_all(file, DOC_MAX_BYTES, buf, len, &ie)) {
        err_at(e, "ImageError", doc_path(d), s->line, 1, "image '%s' (%s): %s", s->media_path, file, ie.msg);
        return err_hint(e, "images are read whole, up to %u MiB", DOC_MAX_BYTES >> 20);
    }
    image_rgb im;
    err_clear(&ie);
    if (image_decode((const uint8_t *)*buf, *len, &im, &ie)) {
        free(*buf);
        *buf = NULL;
        err_at(e, "ImageError", doc_path(d), s->line, 1, "image '%s' (%s): %s", s->media_path, file, ie.msg);
        return err_hint(e, "%s", ie.hint[0] ? ie.hint : "re-export the image from an editor, or remove the section");
    }
    image_free(&im);
    sha256_hex(*buf, *len, sha);
    return 0;
}

int media_ingest_images(dlm_doc *d, const char *store, media_ingest_stats *st, dlm_err *e)
{
    memset(st, 0, sizeof *st);
    int n = doc_nsections(d);
    char (*shas)[65] = calloc((size_t)n + 1, sizeof *shas);
    if (!shas) return err_set(e, "MemoryError", "out of memory");
    int rc = -1;
    char file[PATH_MAX + 4096];
    /* first every image is read and decoded, so that one bad file leaves the store untouched */
    for (int i = 0; i < n; i++) {
        const doc_section *s = doc_section_at(d, i);
        if (s->type != DOC_IMAGE) continue;
        media_section_file(d, s, file, sizeof file);
        char *buf = NULL;
        size_t len = 0;
        if (load_one(d, s, file, &buf, &len, shas[i], e)) goto out;
        free(buf);
        st->images++;
        st->bytes += len;
    }
    for (int i = 0; i < n; i++) {
        const doc_section *s = doc_section_at(d, i);
        if (s->type != DOC_IMAGE) continue;
        if (store) {
            media_section_file(d, s, file, sizeof file);
            char *buf = NULL, sha[65];
            size_t len = 0;
            dlm_err ie;
            if (fs_read_all(file, DOC_MAX_BYTES, &buf, &len, &ie)) {
                err_at(e, "ImageError", doc_path(d), s->line, 1, "image '%s' (%s): %s", s->media_path, file, ie.msg);
                goto out;
            }
            sha256_hex(buf, len, sha);
            if (strcmp(sha, shas[i])) {   /* the bytes stored must be the bytes decoded */
                free(buf);
                err_at(e, "ImageError", doc_path(d), s->line, 1, "image '%s' (%s) changed while dlm read it", s->media_path, file);
                err_hint(e, "train again once the file is written");
                goto out;
            }
            blob_handle h;
            int r = blob_put(store, buf, len, file, &h, e);
            free(buf);
            if (r) goto out;
            st->written += h.written;
        }
        doc_set_media_blob(d, i, shas[i]);
    }
    rc = 0;
out:
    free(shas);
    return rc;
}
