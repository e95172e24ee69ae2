#!/usr/bin/env bash
# dlm push --to hf:ORG/NAME and dlm pull hf:ORG/NAME (the original's
# spellings) against a stand-in for the Hugging Face Hub's API
# (helpers/hub_share_standin.py, stateful; tests/ref/r0809 checks it and dlm
# against huggingface_hub itself). Checked: the requests (repository
# creation, preupload, the git-lfs batch upload with the token kept off the
# presigned PUT (and the multipart transfer: parts, completion), verify, one
# NDJSON commit of adapter.dlm.pack as an LFS
# file, its .minisig and the original's README.md model card), the files
# on the Hub (the signature verifies with Debian's minisign), a round trip
# to another home (verified / unsigned), an unsigned push deleting a stale
# signature, bytes the Hub already has not sent again, a pack whose bytes
# do not match the Hub's sha256 refused, a pack that does not match its
# signature refused with nothing installed, private repositories, and the
# errors: no token, a bad token (401), a read-only token (403), no such
# repository, no pack in it, a bad spec, offline.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
PY=/usr/bin/python3
write_doc t.dlm 1
"$DLM" train t.dlm --max-steps 2 -q > /dev/null
"$DLM" keygen -q
ME=$DLM_HOME
$PY "$DLM_SRC/tests/cli/helpers/hub_share_standin.py" req.log --private org/secret > port.txt &
srv=$!
trap 'kill $srv 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 600); do [ -s port.txt ] && break; sleep 0.1; done
[ -s port.txt ] || fail "the stand-in did not start"
export HF_ENDPOINT="http://127.0.0.1:$(cat port.txt)" HF_HUB_CACHE="$T/hfcache"
unset HF_TOKEN HUGGING_FACE_HUB_TOKEN HF_HUB_OFFLINE
: > req.log
check() {   # check RC PATTERN [HINT]
    [ "$rc" = "$1" ] && grep -q -- "$2" err.txt || fail "want rc $1 and '$2': rc $rc $(cat err.txt)"
    [ -z "${3:-}" ] || grep -q "^hint: .*$3" err.txt || fail "hint '$3': $(cat err.txt)"
    ! grep -q "hf_write\|hf_read\|hf_bad" err.txt out.txt || fail "a token was printed"
}

# --- push errors ---------------------------------------------------------------------
rc=0; "$DLM" push t.dlm --to hf:org/notes > out.txt 2> err.txt || rc=$?
check 1 "pushing to hf:org/notes needs a Hugging Face token" "export HF_TOKEN"
[ ! -s req.log ] || fail "requests without a token: $(cat req.log)"
rc=0; HF_TOKEN=hf_bad "$DLM" push t.dlm --to hf:org/notes > out.txt 2> err.txt || rc=$?
check 1 "hf:org/notes: creating the repository refused (HTTP 401): Invalid credentials" "HF_TOKEN was not accepted"
rc=0; HF_TOKEN=hf_read "$DLM" push t.dlm --to hf:org/notes > out.txt 2> err.txt || rc=$?
check 1 "refused (HTTP 403)" "cannot write to org"
rc=0; HF_TOKEN=hf_write "$DLM" push t.dlm --to hf:notes > out.txt 2> err.txt || rc=$?
check 1 "'hf:notes' is not hf:ORG/NAME" "hf:my-user/my-notes"
rc=0; HF_TOKEN=hf_write HF_HUB_OFFLINE=1 "$DLM" push t.dlm --to hf:org/notes > out.txt 2> err.txt || rc=$?
check 1 "HF_HUB_OFFLINE is set"

# --- a signed push: the requests ----------------------------------------------------
: > req.log
HF_TOKEN=hf_write "$DLM" push t.dlm --to hf:org/notes --sign > push.out 2> err.txt || fail "push: $(cat err.txt)"
grep -q "^pushed $ID to hf:org/notes$" push.out && grep -q "^  signature: hf:org/notes/adapter.dlm.pack.minisig$" push.out &&
    grep -q "^  created the repository org/notes$" push.out && grep -q "^  commit: [0-9a-f]\{40\}$" push.out &&
    grep -q "^  install: dlm pull hf:org/notes$" push.out || fail "push output: $(cat push.out)"
$PY - "$ID" <<'PYEOF' || fail "requests: $(cat req.log)"
import json, sys
reqs = [json.loads(l) for l in open("req.log")]
seq = [(r["method"], r["path"].split("?")[0]) for r in reqs]
assert seq[0] == ("POST", "/api/repos/create") and reqs[0]["body"] == {"name": "notes", "organization": "org", "visibility": "public", "type": "model"}, reqs[0]
assert seq[1] == ("POST", "/api/models/org/notes/preupload/main"), seq
files = reqs[1]["body"]["files"]
assert [f["path"] for f in files] == ["adapter.dlm.pack", "adapter.dlm.pack.minisig", "README.md"], files
b = next(r for r in reqs if r["path"] == "/org/notes.git/info/lfs/objects/batch")
assert b["accept"] == "application/vnd.git-lfs+json" and b["ctype"] == "application/vnd.git-lfs+json", b
assert b["body"]["operation"] == "upload" and b["body"]["hash_algo"] == "sha256" and b["body"]["transfers"] == ["basic", "multipart"], b
assert b["body"]["ref"] == {"name": "main"} and len(b["body"]["objects"]) == 1, b
oid, size = b["body"]["objects"][0]["oid"], b["body"]["objects"][0]["size"]
assert size == files[0]["size"], (size, files[0])
put = [r for r in reqs if r["method"] == "PUT"]
assert len(put) == 1 and put[0]["path"].startswith("/s3/org/notes/%s?" % oid) and put[0]["auth"] is None, put
v = [r for r in reqs if r["path"].endswith("/verify")]
assert len(v) == 1 and v[0]["body"] == {"oid": oid, "size": size} and v[0]["auth"] == "Bearer hf_write", v
c = [r for r in reqs if r["path"] == "/api/models/org/notes/commit/main"]
assert len(c) == 1 and c[0]["ctype"] == "application/x-ndjson" and c[0]["auth"] == "Bearer hf_write", c
lines = c[0]["body"]
assert lines[0] == {"key": "header", "value": {"summary": "Upload adapter.dlm.pack via dlm push", "description": ""}}, lines[0]
assert lines[1] == {"key": "lfsFile", "value": {"path": "adapter.dlm.pack", "algo": "sha256", "oid": oid, "size": size}}, lines[1]
assert [(l["key"], l["value"]["path"], l["value"]["encoding"]) for l in lines[2:]] == \
    [("file", "adapter.dlm.pack.minisig", "base64"), ("file", "README.md", "base64")], lines[2:]
assert all(r["auth"] == "Bearer hf_write" for r in reqs if r["method"] != "PUT"), "the token on every API call"
PYEOF
# what is on the Hub, fetched by curl: the pack, its signature, the card
curl -sfL "$HF_ENDPOINT/org/notes/resolve/main/adapter.dlm.pack" -o hub.dlm.pack || fail "curl pack"
curl -sfL "$HF_ENDPOINT/org/notes/resolve/main/adapter.dlm.pack.minisig" -o hub.dlm.pack.minisig || fail "curl sig"
curl -sfL "$HF_ENDPOINT/org/notes/resolve/main/README.md" -o README.hub || fail "curl readme"
minisign -V -p "$ME/minisign.pub" -m hub.dlm.pack > /dev/null || fail "minisign rejects the pushed signature"
mkdir -p "$ME/trusted-keys" && cp "$ME/minisign.pub" "$ME/trusted-keys/me.pub"
"$DLM" verify hub.dlm.pack -q || fail "the pushed pack's provenance does not verify"
head -2 README.hub | grep -q "^library_name: dlm$" && grep -q "^| \`dlm_id\` | \`$ID\` |$" README.hub &&
    grep -q "^| \`adapter_version\` | \`1\` |$" README.hub && grep -q "^dlm pull hf:org/notes$" README.hub || fail "README: $(cat README.hub)"

# --- pull into another home ------------------------------------------------------------
export DLM_HOME="$T/friend"
mkdir -p "$DLM_HOME/trusted-keys" && cp "$ME/minisign.pub" "$DLM_HOME/trusted-keys/me.pub"
"$DLM" pull hf:org/notes --out got > pull.out 2> err.txt || fail "pull: $(cat err.txt)"
grep -q "signature: verified" pull.out && grep -q "^pulled $ID (adapter v0001" pull.out || fail "pull: $(cat pull.out)"
cmp got/t.dlm t.dlm || fail "the pulled document differs"
"$DLM" prompt got/t.dlm --temp 0 -n 4 "What is the capital of France?" > /dev/null || fail "prompt on the pulled store"

# --- an unsigned push of a pack file: the stale signature goes; same bytes are not resent ---
export DLM_HOME=$ME
"$DLM" pack t.dlm --out plain.dlm.pack -q
: > req.log
HF_TOKEN=hf_write "$DLM" push plain.dlm.pack --to hf:org/notes > out.txt 2> err.txt || fail "unsigned push: $(cat err.txt)"
grep -q '"key": "deletedFile", "value": {"path": "adapter.dlm.pack.minisig"}' req.log || fail "no deletedFile: $(cat req.log)"
curl -s -o /dev/null -w '%{http_code}' "$HF_ENDPOINT/org/notes/resolve/main/adapter.dlm.pack.minisig" | grep -qx 404 || fail "the stale signature is still there"
: > req.log
HF_TOKEN=hf_write "$DLM" push plain.dlm.pack --to hf:org/notes > out.txt 2> err.txt || fail "second push: $(cat err.txt)"
! grep -q '"method": "PUT"' req.log || fail "bytes the Hub has were uploaded again"
grep -q '"key": "lfsFile"' req.log && ! grep -q deletedFile req.log || fail "second commit: $(cat req.log)"
rc=0; DLM_HOME="$T/h2" "$DLM" pull hf:org/notes --out h2 > out.txt 2> err.txt || fail "unsigned pull: $(cat err.txt)"
grep -q "signature: none" out.txt || fail "unsigned: $(cat out.txt)"

# --- integrity: bytes that do not match the Hub's sha256; a pack not matching its signature ---
HF_TOKEN=hf_write "$DLM" push t.dlm --to hf:org/signed --sign > /dev/null 2> err.txt || fail "push signed: $(cat err.txt)"
curl -sf -X POST "$HF_ENDPOINT/_standin/flip/org/signed/adapter.dlm.pack" > /dev/null
rc=0; DLM_HOME="$T/h3" "$DLM" pull hf:org/signed --out h3 > out.txt 2> err.txt || rc=$?
[ $rc = 1 ] && grep -qi "sha256" err.txt || fail "corrupted bytes: rc $rc $(cat err.txt)"
[ ! -e "$T/h3/store/$ID" ] && [ ! -e h3/t.dlm ] || fail "corrupted bytes were installed"
curl -sf -X POST --data-binary @plain.dlm.pack -H 'Content-Type: application/octet-stream' \
    "$HF_ENDPOINT/_standin/put/org/signed/adapter.dlm.pack" > /dev/null
mkdir -p "$T/h4/trusted-keys" && cp "$ME/minisign.pub" "$T/h4/trusted-keys/"
rc=0; DLM_HOME="$T/h4" "$DLM" pull hf:org/signed --out h4 > out.txt 2> err.txt || rc=$?
[ $rc = 1 ] && grep -q "refusing to install" err.txt || fail "a pack not matching its signature: rc $rc $(cat err.txt)"
[ ! -e "$T/h4/store/$ID" ] && [ ! -e h4/t.dlm ] || fail "a pack not matching its signature was installed"

# --- private repositories, pull errors -------------------------------------------------------
HF_TOKEN=hf_write "$DLM" push plain.dlm.pack --to hf:org/secret > /dev/null 2> err.txt || fail "push private: $(cat err.txt)"
rc=0; DLM_HOME="$T/h5" "$DLM" pull hf:org/secret --out h5 > out.txt 2> err.txt || rc=$?
check 1 "hf:org/secret: repository not found at $HF_ENDPOINT" "a private repository also needs HF_TOKEN"
DLM_HOME="$T/h5" HF_TOKEN=hf_read "$DLM" pull hf:org/secret --out h5 > out.txt 2> err.txt || fail "private pull with a token: $(cat err.txt)"
rc=0; DLM_HOME="$T/h6" HF_TOKEN=hf_bad "$DLM" pull hf:org/absent > out.txt 2> err.txt || rc=$?
check 1 "hf:org/absent: repository not found" "HF_TOKEN is set but does not reach it"
curl -sf -X POST -H 'authorization: Bearer hf_write' -H 'Content-Type: application/json' -d '{"name": "empty", "organization": "org"}' \
    "$HF_ENDPOINT/api/repos/create" > /dev/null
rc=0; DLM_HOME="$T/h6" "$DLM" pull hf:org/empty > out.txt 2> err.txt || rc=$?
check 1 "hf:org/empty has no adapter.dlm.pack" "dlm push PATH --to hf:org/empty"
rc=0; DLM_HOME="$T/h6" "$DLM" pull hf:org/a/b > out.txt 2> err.txt || rc=$?
check 1 "'hf:org/a/b' is not hf:ORG/NAME"
rc=0; DLM_HOME="$T/h6" HF_HUB_OFFLINE=1 "$DLM" pull hf:org/notes > out.txt 2> err.txt || rc=$?
check 1 "HF_HUB_OFFLINE is set"
# --- a multipart upload (the Hub asks for one for large files: here over 20 kB, 16 KiB parts) ---
$PY "$DLM_SRC/tests/cli/helpers/hub_share_standin.py" mp.log --multipart-over 20000 --chunk 16384 > mport.txt &
srv2=$!
trap 'kill $srv $srv2 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 600); do [ -s mport.txt ] && break; sleep 0.1; done
export DLM_HOME=$ME
HF_ENDPOINT="http://127.0.0.1:$(cat mport.txt)" HF_TOKEN=hf_write "$DLM" push plain.dlm.pack --to hf:org/big > out.txt 2> err.txt ||
    fail "multipart push: $(cat err.txt)"
size=$(stat -c %s plain.dlm.pack)
$PY - "$size" <<'PYEOF' || fail "multipart requests: $(cat mp.log)"
import json, sys
size = int(sys.argv[1])
reqs = [json.loads(l) for l in open("mp.log")]
parts = [r for r in reqs if r["method"] == "PUT"]
n = (size + 16383) // 16384
assert n >= 3, n
assert [r["path"].split("?")[0].rsplit("/", 1)[1] for r in parts] == [str(i) for i in range(1, n + 1)], parts
assert all(r["auth"] is None for r in parts), "a token went to a part URL"
c = [r for r in reqs if "/info/lfs/complete/" in r["path"]]
assert len(c) == 1 and [p["partNumber"] for p in c[0]["body"]["parts"]] == list(range(1, n + 1)), c
assert c[0]["ctype"] == "application/vnd.git-lfs+json", c
PYEOF
rc=0; HF_ENDPOINT="http://127.0.0.1:$(cat mport.txt)" DLM_HOME="$T/h7" "$DLM" pull hf:org/big --out h7 > out.txt 2> err.txt ||
    fail "pull of a multipart upload: $(cat err.txt)"
cmp -s h7/t.dlm t.dlm || fail "multipart round trip"
echo ok
