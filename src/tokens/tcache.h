/* tcache — the tokenization cache (training.cache, spec §2.2
 * "tokenized-cache/"): a section's token rows kept in the store so that a
 * rerun on an unchanged tree does not tokenize it again.
 *
 *   <store>/tokenized-cache/entries/<key[:2]>/<key>.bin
 *
 * The key is sha256 over everything that changes the tokens: the tokenizer
 * file's sha256, the chat dialect, the system prompt, loss_on, sequence_len,
 * the section type and its exact content. An entry is
 *
 *   "DLMTC001" | u32 n_rows | per row: u32 n, n × i32 ids, n × u8 loss mask
 *   | sha256 of all the bytes before it
 *
 * little-endian. Every length is checked against the bytes that remain and
 * the checksum must match; anything else is a miss (and the entry is
 * removed), never a crash. A hit refreshes the entry's mtime, which is what
 * "unused for N days" (prune) and the max_bytes cap (oldest first) read.
 *
 * dataset_build takes a section's rows from it on a hit and puts them on a
 * miss (ds_opts.cache, opened by the trainer when training.cache.enabled
 * and not --no-cache); tests/cli/t0605-cache-train.sh shows the adapter is
 * the same bytes with, from and without the cache. */
#ifndef DLM_TCACHE_H
#define DLM_TCACHE_H

#include <stddef.h>
#include <stdint.h>
#include "doc/doc.h"
#include "util/err.h"

#define TCACHE_DIR "tokenized-cache"

typedef struct tcache_key_parts {
    const char *tokenizer_sha256;  /* sha256 hex of the tokenizer file */
    const char *dialect;           /* chat dialect name ("chatml", ...) */
    const char *system_prompt;     /* NULL = none (distinct from "") */
    int loss_on_all;
    int seq_len;
} tcache_key_parts;

/* out: 65 bytes of lowercase hex. */
void tcache_key(const tcache_key_parts *p, doc_section_type t, const char *content, size_t len, char out[65]);

typedef struct tcache_row {
    int32_t *ids;
    uint8_t *mask;                 /* 1 = a loss target */
    int32_t n;
} tcache_row;
void tcache_rows_free(tcache_row *rows, int n);

typedef struct tcache tcache;

/* Open (creating) the cache of a store. */
int tcache_open(const char *store, tcache **out, dlm_err *e);
/* 1 hit (*rows, *n_rows owned by the caller), 0 miss. */
int tcache_get(tcache *c, const char key[65], tcache_row **rows, int *n_rows);
int tcache_put(tcache *c, const char key[65], const tcache_row *rows, int n_rows, dlm_err *e);
void tcache_counts(const tcache *c, int64_t *hits, int64_t *misses);
void tcache_close(tcache *c);

typedef struct tcache_stats {
    int64_t entries, bytes;
    double oldest, newest;         /* mtimes (epoch seconds), 0 when empty */
} tcache_stats;
int tcache_stat(const char *store, tcache_stats *st, dlm_err *e);
/* Remove entries unused for older_than seconds (<= 0: none by age), then the
 * oldest until the total is <= max_bytes (0: no cap). */
int tcache_prune(const char *store, double older_than, int64_t max_bytes, int64_t *removed, int64_t *freed,
                 dlm_err *e);
int tcache_clear(const char *store, dlm_err *e);

#endif
