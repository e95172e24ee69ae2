#!/usr/bin/env bash
# r0103: llama.cpp's own tokenizer test vectors (models/ggml-vocab-*.gguf
# with their .inp/.out pairs, what llama.cpp's test-tokenizer-0 checks) for
# qwen2, llama-bpe and gpt-2: dlm's tokenizer rebuilt from each GGUF gives
# the published ids. The files come, at test time, from the llama.cpp
# source that npm node-llama-cpp 3.21.1 ships as a git bundle
# (tests/ref/node_modules/node-llama-cpp/llama/gitRelease.bundle); nothing
# of llama.cpp is committed here.
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}"
skip_or_fail() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r0103: skipped: $1"; exit 77; fi
    echo "r0103: FAILED: $1" >&2; exit 1
}
bundle=$DLM_SRC/tests/ref/node_modules/node-llama-cpp/llama/gitRelease.bundle
[ -f "$bundle" ] || skip_or_fail "node-llama-cpp is not installed (run scripts/ref-deps.sh)"
command -v git >/dev/null || skip_or_fail "git is not installed"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
git clone -q --bare "$bundle" "$T/llama.git"
echo "r0103: llama.cpp $(git --git-dir="$T/llama.git" rev-parse --short HEAD) (node-llama-cpp's bundle)"
names="qwen2 llama-bpe gpt-2"
for n in $names; do
    for ext in gguf gguf.inp gguf.out; do
        git --git-dir="$T/llama.git" show "HEAD:models/ggml-vocab-$n.$ext" > "$T/ggml-vocab-$n.$ext"
    done
done
/usr/bin/python3 "$DLM_SRC/tests/ref/tok/llamacpp_vocab.py" "$DLM" "$T" $names
