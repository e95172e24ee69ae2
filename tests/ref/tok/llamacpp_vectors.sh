#!/usr/bin/env bash
# Extract llama.cpp's tokenizer test files for NAME... into DIR from the
# llama.cpp source npm node-llama-cpp ships as a git bundle:
# models/ggml-vocab-NAME.gguf{,.inp,.out} (with --no-gguf only .inp/.out).
# Exit 3 when the bundle or git is missing (callers skip or fail).
#   llamacpp_vectors.sh [--no-gguf] DIR NAME...
set -euo pipefail
exts="gguf gguf.inp gguf.out"
if [ "${1:-}" = "--no-gguf" ]; then exts="gguf.inp gguf.out"; shift; fi
dir=$1; shift
bundle=$(cd "$(dirname "$0")/.." && pwd)/node_modules/node-llama-cpp/llama/gitRelease.bundle
[ -f "$bundle" ] && command -v git >/dev/null || exit 3
mkdir -p "$dir"
git clone -q --bare "$bundle" "$dir/llama.git"
echo "llama.cpp $(git --git-dir="$dir/llama.git" rev-parse --short HEAD) (node-llama-cpp's bundle)"
for n in "$@"; do
    for ext in $exts; do
        git --git-dir="$dir/llama.git" show "HEAD:models/ggml-vocab-$n.$ext" > "$dir/ggml-vocab-$n.$ext"
    done
done
rm -rf "$dir/llama.git"
