/* srcview — what `training.sources` will train: the per-file verdict list
 * shared by `dlm show PATH --sources` and `dlm train PATH --dry-run`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cmd.h"
#include "doc/sources.h"
#include "util/fs.h"
#include "weights/base.h"
#include "weights/registry.h"
#include "util/json.h"
#include "util/str.h"

int srcview_print(const char *doc_path, const char *shown, int as_json, dlm_err *e)
{
    dlm_doc *d = doc_load(doc_path, e);
    if (!d) return -1;
    /* what train keeps: a vision-language base keeps image files, an
     * audio-language base clips with their transcript (doc/sources.h) */
    src_opts so = {0};
    so.images = base_vl_kind(doc_fm(d)->base_model) != 0;
    so.audio = base_is_audio(doc_fm(d)->base_model);
    src_report r;
    int rc = src_expand(doc_path, doc_fm(d), &so, NULL, NULL, &r, e);
    if (rc) { src_report_free(&r); doc_free(d); return -1; }
    if (shown) {   /* a dry run's temp scaffold is listed under the name a real run writes */
        char tmp_rel[600], real_rel[600];
        snprintf(tmp_rel, sizeof tmp_rel, ".dlm/%s", fs_basename(doc_path));
        snprintf(real_rel, sizeof real_rel, ".dlm/%s", fs_basename(shown));
        for (int i = 0; i < r.n_files; i++)
            if (!strcmp(r.files[i].relpath, tmp_rel)) {
                char *c = strdup(real_rel);
                if (c) { free(r.files[i].relpath); r.files[i].relpath = c; }
            }
        doc_path = shown;
    }
    if (as_json) {
        json_t *o = src_report_json(&r, 1);
        json_object_set_new(o, "path", json_string(doc_path));
        json_object_set_new(o, "policy", json_string(doc_sources_policy_names[doc_fm(d)->training.sources_policy]));
        cmd_print_json(o);
    } else if (!r.n_dirs) {
        printf("%s: no training.sources directives\n", doc_path);
    } else {
        for (int di = 0; di < r.n_dirs; di++) {
            const src_directive_stats *s = &r.dirs[di];
            char hs[32];
            printf("directive %d (%s:%d): %s -> %s\n", di + 1, doc_path, s->line, s->path, s->root);
            for (int i = 0; i < r.n_files; i++) {
                const src_file *f = &r.files[i];
                if (f->directive != di) continue;
                if (f->verdict == SRC_KEPT)
                    printf("  kept     %10lld  %s  %s\n", (long long)f->size, f->id, f->relpath);
                else
                    printf("  skip     %-14s %s  (%s)\n", src_verdict_name(f->verdict), f->relpath,
                           f->reason ? f->reason : "");
            }
            printf("  = %d file(s), %s kept", s->kept, str_human_size((unsigned long long)s->kept_bytes, hs, sizeof hs));
            for (int v = 1; v <= SRC_UNREADABLE; v++)
                if (s->skipped[v]) printf("; %d %s", s->skipped[v], src_verdict_name((src_verdict)v));
            printf("\n");
        }
        char hs[32];
        printf("total: %d file(s) seen, %d kept (%s), %d skipped\n", r.n_files, r.kept,
               str_human_size((unsigned long long)r.kept_bytes, hs, sizeof hs), r.skipped);
    }
    src_report_free(&r);
    doc_free(d);
    return 0;
}
