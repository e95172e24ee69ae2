/* sign — Ed25519 signatures in minisign's key and signature formats
 * (https://jedisct1.github.io/minisign/), so Debian's `minisign -V` checks
 * what dlm signs and dlm checks what `minisign -S` signs.
 *
 *   public key file   "untrusted comment: minisign public key <ID>\n"
 *                     base64("Ed" || key_id[8] || pk[32]) "\n"
 *   secret key file   "untrusted comment: minisign encrypted secret key\n"
 *                     base64("Ed" || kdf "\0\0" || "B2" || salt[32] ||
 *                            opslimit[8] || memlimit[8] || key_id[8] ||
 *                            sk[64] || checksum[32]) "\n"
 *                     dlm writes and reads only unencrypted keys (kdf
 *                     "\0\0", as `minisign -G -W`); a password-protected
 *                     ("Sc", scrypt) key is refused with a hint.
 *   signature file    "untrusted comment: ...\n"
 *                     base64("ED" || key_id || ed25519(blake2b-512(msg))) "\n"
 *                     "trusted comment: <text>\n"
 *                     base64(ed25519(sig[64] || <text>)) "\n"
 *                     (the legacy "Ed" form signs msg itself; verified too)
 *
 * key_id is printed as the little-endian 64-bit number in upper hex. */
#ifndef DLM_SIGN_H
#define DLM_SIGN_H

#include <stddef.h>

#include "util/err.h"
#include "util/str.h"

typedef struct minisign_key {
    unsigned char key_id[8];
    unsigned char pk[32];
    unsigned char sk[64];          /* libsodium's seed || pk */
} minisign_key;

typedef struct minisign_pub {
    unsigned char key_id[8];
    unsigned char pk[32];
} minisign_pub;

void minisign_keygen(minisign_key *k);
void minisign_key_pub(const minisign_key *k, minisign_pub *p);
/* "<16 upper hex>" (out >= 17). */
void minisign_id_hex(const unsigned char key_id[8], char *out);
/* The base64 line of the public key (out >= 64). */
void minisign_pub_b64(const minisign_pub *p, char *out, size_t cap);

/* Write the two key files (secret 0600, never over an existing file). */
int minisign_write_secret(const char *path, const minisign_key *k, dlm_err *e);
int minisign_write_public(const char *path, const minisign_pub *p, dlm_err *e);
int minisign_load_secret(const char *path, minisign_key *k, dlm_err *e);
/* A public key file's text, or its bare base64 line. */
int minisign_parse_pub(const char *text, minisign_pub *p, dlm_err *e);
int minisign_load_pub(const char *path, minisign_pub *p, dlm_err *e);

/* Sign msg (prehashed "ED" form) into a .minisig text. trusted_comment must
 * be one line. */
int minisign_sign(const minisign_key *k, const void *msg, size_t len, const char *trusted_comment,
                  strbuf *out, dlm_err *e);

enum { MINISIGN_OK = 0, MINISIGN_OTHER_KEY = 1, MINISIGN_BAD = 2 };
/* Check sig_text (a .minisig) over msg with p. Returns MINISIGN_OK,
 * MINISIGN_OTHER_KEY (signed by another key id; e says which), MINISIGN_BAD
 * (signature or trusted comment does not verify), or -1 for a malformed
 * signature text. The signer's key id goes to signer_id (may be NULL). */
int minisign_verify(const minisign_pub *p, const void *msg, size_t len, const char *sig_text,
                    unsigned char signer_id[8], dlm_err *e);
/* The same over a whole file (blake2b streamed; legacy "Ed" files up to 1 GiB). */
int minisign_sign_file(const minisign_key *k, const char *path, const char *trusted_comment, strbuf *out, dlm_err *e);
int minisign_verify_file(const minisign_pub *p, const char *path, const char *sig_text, dlm_err *e);
/* The key id a signature names (0), or -1 when malformed. */
int minisign_sig_key_id(const char *sig_text, unsigned char key_id[8], dlm_err *e);

#endif
