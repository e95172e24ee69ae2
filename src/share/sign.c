/* sign — minisign key and signature formats over libsodium (see sign.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include "share/sign.h"
#include "util/fs.h"
#include "util/hash.h"

#define SK_BYTES (2 + 2 + 2 + 32 + 8 + 8 + 8 + 64 + 32)   /* 158 */
#define PK_BYTES (2 + 8 + 32)                              /* 42 */
#define SIG_BYTES (2 + 8 + 64)                             /* 74 */
#define MAX_KEY_FILE 4096
#define MAX_TRUSTED_COMMENT 8192

void minisign_keygen(minisign_key *k)
{
    hash_init();
    crypto_sign_keypair(k->pk, k->sk);
    randombytes_buf(k->key_id, sizeof k->key_id);
}

void minisign_key_pub(const minisign_key *k, minisign_pub *p)
{
    memcpy(p->key_id, k->key_id, 8);
    memcpy(p->pk, k->pk, 32);
}

void minisign_id_hex(const unsigned char id[8], char *out)
{
    /* minisign prints the id as a little-endian uint64 */
    for (int i = 0; i < 8; i++) snprintf(out + 2 * i, 3, "%02X", id[7 - i]);
}

static void b64(const unsigned char *p, size_t n, char *out, size_t cap)
{
    sodium_bin2base64(out, cap, p, n, sodium_base64_VARIANT_ORIGINAL);
}

/* Decode one base64 line exactly n bytes long. */
static int unb64(const char *s, size_t slen, unsigned char *out, size_t n)
{
    size_t got = 0;
    if (sodium_base642bin(out, n, s, slen, NULL, &got, NULL, sodium_base64_VARIANT_ORIGINAL) || got != n) return -1;
    return 0;
}

void minisign_pub_b64(const minisign_pub *p, char *out, size_t cap)
{
    unsigned char raw[PK_BYTES];
    memcpy(raw, "Ed", 2);
    memcpy(raw + 2, p->key_id, 8);
    memcpy(raw + 10, p->pk, 32);
    b64(raw, sizeof raw, out, cap);
}

/* blake2b-256("Ed" || key_id || sk): minisign's secret key checksum. */
static void sk_checksum(const minisign_key *k, unsigned char out[32])
{
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, 32);
    crypto_generichash_update(&st, (const unsigned char *)"Ed", 2);
    crypto_generichash_update(&st, k->key_id, 8);
    crypto_generichash_update(&st, k->sk, 64);
    crypto_generichash_final(&st, out, 32);
}

/* Write a new file (never replacing one) with mode, fsync'd. */
static int write_new(const char *path, const char *text, int mode, dlm_err *e)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) {
        if (errno == EEXIST)
            return err_set(e, "KeyExistsError", "%s already exists", path),
                   err_hint(e, "keep the key you have, or move it away first to make a new one");
        return err_sys(e, "cannot create %s", path);
    }
    size_t n = strlen(text);
    int bad = write(fd, text, n) != (ssize_t)n || fsync(fd) || fchmod(fd, mode);
    if (close(fd)) bad = 1;
    if (bad) {
        unlink(path);
        return err_sys(e, "cannot write %s", path);
    }
    return 0;
}

int minisign_write_secret(const char *path, const minisign_key *k, dlm_err *e)
{
    unsigned char raw[SK_BYTES] = {0};
    size_t o = 0;
    memcpy(raw + o, "Ed", 2), o += 2;
    memcpy(raw + o, "\0\0", 2), o += 2;      /* no KDF: unencrypted, like minisign -W */
    memcpy(raw + o, "B2", 2), o += 2;
    o += 32 + 8 + 8;                          /* salt, opslimit, memlimit: unused */
    memcpy(raw + o, k->key_id, 8), o += 8;
    memcpy(raw + o, k->sk, 64), o += 64;
    sk_checksum(k, raw + o);
    char line[4 * SK_BYTES / 3 + 8], text[sizeof line + 128];
    b64(raw, sizeof raw, line, sizeof line);
    snprintf(text, sizeof text, "untrusted comment: minisign encrypted secret key\n%s\n", line);
    sodium_memzero(raw, sizeof raw);
    int r = write_new(path, text, 0600, e);
    sodium_memzero(text, sizeof text);
    sodium_memzero(line, sizeof line);
    return r;
}

int minisign_write_public(const char *path, const minisign_pub *p, dlm_err *e)
{
    char id[17], line[128], text[256];
    minisign_id_hex(p->key_id, id);
    minisign_pub_b64(p, line, sizeof line);
    snprintf(text, sizeof text, "untrusted comment: minisign public key %s\n%s\n", id, line);
    return write_new(path, text, 0644, e);
}

/* The n-th line (0-based) of text into [*s, *s+*len), without "\r\n". */
static int get_line(const char *text, int n, const char **s, size_t *len)
{
    const char *p = text;
    for (int i = 0; i < n; i++) {
        p = strchr(p, '\n');
        if (!p) return -1;
        p++;
    }
    size_t l = strcspn(p, "\n");
    if (l && p[l - 1] == '\r') l--;
    *s = p;
    *len = l;
    return 0;
}

int minisign_load_secret(const char *path, minisign_key *k, dlm_err *e)
{
    hash_init();
    char *text = NULL;
    size_t len;
    if (fs_read_all(path, MAX_KEY_FILE, &text, &len, e)) return -1;
    const char *s;
    size_t sl;
    unsigned char raw[SK_BYTES];
    int r = -1;
    if (get_line(text, 1, &s, &sl) || unb64(s, sl, raw, sizeof raw)) {
        err_set(e, "KeyFormatError", "%s: not a minisign secret key", path);
        err_hint(e, "make one with `dlm keygen` (or `minisign -G -W`)");
        goto out;
    }
    if (memcmp(raw, "Ed", 2) || memcmp(raw + 4, "B2", 2)) {
        err_set(e, "KeyFormatError", "%s: unsupported minisign key algorithm", path);
        goto out;
    }
    if (memcmp(raw + 2, "\0\0", 2)) {
        err_set(e, "KeyEncryptedError", "%s: the secret key is password-protected (scrypt)", path);
        err_hint(e, "dlm signs without prompting: make an unencrypted key with `dlm keygen` or `minisign -G -W`");
        goto out;
    }
    size_t o = 2 + 2 + 2 + 32 + 8 + 8;
    memcpy(k->key_id, raw + o, 8);
    memcpy(k->sk, raw + o + 8, 64);
    memcpy(k->pk, k->sk + 32, 32);
    unsigned char chk[32], zero[32] = {0};
    sk_checksum(k, chk);
    /* minisign -W leaves the checksum zero; dlm writes the real one */
    if (memcmp(chk, raw + o + 72, 32) && memcmp(zero, raw + o + 72, 32)) {
        err_set(e, "KeyFormatError", "%s: secret key checksum mismatch (corrupt key file)", path);
        goto out;
    }
    unsigned char pk2[32], seed_sk[64];
    crypto_sign_seed_keypair(pk2, seed_sk, k->sk);
    if (memcmp(pk2, k->pk, 32)) {
        err_set(e, "KeyFormatError", "%s: secret key is inconsistent (corrupt key file)", path);
        goto out;
    }
    r = 0;
out:
    sodium_memzero(raw, sizeof raw);
    sodium_memzero(text, len);
    free(text);
    return r;
}

int minisign_parse_pub(const char *text, minisign_pub *p, dlm_err *e)
{
    hash_init();
    const char *s;
    size_t sl;
    unsigned char raw[PK_BYTES];
    int line = strncmp(text, "untrusted comment:", 18) == 0 ? 1 : 0;
    if (get_line(text, line, &s, &sl) || unb64(s, sl, raw, sizeof raw) || memcmp(raw, "Ed", 2))
        return err_set(e, "KeyFormatError", "not a minisign public key");
    memcpy(p->key_id, raw + 2, 8);
    memcpy(p->pk, raw + 10, 32);
    return 0;
}

int minisign_load_pub(const char *path, minisign_pub *p, dlm_err *e)
{
    char *text = NULL;
    size_t len;
    if (fs_read_all(path, MAX_KEY_FILE, &text, &len, e)) return -1;
    int r = minisign_parse_pub(text, p, e);
    if (r) err_prefix(e, "%s", path);
    free(text);
    return r;
}

/* The .minisig text for a prehashed message h (BLAKE2b-512, minisign's
 * "ED" mode): the signature line, the trusted comment and the global
 * signature over signature + comment. */
static int sign_hashed(const minisign_key *k, const unsigned char h[64], const char *tc, strbuf *out, dlm_err *e)
{
    if (strchr(tc, '\n') || strchr(tc, '\r') || strlen(tc) > MAX_TRUSTED_COMMENT)
        return err_set(e, "SignError", "the trusted comment must be one short line");
    unsigned char sig[SIG_BYTES], gsig[64];
    memcpy(sig, "ED", 2);
    memcpy(sig + 2, k->key_id, 8);
    crypto_sign_detached(sig + 10, NULL, h, 64, k->sk);
    size_t tl = strlen(tc);
    unsigned char *g = malloc(64 + tl + 1);
    if (!g) return err_set(e, "OOMError", "out of memory");
    memcpy(g, sig + 10, 64);
    memcpy(g + 64, tc, tl);
    crypto_sign_detached(gsig, NULL, g, 64 + tl, k->sk);
    free(g);
    char id[17], l1[128], l2[128];
    minisign_id_hex(k->key_id, id);
    b64(sig, sizeof sig, l1, sizeof l1);
    b64(gsig, sizeof gsig, l2, sizeof l2);
    sb_printf(out, "untrusted comment: signature from dlm secret key %s\n%s\ntrusted comment: %s\n%s\n", id, l1, tc, l2);
    return out->oom ? err_set(e, "OOMError", "out of memory") : 0;
}

int minisign_sign(const minisign_key *k, const void *msg, size_t len, const char *tc, strbuf *out, dlm_err *e)
{
    hash_init();
    unsigned char h[64];
    crypto_generichash(h, sizeof h, msg, len, NULL, 0);
    return sign_hashed(k, h, tc, out, e);
}

/* Split a .minisig into its decoded parts. */
static int parse_sig(const char *t, unsigned char sig[SIG_BYTES], const char **tc, size_t *tcl, unsigned char g[64],
                     dlm_err *e)
{
    const char *s;
    size_t sl;
    if (strncmp(t, "untrusted comment:", 18)) return err_set(e, "SignatureFormatError", "signature: no untrusted comment line");
    if (get_line(t, 1, &s, &sl) || unb64(s, sl, sig, SIG_BYTES))
        return err_set(e, "SignatureFormatError", "signature: bad signature line");
    if (memcmp(sig, "ED", 2) && memcmp(sig, "Ed", 2))
        return err_set(e, "SignatureFormatError", "signature: unsupported algorithm '%.2s'", (const char *)sig);
    if (get_line(t, 2, &s, &sl) || sl < 17 || strncmp(s, "trusted comment: ", 17) || sl - 17 > MAX_TRUSTED_COMMENT)
        return err_set(e, "SignatureFormatError", "signature: no trusted comment line");
    *tc = s + 17;
    *tcl = sl - 17;
    if (get_line(t, 3, &s, &sl) || unb64(s, sl, g, 64))
        return err_set(e, "SignatureFormatError", "signature: bad trusted comment signature line");
    return 0;
}

int minisign_sig_key_id(const char *sig_text, unsigned char key_id[8], dlm_err *e)
{
    hash_init();
    unsigned char sig[SIG_BYTES], g[64];
    const char *tc;
    size_t tcl;
    if (parse_sig(sig_text, sig, &tc, &tcl, g, e)) return -1;
    memcpy(key_id, sig + 2, 8);
    return 0;
}

/* The global signature g over the data signature + the trusted comment
 * (minisign's second check); path (or NULL) prefixes the message. */
static int verify_trusted_comment(const minisign_pub *p, const unsigned char *sig, const char *tc, size_t tcl,
                                  const unsigned char *g, const char *path, dlm_err *e)
{
    unsigned char *gm = malloc(64 + tcl + 1);
    if (!gm) return err_set(e, "OOMError", "out of memory");
    memcpy(gm, sig + 10, 64);
    memcpy(gm + 64, tc, tcl);
    int bad = crypto_sign_verify_detached(g, gm, 64 + tcl, p->pk);
    free(gm);
    if (bad) {
        err_set(e, "BadSignatureError", "%s%sthe trusted comment's signature does not verify", path ? path : "",
                path ? ": " : "");
        return MINISIGN_BAD;
    }
    return MINISIGN_OK;
}

int minisign_verify(const minisign_pub *p, const void *msg, size_t len, const char *sig_text,
                    unsigned char signer_id[8], dlm_err *e)
{
    hash_init();
    unsigned char sig[SIG_BYTES], g[64];
    const char *tc;
    size_t tcl;
    if (parse_sig(sig_text, sig, &tc, &tcl, g, e)) return -1;
    if (signer_id) memcpy(signer_id, sig + 2, 8);
    if (memcmp(sig + 2, p->key_id, 8)) {
        char a[17], b[17];
        minisign_id_hex(sig + 2, a);
        minisign_id_hex(p->key_id, b);
        err_set(e, "UntrustedSignerError", "signed by key %s, not by key %s", a, b);
        return MINISIGN_OTHER_KEY;
    }
    int bad;
    if (!memcmp(sig, "ED", 2)) {
        unsigned char h[64];
        crypto_generichash(h, sizeof h, msg, len, NULL, 0);
        bad = crypto_sign_verify_detached(sig + 10, h, sizeof h, p->pk);
    } else bad = crypto_sign_verify_detached(sig + 10, msg, len, p->pk);
    if (bad) {
        err_set(e, "BadSignatureError", "the signature does not match the signed data");
        return MINISIGN_BAD;
    }
    return verify_trusted_comment(p, sig, tc, tcl, g, NULL, e);
}

/* blake2b-512 of a file, streamed (the "ED" prehash). */
static int hash_file(const char *path, unsigned char h[64], dlm_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) return err_sys(e, "cannot open %s", path);
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, 64);
    unsigned char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) crypto_generichash_update(&st, buf, n);
    int bad = ferror(f);
    fclose(f);
    if (bad) return err_sys(e, "cannot read %s", path);
    crypto_generichash_final(&st, h, 64);
    return 0;
}

int minisign_sign_file(const minisign_key *k, const char *path, const char *tc, strbuf *out, dlm_err *e)
{
    hash_init();
    unsigned char h[64];
    if (hash_file(path, h, e)) return -1;
    return sign_hashed(k, h, tc, out, e);
}

int minisign_verify_file(const minisign_pub *p, const char *path, const char *sig_text, dlm_err *e)
{
    hash_init();
    unsigned char sig[SIG_BYTES], g[64], h[64];
    const char *tc;
    size_t tcl;
    if (parse_sig(sig_text, sig, &tc, &tcl, g, e)) return -1;
    if (memcmp(sig + 2, p->key_id, 8)) {
        err_set(e, "UntrustedSignerError", "signed by another key");
        return MINISIGN_OTHER_KEY;
    }
    int bad;
    if (!memcmp(sig, "ED", 2)) {
        if (hash_file(path, h, e)) return -1;
        bad = crypto_sign_verify_detached(sig + 10, h, sizeof h, p->pk);
    } else {
        char *all = NULL;
        size_t len = 0;
        if (fs_read_all(path, 1u << 30, &all, &len, e)) return -1;
        bad = crypto_sign_verify_detached(sig + 10, (unsigned char *)all, len, p->pk);
        free(all);
    }
    if (bad) {
        err_set(e, "BadSignatureError", "%s: the signature does not match the file", path);
        return MINISIGN_BAD;
    }
    return verify_trusted_comment(p, sig, tc, tcl, g, path, e);
}
