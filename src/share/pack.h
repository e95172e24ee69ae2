/* pack — one file that carries a document, its store and its history
 * (spec §7; docs/share.md).
 *
 *   <name>.dlm.pack = zstd(level 10) of a tar stream, entries sorted by
 *   path, headers normalised (mtime 0, uid/gid 0, no user names, 0644 files,
 *   0755 dirs):
 *     CHECKSUMS.sha256   "<hex>  <relpath>\n" per file, sorted, without
 *                        itself and manifest.json
 *     PACK_HEADER.json   pack_format_version 1, created_at, tool_version, ...
 *     dlm/<name>.dlm     the document (exactly one)
 *     manifest.json      dlm_id, base, adapter_version, entries, content_sha256
 *     provenance.json    adapter_sha256, base_revision, ..., signature
 *     store/...          the store minus exports/ cache/ logs/ run/ .lock
 *     base/<file>        --include-base: the base's HF snapshot files
 *                        (config.json, tokenizer files, safetensors);
 *                        manifest.json "base" says repo, revision, commit,
 *                        per file blob/size/sha256, and the optional files
 *                        the base lacks ("absent")
 *
 * The writer is deterministic: the same store packs to the same bytes
 * (created_at is the store manifest's updated_at, not the clock), unless
 * the pack is signed (signed_at is the clock).
 *
 * The reader never trusts the pack: it decompresses with a bounded zstd
 * window, refuses anything but plain files and directories under known
 * names, counts every byte against the member / total / ratio limits, and
 * hashes every member. It either fills a pack_contents whose every checksum
 * matched, or fails — and only then may unpack install anything. */
#ifndef DLM_PACK_H
#define DLM_PACK_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "util/err.h"

#define PACK_FORMAT_VERSION 1
#define PACK_ZSTD_LEVEL 10

/* ---- writing ---------------------------------------------------------------- */

struct minisign_key;                       /* share/sign.h */

typedef struct pack_opts {
    const char *doc_path;          /* the .dlm */
    const char *home;              /* dlm home (store root) */
    const char *out;               /* NULL = <doc>.pack next to the document */
    int include_exports, include_base, include_logs;
    const char *licensee_url;      /* --i-am-the-licensee */
    const struct minisign_key *signer; /* NULL = unsigned provenance */
    double now;                    /* clock for signed_at */
} pack_opts;

typedef struct pack_result {
    char path[4096];
    char dlm_id[27];
    int adapter_version;
    int n_files;
    uint64_t bytes_in;             /* uncompressed member bytes */
    uint64_t bytes_out;            /* pack size */
    char content_sha256[65];
    int signed_;
} pack_result;

int pack_write(const pack_opts *o, pack_result *res, dlm_err *e);

/* ---- reading (bounded) --------------------------------------------------------- */

typedef struct pack_limits {
    uint64_t max_member;           /* bytes of one member (16 GiB) */
    uint64_t max_total;            /* bytes of all members (64 GiB) */
    uint64_t max_ratio;            /* uncompressed / compressed, past ratio_floor (1000) */
    uint64_t ratio_floor;          /* bytes below which the ratio is not checked (64 MiB) */
    int max_entries;               /* members (100000) */
    int window_log_max;            /* zstd window (29 = 512 MiB) */
} pack_limits;

void pack_limits_default(pack_limits *l);

typedef struct pack_member {
    char *name;                    /* normalised relpath (no trailing '/') */
    int is_dir;
    uint64_t size;
    char sha256[65];               /* files only */
} pack_member;

typedef struct pack_contents {
    pack_member *m;
    int n;
    json_t *header;                /* PACK_HEADER.json */
    json_t *manifest;              /* manifest.json */
    json_t *provenance;            /* provenance.json, NULL when absent */
    char dlm_id[27];
    char dlm_rel[1024];            /* "dlm/<name>.dlm" */
    char current_rel[1024];        /* "store/adapter/versions/vNNNN" or "" */
    json_t *named_current;         /* named adapters: {name: "store/adapter/<name>/versions/vNNNN"} from each
                                    * store/adapter/<name>/current.txt (an empty object for none) */
    int format_version;
    uint64_t bytes;                /* uncompressed member bytes */
} pack_contents;

/* Read a pack from a file or memory. With dest != NULL every member is
 * written under dest (which must not exist; it is created). Checks, in
 * order: the stream and every member against lim; PACK_HEADER.json
 * (PackFormatVersionError past version 1); every file against
 * CHECKSUMS.sha256 (PackIntegrityError "checksum mismatch for <rel>: ...");
 * manifest.json's entries and content_sha256; exactly one dlm/NAME.dlm; a
 * store/manifest.json. On failure dest is removed again. */
pack_contents *pack_read_file(const char *path, const char *dest, const pack_limits *lim, dlm_err *e);
pack_contents *pack_read_mem(const void *buf, size_t len, const char *dest, const pack_limits *lim, dlm_err *e);
void pack_contents_free(pack_contents *c);
/* The member named rel, or NULL. */
const pack_member *pack_find(const pack_contents *c, const char *rel);

/* ---- unpack ------------------------------------------------------------------- */

typedef struct unpack_opts {
    const char *pack_path;
    const char *home;
    const char *out_dir;           /* NULL = the pack's directory */
    int force;
    pack_limits limits;
} unpack_opts;

typedef struct unpack_result {
    char dlm_id[27];
    char store[4096];
    char doc_path[4096];
    int adapter_version;
    int n_files;
    int replaced;                  /* an existing store was replaced (--force) */
    int base_files;                /* files of the pack's base now in the HF cache */
    int base_replaced;             /* of them, differing files --force replaced */
    char base_repo[256];
    char base_cache[4096];
} unpack_result;

/* Read (bounded, verified) into a staging folder next to the stores, then
 * install it as <home>/store/<dlm_id> with one rename (--force: the old
 * store is moved to <store>.old-<pid> first and put back on any failure;
 * what a killed unpack left is put right first, see unpack.c),
 * then copy the .dlm to out_dir. A pack made with --include-base also
 * puts its base into the HF cache (hub_install_snapshot: a differing file
 * there is BaseConflictError unless force) before the store. Nothing is
 * installed unless every check passed. */
int unpack_run(const unpack_opts *o, unpack_result *res, dlm_err *e);

/* The member-name rule both sides keep: NULL when name (a relpath, one
 * trailing '/' allowed) may be in a pack, else why not. The normalised
 * name goes to out. */
const char *pack_check_name(const char *name, int is_dir, char *out, size_t cap);

/* 1 when s is a 26-char Crockford base32 ULID. */
int pack_valid_dlm_id(const char *s);

#endif
