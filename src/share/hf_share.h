/* hf_share — `dlm push --to hf:ORG/NAME` and `dlm pull hf:ORG/NAME`: a pack
 * in a Hugging Face Hub model repository, as the original's hf sink keeps
 * it (dlm/share/hf_sink.py): the pack as adapter.dlm.pack, its detached
 * signature as adapter.dlm.pack.minisig, and a README.md model card
 * (library_name: dlm) on the main branch.
 *
 * Push, through the Hub's HTTP API as huggingface_hub calls it:
 *   POST {endpoint}/api/repos/create {"name", "organization", "visibility":
 *        "public", "type": "model"}
 *        (409: it exists, fine)
 *   POST {endpoint}/api/models/{repo}/preupload/main
 *        {"files": [{"path", "sample": base64(first 512 bytes), "size"}]}
 *        → each file's uploadMode, "lfs" or "regular", and shouldIgnore
 *   lfs files: POST {endpoint}/{repo}.git/info/lfs/objects/batch (git-lfs
 *        batch API, transfers "basic" and "multipart", sha256 oids) → per
 *        object an upload action (basic: PUT the bytes to its href, with
 *        its headers and without the token: the href is presigned;
 *        multipart: its header has chunk_size and a presigned URL per part,
 *        each slice is PUT there and the parts' ETags POSTed to the href)
 *        and a verify action (POST {"oid", "size"} with the token); no
 *        actions = already stored
 *   POST {endpoint}/api/models/{repo}/commit/main, application/x-ndjson:
 *        {"key": "header", "value": {"summary", "description"}}, then per
 *        file {"key": "file", "value": {"content": base64, "path",
 *        "encoding": "base64"}} or {"key": "lfsFile", "value": {"path",
 *        "algo": "sha256", "oid", "size"}}; an unsigned push deletes a
 *        signature left by an earlier signed one ({"key": "deletedFile"}).
 * One commit holds the three files. The token ("authorization: Bearer")
 * is required. Xet storage is not spoken: the Hub takes LFS uploads for
 * Xet-backed repositories too.
 *
 * Pull: HEAD/GET {endpoint}/{repo}/resolve/main/adapter.dlm.pack (hub.h's
 * downloader: redirects, retries, the size and the sha256 the Hub states
 * checked) and adapter.dlm.pack.minisig when there is one (404 = an
 * unsigned pack). The token is sent when set (private repositories). */
#ifndef DLM_HF_SHARE_H
#define DLM_HF_SHARE_H

#include <stdint.h>
#include "weights/hub.h"
#include "util/err.h"

#define HF_PACK_NAME "adapter.dlm.pack"
#define HF_SIG_NAME "adapter.dlm.pack.minisig"

/* "hf:ORG/NAME" → ORG/NAME in repo (checked). */
int hf_share_parse(const char *spec, char *repo, size_t cap, dlm_err *e);

typedef struct hf_push_result {
    char commit[64];               /* the commit's oid, "" when the Hub did not say */
    char commit_url[1024];
    int created;                   /* the repository was created */
    int pack_uploaded;             /* 0: the Hub already had these bytes (LFS) */
} hf_push_result;

/* 0 when a push can start: a token, not offline (checked before packing). */
int hf_push_ready(const hub_opts *o, const char *repo, dlm_err *e);

/* Upload pack (+ sig when not NULL) and readme as one commit on main. */
int hf_push(const hub_opts *o, const char *repo, const char *pack, const char *sig, const char *readme,
            const char *message, hf_push_result *r, dlm_err *e);

/* Download the pack to pack_out (at most max_bytes) and the signature to
 * sig_out; *have_sig = 0 when the repository has none. */
int hf_pull(const hub_opts *o, const char *repo, const char *pack_out, const char *sig_out, uint64_t max_bytes,
            int *have_sig, dlm_err *e);

#endif
