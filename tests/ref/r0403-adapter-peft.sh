#!/usr/bin/env bash
# dlm's adapter folder, read as PEFT reads it (adapter_config.json + PEFT
# tensor names) by a PyTorch script, gives dlm's own logits: for a LoRA on
# all seven projections of a llama base and a DoRA on attention of a qwen2
# base, both trained by `dlm train`.
set -euo pipefail
py=${DLM_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch' 2>/dev/null; then
    [ "${DLM_REF_SKIP:-}" = 1 ] && exit 77
    echo "r0403: $py has no torch" >&2; exit 1
fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export DLM_HOME="$T/home"
case_run() { # name arch adapter targets
    local name=$1 arch=$2 adapter=$3 targets=$4
    "$py" "$DLM_SRC/tests/ref/make_model.py" --out "$T/$name" --arch $arch --vocab 400 --seed 21 >/dev/null
    cat > "$T/$name.dlm" <<DOC
---
dlm_id: 01JD00000000000000000000$( [ $name = a ] && echo AA || echo BB )
base_model: $T/$name
training:
  adapter: $adapter
  target_modules: $targets
  learning_rate: 0.01
  num_epochs: 4
  sequence_len: 128
---
Some prose to learn from, repeated a little so the adapter moves away from zero.

::instruction::
### Q
What colour is the sky?
### A
Blue, on a clear day.
DOC
    "$DLM" train "$T/$name.dlm" -q >/dev/null
    local id=$(sed -n 's/^dlm_id: //p' "$T/$name.dlm")
    local ad="$DLM_HOME/store/$id/adapter/versions/v0001"
    "$DLM" tokenize --tokenizer "$T/$name/tokenizer.json" --json "What colour is the sky? Blue." > "$T/$name.ids"
    "$py" "$DLM_SRC/tests/ref/engine/torch_peft.py" "$T/$name" "$ad" "$T/$name.ids" "$T/$name.ref"
    DLM_INFER_MODEL="$T/$name" DLM_INFER_ADAPTER="$ad" DLM_INFER_IDS="$T/$name.ids" \
        DLM_INFER_LOGITS="$T/$name.ref/logits.f32" "$DLM_BUILD/test_engine" | head -1
}
case_run a llama lora "[q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]"
case_run b qwen2 dora auto
echo ok
