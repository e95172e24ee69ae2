#!/usr/bin/env bash
# r0501 (slow: 31 s in release, 112 s under ASan since K-quant exports compute the importance matrix; its readers are fuzzed): dlm's GGUF exports in llama.cpp itself (npm node-llama-cpp 3.21.1,
# CPU): a random llama (tied, llama3 RoPE), qwen2 (untied, biases) and qwen3
# (tied, per-head q/k RMSNorm), olmo2 (untied, q/k RMSNorm, post-norms) and
# smollm3 (tied, NoPE every fourth layer) with a
# trained adapter, every mix as base + adapter and merged. F32/F16: 32-token
# greedy continuations identical to `dlm prompt --raw --temp 0`; every mix:
# next-token distributions within the bound explained in
# tests/ref/export/check_llamacpp.py; tokenization identical; an adapter
# trained on a GGUF base and on the same weights as an HF folder give
# llama.cpp the same output.
set -euo pipefail
: "${DLM:?}" "${DLM_SRC:?}" "${DLM_BUILD:?}"
skip_or_fail() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r0501: skipped: $1"; exit 77; fi
    echo "r0501: FAILED: $1" >&2; exit 1
}
/usr/bin/python3 -c 'import numpy' 2>/dev/null || skip_or_fail "/usr/bin/python3 with numpy is required"
command -v node >/dev/null || skip_or_fail "node is not installed"
[ -f "$DLM_SRC/tests/ref/node_modules/node-llama-cpp/dist/index.js" ] ||
    skip_or_fail "node-llama-cpp is not installed (run scripts/ref-deps.sh)"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
/usr/bin/python3 "$DLM_SRC/tests/ref/export/check_llamacpp.py" "$T"
