#!/usr/bin/env bash
# r1003: named adapters in llama.cpp (npm node-llama-cpp 3.21.1, CPU, F32):
# two adapters of one document, each exported with `dlm export --adapter
# NAME --quant F32`, loaded together with scales 0.7 / 0.3, continue the
# prompt greedily with the same 32 tokens as `dlm prompt --raw --temp 0
# --adapter-mix knowledge:0.7,tone:0.3` (from the same prompt ids).
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}"
skip_or_fail() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r1003: skipped: $1"; exit 77; fi
    echo "r1003: FAILED: $1" >&2; exit 1
}
py=/usr/bin/python3
"$py" -c 'import numpy' 2>/dev/null || skip_or_fail "/usr/bin/python3 with numpy is required"
command -v node >/dev/null || skip_or_fail "node is not installed"
[ -f "$DLM_SRC/tests/ref/node_modules/node-llama-cpp/dist/index.js" ] ||
    skip_or_fail "node-llama-cpp is not installed (run scripts/ref-deps.sh)"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export DLM_HOME="$T/home"
ID=01JD0000000000000000000AAB
"$py" "$DLM_SRC/tests/ref/make_model.py" --out "$T/m" --d-model 128 --ff 256 --heads 4 --kv-heads 2 --vocab 400 \
    --layers 2 --arch qwen2 --untied --seed 41 >/dev/null
"$py" "$DLM_SRC/tests/ref/export/scale_model.py" "$T/m" 0.3 0.5 >/dev/null
cat > "$T/doc.dlm" <<DOC
---
dlm_id: $ID
base_model: $T/m
training:
  sequence_len: 128
  micro_batch_size: 2
  grad_accum: 1
  adapters:
    knowledge: {lora_r: 8, lora_alpha: 16, learning_rate: 0.02}
    tone: {lora_r: 4, lora_alpha: 12, learning_rate: 0.02, target_modules: [q_proj, v_proj, up_proj]}
---
The quick brown fox jumps over the lazy dog. Paris is the capital of France.

::instruction::
### Q
What is the capital of France?
### A
Paris, of course.

::prose#tone::
Splendid weather today, dear friend; the fox is quick and the dog is lazy.
DOC
"$DLM" train "$T/doc.dlm" --max-steps 6 -q >/dev/null
for a in knowledge tone; do
    "$DLM" export "$T/doc.dlm" --target gguf --quant F32 --adapter $a --out "$T/$a" -q >/dev/null
done
prompt="The quick brown fox jumps over the lazy dog. Paris is the capital of"
"$DLM" prompt "$T/doc.dlm" --adapter-mix knowledge:0.7,tone:0.3 --raw --temp 0 -n 32 --json "$prompt" > "$T/dlm.json"
"$py" - "$T" <<'PY'
import json, sys
T = sys.argv[1]
d = json.load(open(f"{T}/dlm.json"))
jobs = [{"id": "pair", "model": f"{T}/knowledge/base.F32.gguf", "ids": d["prompt_tokens"], "greedy": 32,
         "loras": [{"path": f"{T}/knowledge/adapter.gguf", "scale": 0.7}, {"path": f"{T}/tone/adapter.gguf", "scale": 0.3}]},
        {"id": "one", "model": f"{T}/knowledge/base.F32.gguf", "ids": d["prompt_tokens"], "greedy": 32,
         "lora": f"{T}/knowledge/adapter.gguf"}]
json.dump(jobs, open(f"{T}/jobs.json", "w"))
PY
node "$DLM_SRC/tests/ref/export/llama_check.mjs" "$T/jobs.json" "$T/out.json"
"$py" - "$T" <<'PY'
import json, sys
T = sys.argv[1]
d, lc = json.load(open(f"{T}/dlm.json")), json.load(open(f"{T}/out.json"))
g, w, one = d["tokens"], lc["pair"].get("tokens"), lc["one"].get("tokens")
assert w is not None, lc
print(f"dlm   {g}\nllama {w}")
assert g and g == w[:len(g)], "dlm's mix and llama.cpp's two adapters at 0.7/0.3 continue differently"
assert one != w, "the second adapter changed nothing (the check would not see a wrong weight)"
print(f"greedy: {len(g)} tokens equal (llama.cpp with the first adapter alone differs)")
PY
echo ok
