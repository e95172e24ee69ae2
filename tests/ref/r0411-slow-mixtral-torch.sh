#!/usr/bin/env bash
# r0411 (slow: ~15 s of CPU, two torch references and llama.cpp): mixtral (sparse MoE: router, top-2 of 4 experts here, each expert a
# SwiGLU MLP, softmax over the chosen logits) against PyTorch written from
# transformers' MixtralSparseMoeBlock (tests/ref/engine/torch_ref.py
# moe_block, independent of dlm's code):
#   1. logits (max abs error <= 1e-4), LoRA and DoRA gradients on the
#      attention (1e-4 relative, through the frozen experts and router) and
#      10 AdamW steps (test_engine DLM_ENGINE_REF);
#   2. the KV-cache session (prompt in chunks, then token by token, a
#      sliding window of 8 over 25 tokens) vs torch's logits (1e-4), and
#      `dlm prompt --raw --temp 0` continues with torch's 32 greedy tokens;
#   3. through the registry key mixtral-8x7b-instruct on a shrunk random model
#      in an offline HF cache: dlm init, train --max-steps 2, doctor (the
#      plan), prompt;
#   4. the F32 GGUF export in llama.cpp: greedy equal to dlm's (see below).
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}" "${DLM_BUILD:?}"
py=${DLM_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch' 2>/dev/null; then
    [ "${DLM_REF_SKIP:-}" = 1 ] && exit 77
    echo "r0411: $py has no torch" >&2; exit 1
fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export DLM_HOME="$T/home" HF_HUB_CACHE="$T/hub" HF_HUB_OFFLINE=1
ref=$DLM_SRC/tests/ref

# 1. engine
"$py" "$ref/engine/torch_ref.py" --arch mixtral --out "$T/eng" | sed 's/^/r0411: /'
DLM_ENGINE_REF="$T/eng" "$DLM_BUILD/test_engine" | sed 's/^/r0411: /'

# 2. KV cache and greedy
m=$T/infer
"$py" "$ref/make_model.py" --out "$m" --arch mixtral --untied --sliding-window 8 --vocab 400 --d-model 64 --ff 96 \
    --layers 2 --experts 4 --experts-used 2 --seed 19 >/dev/null
text="The quick brown fox jumps over the lazy dog. 12345 <|im_start|>user"
"$DLM" tokenize --tokenizer "$m/tokenizer.json" --json "$text" > "$T/ids"
"$py" "$ref/engine/torch_infer.py" "$m" "$T/ids" "$T/ref" >/dev/null
DLM_INFER_MODEL="$m" DLM_INFER_IDS="$T/ids" DLM_INFER_LOGITS="$T/ref/logits.f32" "$DLM_BUILD/test_engine" |
    head -1 | sed 's/^/r0411: /'
got=$("$DLM" prompt --base "$m" --raw --temp 0 -n 32 --json "$text" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["tokens"])')
want=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1])))' "$T/ref/greedy.json")
"$py" - "$got" "$want" <<'PY'
import ast, sys
g, w = ast.literal_eval(sys.argv[1]), ast.literal_eval(sys.argv[2])
assert g and g == w[:len(g)], f"greedy differs: dlm {g} torch {w}"
print(f"r0411: greedy: {len(g)} tokens equal to torch's")
PY

# 3. the registry key on a shrunk random model
key=mixtral-8x7b-instruct repo=mistralai/Mixtral-8x7B-Instruct-v0.1 rev=eba92302a2861cdc0098cc54bc9f17cb2c47eb61
rdir="$HF_HUB_CACHE/models--${repo/\//--}"
"$py" "$ref/make_model.py" --out "$rdir/snapshots/$rev" --arch mixtral --untied --vocab 400 --d-model 64 --ff 96 \
    --layers 2 --experts 8 --experts-used 2 --seed 45 >/dev/null
mkdir -p "$rdir/.no_exist/$rev"
: > "$rdir/.no_exist/$rev/special_tokens_map.json"
: > "$rdir/.no_exist/$rev/chat_template.jinja"
cd "$T"
"$DLM" init m.dlm --base "$key" -q
"$DLM" train m.dlm --max-steps 2 -q
"$DLM" doctor m.dlm --json > plan.json
"$py" - plan.json <<'PY'
import json, sys
s = json.dumps(json.load(open(sys.argv[1])))
assert "total_bytes" in s and '"fits": true' in s, s[:400]
PY
out=$("$DLM" prompt m.dlm --temp 0 -n 8 "What is it?")
[ -n "$out" ] || { echo "r0411: empty prompt output" >&2; exit 1; }
echo "r0411: $key: init, train --max-steps 2, doctor, prompt ok"

# 4. the F32 GGUF export (llama arch with expert_count, ffn_gate_inp and the
# stacked ffn_{gate,up,down}_exps) in llama.cpp (npm node-llama-cpp 3.21.1):
# 32 greedy tokens equal dlm's on the HF folder, base + adapter and merged;
# dlm reads its merged export back to the same tokens
if [ ! -f "$ref/node_modules/node-llama-cpp/dist/index.js" ]; then
    [ "${DLM_REF_SKIP:-}" = 1 ] && { echo "r0411: llama.cpp part skipped (node-llama-cpp is not installed)"; exit 0; }
    echo "r0411: node-llama-cpp is not installed (run scripts/ref-deps.sh)" >&2; exit 1
fi
g=$T/gx
"$py" "$ref/make_model.py" --out "$g" --arch mixtral --untied --vocab 400 --d-model 256 --ff 512 --layers 2 \
    --experts 4 --experts-used 2 --seed 47 >/dev/null
"$py" "$ref/export/scale_model.py" "$g" 0.3 0.5
cat > g.dlm <<EOF
---
dlm_id: 01JD00000000000000000000X1
dlm_version: 15
base_model: $g
training:
  sequence_len: 64
  num_epochs: 2
  learning_rate: 0.02
  micro_batch_size: 2
  lora_r: 8
  lora_alpha: 16
  target_modules: [q_proj, k_proj, v_proj, o_proj]
---
# Capitals

Paris is the capital of France. Berlin is the capital of Germany.
Madrid is the capital of Spain, and Lisbon the capital of Portugal.
EOF
"$DLM" train g.dlm -q >/dev/null
"$DLM" export g.dlm --target gguf --quant F32 --out xa >/dev/null 2>&1
"$DLM" export g.dlm --target gguf --quant F32 --merged --out xm >/dev/null 2>&1
P="The quick brown fox jumps over the lazy dog. Paris is the capital of"
"$DLM" prompt g.dlm --raw --temp 0 -n 32 --json "$P" > mine.json
"$DLM" prompt --base xm/merged.F32.gguf --raw --temp 0 -n 32 --json "$P" > mine_gguf.json
"$DLM" prompt g.dlm --no-adapter --raw --temp 0 -n 32 --json "$P" > none.json
"$py" - "$ref/export/llama_check.mjs" <<'PY'
import json, subprocess, sys
mine, mg, none = (json.load(open(f)) for f in ("mine.json", "mine_gguf.json", "none.json"))
ids, want = mine["prompt_tokens"], mine["tokens"]
jobs = [{"id": "adapter", "model": "xa/base.F32.gguf", "lora": "xa/adapter.gguf", "ids": ids, "greedy": 32},
        {"id": "merged", "model": "xm/merged.F32.gguf", "lora": None, "ids": ids, "greedy": 32}]
json.dump(jobs, open("jobs.json", "w"))
subprocess.run(["node", sys.argv[1], "jobs.json", "llama.json"], check=True)
lc = json.load(open("llama.json"))
assert none["tokens"] != want, "the adapter does not change the greedy continuation"
assert mg["tokens"] == want, f"dlm on its merged GGUF {mg['tokens']} vs the HF folder {want}"
for k in ("adapter", "merged"):
    got = lc[k].get("tokens")
    assert got is not None and want == got[:len(want)] and (len(want) == 32 or len(got) > len(want)), \
        f"llama.cpp {k}: {lc[k]} vs dlm {want}"
    print(f"r0411: llama.cpp greedy ({k}): {len(want)} tokens equal to dlm prompt on the HF folder")
PY
