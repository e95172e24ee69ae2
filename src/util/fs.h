/* fs — files the crash-safe way.
 *
 * Every file dlm writes goes through fs_write_atomic: write a sibling
 * "<name>.tmp.<pid>.<8 hex>", fsync it, rename it over the target, fsync the
 * directory. A crash leaves either the old file or the new one, never half.
 *
 * Fault injection for tests: when $DLM_FAIL_WRITE is set and is a substring
 * of the target path, the write fails (EIO) after the temp file is written
 * and before the rename, exactly where a full disk would bite. */
#ifndef DLM_FS_H
#define DLM_FS_H

#include <stddef.h>
#include <stdint.h>
#include "util/err.h"

/* Read a whole file (NUL-terminated for convenience; *len excludes it).
 * Files larger than max_bytes are refused. Caller frees *out. */
int fs_read_all(const char *path, size_t max_bytes, char **out, size_t *len, dlm_err *e);

/* Atomically replace path with data. mode is the file mode (0644 typical). */
int fs_write_atomic(const char *path, const void *data, size_t len, int mode, dlm_err *e);

/* mkdir -p (mode 0755). */
int fs_mkdir_p(const char *path, dlm_err *e);
/* fsync a directory (after a rename inside it). */
int fs_fsync_dir(const char *dir, dlm_err *e);
/* fsync a file by path. */
int fs_fsync_path(const char *path, dlm_err *e);
/* rm -rf; missing path is not an error. */
int fs_remove_tree(const char *path, dlm_err *e);
/* Remove a tree so that a kill at any moment leaves it whole or gone: it is
 * first renamed to ".<name>.tmp-<pid>" beside itself (a temp name that
 * store_sweep_temp removes once this process is dead), then removed. */
int fs_discard_tree(const char *path, dlm_err *e);
/* 1 when no process has this pid (kill(pid, 0) says ESRCH): what a temp
 * name or lock record left by it may be swept for. 0 for pid <= 0 and for
 * this process. */
int fs_pid_gone(long pid);
/* Copy a file atomically (dst replaced), streamed in 1 MiB pieces with a
 * "copying NAME" progress line past the threshold (util/progress.h). */
int fs_copy_file(const char *src, const char *dst, dlm_err *e);

int fs_exists(const char *path);
int fs_is_dir(const char *path);
int fs_is_file(const char *path);
/* File size, or -1. */
int64_t fs_file_size(const char *path);
/* Total bytes of regular files under dir (recursive); 0 if missing. */
uint64_t fs_tree_size(const char *dir);

/* dst = a "/" b (b absolute → b). Returns dst, truncation-checked: returns
 * NULL if it does not fit. */
char *fs_join(char *dst, size_t cap, const char *a, const char *b);
/* Directory part of path into dst ("." if none). */
char *fs_dirname(char *dst, size_t cap, const char *path);
/* Last component (pointer into path). */
const char *fs_basename(const char *path);

/* Sorted list of entry names in dir (excluding . and ..). Caller frees with
 * fs_free_list. Returns count, or -1 with e set. */
int fs_list_dir(const char *dir, char ***names, dlm_err *e);
void fs_free_list(char **names, int n);

/* Fault injection: every atomic write whose path contains `substring`
 * fails as a full disk would (NULL or "" turns it off). The command layer
 * sets it from $DLM_FAIL_WRITE, so the CLI tests can prove that a failed
 * write loses nothing. */
void fs_inject_write_failure(const char *substring);
/* ... and every removal of a file whose path contains it fails (EIO), the
 * tree removal stopping there as a kill would ($DLM_FAIL_REMOVE). */
void fs_inject_remove_failure(const char *substring);
int fs_fault_injected(const char *path);

/* Free bytes for an unprivileged writer on the filesystem holding path (or
 * its nearest existing parent); UINT64_MAX when unknown. */
uint64_t fs_free_bytes(const char *path);
/* The error for a failed write of `need` bytes to path, from errno: on
 * ENOSPC/EDQUOT a DiskFullError "disk full: cannot write '<path>': it needs
 * <size> (<n> bytes), <size> free there" with a hint; otherwise as err_sys
 * "cannot write '<path>': <strerror>". Returns -1. */
int fs_err_write(dlm_err *e, const char *path, uint64_t need);

#endif
