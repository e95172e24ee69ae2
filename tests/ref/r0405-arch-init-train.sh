#!/usr/bin/env bash
# r0405: every architecture dlm runs, end to end through a registry key:
# make_model.py writes a shrunk random model of the family (the real
# config.json fields, small dimensions) into an offline HF cache at the
# registry row's pinned commit, then `dlm init --base KEY`, `dlm train
# --max-steps 2`, `dlm doctor DOC --json` (the plan of that base) and
# `dlm prompt` run on it.
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}"
py=/usr/bin/python3
if ! "$py" -c 'import numpy' 2>/dev/null; then
    [ "${DLM_REF_SKIP:-}" = 1 ] && exit 77
    echo "r0405: $py has no numpy" >&2; exit 1
fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export DLM_HOME="$T/home" HF_HUB_CACHE="$T/hub" HF_HUB_OFFLINE=1
cd "$T"
# key repo commit make_model-args...
case_arch() {
    local key=$1 repo=$2 rev=$3; shift 3
    local rdir="$HF_HUB_CACHE/models--${repo/\//--}"
    "$py" "$DLM_SRC/tests/ref/make_model.py" --out "$rdir/snapshots/$rev" --vocab 400 --d-model 64 --ff 96 \
        --layers 2 "$@" >/dev/null
    mkdir -p "$rdir/.no_exist/$rev"
    : > "$rdir/.no_exist/$rev/special_tokens_map.json"
    : > "$rdir/.no_exist/$rev/chat_template.jinja"
    "$DLM" init "$key.dlm" --base "$key" -q
    "$DLM" train "$key.dlm" --max-steps 2 -q
    "$DLM" doctor "$key.dlm" --json > "$key.plan.json"
    "$py" - "$key.plan.json" "$key" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = json.dumps(d)
assert "total_bytes" in s and '"fits": true' in s, s[:400]
print(f"{sys.argv[2]}: doctor plans the document")
PY
    out=$("$DLM" prompt "$key.dlm" --temp 0 -n 8 "What is it?")
    [ -n "$out" ] || { echo "r0405: $key: empty prompt output" >&2; exit 1; }
    echo "$key: init, train --max-steps 2, doctor, prompt ok"
}
case_arch qwen3-1.7b Qwen/Qwen3-1.7B 70d244cc86ccca08cf5af4e1e306ecf908b1ad5e --arch qwen3 --tied --head-dim 32 --seed 41
case_arch qwen3-8b Qwen/Qwen3-8B b968826d9c46dd6066d109eabc6255188de91218 --arch qwen3 --untied --seed 42
case_arch olmo-2-7b-instruct allenai/OLMo-2-1124-7B-Instruct 470b1fba1ae01581f270116362ee4aa1b97f4c84 \
    --arch olmo2 --untied --seed 43
case_arch smollm3-3b HuggingFaceTB/SmolLM3-3B a07cc9a04f16550a088caea529712d1d335b0ac1 \
    --arch smollm3 --tied --layers 4 --seed 44
# phi3 (every text row runs now; the refusal of a registry row whose
# architecture dlm does not run is in tests/unit/test_hub.c's base_check_runnable)
case_arch phi-3.5-mini microsoft/Phi-3.5-mini-instruct 2fe192450127e6a83f7441aef6e3ca586c338b77 \
    --arch phi3 --untied --heads 4 --kv-heads 4 --longrope 16 --max-pos 256 --seed 46
case_arch phi-4-mini-reasoning microsoft/Phi-4-mini-reasoning 0e3b1e2d02ee478a3743abe3f629e9c0cb722e0a \
    --arch phi3 --tied --partial-rotary 0.75 --longrope 64 --max-pos 512 --seed 47
echo ok
