#!/bin/bash
# r0809: dlm push/pull hf:ORG/NAME against huggingface_hub 2.4 (the client
# the original's hf sink calls), both talking to the Hub stand-in
# (tests/cli/helpers/hub_share_standin.py): huggingface_hub uploads a pack
# and its signature the way the original does (create_repo exist_ok +
# upload_file) and `dlm pull` installs it, verified; `dlm push` uploads and
# huggingface_hub's hf_hub_download gets the same bytes back (the pack, the
# signature, the card). The requests of the two clients are compared: the
# same endpoints in the same order, with the same JSON keys and NDJSON
# operation kinds, in the same order (the pack goes up in 5 multipart
# parts, as the stand-in asks), so the stand-in answers what a real-Hub
# client sends.
# huggingface_hub runs with HF_HUB_DISABLE_XET=1 (dlm does not speak Xet).
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
venv=$("$DLM_SRC/scripts/ref-venv.sh" torch2) || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: the torch2 reference venv is unavailable"; exit 77; fi
    exit 1
}
py="$venv/bin/python"
DLM=${DLM:-$DLM_BUILD/dlm}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r0809.XXXXXX")
srv=""
trap '[ -n "$srv" ] && kill $srv 2>/dev/null; rm -rf "$T"' EXIT
cd "$T"
export DLM_HOME="$T/home" HF_HUB_DISABLE_XET=1 HF_HUB_DISABLE_TELEMETRY=1 HF_HOME="$T/hfhome" HF_HUB_CACHE="$T/hfcache"
unset HF_TOKEN HUGGING_FACE_HUB_TOKEN HF_HUB_OFFLINE
cat > t.dlm <<'DOC'
---
dlm_id: 01JD0000000000000000000000
dlm_version: 15
base_model: tiny
training:
  sequence_len: 64
---
Paris is the capital of France.

::instruction::
### Q
What is the capital of France?
### A
Paris.
DOC
"$DLM" train t.dlm --max-steps 1 -q > /dev/null
"$DLM" keygen -q
"$DLM" pack t.dlm --out p.dlm.pack --sign -q
minisign_sig=p.dlm.pack.minisig
"$DLM" push p.dlm.pack --to "$T/signed" --sign -q      # writes the detached signature next to a copy
cp "$T/signed/p.dlm.pack.minisig" "$minisign_sig"
mkdir -p "$DLM_HOME/trusted-keys" && cp "$DLM_HOME/minisign.pub" "$DLM_HOME/trusted-keys/me.pub"
# the stand-in asks for multipart uploads over 200 kB (100 kB parts): the pack goes in parts
"$py" "$DLM_SRC/tests/cli/helpers/hub_share_standin.py" req.log --multipart-over 200000 --chunk 100000 > port.txt &
srv=$!
for _ in $(seq 600); do [ -s port.txt ] && break; sleep 0.1; done
export HF_ENDPOINT="http://127.0.0.1:$(cat port.txt)"

# 1. huggingface_hub uploads as the original's push_hf does; dlm pulls
: > req.log
HF_TOKEN=hf_write "$py" - <<'PY'
from huggingface_hub import create_repo, upload_file
create_repo(repo_id="org/byhf", repo_type="model", private=False, exist_ok=True)
for f, name in (("p.dlm.pack", "adapter.dlm.pack"), ("p.dlm.pack.minisig", "adapter.dlm.pack.minisig")):
    upload_file(path_or_fileobj=f, path_in_repo=name, repo_id="org/byhf", repo_type="model",
                commit_message="Upload %s via dlm push" % name)
create_repo(repo_id="org/byhf", repo_type="model", private=False, exist_ok=True)   # exists: 409, fine
PY
cp req.log hf.log
DLM_HOME="$T/friend" "$DLM" pull hf:org/byhf --out got > pull.out 2> err.txt || { cat err.txt >&2; exit 1; }
mkdir -p "$T/friend2/trusted-keys" && cp "$DLM_HOME/minisign.pub" "$T/friend2/trusted-keys/"
DLM_HOME="$T/friend2" "$DLM" pull hf:org/byhf --out got2 > pull2.out 2> err.txt || { cat err.txt >&2; exit 1; }
grep -q "signature: verified" pull2.out && cmp -s got2/t.dlm t.dlm || { cat pull2.out >&2; echo "r0809: pull of huggingface_hub's upload" >&2; exit 1; }
echo "r0809: huggingface_hub upload_file -> dlm pull: installed, signature verified"

# 2. dlm pushes; huggingface_hub downloads
: > req.log
HF_TOKEN=hf_write "$DLM" push p.dlm.pack --to hf:org/bydlm --sign -q 2> err.txt || { cat err.txt >&2; exit 1; }
cp req.log dlm.log
"$py" - <<'PY'
from huggingface_hub import hf_hub_download, HfApi
p = hf_hub_download(repo_id="org/bydlm", filename="adapter.dlm.pack")
assert open(p, "rb").read() == open("p.dlm.pack", "rb").read(), "the pack differs"
s = hf_hub_download(repo_id="org/bydlm", filename="adapter.dlm.pack.minisig")
r = hf_hub_download(repo_id="org/bydlm", filename="README.md")
card = open(r).read()
assert card.startswith("---\nlibrary_name: dlm\n") and "dlm pull hf:org/bydlm" in card, card
info = HfApi().model_info("org/bydlm")
assert sorted(x.rfilename for x in info.siblings) == [".gitattributes", "README.md", "adapter.dlm.pack",
                                                       "adapter.dlm.pack.minisig"], info.siblings
print("r0809: dlm push -> huggingface_hub hf_hub_download: the pack byte for byte, signature, card")
PY
# the signature huggingface_hub fetched is the one dlm pushed (dlm signs afresh: check it verifies)
command -v minisign > /dev/null && { minisign -V -p "$DLM_HOME/minisign.pub" -m p.dlm.pack -x "$(ls "$HF_HUB_CACHE"/models--org--bydlm/snapshots/*/adapter.dlm.pack.minisig)" > /dev/null ||
    { echo "r0809: minisign rejects the signature on the Hub" >&2; exit 1; }; }

# 3. the two clients' requests: same endpoints, same JSON keys, same NDJSON kinds
"$py" - <<'PY'
import json, re
def shape(path):
    out = []
    for l in open(path):
        r = json.loads(l)
        if r["method"] in ("GET", "HEAD"):
            continue
        p = r["path"].replace("org/byhf", "R").replace("org/bydlm", "R")
        p = re.sub(r"/s3/R/[0-9a-f]{64}(/part/\d+)?\?.*", r"/s3/OID\1", p)
        p = re.sub(r"/complete/[0-9a-f]{64}\?.*", "/complete/OID", p)
        b = r["body"]
        if isinstance(b, list):
            b = [(x["key"], sorted(x["value"])) for x in b]
        elif isinstance(b, dict):
            b = {k: (sorted(v[0]) if k in ("files", "objects") and v else v if k in ("operation", "hash_algo") else None) for k, v in b.items()}
        out.append((r["method"], p, r["ctype"].split(";")[0] if r["ctype"] else None, json.dumps(b, sort_keys=True),
                    r["auth"] is not None))
    return out
hf, dl = shape("hf.log"), shape("dlm.log")
for x in dl:
    assert x in hf or x[1].endswith("/commit/main"), ("dlm sent what huggingface_hub never does", x, hf)
hf_kinds = {k for x in hf if x[1].endswith("/commit/main") for k, _ in json.loads(x[3])}
dl_commit = [x for x in dl if x[1].endswith("/commit/main")]
assert len(dl_commit) == 1, dl
for k, keys in json.loads(dl_commit[0][3]):
    want = [y for x in hf if x[1].endswith("/commit/main") for y in json.loads(x[3]) if y[0] == k]
    assert want and want[0][1] == keys, (k, keys, want)
order = lambda s: [(x[0], x[1]) for x in s]
assert order(dl) == order(hf)[:len(order(dl))], (order(dl), order(hf))
assert sum(1 for x in dl if "/part/" in x[1]) == 5, "want 5 parts of the pack"
print("r0809: dlm's requests match huggingface_hub's (endpoints, JSON keys, NDJSON operations, token placement)")
PY
echo "r0809: ok"
