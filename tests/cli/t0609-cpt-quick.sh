#!/usr/bin/env bash
# The quick (ASan-run) variant of t0606-t0608 (slow: they train several
# runs): on the tag-weighted tree of tests/cli/helpers/tag_weights_ref.py,
# `dlm show --sources --json` gives every file the reference's weight and
# `dlm doctor --json` the reference's rows dropped, copies added and train
# prose rows, with the DAPT schedule auto picks for an all-prose corpus
# (warmup ceil(0.2·total), floor 0.1); then one DAPT step with the embed
# warm-up on (the embedding and head trained in step 1) trains, and its
# training_run.json records the choice; with an 8-bit optimizer it is refused
# at the key's file:line.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
py=${DLM_PYTHON:-/usr/bin/python3}
ref="$DLM_SRC/tests/cli/helpers/tag_weights_ref.py"
"$py" "$ref" make corpus
cat > w.dlm <<DOC
---
dlm_id: $ID
dlm_version: 15
base_model: tiny
training:
  sequence_len: 128
  micro_batch_size: 4
  sources:
    - path: corpus
---
DOC
"$DLM" -q show w.dlm --sources --json > show.json || fail "show"
"$DLM" doctor w.dlm --json > doctor.json || fail "doctor"
"$py" - show.json doctor.json "$ref" <<'PY' || fail "weights or schedule differ from the reference"
import json, math, subprocess, sys
ref = json.loads(subprocess.check_output([sys.executable, sys.argv[3], "expect", "corpus", "42"]))
got_w = {f["path"]: f["weight"] for f in json.load(open(sys.argv[1]))["files"] if f["verdict"] == "kept"}
assert got_w == ref["weights"], (got_w, ref["weights"])
d = json.load(open(sys.argv[2]))
assert d["tag_weights"] == {"rows_dropped": ref["dropped"], "copies_added": ref["extra"]}, (d["tag_weights"], ref)
c = d["cpt"]
assert (c["text_rows"], c["messages_rows"]) == (ref["train"], 0), (c, ref)
assert c["schedule"] == "dapt" and c["lr_scheduler"] == "cosine_with_min_lr" and c["min_lr_ratio"] == 0.1, c
mb, ga = d["plan"]["micro_batch_size"], d["plan"]["grad_accum"]
total = math.ceil(ref["train"] / (mb * ga)) * 3        # num_epochs 3
assert c["warmup_steps"] == math.ceil(total * 0.2), (c, total)
PY
cat > e.dlm <<DOC
---
dlm_id: 01JD0000000000000000000009
dlm_version: 15
base_model: tiny
training:
  sequence_len: 64
  cpt: {schedule: dapt, embed_warmup_steps: 1}
---
The quick brown fox jumps over the lazy dog. Paris is the capital of France.
DOC
out=$("$DLM" train e.dlm --max-steps 1 2>&1) || fail "train: $out"
grep <<<"$out" -q "embed warm-up: steps 1..1 train the embedding and LM head (tied: one matrix) with the LoRA weights" || fail "$out"
st="$DLM_HOME/store/01JD0000000000000000000009"
"$py" - "$st/$(tr -d '\n' < "$st/adapter/current.txt")/training_run.json" <<'PY' || fail "training_run.json cpt"
import json, sys
c = json.load(open(sys.argv[1]))["cpt"]
assert c["schedule"] == "dapt" and c["setting"] == "dapt" and c["embed_warmup_steps"] == 1, c
PY
# the warm-up trains with 32-bit AdamW only: an 8-bit optimizer is refused at the key's line
sed 's/^  sequence_len: 64$/  sequence_len: 64\n  optimizer: adamw_bnb_8bit/' e.dlm > e8.dlm
line=$(grep -n "embed_warmup_steps" e8.dlm | cut -d: -f1)
set +e
out=$("$DLM" train e8.dlm --same-store --max-steps 1 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] && grep <<<"$out" -q "e8.dlm:$line:1: training.cpt.embed_warmup_steps trains the embedding and LM head with 32-bit AdamW only" &&
    grep <<<"$out" -q "hint: set training.optimizer: adamw_torch" || fail "8-bit + warm-up not refused: $out"
echo ok
