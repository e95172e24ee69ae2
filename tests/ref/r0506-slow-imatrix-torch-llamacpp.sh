#!/usr/bin/env bash
# r0506 (slow: ~8 s of CPU, ~20 s wall; three models, PyTorch and
# llama.cpp): dlm's importance matrix equals an independent PyTorch
# computation (llama, qwen2, mixtral experts and router, a merged LoRA) and
# every imatrix-calibrated export is byte-identical to llama.cpp's
# llama_model_quantize given that imatrix (libllama of npm
# @node-llama-cpp/linux-x64, ctypes): K-quant mixes, Q5_0/Q5_1 fallbacks,
# stacked experts, merged adapter. See tests/ref/export/imatrix_ref.py.
set -euo pipefail
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
BINS="$DLM_SRC/tests/ref/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
skip_or_fail() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r0506: skipped: $1"; exit 77; fi
    echo "r0506: FAILED: $1" >&2; exit 1
}
/usr/bin/python3 -c 'import numpy, torch' 2>/dev/null || skip_or_fail "/usr/bin/python3 with numpy and torch is required"
ls "$BINS"/libllama*.so >/dev/null 2>&1 || skip_or_fail "$BINS has no libllama (run scripts/ref-deps.sh)"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
/usr/bin/python3 "$DLM_SRC/tests/ref/export/imatrix_ref.py" "$BINS" "$T"
