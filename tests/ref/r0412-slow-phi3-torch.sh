#!/usr/bin/env bash
# r0412 (slow: ~8 s of CPU, mostly three torch processes): Phi-3 /
# Phi-3.5-mini / Phi-4-mini against PyTorch written from transformers'
# modeling_phi3.py (tests/ref/engine/torch_phi3.py, independent of dlm's
# code: fused qkv_proj / gate_up_proj, partial rotary, LongRoPE with its
# attention factor, PEFT's LoRA / DoRA on the fused modules):
#   1. the training engine (test_engine DLM_ENGINE_REF) on a Phi-3.5-like
#      model (MHA, untied, rows longer than the original context: the long
#      factors) and a Phi-4-mini-like one (GQA, tied, 3/4 of each head
#      rotates, the short factors): logits (max abs error <= 1e-4), loss,
#      every LoRA / DoRA gradient (1e-4 relative) and 10 AdamW steps;
#   2. inference: make_model.py's phi3 models of both kinds, each as an HF
#      folder and as its independently written GGUF twin (llama.cpp's phi3
#      names and keys: attn_qkv, the fused ffn_up, rope_factors_long/short,
#      rope.dimension_count, rope.scaling.attn_factor): KV-cache logits
#      (prompt in chunks, then token by token) vs torch to 1e-4;
#   3. `dlm prompt --raw --temp 0` continues with torch's 32 greedy tokens;
#   4. adapters dlm trains, read as PEFT reads them (adapter_config.json and
#      PEFT's tensor names) by the torch model: a DoRA on qkv_proj and
#      gate_up_proj of the Phi-4-mini-like model and a LoRA on all four
#      modules (target_modules auto) of the other give dlm's KV-cache logits.
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}" "${DLM_BUILD:?}"
py=/usr/bin/python3
ref=$DLM_SRC/tests/ref
if ! "$py" -c 'import torch' 2>/dev/null; then
    [ "${DLM_REF_SKIP:-}" = 1 ] && { echo "r0412: skipped: $py has no torch"; exit 77; }
    echo "r0412: $py has no torch (scripts/deps.sh installs python3-torch)" >&2; exit 1
fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export DLM_HOME="$T/home"

# 1. training engine, both kinds
"$py" "$ref/engine/torch_phi3.py" train --out "$T/eng" >/dev/null
for k in phi35 phi4; do DLM_ENGINE_REF="$T/eng/$k" "$DLM_BUILD/test_engine" | grep '^ref' | sed 's/^/r0412: /'; done

# 2.-4. inference, greedy and adapters: Phi-3.5-like (LongRoPE's original
# context 16 < the prompt: the long factors everywhere) and Phi-4-mini-like
# (partial rotary 0.75, tied, GQA, original context 512: the short factors);
# dlm trains the adapters first so that one torch process answers them all
text="The quick brown fox jumps over the lazy dog. Paris is the capital of"
"$py" "$ref/make_model.py" --out "$T/a" --gguf "$T/a.gguf" --arch phi3 --untied --vocab 400 --d-model 64 --ff 128 \
    --layers 2 --heads 4 --kv-heads 4 --longrope 16 --max-pos 256 --seed 3 >/dev/null
"$py" "$ref/make_model.py" --out "$T/b" --gguf "$T/b.gguf" --arch phi3 --tied --vocab 400 --d-model 64 --ff 128 \
    --layers 2 --heads 4 --kv-heads 2 --partial-rotary 0.75 --longrope 512 --max-pos 4096 --seed 6 >/dev/null
"$DLM" tokenize --tokenizer "$T/a/tokenizer.json" --json "$text" > "$T/ids"
for k in a b; do
    if [ $k = b ]; then extra="  adapter: dora
  target_modules: [qkv_proj, gate_up_proj]"; else extra="  target_modules: auto"; fi
    cat > "$T/$k.dlm" <<DOC
---
dlm_id: 01JD00000000000000000000Q${k^^}
dlm_version: 15
base_model: $T/$k
training:
  sequence_len: 64
  num_epochs: 3
  learning_rate: 0.02
  micro_batch_size: 2
  lora_r: 4
  lora_alpha: 12
$extra
---
# Capitals

Paris is the capital of France. Berlin is the capital of Germany.
DOC
    "$DLM" train "$T/$k.dlm" -q >/dev/null
done
ad() { echo "$DLM_HOME/store/01JD00000000000000000000Q${1^^}/adapter/versions/v0001"; }
cat > "$T/jobs.json" <<JOBS
[["$T/a", "$T/ids", "$T/refa", null], ["$T/b", "$T/ids", "$T/refb", null],
 ["$T/a", "$T/ids", "$T/ada", "$(ad a)"], ["$T/b", "$T/ids", "$T/adb", "$(ad b)"]]
JOBS
"$py" "$ref/engine/torch_phi3.py" infer-many "$T/jobs.json" >/dev/null
for k in a b; do
    for m in "$T/$k" "$T/$k.gguf"; do
        DLM_INFER_MODEL="$m" DLM_INFER_IDS="$T/ids" DLM_INFER_LOGITS="$T/ref$k/logits.f32" "$DLM_BUILD/test_engine" |
            head -1 | sed "s|$T/|r0412: |"
    done
    got=$("$DLM" prompt --base "$T/$k" --raw --temp 0 -n 32 --json "$text" |
          "$py" -c 'import json,sys; print(json.load(sys.stdin)["tokens"])')
    "$py" - "$got" "$(cat "$T/ref$k/greedy.json")" "$k" <<'PY'
import ast, sys
g, w = ast.literal_eval(sys.argv[1]), ast.literal_eval(sys.argv[2])
assert len(g) == 32 and g == w[:32] and len(set(g)) > 3, f"greedy differs: dlm {g} torch {w}"
print(f"r0412: {sys.argv[3]}: greedy: {len(g)} tokens equal to torch's")
PY
    DLM_INFER_MODEL="$T/$k" DLM_INFER_ADAPTER="$(ad $k)" DLM_INFER_IDS="$T/ids" DLM_INFER_LOGITS="$T/ad$k/logits.f32" \
        "$DLM_BUILD/test_engine" | head -1 | sed "s|$T/|r0412: adapter on |"
    if cmp -s "$T/ref$k/logits.f32" "$T/ad$k/logits.f32"; then echo "r0412: $k: the adapter changes nothing" >&2; exit 1; fi
done
