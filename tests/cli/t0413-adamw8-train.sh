#!/usr/bin/env bash
# training.optimizer: adamw_bnb_8bit on the embedded tiny base: --threads 1
# and 2 give the same adapter and training_state.bin bytes; a run killed
# (SIGKILL) after a checkpoint and resumed gives the uninterrupted bytes; a
# resume after switching to adamw_torch is refused and names both
# optimizers (for a checkpoint and for a committed version's state);
# training_run.json records the optimizer; the checkpoint is
# training_state.bin version 2; `dlm doctor --json` plans the 8-bit moments
# at under a third of adamw_torch's 8 bytes per parameter.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
doc() { # doc FILE OPTIMIZER
    cat > "$1" <<DOC
---
dlm_id: $ID
dlm_version: 15
base_model: tiny
training:
  sequence_len: 64
  optimizer: $2
  lora_r: 16
  target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]
  micro_batch_size: 1
  grad_accum: 1
  num_epochs: 20
---
The quick brown fox jumps over the lazy dog. Paris is the capital of France.

::instruction::
### Q
What is the capital of Germany?
### A
Berlin.
DOC
}
V="$DLM_HOME/store/$ID/adapter/versions"
sha() { cat "$V/$1/adapter_model.safetensors" "$V/$1/training_state.bin" | sha256sum | cut -c1-64; }
doc d.dlm adamw_bnb_8bit
"$DLM" train d.dlm --max-steps 6 --threads 2 -q >/dev/null
a=$(sha v0001)
"$DLM" train d.dlm --max-steps 6 --threads 1 -q >/dev/null
[ "$a" = "$(sha v0002)" ] || fail "threads 1 vs 2 changed the adapter or its 8-bit state"
grep -q '"optimizer": *"adamw_bnb_8bit"' "$V/v0001/training_run.json" || fail "training_run.json has no optimizer"
ver=$(od -An -tu4 -j8 -N4 "$V/v0001/training_state.bin" | tr -d ' ')
[ "$ver" = 2 ] || fail "training_state.bin is version $ver, not 2 (8-bit state)"

# killed after step 3 (a checkpoint after every step of 6)
set +e
DLM_TEST_CRASH_AFTER_STEP=3 "$DLM" train d.dlm --max-steps 6 -q >/dev/null 2>&1
rc=$?
set -e
[ $rc -ne 0 ] || fail "the crash hook did not kill the run"
ls "$DLM_HOME/store/$ID/adapter/checkpoints" | grep -q step-000003 || fail "no checkpoint at step 3"
# another optimizer cannot continue the 8-bit moments
doc d.dlm adamw_torch
set +e
out=$("$DLM" train d.dlm --max-steps 6 --resume 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] || fail "a resume with adamw_torch over 8-bit moments was accepted"
grep <<<"$out" -q "ResumeIntegrityError: .*holds 8-bit AdamW moments .*trains with training.optimizer: adamw_torch" ||
    fail "the refusal does not name both optimizers: $out"
grep <<<"$out" -q "hint: set training.optimizer back to adamw_bnb_8bit" || fail "no hint: $out"
doc d.dlm adamw_bnb_8bit
"$DLM" train d.dlm --max-steps 6 --resume -q >/dev/null
[ "$a" = "$(sha v0003)" ] || fail "the resumed run differs from the uninterrupted one"

# no checkpoint left: --continue continues the committed version's state,
# and that too is refused for the other optimizer
doc d.dlm adamw_torch
set +e
out=$("$DLM" train d.dlm --max-steps 6 --continue 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] || fail "continuing an 8-bit version with adamw_torch was accepted"
grep <<<"$out" -q "v0003/training_state.bin holds 8-bit AdamW moments" || fail "version continuation: $out"
doc d.dlm adamw_bnb_8bit

# the plan: 8-bit moments well under adamw_torch's
moments() { "$DLM" doctor d.dlm --json | python3 -c '
import json, sys
items = json.load(sys.stdin)["plan"]["items"]
print(sum(i["bytes"] for i in items if i["name"].startswith("AdamW moments")), [i["name"] for i in items if i["name"].startswith("AdamW")][0])'; }
m8=$(moments)
doc d.dlm adamw_torch
m32=$(moments)
echo "doctor: $m8 | $m32"
grep <<<"$m8" -q "8-bit codes" || fail "doctor does not name the 8-bit moments: $m8"
[ $(( ${m8%% *} * 3 )) -lt "${m32%% *}" ] || fail "8-bit moments ($m8) are not under a third of 32-bit ($m32)"
echo ok
