#!/usr/bin/env bash
# training.cpt.embed_warmup_steps against independent references (slow:
# ~25 s of CPU; docs/cpt.md):
#   1. PyTorch (tests/ref/engine/torch_embed.py, written from the formulas):
#      8 steps on one batch of a random llama (untied) and qwen2 (tied), the
#      embedding and head trained in steps 1..3 and frozen after, one clip,
#      AdamW: every step's loss and grad norm, the final LoRA tensors,
#      embedding and head within 1e-4 relative (tests/unit/test_embed.c);
#   2. PEFT's layout: the adapters `dlm train` saves for an untied llama and
#      a tied qwen2 base, read by tests/ref/engine/torch_peft.py with PEFT's
#      modules_to_save names, give dlm's logits (1e-4);
#   3. llama.cpp (npm node-llama-cpp 3.21.1): the merged F32 GGUF's 32-token
#      greedy continuation equals `dlm prompt --raw --temp 0` with the
#      adapter, and differs from the base's without the embeddings.
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}" "${DLM_BUILD:?}"
py=${DLM_PYTHON:-/usr/bin/python3}
skip_or_fail() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r0414: skipped: $1"; exit 77; fi
    echo "r0414: FAILED: $1" >&2; exit 1
}
"$py" -c 'import torch, numpy' 2>/dev/null || skip_or_fail "$py has no torch/numpy"
command -v node >/dev/null || skip_or_fail "node is not installed"
[ -f "$DLM_SRC/tests/ref/node_modules/node-llama-cpp/dist/index.js" ] || skip_or_fail "node-llama-cpp is not installed"
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export DLM_HOME="$T/home"
# 1. the training math
for arch in llama qwen2; do
    "$py" "$DLM_SRC/tests/ref/engine/torch_ref.py" --arch $arch --modes lora --out "$T/ref-$arch" >/dev/null
    "$py" "$DLM_SRC/tests/ref/engine/torch_embed.py" "$T/ref-$arch" 3 8
    DLM_EMBED_REF="$T/ref-$arch" "$DLM_BUILD/test_embed" | head -1
done
# 2. PEFT's names and logits; 3. llama.cpp greedy on the merged export
PROMPT="The quick brown fox jumps over the lazy dog. Paris is the capital of"
jobs="["
for case in "a llama --untied" "b qwen2 --tied"; do
    set -- $case
    name=$1 arch=$2 tie=$3
    "$py" "$DLM_SRC/tests/ref/make_model.py" --out "$T/$name" --arch $arch $tie --vocab 400 --seed 21 >/dev/null
    cat > "$T/$name.dlm" <<DOC
---
dlm_id: 01JD00000000000000000000$( [ $name = a ] && echo AA || echo BB )
base_model: $T/$name
training:
  target_modules: [q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]
  learning_rate: 0.02
  num_epochs: 4
  sequence_len: 64
  cpt: {schedule: dapt, embed_warmup_steps: 4}
---
The quick brown fox jumps over the lazy dog. Paris is the capital of France.
Berlin is the capital of Germany. Madrid is the capital of Spain.

::prose::
Rome is the capital of Italy. Lisbon is the capital of Portugal. Vienna is the
capital of Austria, and Prague the capital of Czechia.
DOC
    "$DLM" train "$T/$name.dlm" -q >/dev/null
    id=$(sed -n 's/^dlm_id: //p' "$T/$name.dlm")
    ad="$DLM_HOME/store/$id/adapter/versions/v0001"
    grep -q '"embed_tokens"' "$ad/adapter_config.json" || { echo "r0414: $name: no modules_to_save" >&2; exit 1; }
    "$DLM" tokenize --tokenizer "$T/$name/tokenizer.json" --json "What colour is the sky? Blue." > "$T/$name.ids"
    "$py" "$DLM_SRC/tests/ref/engine/torch_peft.py" "$T/$name" "$ad" "$T/$name.ids" "$T/$name.ref"
    DLM_INFER_MODEL="$T/$name" DLM_INFER_ADAPTER="$ad" DLM_INFER_IDS="$T/$name.ids" \
        DLM_INFER_LOGITS="$T/$name.ref/logits.f32" "$DLM_BUILD/test_engine" | head -1
    "$DLM" export "$T/$name.dlm" --target gguf --quant F32 --merged --out "$T/$name.exp" -q >/dev/null
    ids=$("$DLM" tokenize --base "$T/$name" --json "$PROMPT")
    jobs="$jobs{\"id\":\"$name\",\"model\":\"$T/$name.exp/merged.F32.gguf\",\"lora\":null,\"ids\":$ids,\"greedy\":32},"
done
echo "${jobs%,}]" > "$T/jobs.json"
node "$DLM_SRC/tests/ref/export/llama_check.mjs" "$T/jobs.json" "$T/llama.json"
for name in a b; do
    mine=$("$DLM" prompt "$T/$name.dlm" --raw --temp 0 -n 32 --json "$PROMPT")
    base=$("$DLM" prompt --base "$T/$name" --raw --temp 0 -n 32 --json "$PROMPT")
    "$py" - "$T/llama.json" "$name" "$mine" "$base" <<'PY'
import json, sys
lc = json.load(open(sys.argv[1]))[sys.argv[2]]
assert "error" not in lc, lc
mine, base, theirs = json.loads(sys.argv[3])["tokens"], json.loads(sys.argv[4])["tokens"], lc["tokens"]
# dlm stops at an end-of-generation token; llama.cpp goes on
assert mine == theirs[:len(mine)] and (len(mine) == 32 or len(theirs) > len(mine)), (mine, theirs)
assert mine != base, "the adapter does not change the greedy continuation"
print(f"r0414 {sys.argv[2]}: llama.cpp's greedy on the merged GGUF = dlm prompt --temp 0 ({len(mine)} tokens)")
PY
done
echo ok
