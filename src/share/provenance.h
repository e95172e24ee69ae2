/* provenance — who made a pack and what it claims (spec §7 verify).
 *
 * provenance.json: {adapter_sha256, base_revision, corpus_root_sha256,
 * env_lock_digest, signed_at, signer_public_key, signature}. The signature
 * is a minisign signature (share/sign.h) over the canonical JSON of the
 * first five fields: keys sorted, no spaces (Python's
 * json.dumps(sort_keys=True, separators=(",", ":"))).
 *
 * A store of named adapters (training.adapters) adds "adapters_sha256":
 * {name: sha256 of adapter/<name>/versions/<current>/adapter_model.safetensors,
 * or null}; it is signed with the five (the payload then has six keys), and
 * verify checks each against the packed adapter/<name>/current.txt. The
 * top-level adapter_sha256 stays the flat adapter's (null here). */
#ifndef DLM_PROVENANCE_H
#define DLM_PROVENANCE_H

#include <jansson.h>

#include "share/pack.h"
#include "share/sign.h"
#include "util/err.h"
#include "util/str.h"

#define PROV_ADAPTERS_KEY "adapters_sha256"

/* The signed bytes of a provenance object. */
int provenance_payload(const json_t *prov, strbuf *out, dlm_err *e);

enum { VERIFY_OK = 0, VERIFY_BROKEN = 1, VERIFY_UNTRUSTED = 2, VERIFY_BAD_SIGNATURE = 3 };

typedef struct verify_opts {
    const char *pack_path;
    const char *trusted_dir;       /* <home>/trusted-keys */
    int trust_on_first_use;        /* record an unknown signer's key and accept it */
    pack_limits limits;
} verify_opts;

typedef struct verify_result {
    char signer_id[17];            /* "" when unsigned */
    char signed_at[40];
    char adapter_sha256[65];
    int n_named;                   /* named adapters checked (adapters_sha256) */
    char named[8][40];             /* the first of them, "name sha256[:12]" */
    char key_file[4096];           /* the trusted key that matched (or was recorded) */
    int recorded;                  /* trust-on-first-use wrote key_file */
} verify_result;

/* Read the pack (bounded, every checksum), check provenance.json against
 * the packed adapter, then its signature against the trusted keys. Returns
 * a VERIFY_* code; e describes any non-zero one. */
int verify_pack(const verify_opts *o, verify_result *r, dlm_err *e);

/* A detached <file>.minisig over a whole file (pull, push --sign): the
 * signer must be a trusted key. Returns a VERIFY_* code. */
int verify_detached(const char *path, const char *sig_path, const char *trusted_dir, verify_result *r, dlm_err *e);

/* Find a trusted key with this id in dir (*.pub files). 1 found, 0 not. */
int trusted_find(const char *dir, const unsigned char key_id[8], minisign_pub *out, char *file, size_t cap);

#endif
