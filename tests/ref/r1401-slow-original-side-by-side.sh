#!/usr/bin/env bash
# r1401: dlm beside the original DocumentLanguageModel (PyPI
# document-language-model 0.10.0, tests/ref/venv/orig.txt) on the same
# DLM_HOME and the same base: a random llama-shaped model made from a
# config (tests/ref/orig/mkbase.py), saved with save_pretrained into an HF
# cache snapshot under the id and revision of the original's registry key
# smollm2-135m (the original resolves only registry keys and hf: ids), used
# offline by both.
#   1. the original inits and trains; dlm shows the store, prompts the same
#      greedy answer as the original's `prompt --temp 0`, exports, reads the
#      original's metrics.sqlite, refuses `--resume` of the original's
#      torch-pickled optimizer state with a hint, and trains v0002 replaying
#      a section the document no longer has from the original's zstd + CBOR
#      corpus;
#   2. dlm trains; the original's own loaders accept dlm's dlm.lock and
#      replay corpus (pydantic schemas with extra="forbid", cbor2), the
#      original shows the store, prompts dlm's greedy answer, scores dlm's
#      `preference mine --judge sway` pairs as dlm did, unpacks dlm's
#      pack, packs the store (dlm verifies and unpacks that pack), and
#      retrains v0002 on top of dlm's v0001.
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}"
if ! V=$("$DLM_SRC/scripts/ref-venv.sh" orig); then
    [ "${DLM_REF_SKIP:-}" = 1 ] && exit 77
    echo "r1401: cannot make the orig venv (tests/ref/venv/orig.txt)" >&2; exit 1
fi
O="$V/bin/dlm"
PY="$V/bin/python"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
export HF_HOME="$T/hf" HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 DO_NOT_TRACK=1
unset HF_HUB_CACHE DLM_TINY
"$PY" "$DLM_SRC/tests/ref/orig/mkbase.py" "$DLM_SRC/tests/ref/model/fixtures/llama-bf16" "$HF_HOME" > /dev/null 2>&1 ||
    fail "cannot make the base"
Q="What is the capital of France?"
# doc FILE ID [no-qa]: prose + (unless no-qa) one instruction section
doc() {
    cat > "$1" <<DOC
---
dlm_id: $2
dlm_version: 1
base_model: smollm2-135m
training:
  sequence_len: 64
  num_epochs: 1
  micro_batch_size: 2
  grad_accum: 1
  learning_rate: 0.005
---
# Capitals

Paris is the capital of France. Berlin is the capital of Germany.
DOC
    [ "${3:-}" = no-qa ] || printf '\n::instruction::\n### Q\nWhat is the capital of France?\n### A\nParis.\n\n### Q\nWhat is the capital of Germany?\n### A\nBerlin.\n' >> "$1"
}
# same_answer FILE: the original's and dlm's greedy answers, the bytes dlm
# streams read as Python reads them (undecodable bytes → U+FFFD, as the
# original's tokenizer.decode prints them)
same_answer() {
    "$O" prompt "$1" "$Q" --temp 0 --max-tokens 12 > o.txt 2> o.err || fail "original prompt $1: $(tail -3 o.err)"
    "$DLM" prompt "$1" "$Q" --temp 0 --max-tokens 12 > d.txt 2> d.err || fail "dlm prompt $1: $(cat d.err)"
    "$PY" - <<'PYEOF' || fail "greedy answers differ: original $(od -c o.txt | head -3) dlm $(od -c d.txt | head -3)"
o = open("o.txt", "rb").read().decode("utf-8").strip()
d = open("d.txt", "rb").read().decode("utf-8", "replace").strip()
assert o == d and len(o) >= 4, (o, d)
PYEOF
}

# --- 1. the original trains, dlm continues ------------------------------------------
export DLM_HOME="$T/h1"
"$O" init a.dlm --base smollm2-135m > /dev/null 2>&1 || fail "original init"
A=$(sed -n 's/^dlm_id: //p' a.dlm)
doc a.dlm "$A"
"$O" train a.dlm --max-steps 4 > o-train.log 2>&1 || fail "original train: $(tail -5 o-train.log)"
S="$DLM_HOME/store/$A"
[ -f "$S/adapter/versions/v0001/training_state.pt" ] || fail "the original wrote no training_state.pt"
"$DLM" show a.dlm --json > show.json || fail "dlm show"
"$PY" -c 'import json; s = json.load(open("show.json")); print(json.dumps(s)[:0]); assert "v0001" in json.dumps(s), s' || fail "show: $(head -c 600 show.json)"
same_answer a.dlm
"$DLM" export a.dlm --target gguf --quant F32 > exp.txt 2>&1 || fail "dlm export: $(cat exp.txt)"
[ -s "$S/exports/F32/adapter.gguf" ] && [ -s "$S/exports/F32/base.F32.gguf" ] || fail "export files"
"$DLM" metrics a.dlm --runs --json > runs.json || fail "dlm metrics"
"$PY" -c '
import json; r = json.load(open("runs.json"))
r = r if isinstance(r, list) else r.get("runs", r.get("rows"))
assert len(r) == 1 and r[0]["run_id"] == 1 and r[0]["phase"] == "sft", r' || fail "metrics runs: $(cat runs.json)"
rc=0; "$DLM" train a.dlm --resume > res.txt 2>&1 || rc=$?
[ $rc = 1 ] && grep -q "v0001 was trained by the original DocumentLanguageModel: its optimizer state (training_state.pt" res.txt &&
    grep -q "^hint: train on without --resume" res.txt || fail "--resume: rc $rc $(cat res.txt)"
doc a.dlm "$A" no-qa   # the Q&A section now lives only in the original's replay corpus
"$DLM" train a.dlm --max-steps 2 > d-train.log 2>&1 || fail "dlm train on the original's store: $(cat d-train.log)"
"$PY" - "$S" <<'PYEOF' || fail "dlm's v0002 did not replay the original's corpus"
import json, sys
s = sys.argv[1]
assert open(s + "/adapter/current.txt").read().strip().endswith("v0002")
tr = json.load(open(s + "/adapter/versions/v0002/training_run.json"))
assert tr["replay_sections"] >= 1, tr["replay_sections"]
PYEOF
"$DLM" metrics a.dlm --runs --json > runs.json
"$PY" -c '
import json; r = json.load(open("runs.json")); r = r if isinstance(r, list) else r.get("runs", r.get("rows"))
assert [x["run_id"] for x in r] == [1, 2], r' || fail "metrics after dlm's run: $(cat runs.json)"
# and the original still reads the store dlm wrote into
"$O" show a.dlm > o-show.txt 2>&1 || fail "original show after dlm: $(tail -5 o-show.txt)"
grep -q "v0002" o-show.txt || fail "original show: $(cat o-show.txt)"

# --- 2. dlm trains, the original continues ---------------------------------------------
export DLM_HOME="$T/h2"
B=01M92MPZHR0JDACWTYDQ2C9K8Z
doc b.dlm "$B"
"$DLM" train b.dlm --max-steps 3 > d-train2.log 2>&1 || fail "dlm train: $(cat d-train2.log)"
S="$DLM_HOME/store/$B"
"$PY" - "$S" <<'PYEOF' || fail "the original's loaders refuse dlm's store files"
import sys
from pathlib import Path
from dlm.lock.writer import load_lock
from dlm.replay.index import load_index
from dlm.replay.corpus import iter_snapshots
s = Path(sys.argv[1])
lock = load_lock(s)
assert lock.dlm_id == "01M92MPZHR0JDACWTYDQ2C9K8Z" and lock.hardware_tier == "cpu", lock
idx = load_index(s / "replay" / "index.json")
snaps = list(iter_snapshots(s / "replay" / "corpus.zst", idx))
types = sorted(x.section_type for x in snaps)
assert types == ["instruction", "prose"], types
assert any(x.content.startswith("# Capitals") for x in snaps)
assert all(x.training_runs_seen == [1] for x in snaps)
PYEOF
"$O" show b.dlm > o-show2.txt 2>&1 || fail "original show: $(tail -5 o-show2.txt)"
grep -q "adapter: *v0001" o-show2.txt || fail "original show: $(cat o-show2.txt)"
same_answer b.dlm
# the original's default preference judge: dlm's `--judge sway` scores are
# the original's SwayJudge (dlm-sway's HF backend) scores of the same pairs
"$DLM" preference mine b.dlm --judge sway --samples 3 --temp 1.5 --max-new-tokens 6 --threshold 0 --json \
    > mine.json 2> mine.err || fail "dlm preference mine --judge sway: $(cat mine.err)"
"$PY" - <<'PYEOF' || fail "dlm's sway judge scores differ from the original's SwayJudge"
import json
from pathlib import Path
from dlm.preference.judge import SwayJudge
tr = json.load(open("mine.json"))["triples"]
assert tr, "no triples"
j = SwayJudge(Path("b.dlm"))
for t in tr:
    assert t["judge_name"] == "sway:preference_judge", t
    ps = j.score_pair(t["prompt"], t["chosen"], t["rejected"])
    for a, b in ((ps.score_a, t["judge_score_chosen"]), (ps.score_b, t["judge_score_rejected"])):
        assert abs(a - b) <= 1e-4 * max(1.0, abs(a)), (a, b, t)
PYEOF
# packs both ways: the original unpacks dlm's, dlm verifies (unsigned: exit
# 1, as the original's verify) and unpacks the original's
"$DLM" pack b.dlm --out d.dlm.pack > /dev/null || fail "dlm pack"
DLM_HOME="$T/h5" "$O" unpack d.dlm.pack --out u5 > o-unpack.txt 2>&1 || fail "original unpack of dlm's pack: $(tail -3 o-unpack.txt)"
DLM_HOME="$T/h5" "$O" show u5/b.dlm > o-show5.txt 2>&1 && grep -q "adapter: *v0001" o-show5.txt || fail "original show of the unpacked store: $(tail -5 o-show5.txt)"
"$O" pack b.dlm > o-pack.txt 2>&1 || fail "original pack: $(tail -3 o-pack.txt)"
[ -s b.dlm.pack ] || fail "no pack"
rc=0; "$DLM" verify b.dlm.pack 2> v.err || rc=$?
[ $rc = 1 ] && grep -q "holds no provenance.json" v.err || fail "dlm verify of the original's unsigned pack: rc $rc $(cat v.err)"
DLM_HOME="$T/h6" "$DLM" unpack b.dlm.pack --out u6 > /dev/null || fail "dlm unpack of the original's pack"
DLM_HOME="$T/h6" "$DLM" show u6/b.dlm > d-show6.txt && grep -q "adapter *v0001" d-show6.txt || fail "dlm show of the unpacked store: $(cat d-show6.txt)"
doc b.dlm "$B" no-qa
"$O" train b.dlm --max-steps 2 > o-train2.log 2>&1 || fail "original retrain on dlm's store: $(tail -5 o-train2.log)"
[ -f "$S/adapter/versions/v0002/adapter_model.safetensors" ] || fail "the original wrote no v0002"
"$DLM" show b.dlm > d-show.txt || fail "dlm show after the original"
grep -q "v0002" d-show.txt || fail "dlm show: $(cat d-show.txt)"
same_answer b.dlm
echo ok
