#!/usr/bin/env bash
# Named adapters in packs and in doctor (issue 17), on the two-style
# document of tests/cli/helpers/styles_doc.py (sql r 8 on q/k/v/o, tone r 4
# alpha 8 on q/v/o):
#   doctor plans each adapter with its own sections and LoRA shape: the
#   trainable parameters of each plan equal the element count of the
#   adapter_model.safetensors that `dlm train` then writes (read here from
#   the safetensors header), and each plan's batch shape, items and bytes
#   equal the banner of that adapter's run log; text output has one plan per
#   adapter.
#   pack: provenance.json adapters_sha256 holds each adapter's current
#   safetensors sha256 (sha256sum of the store files); signed, Debian's
#   minisign verifies the payload (six keys); dlm verify checks each; an
#   adapter swapped after signing (checksums fixed) is a
#   ProvenanceMismatchError naming it; a current.txt naming another
#   adapter's version is a PackIntegrityError; unpack into a fresh home, then
#   `prompt --adapter NAME` gives the same text as before.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
PY=/usr/bin/python3
LIB="$DLM_SRC/tests/cli/packlib.py"
command -v minisign >/dev/null || fail "minisign is not installed (scripts/deps.sh)"
$PY "$DLM_SRC/tests/cli/helpers/styles_doc.py" doc.dlm "$ID" 2
S="$DLM_HOME/store/$ID"

# doctor, before training: one plan per adapter
"$DLM" doctor doc.dlm --json > doctor.json
"$DLM" doctor doc.dlm > doctor.txt
grep -q "^plan for doc.dlm, adapter sql (r 8, alpha 16, q_proj,k_proj,v_proj,o_proj), phase sft" doctor.txt || fail "$(cat doctor.txt)"
grep -q "^plan for doc.dlm, adapter tone (r 4, alpha 8, q_proj,v_proj,o_proj), phase sft" doctor.txt || fail "$(cat doctor.txt)"
"$DLM" train doc.dlm -q > /dev/null 2>&1 || fail "train"
$PY - doctor.json "$S" <<'PY'
import glob, json, struct, sys
d = json.load(open(sys.argv[1]))
aps = {a["adapter"]: a for a in d["adapter_plans"]}
assert list(aps) == ["sql", "tone"], list(aps)
assert aps["sql"]["lora"]["r"] == 8 and aps["tone"]["lora"]["r"] == 4 and aps["tone"]["lora"]["alpha"] == 8
assert aps["tone"]["lora"]["target_modules"] == ["q_proj", "v_proj", "o_proj"], aps["tone"]["lora"]
# tone: its 4 pairs and a conversation row each (training.multi_turn); sql's
# 6 pairs, whose two-turn conversations do not fit sequence_len 64
assert (aps["sql"]["train_items"], aps["tone"]["train_items"]) == (6, 8), aps
assert d["plan"]["total_bytes"] == max(a["plan"]["total_bytes"] for a in aps.values())
for name, ap in aps.items():
    f = open(f"{sys.argv[2]}/adapter/{name}/versions/v0001/adapter_model.safetensors", "rb")
    n = struct.unpack("<Q", f.read(8))[0]
    hdr = json.loads(f.read(n))
    elems = 0
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        c = 1
        for x in v["shape"]:
            c *= x
        elems += c
    assert ap["plan"]["trainable_params"] == elems, (name, ap["plan"]["trainable_params"], elems)
    logs = sorted(glob.glob(f"{sys.argv[2]}/logs/train-*.jsonl"))
    banners = [json.loads(l) for p in logs for l in open(p) if '"banner"' in l]
    b = [x for x in banners if x["train_items"] == ap["train_items"]][-1]
    for k, dk in (("micro_batch_size", "micro_batch_size"), ("grad_accum", "grad_accum"), ("seq_len", "sequence_len")):
        assert b[k] == ap["plan"][dk], (name, k, b[k], ap["plan"][dk])
    print(f"{name}: {elems} trainable parameters, plan {ap['plan']['total_bytes']} bytes, run {b['plan_bytes']}")
PY

# pack, signed; provenance claims each adapter
"$DLM" keygen -q
for a in sql tone; do "$DLM" prompt doc.dlm "List all users." --temp 0 -n 12 --adapter $a 2>/dev/null > "before-$a.txt"; done
cmp -s before-sql.txt before-tone.txt && fail "sql and tone answer alike: the round trip proves nothing"
"$DLM" pack doc.dlm --sign --out p.pack -q
$PY "$LIB" prov p.pack > prov.json
$PY - prov.json "$S" <<'PY'
import hashlib, json, sys
prov = json.load(open(sys.argv[1]))
want = {a: hashlib.sha256(open(f"{sys.argv[2]}/adapter/{a}/versions/v0001/adapter_model.safetensors", "rb").read()).hexdigest()
        for a in ("sql", "tone")}
assert prov["adapters_sha256"] == want, (prov["adapters_sha256"], want)
assert prov["adapter_sha256"] is None
PY
$PY "$LIB" payload p.pack payload.bin payload.minisig
grep -q '"adapters_sha256":{"sql":"' payload.bin || fail "payload: $(cat payload.bin)"
minisign -V -p "$DLM_HOME/minisign.pub" -m payload.bin -x payload.minisig >/dev/null || fail "minisign rejects the six-key payload"
out=$("$DLM" verify p.pack --trust-on-first-use) || fail "verify: $out"
grep -q "adapter sql [0-9a-f]\{12\}… matches its claim" <<<"$out" && grep -q "adapter tone " <<<"$out" || fail "verify: $out"
$PY "$LIB" swap-adapter p.pack swapped.pack adapter/tone/
set +e
out=$("$DLM" -v verify swapped.pack 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q "ProvenanceMismatchError.*claims adapters_sha256 .* for adapter 'tone', the packed current version is" <<<"$out" || fail "swapped tone: $rc $out"
# a named current.txt that names anything but its own adapter's vNNNN is refused
$PY "$LIB" set-member p.pack bad.pack store/adapter/sql/current.txt "adapter/tone/versions/v0001"
set +e
out=$("$DLM" -v verify bad.pack 2>&1); rc=$?
set -e
[ $rc = 1 ] && grep -q "PackIntegrityError.*store/adapter/sql/current.txt is malformed" <<<"$out" || fail "bad current.txt: $rc $out"

# unpack into a fresh home: the same answers by name
mkdir other && cd other
export DLM_HOME="$T/home2"
"$DLM" unpack ../p.pack --out . -q || fail "unpack"
[ -d "$DLM_HOME/store/$ID/adapter/sql/versions/v0001" ] || fail "unpack: no sql tree"
for a in sql tone; do
    "$DLM" prompt doc.dlm "List all users." --temp 0 -n 12 --adapter $a 2>/dev/null > "after-$a.txt" || fail "prompt --adapter $a after unpack"
    cmp -s "after-$a.txt" "../before-$a.txt" || fail "$a after unpack: '$(cat "after-$a.txt")' vs '$(cat "../before-$a.txt")'"
done
echo ok
