#!/usr/bin/env bash
# r1802: the original DocumentLanguageModel (PyPI 0.10.0, tests/ref/venv/
# orig.txt) continues a version dlm trained, through the training_state.pt
# sidecar dlm writes (src/run/ptstate.c), on the base r1401 makes (a random
# llama-shaped model under the original's registry key smollm2-135m):
#   - the original's own reader, dlm.train.state_sidecar.load_state, takes
#     dlm's v0001 (sha256 sidecar, torch.load(weights_only=True), the RNG
#     sidecar merged, no version-drift warning is an error);
#   - over the PEFT model the original's --resume builds
#     (PeftModel.from_pretrained(base, v0001, is_trainable=True)), torch's
#     AdamW with HF Trainer's two param groups loads dlm's optimizer state:
#     one state per trainable parameter, each exp_avg the parameter's shape;
#   - `dlm train --resume` of the original (which loads the adapter of the
#     current version; its trainer never reads training_state.pt back, the
#     file is for its tools) trains v0002 on dlm's store, and dlm shows it;
#   - the reverse: dlm asked to --resume the original's v0002 says why not,
#     with a hint (its optimizer state is a torch pickle of the original).
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}"
if ! V=$("$DLM_SRC/scripts/ref-venv.sh" orig); then
    [ "${DLM_REF_SKIP:-}" = 1 ] && exit 77
    echo "r1802: cannot make the orig venv (tests/ref/venv/orig.txt)" >&2; exit 1
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
export DLM_HOME="$T/h"
B=01M92MPZHR0JDACWTYDQ2C1802
cat > b.dlm <<DOC
---
dlm_id: $B
dlm_version: 1
base_model: smollm2-135m
training:
  sequence_len: 64
  num_epochs: 1
  micro_batch_size: 2
  grad_accum: 1
  learning_rate: 0.005
  seed: 11
---
# Capitals

Paris is the capital of France. Berlin is the capital of Germany.

::instruction::
### Q
What is the capital of France?
### A
Paris.
DOC
"$DLM" train b.dlm --max-steps 3 > d-train.log 2>&1 || fail "dlm train: $(cat d-train.log)"
S="$DLM_HOME/store/$B"
"$PY" - "$S/adapter/versions/v0001" <<'PYEOF' || fail "the original cannot load dlm's training_state.pt"
import json, sys, warnings
from pathlib import Path
import torch
from transformers import AutoModelForCausalLM
from peft import PeftModel
from dlm.base_models.registry import BASE_MODELS
from dlm.train.state_sidecar import load_state, capture_runtime_versions
d = Path(sys.argv[1])
with warnings.catch_warnings(record=True):
    st = load_state(d, runtime_versions=capture_runtime_versions())
steps = json.load(open(d / "training_run.json"))["steps"]
assert st["global_step"] == steps and steps > 0 and st["_state_sidecar_version"] == 2, (st["global_step"], steps)
assert st["python_random_state"][0] == 3 and st["numpy_rng_state"][0] == "MT19937"
base = AutoModelForCausalLM.from_pretrained(BASE_MODELS["smollm2-135m"].hf_id, revision=BASE_MODELS["smollm2-135m"].revision)
m = PeftModel.from_pretrained(base, str(d), is_trainable=True)
params = [p for n, p in m.named_parameters() if p.requires_grad]
o = st["optimizer_state_dict"]
assert len(o["state"]) == len(params), (len(o["state"]), len(params))
opt = torch.optim.AdamW([{"params": params, "weight_decay": 0.0}, {"params": [], "weight_decay": 0.0}], lr=0.005)
opt.load_state_dict(o)
for i, p in enumerate(params):
    assert opt.state[p]["exp_avg"].shape == p.shape and float(opt.state[p]["step"]) == steps
torch.random.set_rng_state(st["torch_rng_state"])
PYEOF
"$O" train b.dlm --resume --max-steps 2 > o-train.log 2>&1 || fail "the original's train --resume on dlm's store: $(tail -5 o-train.log)"
[ -f "$S/adapter/versions/v0002/training_state.pt" ] || fail "the original wrote no v0002"
"$DLM" show b.dlm > show.txt || fail "dlm show"
grep -q "v0002" show.txt || fail "dlm show after the original's resume: $(cat show.txt)"
rc=0; "$DLM" train b.dlm --resume > res.txt 2>&1 || rc=$?
[ $rc = 1 ] && grep -q "v0002 was trained by the original DocumentLanguageModel" res.txt &&
    grep -q "^hint: train on without --resume" res.txt || fail "dlm --resume of the original's v0002: rc $rc $(cat res.txt)"
echo ok
