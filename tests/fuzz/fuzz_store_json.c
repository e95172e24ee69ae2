/* libFuzzer target: the store's JSON files a user may edit by hand and
 * every command reads: manifest.json (manifest_load: JSON, then the
 * schema) and a pending.json of synth or preference (doc_grow_pending_load,
 * then each item as the section `apply` would write). The same bytes go to
 * both. A manifest that loads must take a new run record, save, and load
 * again. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include "doc/grow.h"
#include "store/store.h"
#include "util/str.h"
#include "fuzz_fileio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char p[4300], out[4300];
    dlm_err e;
    if (fuzz_put("manifest.json", data, size, p, sizeof p)) return 0;
    json_t *m = manifest_load(p, &e);
    if (m) {
        json_t *run = json_pack("{s:s, s:i, s:i}", "started_at", "2026-12-02T00:00:00Z", "adapter_version", 1, "seed", 42);
        if (run && manifest_add_run(m, run, &e) == 0) {
            snprintf(out, sizeof out, "%s/saved.json", fuzz_dir());
            if (manifest_save(out, m, &e)) abort();    /* what validated must save */
            json_t *again = manifest_load(out, &e);
            if (!again) abort();                       /* and load back */
            json_decref(again);
        }
        json_decref(run);
        json_decref(m);
    }
    static const char *const kinds[] = {"synth", "preference"};
    for (int k = 0; k < 2; k++) {
        json_t *j = doc_grow_pending_load(p, kinds[k], &e);
        if (!j) continue;
        size_t i;
        json_t *it;
        json_array_foreach(json_object_get(j, "items"), i, it) {
            doc_section s;
            strbuf body = STRBUF_INIT;
            doc_grow_item_section(it, kinds[k], &s, &body, &e);
            sb_free(&body);
        }
        json_decref(j);
    }
    return 0;
}
