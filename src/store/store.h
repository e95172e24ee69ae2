/* store — where a document's training state lives (docs/reference/original-spec.md §2).
 *
 *   $DLM_HOME/store/<dlm_id>/
 *     manifest.json              the store's narrative (runs, exports, base)
 *     .lock                      exclusive writer lock ("PID\nhost\nepoch\ncommand\n")
 *     adapter/current.txt        "adapter/versions/v0003\n"
 *     adapter/versions/vNNNN/    one directory per committed adapter
 *     logs/  exports/
 *
 * Every file write is atomic (fs_write_atomic: temp + fsync + rename +
 * fsync of the directory). Every command that writes a store holds its
 * lock for the whole write. The kernel releases the lock of a process that
 * dies; the next command takes it over and says so. Only where the
 * filesystem has no kernel locks is a dead holder's lock reported with the
 * command that clears it.
 *
 * Test hook: with DLM_TEST_HOLD_LOCK_MS=<ms> in the environment, a command
 * that took a store lock sleeps that long before releasing it, so tests can
 * start a second writer while the first one holds the store
 * (store_lock_test_hooks). */
#ifndef DLM_STORE_H
#define DLM_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "util/err.h"

#define STORE_MANIFEST_SCHEMA 1

/* ---- paths ------------------------------------------------------------------ */

/* <home>/store/<dlm_id> into out (cap >= 4096 recommended). */
int store_dir(const char *home, const char *dlm_id, char *out, size_t cap, dlm_err *e);
/* <store>/<rel> into out. */
int store_path(const char *store, const char *rel, char *out, size_t cap, dlm_err *e);
/* 1 when <store>/manifest.json exists. */
int store_exists(const char *store);

/* mkdir -p the skeleton: adapter/versions, logs, exports. */
int store_create_skeleton(const char *store, dlm_err *e);

/* ---- manifest (docs/reference/original-spec.md §2.3) ----------------------------------------------------
 * Held as a validated jansson object so later modules can add runs and
 * exports without this header knowing their every field. Saved with the
 * Python-compatible writer (sorted keys, indent 2, trailing LF). */

typedef struct store_license {
    const char *accepted_at;      /* NULL = now */
    const char *license_url;
    const char *license_spdx;
    const char *via;              /* cli_flag | interactive | frontmatter */
} store_license;

/* A fresh manifest (schema_version 1, created_at = updated_at = now). */
json_t *manifest_new(const char *dlm_id, const char *base_model, const char *base_revision,
                     const char *source_path, const store_license *license);
/* Load + validate. Errors: ManifestCorruptError "<path>: manifest is
 * corrupt: <reason>", ManifestVersionError for another schema_version. */
json_t *manifest_load(const char *path, dlm_err *e);
/* Validate a manifest object (as manifest_load does). */
int manifest_validate(const char *path, const json_t *m, dlm_err *e);
/* Set updated_at = now and write atomically. */
int manifest_save(const char *path, json_t *m, dlm_err *e);
/* Append a training run / export record (validated); run_id is assigned
 * (max existing + 1) when the record has none. */
int manifest_add_run(json_t *m, json_t *run, dlm_err *e);
int manifest_add_export(json_t *m, json_t *exp, dlm_err *e);
int64_t manifest_next_run_id(const json_t *m);
/* Which document owns the store (the manifest's source_path), checked by
 * every command that writes to a store for a document (train, export): the
 * same file (by real path) passes; no owner yet, or an owner that moved
 * (its old path is gone or holds another dlm_id now) makes doc_path the
 * owner (*changed = 1: save the manifest; note says so when it moved); an
 * owner that still exists with this dlm_id is a copy: SharedStoreError with
 * a hint naming `dlm init --from` and --same-store, unless same_store (then
 * a note). note may be NULL. */
int store_source_check(json_t *m, const char *doc_path, const char *dlm_id, int same_store, int *changed, char *note,
                       size_t cap, dlm_err *e);
/* The same for a command without --same-store (can_share 0: the hint
 * names dlm init --from only). */
int store_source_check_as(json_t *m, const char *doc_path, const char *dlm_id, int same_store, int can_share,
                          int *changed, char *note, size_t cap, dlm_err *e);

/* ---- lock (docs/reference/original-spec.md §2.4) -------------------------------------------------------- */

typedef struct store_lock_info {
    long pid;
    char host[256];
    double since;                 /* epoch seconds */
    char command[64];             /* "" when the holder did not say */
    int kernel;                   /* the holder took a kernel lock ("kernel-lock" line) */
    int alive;                    /* 1 alive, 0 dead, -1 unknown (other host, no kernel lock) */
} store_lock_info;

typedef struct store_lock {
    char path[4096];
    int held;
    int fd;                       /* the kernel-locked descriptor, -1 without */
    int kernel;                   /* 1 kernel lock, 0 exclusive-create fallback */
    store_lock_info prev;         /* a holder that died before us (prev.pid 0: none) */
} store_lock;

/* Take <store>/.lock for `command` ("init", "train", ...). Held by a live
 * process → LockHeldError "<path>: already locked by PID n (dlm <command>,
 * since <time>)". Left by a dead process → taken over, lk->prev says who
 * (and a warning is logged). On a filesystem without kernel locks, a dead
 * holder → StaleLockError with the `rm` hint. */
int store_lock_acquire(const char *store, const char *command, store_lock *lk, dlm_err *e);
/* Parse lock-file bytes (untrusted; any length): 0 ok, -1 malformed. */
int store_lock_parse(const char *buf, size_t len, store_lock_info *info);
/* Test hooks, set by the command layer from DLM_TEST_HOLD_LOCK_MS (sleep
 * that long before releasing) and DLM_TEST_NO_KERNEL_LOCK (behave as on a
 * filesystem that refuses kernel locks). */
void store_lock_test_hooks(int hold_ms, int no_kernel_lock);
/* Release (only if it is still ours). Honours the hold test hook. */
void store_lock_release(store_lock *lk);
/* Remove temp files and folders under dir (4 levels deep) whose writer
 * is dead: names "<x>.tmp.<pid>.*" and "<x>.tmp-<pid>" of a pid that no
 * longer exists. Returns how many went. Run on a lock takeover (and by
 * export for its staging folders). */
int store_sweep_temp(const char *dir);
/* Read the lock file: 1 present (info filled), 0 absent, -1 unreadable. */
int store_lock_read(const char *store, store_lock_info *info);

/* ---- adapter versions --------------------------------------------------------- */

/* Sorted version numbers found under adapter/versions (names vNNNN only;
 * "-rejected" and other names are ignored). Caller frees *out. */
int store_versions(const char *store, int **out, dlm_err *e);
/* Next version number: max + 1 (1 for none). */
int store_next_version(const char *store, dlm_err *e);
/* The version adapter/current.txt points at (0 = none / missing). */
int store_current_version(const char *store, dlm_err *e);
/* Atomically point adapter/current.txt at version v. */
int store_set_current(const char *store, int v, dlm_err *e);
/* "v0003" into out (cap >= 16). */
void store_version_name(int v, char *out, size_t cap);

/* Named adapters (training.adapters, docs/reference/original-spec.md §3.9):
 * the same under adapter/<name>/ — versions/vNNNN, current.txt
 * ("adapter/<name>/versions/v0001\n"), checkpoints/, replay/, dlm.lock.
 * name NULL = the flat tree adapter/ (the calls above). */
int store_adapter_dir(const char *store, const char *name, char *out, size_t cap, dlm_err *e);
int store_versions_of(const char *store, const char *name, int **out, dlm_err *e);
int store_next_version_of(const char *store, const char *name, dlm_err *e);
int store_current_version_of(const char *store, const char *name, dlm_err *e);
int store_set_current_of(const char *store, const char *name, int v, dlm_err *e);

/* Bytes of every regular file in the store. */
uint64_t store_size(const char *store);

#endif
