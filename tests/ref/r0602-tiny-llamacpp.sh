#!/usr/bin/env bash
# r0602: llama.cpp (npm node-llama-cpp 3.21.1) loads the embedded base
# models/tiny.gguf, tokenizes tests/ref/tok/corpus.txt line for line as dlm
# does (special tokens parsed and as text), and continues raw prompts
# greedily with the same tokens as `dlm prompt --raw --temp 0`.
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}" "${DLM_BUILD:?}"
skip_or_fail() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r0602: skipped: $1"; exit 77; fi
    echo "r0602: FAILED: $1" >&2; exit 1
}
command -v node >/dev/null || skip_or_fail "node is not installed"
[ -f "$DLM_SRC/tests/ref/node_modules/node-llama-cpp/dist/index.js" ] ||
    skip_or_fail "node-llama-cpp is not installed (run scripts/ref-deps.sh)"
gguf=${TINY_GGUF:-$DLM_SRC/models/tiny.gguf}
[ -f "$gguf" ] || { echo "r0602: FAILED: $gguf missing (make tiny-base)" >&2; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
/usr/bin/python3 "$DLM_SRC/tests/ref/tiny/check_tiny_llamacpp.py" "$DLM" "$gguf" "$DLM_SRC/tests/ref/tok/corpus.txt" "$T"
