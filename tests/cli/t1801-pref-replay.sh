#!/usr/bin/env bash
# The preference phase replays past preference sections, as the original's
# DPO/ORPO phases (ReplayStore.sample_preference_rows): after a document's
# ten preference sections were trained, the same document with them
# replaced by one new section trains DPO on its own triple plus
# k = max(8, 2·1) = 8 of the ten, drawn from the replay corpus by recency
# weight, and they are trained (the adapter differs from --no-replay's);
# the same seed draws the same ones (identical adapters on a copied store);
# --no-replay and training.replay.enabled: false train the
# document's triple alone; a document with no preference section of its
# own is still NoPreferenceContentError (replay alone is no phase).
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
doc() { # FILE FIRST LAST [EXTRA-TRAINING-YAML]
    cat > "$1" <<DOC
---
dlm_id: $ID
dlm_version: 15
base_model: $FIXTURE_QWEN
training:
  sequence_len: 64
  num_epochs: 1
  learning_rate: 0.005
  micro_batch_size: 2
  grad_accum: 1
  preference:
    hyperparams: {beta: 0.1, learning_rate: 0.001, num_epochs: 1}
${4:-}
---
Paris is the capital of France.

::instruction::
### Q
What is the capital of France?
### A
Paris.
DOC
    for i in $(seq "$2" "$3"); do
        printf '\n::preference::\n### Prompt\nQuestion %d?\n### Chosen\nAnswer %d.\n### Rejected\nNo %d.\n' "$i" "$i" "$i" >> "$1"
    done
}
S="$DLM_HOME/store/$ID"
doc a.dlm 1 10
"$DLM" train a.dlm --phase all > t1.log 2>&1 || fail "train --phase all: $(cat t1.log)"
n=$(python3 -c 'import json,sys; print(sum(1 for x in json.load(open(sys.argv[1])) if True))' "$S/replay/index.json")
[ "$n" -ge 12 ] || fail "the corpus holds $n sections, expected the 12 of the document"
doc a.dlm 11 11   # the ten sections now live only in the replay corpus
cp -r "$DLM_HOME" home2
cp -r "$DLM_HOME" home3
"$DLM" train a.dlm --phase preference > t2.log 2>&1 || fail "train --phase preference: $(cat t2.log)"
V=$(cat "$S/adapter/current.txt"); V=${V##*/}
python3 - "$S/adapter/versions/$V/training_run.json" <<'PYEOF' || fail "replayed pairs: $(cat "$S/adapter/versions/$V/training_run.json")"
import json, sys
t = json.load(open(sys.argv[1]))
assert t["phase"] == "dpo", t["phase"]
assert t["replay_sections"] == 8 and t["pref_pairs"] == {"document": 1, "replay": 8}, (t["replay_sections"], t["pref_pairs"])
PYEOF
# the same draw from the same store and seed: the same adapter
DLM_HOME="$T/home2" "$DLM" train a.dlm --phase preference > t3.log 2>&1 || fail "second store: $(cat t3.log)"
cmp -s "$S/adapter/versions/$V/adapter_model.safetensors" "$T/home2/store/$ID/adapter/versions/$V/adapter_model.safetensors" ||
    fail "the same seed and store gave another adapter"
# --no-replay from the same store: the document's triple alone, and another
# adapter than the replayed run's (the replayed pairs were trained)
DLM_HOME="$T/home3" "$DLM" train a.dlm --phase preference --no-replay > t4.log 2>&1 || fail "--no-replay: $(cat t4.log)"
python3 -c 'import json,sys; t = json.load(open(sys.argv[1])); assert t["pref_pairs"] == {"document": 1, "replay": 0}, t["pref_pairs"]' \
    "$T/home3/store/$ID/adapter/versions/$V/training_run.json" || fail "--no-replay replayed"
! cmp -s "$S/adapter/versions/$V/adapter_model.safetensors" "$T/home3/store/$ID/adapter/versions/$V/adapter_model.safetensors" ||
    fail "the replayed pairs changed nothing"
doc a.dlm 11 11 "  replay: {enabled: false}"
"$DLM" train a.dlm --phase preference > t5.log 2>&1 || fail "replay disabled: $(cat t5.log)"
V=$(cat "$S/adapter/current.txt"); V=${V##*/}
python3 -c 'import json,sys; t = json.load(open(sys.argv[1])); assert t["pref_pairs"]["replay"] == 0, t["pref_pairs"]' \
    "$S/adapter/versions/$V/training_run.json" || fail "training.replay.enabled: false replayed"
doc a.dlm 1 0
rc=0; "$DLM" train a.dlm --phase preference > t6.log 2>&1 || rc=$?
[ $rc = 1 ] && grep -q "NoPreferenceContentError\|has no preference sections" t6.log || fail "replay alone: rc $rc $(cat t6.log)"
echo ok
