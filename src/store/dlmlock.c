#include "store/dlmlock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern/cpu.h"
#include "util/fs.h"
#include "util/json.h"
#include "util/log.h"
#include "util/str.h"
#include "util/timeutil.h"
#include "version.h"

int dlmlock_write(const char *store, const lock_facts *f, dlm_err *e)
{
    char path[4200], now[24];
    snprintf(path, sizeof path, "%s/dlm.lock", store);
    time_iso_utc(time_now(), now, sizeof now);
    /* the original's DlmLock (extra="forbid"): dlm's own facts (the base
     * key, the ISA, the precision) go into its free-form determinism_flags */
    json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:{s:s, s:s}, s:s, s:I, s:{s:s, s:s, s:s}, s:s, s:n, s:I, s:i}",
                          "lock_version", 1, "created_at", now, "dlm_id", f->dlm_id, "dlm_sha256", f->dlm_sha256,
                          "base_model_revision", f->base_model_revision,
                          "base_model_sha256", f->base_model_sha256, "pinned_versions", "dlm", DLM_VERSION,
                          "dlm_commit", DLM_COMMIT, "hardware_tier", "cpu", "seed", (json_int_t)f->seed,
                          "determinism_flags", "dlm_base_model", f->base_model, "dlm_isa_class", f->isa,
                          "dlm_precision", f->precision ? f->precision : "fp32", "determinism_class",
                          f->determinism_class, "license_acceptance", "last_run_id", (json_int_t)f->last_run_id,
                          "world_size", f->world_size > 1 ? f->world_size : 1);
    if (!o) return err_set(e, "MemoryError", "out of memory");
    int rc = json_save_file(path, o, e);
    json_decref(o);
    return rc;
}

static int major_of(const char *v) { return v ? atoi(v) : -1; }

int dlmlock_check(const char *store, const char *doc_path, const lock_facts *f, lock_mode mode, dlm_err *e)
{
    if (mode == LOCK_UPDATE || mode == LOCK_IGNORE) return 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/dlm.lock", store);
    if (!fs_exists(path)) return 0;
    json_t *o = json_load_path(path, 1 << 20, e);
    if (!o || !json_is_object(o)) {
        json_decref(o);
        err_set(e, "LockValidationError", "%s: dlm.lock is corrupt", path);
        return err_hint(e, "rewrite it with 'dlm train %s --update-lock'", doc_path);
    }
    strbuf errs = STRBUF_INIT, warns = STRBUF_INIT;
    struct { const char *key, *now; int error; } cmp[] = {
        {"base_model", f->base_model, 1},
        {"base_model_revision", f->base_model_revision, 1},
        {"base_model_sha256", f->base_model_sha256, 1},
        {"isa_class", f->isa, 0},
        {"determinism_class", f->determinism_class, 0},
        {"precision", f->precision ? f->precision : "fp32", 0},   /* a lock from before the key: unchecked */
    };
    for (size_t i = 0; i < sizeof cmp / sizeof cmp[0]; i++) {
        /* dlm before wrote base_model, isa_class and precision at the top */
        char fk[64];
        snprintf(fk, sizeof fk, "dlm_%s", cmp[i].key);
        const char *was = jget_str(o, cmp[i].key);
        if (!was) was = jget_str(json_object_get(o, "determinism_flags"), fk);
        if (!was || !cmp[i].now || !strcmp(was, cmp[i].now)) continue;
        strbuf *sb = cmp[i].error ? &errs : &warns;
        sb_printf(sb, "%s%s changed ('%s' -> '%s')", sb->len ? "; " : "", cmp[i].key, was, cmp[i].now);
    }
    long long seed;
    if (!jget_int(o, "seed", &seed) && seed != f->seed)
        sb_printf(&warns, "%sseed changed (%lld -> %lld)", warns.len ? "; " : "", seed, (long long)f->seed);
    json_t *pv = json_object_get(o, "pinned_versions");
    const char *ver = jget_str(pv, "dlm"), *commit = jget_str(pv, "dlm_commit");
    if (ver && major_of(ver) != major_of(DLM_VERSION))
        sb_printf(&errs, "%sdlm major version changed (%s -> %s)", errs.len ? "; " : "", ver, DLM_VERSION);
    else if ((ver && strcmp(ver, DLM_VERSION)) || (commit && strcmp(commit, DLM_COMMIT)))
        sb_printf(&warns, "%sdlm version changed (%s %s -> %s %s)", warns.len ? "; " : "", ver ? ver : "?",
                  commit ? commit : "?", DLM_VERSION, DLM_COMMIT);
    json_decref(o);
    int rc = 0;
    if (warns.len && mode != LOCK_STRICT) log_warn("lock: %s (bit-identical results are not guaranteed)", warns.buf);
    if (errs.len || (warns.len && mode == LOCK_STRICT)) {
        if (errs.len && warns.len && mode == LOCK_STRICT) sb_printf(&errs, "; %s", warns.buf);
        err_set(e, "LockValidationError", "lock: %s", errs.len ? errs.buf : warns.buf);
        err_hint(e, "if the change is intended: 'dlm train %s --update-lock' (or --ignore-lock for this run only)",
                 doc_path);
        rc = -1;
    }
    sb_free(&errs);
    sb_free(&warns);
    return rc;
}
