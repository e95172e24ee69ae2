#!/bin/sh
# Regenerate the committed model fixtures (tests/ref/model/fixtures) with
# tests/ref/make_model.py. Deterministic: r0202 checks that a fresh run
# gives the same bytes. Usage: make_fixtures.sh [OUT_DIR]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/fixtures}
py=${DLM_PYTHON:-/usr/bin/python3}
mk="$py $here/../make_model.py"
mkdir -p "$out"
# llama: bf16, tied, llama3 RoPE, transformers v4 layout, Q8_0 GGUF (permuted Q/K)
$mk --out "$out/llama-bf16" --arch llama --dtype bf16 --tied --rope-llama3 --layout v4 \
    --layers 2 --d-model 32 --heads 4 --kv-heads 2 --ff 64 --vocab 320 --seed 1 \
    --gguf "$out/llama-bf16.q8_0.gguf" --gguf-type q8_0
# qwen2: f32, untied, q/k/v biases, v5 layout, two shards, F16 GGUF
$mk --out "$out/qwen2-f32" --arch qwen2 --dtype f32 --untied --layout v5 --shards 2 \
    --layers 2 --d-model 32 --heads 4 --kv-heads 2 --ff 64 --vocab 320 --seed 2 \
    --gguf "$out/qwen2-f32.f16.gguf" --gguf-type f16
