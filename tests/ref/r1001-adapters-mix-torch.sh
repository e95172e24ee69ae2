#!/usr/bin/env bash
# r1001: base + a weighted pair of named adapters vs PyTorch written from HF +
# PEFT conventions (tests/ref/adapters/torch_mix.py merges
# W + Σ wᵢ·(alphaᵢ/rᵢ)·BᵢAᵢ from the PEFT folders): two adapters of one
# document (training.adapters, different r, alpha and target modules) trained
# by `dlm train` on a random llama base; dlm's KV-cache logits of the
# 0.7/0.3 mix (test_adapters_mix, the path `dlm prompt --adapter-mix` runs)
# match torch to 1e-4, and `dlm prompt --raw --temp 0 --adapter-mix
# a:0.7,b:0.3` continues greedily with torch's tokens.
set -euo pipefail
py=${DLM_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch' 2>/dev/null; then
    [ "${DLM_REF_SKIP:-}" = 1 ] && exit 77
    echo "r1001: $py has no torch" >&2; exit 1
fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export DLM_HOME="$T/home"
ID=01JD0000000000000000000AAA
"$py" "$DLM_SRC/tests/ref/make_model.py" --out "$T/m" --arch llama --vocab 400 --seed 31 >/dev/null
cat > "$T/doc.dlm" <<DOC
---
dlm_id: $ID
base_model: $T/m
training:
  sequence_len: 128
  micro_batch_size: 2
  grad_accum: 1
  adapters:
    knowledge:
      lora_r: 4
      lora_alpha: 16
      learning_rate: 0.02
      target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]
    tone:
      lora_r: 8
      lora_alpha: 8
      learning_rate: 0.02
      target_modules: [q_proj, v_proj]
---
Some shared prose about the sky and the sea, so both adapters move.

::instruction::
### Q
What colour is the sky?
### A
Blue, on a clear day.

::instruction#tone::
### Q
How are you?
### A
Splendid, thank you for asking!
DOC
"$DLM" train "$T/doc.dlm" --max-steps 6 -q >/dev/null
A="$DLM_HOME/store/$ID/adapter/knowledge/versions/v0001"
B="$DLM_HOME/store/$ID/adapter/tone/versions/v0001"
text="What colour is the sky? Blue, and the sea"
"$DLM" tokenize --tokenizer "$T/m/tokenizer.json" --json "$text" > "$T/ids.json"
"$py" "$DLM_SRC/tests/ref/adapters/torch_mix.py" "$T/m" "$T/ids.json" "$T/ref" "0.7:$A" "0.3:$B"
DLM_MIX_MODEL="$T/m" DLM_MIX_A="$A" DLM_MIX_B="$B" DLM_MIX_W="0.7,0.3" DLM_MIX_IDS="$T/ids.json" \
    DLM_MIX_LOGITS="$T/ref/logits.f32" "$DLM_BUILD/test_adapters_mix" | head -1
got=$("$DLM" prompt "$T/doc.dlm" --adapter-mix knowledge:0.7,tone:0.3 --raw --temp 0 -n 32 --json "$text" |
      "$py" -c 'import json,sys; print(json.load(sys.stdin)["tokens"])')
"$py" - "$got" "$T/ref/greedy.json" <<'PY'
import ast, json, sys
g, w = ast.literal_eval(sys.argv[1]), json.load(open(sys.argv[2]))
assert g and g == w[:len(g)], f"greedy differs: dlm {g} torch {w}"
print(f"greedy: {len(g)} tokens equal to torch's")
PY
echo ok
