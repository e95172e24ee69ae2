/* hash — SHA-256 (libsodium) as lowercase hex, for ids, checksums and locks. */
#ifndef DLM_HASH_H
#define DLM_HASH_H

#include <stddef.h>
#include <stdint.h>
#include "util/err.h"

typedef struct sha256_ctx { unsigned char opaque[128] __attribute__((aligned(16))); } sha256_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *p, size_t n);
void sha256_final(sha256_ctx *c, unsigned char out[32]);

void sha256(const void *p, size_t n, unsigned char out[32]);
/* hex must hold 65 bytes. */
void sha256_hex(const void *p, size_t n, char hex[65]);
void hex_encode(const unsigned char *p, size_t n, char *out); /* out: 2n+1 */
/* BLAKE2b with an outlen-byte digest (1..64; the digest length is part of
 * the parameter block, so this is Python's hashlib.blake2b(digest_size=
 * outlen), not a cut of BLAKE2b-512). */
void blake2b_n(unsigned char *out, size_t outlen, const void *p, size_t n);
/* Streamed hash of a file. */
int sha256_file_hex(const char *path, char hex[65], dlm_err *e);
/* Same, showing progress (util/progress.h) as `label` for a large file. */
int sha256_file_hex_progress(const char *path, const char *label, char hex[65], dlm_err *e);

/* Global library init (libsodium); idempotent. Returns 0 or -1. */
int hash_init(void);

#endif
