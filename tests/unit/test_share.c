/* test_share — the peer token codec (against a token computed with
 * Python's hmac + base64, see below) and minisign sign/verify refusals. The
 * pack format and minisign interop are tested end to end by
 * tests/cli/t060*.sh with GNU tar, Python tarfile and Debian's minisign. */
#include <string.h>

#include "check.h"
#include "share/peer.h"
#include "share/sign.h"
#include "util/fs.h"
#include "util/hash.h"

static void test_token(void)
{
    unsigned char secret[32], nonce[12], got[12];
    for (int i = 0; i < 32; i++) secret[i] = (unsigned char)i;
    memset(nonce, 0xaa, sizeof nonce);
    const char *id = "01JD0000000000000000000000";
    char tok[PEER_TOKEN_CHARS];
    peer_token_make(secret, id, nonce, 1700000000ull, tok, sizeof tok);
    /* python3 -c "import hmac,hashlib,base64,struct; s=bytes(range(32)); n=b'\xaa'*12;
     *   e=struct.pack('>Q',1700000000); m=hmac.new(s,n+e+b'01JD0000000000000000000000',hashlib.sha256).digest();
     *   print(base64.urlsafe_b64encode(n+e+m).decode().rstrip('='))" */
    CHECK_STR(tok, "qqqqqqqqqqqqqqqqAAAAAGVT8QDxp604FnZgNdweeHgZ6qmRI3x7E1DTl2RMVd4PGyBmnQ");
    CHECK_INT(peer_token_check(secret, id, tok, 1699999999.0, got), 0);
    CHECK(!memcmp(got, nonce, 12));
    CHECK_INT(peer_token_check(secret, id, tok, 1700000000.0, got), 1);          /* expired */
    CHECK_INT(peer_token_check(secret, "01JD0000000000000000000001", tok, 1.0, got), -1);
    secret[0] ^= 1;
    CHECK_INT(peer_token_check(secret, id, tok, 1.0, got), -1);
    secret[0] ^= 1;
    char bad[PEER_TOKEN_CHARS];
    strcpy(bad, tok);
    bad[20] = bad[20] == 'A' ? 'B' : 'A';                                        /* the expiry */
    CHECK_INT(peer_token_check(secret, id, bad, 1.0, got), -1);
    CHECK_INT(peer_token_check(secret, id, "", 1.0, got), -1);
    CHECK_INT(peer_token_check(secret, id, NULL, 1.0, got), -1);
    CHECK_INT(peer_token_check(secret, id, "!!!!", 1.0, got), -1);
}

static void test_minisign(void)
{
    minisign_key k, k2;
    minisign_pub p, p2;
    minisign_keygen(&k);
    minisign_keygen(&k2);
    minisign_key_pub(&k, &p);
    minisign_key_pub(&k2, &p2);
    strbuf sig = STRBUF_INIT;
    dlm_err e;
    err_clear(&e);
    CHECK_INT(minisign_sign(&k, "hello", 5, "a comment", &sig, &e), 0);
    CHECK_INT(minisign_verify(&p, "hello", 5, sig.buf, NULL, &e), MINISIGN_OK);
    CHECK_INT(minisign_verify(&p, "hellO", 5, sig.buf, NULL, &e), MINISIGN_BAD);
    CHECK_INT(minisign_verify(&p2, "hello", 5, sig.buf, NULL, &e), MINISIGN_OTHER_KEY);
    /* a changed trusted comment breaks the global signature */
    char *tc = strstr(sig.buf, "a comment");
    CHECK(tc != NULL);
    if (tc) tc[0] = 'A';
    CHECK_INT(minisign_verify(&p, "hello", 5, sig.buf, NULL, &e), MINISIGN_BAD);
    CHECK_STR(e.msg, "the trusted comment's signature does not verify");
    /* the same for a file's signature (minisign -H: the file's BLAKE2b-512) */
    char path[4200];
    snprintf(path, sizeof path, "%s/signed.bin", check_tmpdir("test_share_minisign"));
    CHECK_INT(fs_write_atomic(path, "hello", 5, 0644, &e), 0);
    strbuf fsig = STRBUF_INIT;
    CHECK_INT(minisign_sign_file(&k, path, "file comment", &fsig, &e), 0);
    CHECK_INT(minisign_verify_file(&p, path, fsig.buf, &e), MINISIGN_OK);
    char *ftc = strstr(fsig.buf, "file comment");
    CHECK(ftc != NULL);
    if (ftc) ftc[0] = 'F';
    CHECK_INT(minisign_verify_file(&p, path, fsig.buf, &e), MINISIGN_BAD);
    char want[4300];
    snprintf(want, sizeof want, "%s: the trusted comment's signature does not verify", path);
    CHECK_STR(e.msg, want);
    sb_free(&fsig);
    CHECK_INT(minisign_verify(&p, "hello", 5, "untrusted comment: x\nnot base64\n", NULL, &e), -1);
    CHECK_INT(minisign_verify(&p, "hello", 5, "", NULL, &e), -1);
    CHECK_INT(minisign_sign(&k, "x", 1, "two\nlines", &sig, &e), -1);
    sb_free(&sig);
    minisign_pub q;
    char b64[128], text[256];
    minisign_pub_b64(&p, b64, sizeof b64);
    CHECK_INT(minisign_parse_pub(b64, &q, &e), 0);
    CHECK(!memcmp(&q, &p, sizeof q));
    snprintf(text, sizeof text, "untrusted comment: minisign public key X\n%s\n", b64);
    CHECK_INT(minisign_parse_pub(text, &q, &e), 0);
    CHECK_INT(minisign_parse_pub("untrusted comment: x\nRWQ=\n", &q, &e), -1);
}

int main(void)
{
    hash_init();
    test_token();
    test_minisign();
    return check_done();
}
