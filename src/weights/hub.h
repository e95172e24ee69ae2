/* hub — the Hugging Face hub cache, shared with Python tools, and a
 * resumable, verified downloader for what is missing (docs/reference/formats.md §1.2-1.3).
 *
 * Cache root: $HF_HUB_CACHE > $HUGGINGFACE_HUB_CACHE > $HF_HOME/hub >
 * $XDG_CACHE_HOME/huggingface/hub > ~/.cache/huggingface/hub. Layout:
 *   models--Org--Name/refs/<rev>             40-hex commit (no newline)
 *   models--Org--Name/blobs/<etag>           the bytes (etag = sha256 for LFS)
 *   models--Org--Name/snapshots/<commit>/<f> relative symlink ../../blobs/<etag>
 *   models--Org--Name/.no_exist/<commit>/<f> "this file does not exist"
 *   .locks/models--Org--Name/<etag>.lock     one downloader per blob
 *
 * Network: HEAD {endpoint}/{repo}/resolve/{rev}/{file} (Accept-Encoding:
 * identity, relative redirects followed) gives X-Repo-Commit, X-Linked-Etag
 * / ETag and X-Linked-Size / Content-Length; GET follows redirects (CDN)
 * into blobs/<etag>.incomplete, resumed with Range, verified (size; sha256
 * for 64-hex etags), renamed into place. Transient failures (connection,
 * timeouts, cut transfers, 429, 5xx) are retried with exponential backoff.
 * $HF_TOKEN becomes "authorization: Bearer"; $HF_ENDPOINT replaces
 * https://huggingface.co; HF_HUB_OFFLINE=1 / TRANSFORMERS_OFFLINE=1 forbid
 * the network (cache only). */
#ifndef DLM_HUB_H
#define DLM_HUB_H

#include <stddef.h>
#include "util/err.h"

typedef struct hub_opts {
    char cache[4096];       /* resolved cache root */
    char endpoint[1024];    /* no trailing slash */
    char token[1024];       /* "" = anonymous */
    int offline;
    int max_retries;        /* retries after the first try (default 4) */
    int backoff_ms;         /* first retry delay, doubled each time (default 1000) */
    int progress;           /* -1 auto (terminal and not -q), 0 off, 1 plain lines */
    long low_speed_s;       /* abort a transfer stalled this long (default 60) */
} hub_opts;

/* What the environment says about the hub, read once by the command layer
 * (src/cmd/setup.c) and handed down here: the cache root by precedence
 * HF_HUB_CACHE (or HUGGINGFACE_HUB_CACHE) > HF_HOME/hub >
 * XDG_CACHE_HOME/huggingface/hub > HOME/.cache/huggingface/hub,
 * HF_ENDPOINT, HF_TOKEN (or HUGGING_FACE_HUB_TOKEN), HF_HUB_OFFLINE /
 * TRANSFORMERS_OFFLINE. Strings are not copied: they must outlive the
 * process's use of the hub (the environment's own strings do). */
typedef struct hub_env {
    const char *hub_cache, *hf_home, *xdg_cache, *home, *endpoint, *token;
    int offline;
} hub_env;
void hub_set_env(const hub_env *env);
const hub_env *hub_get_env(void);

/* Fill from hub_set_env's values (cache root, endpoint, token, offline). */
int hub_opts_init(hub_opts *o, dlm_err *e);
/* The cache root alone, by the precedence above. */
int hub_cache_root(char *out, size_t cap, dlm_err *e);

/* "Org/Name" → "<cache>/models--Org--Name". Refuses ids that are not
 * [A-Za-z0-9._-]+/[A-Za-z0-9._-]+ (no "..", nothing that escapes). */
int hub_repo_dir(const hub_opts *o, const char *repo, char *out, size_t cap, dlm_err *e);
int hub_valid_repo(const char *repo);
int hub_valid_rev(const char *rev);         /* branch, tag or sha; no "..", no leading "/" */
int hub_valid_filename(const char *f);      /* relative path inside a repo */

enum { HUB_NOT_FOUND = 1 };

/* Local path of repo@rev:filename, downloading it when missing and
 * allowed. 0 = out_path is the snapshot path; HUB_NOT_FOUND = the repo has
 * no such file (e explains; cached as .no_exist when the server says so);
 * -1 = error (offline and not cached, gated, network, integrity, ...).
 * rev NULL means "main". A 40-hex rev already in the cache needs no
 * network; a branch is checked with one HEAD when online (falling back to
 * the cache if the network fails). */
int hub_resolve_file(const hub_opts *o, const char *repo, const char *rev, const char *filename,
                     char *out_path, size_t cap, dlm_err *e);

/* A whole model: config.json, tokenizer.json, tokenizer_config.json
 * (required), generation_config.json, special_tokens_map.json,
 * chat_template.jinja (optional), model.safetensors or the index and every
 * shard it names. All files are taken at one commit. out_dir receives
 * snapshots/<commit>. */
int hub_snapshot(const hub_opts *o, const char *repo, const char *rev, char *out_dir, size_t cap, dlm_err *e);

/* ---- a snapshot carried in a pack (share/pack_write.c, share/unpack.c) ------------ */

/* 1 for a 40-hex lowercase commit hash. */
int hub_is_commit(const char *s);

typedef struct hub_file {
    char name[256];         /* file name in the snapshot (no '/') */
    char blob[160];         /* its blob (the etag); "" = the snapshot holds a plain file */
    char path[4700];        /* the local file (snapshot entry, or install source) */
    char sha256[65];        /* install: the bytes' hash, checked against what is there */
} hub_file;

/* The files hub_snapshot reads from the cached snapshot folder snapdir
 * (config.json, the tokenizer files, the weights: model.safetensors or the
 * index and its shards), each with its blob name; *absent lists the
 * optional ones the snapshot does not have. Free both with free(). */
int hub_snapshot_files(const char *snapdir, hub_file **files, int *n, char (**absent)[256], int *nabsent,
                       dlm_err *e);

typedef struct hub_install {
    const char *repo;
    const char *rev;        /* the ref to point at commit ("main"), or NULL/"" when the base names a commit */
    const char *commit;     /* 40 hex */
    const hub_file *files;  /* path = source file; blob "" = name it by sha256 */
    int n;
    const char (*absent)[256]; /* marked .no_exist/<commit>/<name> */
    int nabsent;
    int force;              /* replace what differs (counted in *replaced) instead of refusing */
} hub_install;

/* Put a snapshot into the cache so that hub_snapshot finds it offline:
 * blobs/<blob> (temp file, fsync, rename), snapshots/<commit>/<name>
 * links, .no_exist markers, refs/<rev>. A file already there with the same
 * bytes is kept; one that differs (a blob, a snapshot entry, an optional
 * file the base lacks, a ref at another commit) is BaseConflictError,
 * unless in->force, which replaces it and counts it. With check_only
 * nothing is written: the conflicts are only found. */
int hub_install_snapshot(const hub_opts *o, const hub_install *in, int check_only, int *replaced, dlm_err *e);

/* ---- internals shared with hub_http.c ---------------------------------------- */
typedef struct hub_meta {
    char commit[64];        /* X-Repo-Commit */
    char etag[128];         /* normalised: no W/, no quotes */
    long long size;         /* -1 unknown */
    long status;            /* final HTTP status of the HEAD */
    char error_code[64];    /* X-Error-Code */
} hub_meta;

/* HEAD with the rules above. 0 ok (meta filled), HUB_NOT_FOUND for an
 * entry the server says is missing (meta.commit may be set), -1 error. */
int hub_http_head(const hub_opts *o, const char *repo, const char *rev, const char *filename, hub_meta *meta,
                  dlm_err *e);
/* GET into `incomplete` (resuming from its current size), verify size and
 * sha256 (64-hex etag), leave the complete file at `incomplete`. */
int hub_http_get(const hub_opts *o, const char *repo, const char *rev, const char *filename,
                 const hub_meta *meta, const char *incomplete, dlm_err *e);

#endif
