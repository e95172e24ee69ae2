/* provenance — signing payload, verify, trusted keys (provenance.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "share/provenance.h"
#include "share/sign.h"
#include "util/fs.h"
#include "util/json.h"

static const char *const SIGNED_FIELDS[5] = {"adapter_sha256", "base_revision", "corpus_root_sha256", "env_lock_digest",
                                             "signed_at"};

int provenance_payload(const json_t *prov, strbuf *out, dlm_err *e)
{
    json_t *o = json_object();
    for (int i = 0; i < 5; i++) {
        json_t *v = json_object_get(prov, SIGNED_FIELDS[i]);
        json_object_set_new(o, SIGNED_FIELDS[i], v ? json_deep_copy(v) : json_null());
    }
    const json_t *named = json_object_get(prov, PROV_ADAPTERS_KEY);
    if (named) json_object_set_new(o, PROV_ADAPTERS_KEY, json_deep_copy(named));
    int r = json_write(out, o, JW_SORT | JW_COMPACT);
    json_decref(o);
    if (r || out->oom) return err_set(e, "OOMError", "out of memory");
    return 0;
}

int trusted_find(const char *dir, const unsigned char key_id[8], minisign_pub *out, char *file, size_t cap)
{
    char **names;
    dlm_err e;
    err_clear(&e);
    if (!fs_is_dir(dir)) return 0;
    int n = fs_list_dir(dir, &names, &e);
    int found = 0;
    for (int i = 0; i < n && !found; i++) {
        if (!str_endswith(names[i], ".pub")) continue;
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        minisign_pub k;
        err_clear(&e);
        if (minisign_load_pub(p, &k, &e)) continue;
        if (!memcmp(k.key_id, key_id, 8)) {
            *out = k;
            snprintf(file, cap, "%s", p);
            found = 1;
        }
    }
    if (n > 0) fs_free_list(names, n);
    return found;
}

/* Named adapters: every adapter/<name>/current.txt the pack holds is
 * claimed in adapters_sha256 with the sha256 of the version it names, and
 * every claim is such an adapter (a null claim: no trained version). */
static int check_named(const pack_contents *c, const json_t *p, const char *what, verify_result *r, dlm_err *e)
{
    const json_t *claims = json_object_get(p, PROV_ADAPTERS_KEY);
    if (claims && !json_is_object(claims))
        return err_at(e, "ProvenanceMismatchError", what, 0, 0, "provenance.json %s is not an object", PROV_ADAPTERS_KEY);
    const char *name;
    json_t *rel;
    json_object_foreach((json_t *)c->named_current, name, rel) {
        char mrel[1200];
        snprintf(mrel, sizeof mrel, "%s/adapter_model.safetensors", json_string_value(rel));
        const pack_member *am = pack_find(c, mrel);
        const json_t *cj = claims ? json_object_get(claims, name) : NULL;
        const char *claim = json_string_value(cj);
        if (!cj || (claim != NULL) != (am != NULL) || (am && strcmp(claim, am->sha256))) {
            err_at(e, "ProvenanceMismatchError", what, 0, 0,
                   "provenance.json claims %s %.12s… for adapter '%s', the packed current version is %.12s…",
                   PROV_ADAPTERS_KEY, cj ? claim ? claim : "(null)" : "nothing", name, am ? am->sha256 : "(none)");
            return err_hint(e, "the adapter was swapped after the pack was made; do not trust this pack");
        }
        if (r->n_named < 8)
            snprintf(r->named[r->n_named], sizeof r->named[0], "%s %.12s", name, am ? am->sha256 : "none");
        r->n_named++;
    }
    json_t *v;
    json_object_foreach((json_t *)claims, name, v) {
        if (json_object_get(c->named_current, name)) continue;
        if (!json_is_null(v))
            return err_at(e, "ProvenanceMismatchError", what, 0, 0,
                          "provenance.json claims adapter '%s', which the pack does not hold", name),
                   err_hint(e, "the adapter was removed after the pack was made; do not trust this pack");
    }
    return 0;
}

int verify_pack(const verify_opts *o, verify_result *r, dlm_err *e)
{
    memset(r, 0, sizeof *r);
    pack_contents *c = pack_read_file(o->pack_path, NULL, &o->limits, e);
    if (!c) return VERIFY_BROKEN;
    int rc = VERIFY_BROKEN;
    strbuf payload = STRBUF_INIT;
    const json_t *p = c->provenance;
    if (!p) {
        err_at(e, "ProvenanceMissingError", o->pack_path, 0, 0, "the pack holds no provenance.json");
        err_hint(e, "packs made by dlm pack carry one; sign with `dlm pack --sign`");
        goto out;
    }
    /* the claim must match what the pack holds */
    const char *claim = jget_str(p, "adapter_sha256");
    const pack_member *am = NULL;
    if (c->current_rel[0]) {
        char rel[1200];
        snprintf(rel, sizeof rel, "%s/adapter_model.safetensors", c->current_rel);
        am = pack_find(c, rel);
    }
    if ((claim != NULL) != (am != NULL) || (am && strcmp(claim, am->sha256))) {
        err_at(e, "ProvenanceMismatchError", o->pack_path, 0, 0,
               "provenance.json claims adapter_sha256 %.12s…, the packed current adapter is %.12s…",
               claim ? claim : "(none)", am ? am->sha256 : "(none)");
        err_hint(e, "the adapter was swapped after the pack was signed; do not trust this pack");
        goto out;
    }
    if (am) snprintf(r->adapter_sha256, sizeof r->adapter_sha256, "%s", am->sha256);
    if (check_named(c, p, o->pack_path, r, e)) goto out;
    const char *sig = jget_str(p, "signature"), *pub = jget_str(p, "signer_public_key");
    if (!sig || !pub) {
        err_at(e, "UnsignedPackError", o->pack_path, 0, 0, "the pack is not signed");
        err_hint(e, "ask its author for a pack made with `dlm pack --sign`");
        goto out;
    }
    const char *sa = jget_str(p, "signed_at");
    snprintf(r->signed_at, sizeof r->signed_at, "%s", sa ? sa : "");
    minisign_pub claimed;
    unsigned char sid[8];
    if (minisign_parse_pub(pub, &claimed, e) || minisign_sig_key_id(sig, sid, e)) {
        err_prefix(e, "%s: provenance.json", o->pack_path);
        goto out;
    }
    minisign_id_hex(sid, r->signer_id);
    if (provenance_payload(p, &payload, e)) goto out;
    /* the signature must hold under the key it names before trust is asked */
    int v = minisign_verify(&claimed, payload.buf, payload.len, sig, NULL, e);
    if (v != MINISIGN_OK) {
        err_prefix(e, "%s", o->pack_path);
        rc = VERIFY_BAD_SIGNATURE;
        goto out;
    }
    minisign_pub trusted;
    if (trusted_find(o->trusted_dir, sid, &trusted, r->key_file, sizeof r->key_file)) {
        if (memcmp(trusted.pk, claimed.pk, 32)) {
            err_at(e, "BadSignatureError", o->pack_path, 0, 0,
                   "the signer claims key id %s, but the trusted key %s with that id is a different key", r->signer_id,
                   r->key_file);
            rc = VERIFY_BAD_SIGNATURE;
            goto out;
        }
        rc = VERIFY_OK;
        goto out;
    }
    if (o->trust_on_first_use) {
        if (fs_mkdir_p(o->trusted_dir, e)) goto out;
        snprintf(r->key_file, sizeof r->key_file, "%s/%s.pub", o->trusted_dir, r->signer_id);
        if (minisign_write_public(r->key_file, &claimed, e)) goto out;
        r->recorded = 1;
        rc = VERIFY_OK;
        goto out;
    }
    err_at(e, "UntrustedSignerError", o->pack_path, 0, 0, "signed by key %s, which is not in %s", r->signer_id,
           o->trusted_dir);
    err_hint(e, "if you trust the author, add their minisign.pub to %s (or verify with --trust-on-first-use)",
             o->trusted_dir);
    rc = VERIFY_UNTRUSTED;
out:
    sb_free(&payload);
    pack_contents_free(c);
    return rc;
}

int verify_detached(const char *path, const char *sig_path, const char *trusted_dir, verify_result *r, dlm_err *e)
{
    memset(r, 0, sizeof *r);
    char *sig = NULL;
    size_t len;
    if (fs_read_all(sig_path, 1u << 16, &sig, &len, e)) return VERIFY_BROKEN;
    unsigned char sid[8];
    int rc = VERIFY_BROKEN;
    if (minisign_sig_key_id(sig, sid, e)) { err_prefix(e, "%s", sig_path); goto out; }
    minisign_id_hex(sid, r->signer_id);
    minisign_pub k;
    if (!trusted_find(trusted_dir, sid, &k, r->key_file, sizeof r->key_file)) {
        err_set(e, "UntrustedSignerError", "%s: signed by key %s, which is not in %s", sig_path, r->signer_id,
                trusted_dir);
        err_hint(e, "if you trust the author, add their minisign.pub to %s", trusted_dir);
        rc = VERIFY_UNTRUSTED;
        goto out;
    }
    int v = minisign_verify_file(&k, path, sig, e);
    rc = v == MINISIGN_OK ? VERIFY_OK : v == MINISIGN_BAD ? VERIFY_BAD_SIGNATURE : VERIFY_BROKEN;
out:
    free(sig);
    return rc;
}
