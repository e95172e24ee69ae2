/* ulid — 26-char Crockford base32 ids (48-bit ms time + 80 random bits),
 * the format of a document's dlm_id. */
#ifndef DLM_ULID_H
#define DLM_ULID_H

#include <stdint.h>

/* out must hold 27 bytes. random80 may be NULL (libsodium randomness). */
void ulid_make(uint64_t ms, const unsigned char *random80, char out[27]);
void ulid_new(char out[27]);
/* 1 if s matches ^[0-9A-HJ-KM-NP-TV-Z]{26}$. */
int ulid_valid(const char *s);

#endif
