#!/usr/bin/env bash
# What dlm writes for the original DocumentLanguageModel's tools, without
# Python's torch or sway (tests/ref/r1801-r1804 load them with those):
#   - each committed version holds training_state.pt (+ .sha256, its
#     digest), training_state.rng.json and pinned_versions.json; the .pt is
#     a zip whose entries are torch.save's (archive/data.pkl first,
#     .data/serialization_id last, every entry's bytes 64-byte aligned,
#     stored) and the same run writes the same bytes;
#   - export --emit-sway-json writes sway.yaml into the export folder
#     (version 1, the base, the current version's folder, the document's
#     absolute path, the suite's probe kinds in the original's order) and
#     names it; without the flag there is none.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
write_doc a.dlm 1
"$DLM" train a.dlm > t1.log 2>&1 || fail "train: $(cat t1.log)"
D="$DLM_HOME/store/$ID/adapter/versions/v0001"
for f in training_state.pt training_state.pt.sha256 training_state.rng.json pinned_versions.json; do
    [ -s "$D/$f" ] || fail "v0001 has no $f"
done
[ "$(cat "$D/training_state.pt.sha256")" = "$(sha256sum "$D/training_state.pt" | cut -c1-64)" ] || fail "sha256 sidecar"
python3 - "$D/training_state.pt" <<'PYEOF' || fail "training_state.pt is not torch.save's zip"
import json, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = [i.filename for i in z.infolist()]
assert names[:4] == ["archive/data.pkl", "archive/.format_version", "archive/.storage_alignment", "archive/byteorder"], names
assert names[-2:] == ["archive/version", "archive/.data/serialization_id"], names
assert names[4:-2] == ["archive/data/%d" % i for i in range(len(names) - 6)], names
assert z.read("archive/version") == b"3\n" and z.read("archive/byteorder") == b"little"
raw = open(sys.argv[1], "rb").read()
for i in z.infolist():
    assert i.compress_type == 0
    nl, xl = int.from_bytes(raw[i.header_offset + 26:i.header_offset + 28], "little"), int.from_bytes(raw[i.header_offset + 28:i.header_offset + 30], "little")
    assert (i.header_offset + 30 + nl + xl) % 64 == 0, i.filename
assert z.read("archive/data.pkl")[:2] == b"\x80\x02"
r = json.load(open(sys.argv[1].replace(".pt", ".rng.json")))
assert r["_rng_sidecar_version"] == 2 and r["python_random_state"]["version"] == 3
PYEOF
# dlm-sway's training_drift (its trunk on GitHub, not in the pinned 0.1.0)
# reads <store>/logs/train-*.jsonl: records of type "step" with int step and
# float loss, one per optimizer step
python3 - "$DLM_HOME/store/$ID" "$D/training_run.json" <<'PYEOF' || fail "the training log training_drift reads"
import glob, json, sys
logs = sorted(glob.glob(sys.argv[1] + "/logs/train-*.jsonl"))
assert len(logs) == 1, logs
steps = [r for r in map(json.loads, open(logs[0])) if r.get("type") == "step"]
assert [r["step"] for r in steps] == list(range(1, json.load(open(sys.argv[2]))["steps"] + 1)), steps
assert all(isinstance(r["loss"], float) for r in steps)
PYEOF
cp "$D/training_state.pt" first.pt
"$DLM" train a.dlm > t2.log 2>&1 || fail "retrain: $(cat t2.log)"
cmp -s first.pt "$DLM_HOME/store/$ID/adapter/versions/v0002/training_state.pt" || fail "the same run wrote another training_state.pt"
"$DLM" export a.dlm --target gguf --quant F32 > e1.log 2>&1 || fail "export: $(cat e1.log)"
[ ! -e "$DLM_HOME/store/$ID/exports/F32/sway.yaml" ] || fail "sway.yaml without --emit-sway-json"
"$DLM" export a.dlm --target gguf --quant F32 --emit-sway-json > e2.log 2>&1 || fail "export --emit-sway-json: $(cat e2.log)"
Y="$DLM_HOME/store/$ID/exports/F32/sway.yaml"
grep -qx "sway.yaml: $Y" e2.log || fail "not named: $(cat e2.log)"
grep -qx "version: 1" "$Y" && grep -qx "    base: $FIXTURE_QWEN" "$Y" &&
    grep -qx "    adapter: $(cd "$DLM_HOME/store/$ID/adapter/versions/v0002" && pwd -P)" "$Y" &&
    grep -qx "dlm_source: $(pwd -P)/a.dlm" "$Y" || fail "sway.yaml: $(cat "$Y")"
kinds=$(sed -n 's/^  kind: //p' "$Y" | tr '\n' ' ')
[ "$kinds" = "null_adapter delta_kl adapter_revert prompt_collapse section_internalization paraphrase_invariance style_fingerprint calibration_drift external_perplexity leakage adapter_ablation " ] ||
    fail "probe kinds: $kinds"
echo ok
