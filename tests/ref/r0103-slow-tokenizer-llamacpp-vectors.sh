#!/usr/bin/env bash
# r0103: llama.cpp's own tokenizer test vectors (models/ggml-vocab-*.gguf
# with their .inp/.out pairs, what llama.cpp's test-tokenizer-0 checks) for
# qwen2, llama-bpe and gpt-2 (byte-level BPE) and llama-spm and phi-3
# (SentencePiece `llama` vocabularies, merged by score): dlm's tokenizer
# rebuilt from each GGUF gives the published ids. The files come, at test time, from the llama.cpp
# source that npm node-llama-cpp 3.21.1 ships as a git bundle
# (tests/ref/node_modules/node-llama-cpp/llama/gitRelease.bundle); nothing
# of llama.cpp is committed here.
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}"
skip_or_fail() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r0103: skipped: $1"; exit 77; fi
    echo "r0103: FAILED: $1" >&2; exit 1
}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
names="qwen2 llama-bpe gpt-2 llama-spm phi-3"
rc=0
"$DLM_SRC/tests/ref/tok/llamacpp_vectors.sh" "$T" $names | sed 's/^/r0103: /' || rc=${PIPESTATUS[0]}
[ "$rc" = 3 ] && skip_or_fail "node-llama-cpp (run scripts/ref-deps.sh) or git is not installed"
[ "$rc" = 0 ] || skip_or_fail "could not extract the vectors (exit $rc)"
/usr/bin/python3 "$DLM_SRC/tests/ref/tok/llamacpp_vocab.py" "$DLM" "$T" $names
