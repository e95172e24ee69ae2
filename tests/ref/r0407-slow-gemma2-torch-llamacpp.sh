#!/usr/bin/env bash
# r0407: Gemma 2 against independent references (slow: ~12 s of CPU, several processes).
#  1. training engine vs tests/ref/engine/torch_gemma2.py (written from
#     transformers' modeling_gemma2.py): logits, loss, every LoRA / DoRA /
#     full gradient (1e-4 relative) and 10 AdamW steps, on a model with a
#     query_pre_attn_scalar other than head_dim, attention and final caps
#     that bite, and a sliding window (5) shorter than the rows (12);
#  2. inference: make_model.py's gemma2 (3 layers: two sliding, window 8
#     over a 25-token prompt) as an HF folder and as its independently
#     written GGUF twin (llama.cpp's names, norms + 1): KV-cache logits
#     (prompt in chunks, then token by token) vs torch to 1e-4;
#  3. `dlm prompt --raw --temp 0` continues greedily with torch's 32 tokens
#     (the model rescaled so the continuation is not one repeated token);
#  4. llama.cpp (npm node-llama-cpp 3.21.1): dlm's F32 GGUF export of a
#     document trained on that model, base + LoRA adapter GGUF and merged,
#     continues the prompt with dlm's 32 greedy tokens.
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}" "${DLM_BUILD:?}"
py=/usr/bin/python3
ref=$DLM_SRC/tests/ref
skip() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r0407: skipped: $1"; exit 77; fi
    echo "r0407: FAILED: $1" >&2; exit 1
}
"$py" -c 'import torch' 2>/dev/null || skip "$py has no torch (scripts/deps.sh installs python3-torch)"
command -v node >/dev/null || skip "node is not installed"
[ -f "$ref/node_modules/node-llama-cpp/dist/index.js" ] || skip "node-llama-cpp is not installed (scripts/ref-deps.sh)"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export DLM_HOME="$T/home"

# 1. training engine
"$py" "$ref/engine/torch_gemma2.py" train --out "$T/eng" >/dev/null
DLM_ENGINE_REF="$T/eng" "$DLM_BUILD/test_engine" | grep '^ref'

# 2. inference, HF folder and GGUF twin
text="The quick brown fox jumps over the lazy dog. Paris is the capital of"
"$py" "$ref/make_model.py" --out "$T/g" --gguf "$T/g.gguf" --gguf-type f32 --arch gemma2 --tied --vocab 400 \
    --d-model 64 --ff 128 --layers 3 --head-dim 32 --sliding-window 8 --attn-softcap 4 --final-softcap 5 \
    --seed 51 >/dev/null
"$DLM" tokenize --tokenizer "$T/g/tokenizer.json" --json "$text" > "$T/ids"
"$py" "$ref/engine/torch_gemma2.py" infer "$T/g" "$T/ids" "$T/ref" >/dev/null
for m in "$T/g" "$T/g.gguf"; do
    DLM_INFER_MODEL="$m" DLM_INFER_IDS="$T/ids" DLM_INFER_LOGITS="$T/ref/logits.f32" "$DLM_BUILD/test_engine" | head -1
done

# 3. greedy vs torch on the rescaled folder
"$py" "$ref/export/scale_model.py" "$T/g" 1 0.1
"$py" "$ref/engine/torch_gemma2.py" infer "$T/g" "$T/ids" "$T/ref2" >/dev/null
greedy() { "$DLM" prompt "$@" --raw --temp 0 -n 32 --json "$text" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["tokens"])'; }
"$py" - "$(greedy --base "$T/g")" "$(cat "$T/ref2/greedy.json")" <<'PY'
import ast, sys
g, w = ast.literal_eval(sys.argv[1]), ast.literal_eval(sys.argv[2])
assert g == w[:len(g)] and len(g) == 32, f"greedy differs: dlm {g} torch {w}"
assert len(set(g)) > 4, f"degenerate continuation {g}"
print("r0407: greedy: 32 tokens equal to torch's")
PY

# 4. llama.cpp on dlm's F32 export (base + adapter, merged)
cat > "$T/doc.dlm" <<DOC
---
dlm_id: 01JD0000000000000000000GM2
dlm_version: 15
base_model: $T/g
training:
  sequence_len: 64
  num_epochs: 2
  learning_rate: 0.02
  micro_batch_size: 2
  grad_accum: 1
  lora_r: 8
  lora_alpha: 16
  target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]
---
# Capitals

Paris is the capital of France. Berlin is the capital of Germany.
Madrid is the capital of Spain, and Lisbon the capital of Portugal.
DOC
"$DLM" train "$T/doc.dlm" -q
"$DLM" export "$T/doc.dlm" --target gguf --quant F32 --out "$T/x" >/dev/null
"$DLM" export "$T/doc.dlm" --target gguf --quant F32 --merged --out "$T/xm" >/dev/null
ids=$("$DLM" tokenize --base "$T/g" --json "$text" | tr -d '\n ')
cat > "$T/jobs.json" <<JOBS
[{"id": "adapter", "model": "$T/x/base.F32.gguf", "lora": "$T/x/adapter.gguf", "ids": $ids, "greedy": 32},
 {"id": "merged", "model": "$T/xm/merged.F32.gguf", "lora": null, "ids": $ids, "greedy": 32},
 {"id": "base", "model": "$T/x/base.F32.gguf", "lora": null, "ids": $ids, "greedy": 32}]
JOBS
node "$ref/export/llama_check.mjs" "$T/jobs.json" "$T/llama.json"
"$py" - "$T/llama.json" "$(greedy "$T/doc.dlm")" "$(greedy --base "$T/g")" <<'PY'
import ast, json, sys
lc = json.load(open(sys.argv[1]))
mine, base = ast.literal_eval(sys.argv[2]), ast.literal_eval(sys.argv[3])
for k, v in lc.items():
    assert "error" not in v, f"llama.cpp {k}: {v['error']}"
for k, want in (("adapter", mine), ("merged", mine), ("base", base)):
    got = lc[k]["tokens"]
    # dlm stops at an end-of-generation token; llama.cpp (yieldEogToken) goes on
    assert want == got[:len(want)] and (len(want) == 32 or len(got) > len(want)), f"{k}: dlm {want} llama.cpp {got}"
    print(f"r0407: llama.cpp {k}: {len(want)} greedy tokens equal to dlm prompt --raw --temp 0")
assert mine != base, "the adapter changes nothing"
PY
echo ok
