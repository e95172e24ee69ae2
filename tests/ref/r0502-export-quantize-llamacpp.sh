#!/usr/bin/env bash
# r0502: dlm's quantized exports are byte-identical to what llama.cpp's own
# llama-quantize (libllama of npm @node-llama-cpp/linux-x64, via ctypes)
# makes of dlm's F32 export: every mix, the %256 fallbacks, tied
# embeddings, BF16/F16 sources, a merged adapter; and dlm's Q4_1/Q5_1
# quantizers equal ggml's quantize_row_q4_1_ref / _q5_1_ref.
set -euo pipefail
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
BINS="$DLM_SRC/tests/ref/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
skip_or_fail() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r0502: skipped: $1"; exit 77; fi
    echo "r0502: FAILED: $1" >&2; exit 1
}
/usr/bin/python3 -c 'import numpy' 2>/dev/null || skip_or_fail "/usr/bin/python3 with numpy is required"
ls "$BINS"/libllama*.so >/dev/null 2>&1 || skip_or_fail "$BINS has no libllama (run scripts/ref-deps.sh)"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
/usr/bin/python3 "$DLM_SRC/tests/ref/export/quantize_llamacpp.py" "$BINS" "$T"
