/* transfer — moving packs between people (spec §7 push/pull).
 *
 *   push PATH|PACK --to DIR | https://URL | hf:ORG/NAME     (peer:// refused)
 *   pull PACK | https://URL | peer://host:port/<dlm_id>?token=T | hf:ORG/NAME
 *
 * hf: is a Hugging Face Hub model repository (share/hf_share.h): the pack
 * as adapter.dlm.pack, its signature as adapter.dlm.pack.minisig, a
 * README.md, as the original's hf sink; the token from HF_TOKEN.
 *
 * A .dlm is packed first (signed provenance with --sign). --sign also
 * writes a detached minisign signature <pack>.minisig over the whole pack,
 * sent along (DIR: next to it; HTTPS: POSTed to URL.minisig). pull fetches
 * the pack and, when there is one, its .minisig (URL.minisig / next to the
 * file), checks it against the trusted keys, then unpacks:
 *   verified          the signer is trusted and the signature holds
 *   unverified        signed by a key that is not trusted: a warning
 *   unsigned          no .minisig
 *   a bad signature   refused (nothing installed): the pack was altered
 *
 * HTTPS through libcurl (POST application/octet-stream; the Authorization
 * header is given by the caller, from $DLM_SHARE_AUTH). Plain http:// is
 * refused, except for peer:// (dlm serve on the local network, token in the
 * URL). Downloads are capped (limits.max_total) and land in <home>/tmp. */
#ifndef DLM_TRANSFER_H
#define DLM_TRANSFER_H

#include "share/pack.h"
#include "share/sign.h"
#include "util/err.h"

typedef struct share_http {
    const char *ca_file;           /* CA bundle (NULL = the system's) */
    const char *auth;              /* "Authorization" value, or NULL */
    long timeout_s;                /* whole transfer (0 = none) */
} share_http;

typedef struct push_opts {
    const char *path;              /* a .dlm (packed first) or a pack */
    const char *to;                /* DIR or https://URL */
    const char *home;
    int include_exports, include_base, include_logs;
    const char *licensee_url;
    const minisign_key *signer;    /* --sign */
    double now;
    share_http http;
    pack_limits limits;
} push_opts;

typedef struct push_result {
    char dest[4096];               /* where the pack went */
    char sig_dest[4200];           /* where the .minisig went, "" = unsigned */
    char dlm_id[27];
    long status;                   /* HTTP status of the pack's POST, 0 for DIR and hf: */
    char commit[64];               /* hf: the commit made ("" = the Hub did not say) */
    int created;                   /* hf: the repository was created */
} push_result;

int push_run(const push_opts *o, push_result *r, dlm_err *e);

enum { PULL_VERIFIED = 0, PULL_UNSIGNED = 1, PULL_UNVERIFIED = 2 };

typedef struct pull_opts {
    const char *source;
    const char *home;
    const char *out_dir;           /* where the .dlm goes */
    int force;
    const char *trusted_dir;
    share_http http;
    pack_limits limits;
} pull_opts;

typedef struct pull_result {
    unpack_result u;
    int sig;                       /* PULL_* */
    char signer_id[17];
    char sig_note[1024];           /* why a signature did not verify */
} pull_result;

int pull_run(const pull_opts *o, pull_result *r, dlm_err *e);

/* GET url into path (created; at most max_bytes). *status is the HTTP
 * status; a non-2xx status is not an error here (no file is left). */
int share_http_get(const share_http *h, const char *url, const char *path, uint64_t max_bytes, long *status,
                   dlm_err *e);
/* POST the file at path as application/octet-stream. */
int share_http_post(const share_http *h, const char *url, const char *path, long *status, dlm_err *e);

#endif
