#!/bin/bash
# r0810: dlm and the original DocumentLanguageModel 0.10.0 (its hf sink,
# dlm/share/hf_sink.py, over huggingface_hub 2.4; tests/ref/venv/orig.txt)
# share packs through the same Hub repository layout, on the Hub stand-in
# (tests/cli/helpers/hub_share_standin.py):
#   - the original's `dlm pull hf:ORG/NAME` installs a pack `dlm push --to
#     hf:` uploaded (the .dlm it writes equals the document);
#   - the original's push_hf uploads a pack that `dlm pull hf:` installs;
#   - the README.md model card dlm writes equals the original's
#     _render_readme for the same repository and fields, byte for byte.
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
venv=$("$DLM_SRC/scripts/ref-venv.sh" orig) || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: the orig reference venv is unavailable"; exit 77; fi
    exit 1
}
py="$venv/bin/python"
DLM=${DLM:-$DLM_BUILD/dlm}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r0810.XXXXXX")
srv=""
trap '[ -n "$srv" ] && kill $srv 2>/dev/null; rm -rf "$T"' EXIT
cd "$T"
export DLM_HOME="$T/home" HF_HUB_DISABLE_XET=1 HF_HUB_DISABLE_TELEMETRY=1 HF_HOME="$T/hfhome"
unset HF_TOKEN HUGGING_FACE_HUB_TOKEN HF_HUB_OFFLINE HF_HUB_CACHE
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
"$DLM" pack t.dlm --out p.dlm.pack -q
"$py" "$DLM_SRC/tests/cli/helpers/hub_share_standin.py" req.log > port.txt &
srv=$!
for _ in $(seq 600); do [ -s port.txt ] && break; sleep 0.1; done
export HF_ENDPOINT="http://127.0.0.1:$(cat port.txt)"

# 1. dlm pushes, the original's CLI pulls
HF_TOKEN=hf_write "$DLM" push p.dlm.pack --to hf:org/bydlm -q
mkdir o && (cd o && DLM_HOME="$T/ohome" "$venv/bin/dlm" pull hf:org/bydlm > ../opull.txt 2>&1) ||
    { cat opull.txt >&2; echo "r0810: the original's dlm pull failed" >&2; exit 1; }
cmp -s o/t.dlm t.dlm || { cat opull.txt >&2; echo "r0810: the original pulled another document" >&2; exit 1; }
echo "r0810: dlm push -> the original's dlm pull hf: installed the document"

# 2. the original's push_hf, dlm pulls; the two cards
HF_TOKEN=hf_write "$py" - > /dev/null 2> opush.txt <<'PY' || { cat opush.txt >&2; exit 1; }
import json, tarfile
from pathlib import Path
import zstandard
from dlm.share.hf_sink import push_hf
with open("p.dlm.pack", "rb") as f, zstandard.ZstdDecompressor().stream_reader(f) as r, tarfile.open(fileobj=r, mode="r|") as t:
    for m in t:
        if m.name == "manifest.json":
            man = json.load(t.extractfile(m))
            break
fields = {"dlm_id": man["dlm_id"], "base_model": str(man["base_model"]), "adapter_version": str(man["adapter_version"])}
push_hf(Path("p.dlm.pack"), "org/same", readme_fields=fields)
PY
curl -sfL "$HF_ENDPOINT/org/same/resolve/main/README.md" -o card.orig
DLM_HOME="$T/friend" "$DLM" pull hf:org/same --out got > pull.out 2> err.txt || { cat err.txt >&2; exit 1; }
cmp -s got/t.dlm t.dlm || { echo "r0810: dlm pulled another document" >&2; exit 1; }
echo "r0810: the original's push_hf -> dlm pull hf: installed the document"
HF_TOKEN=hf_write "$DLM" push p.dlm.pack --to hf:org/same -q
curl -sfL "$HF_ENDPOINT/org/same/resolve/main/README.md" -o card.dlm
cmp card.orig card.dlm || { diff card.orig card.dlm >&2; echo "r0810: the cards differ" >&2; exit 1; }
echo "r0810: dlm's README.md equals the original's card byte for byte"
echo "r0810: ok"
