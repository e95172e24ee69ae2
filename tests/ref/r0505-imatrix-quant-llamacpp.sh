#!/usr/bin/env bash
# r0505: dlm's importance-weighted quantizers (src/kern/quant_w.c) are
# byte-identical to llama.cpp's ggml_quantize_chunk with and without an
# imatrix (libggml-base of npm @node-llama-cpp/linux-x64, via ctypes), for
# Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K on several weight patterns and
# importance vectors.
set -euo pipefail
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
LIB="$DLM_SRC/tests/ref/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so"
skip_or_fail() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "r0505: skipped: $1"; exit 77; fi
    echo "r0505: FAILED: $1" >&2; exit 1
}
/usr/bin/python3 -c 'import numpy' 2>/dev/null || skip_or_fail "/usr/bin/python3 with numpy is required"
[ -f "$LIB" ] || skip_or_fail "$LIB missing (run scripts/ref-deps.sh)"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
/usr/bin/python3 "$DLM_SRC/tests/ref/export/imatrix_quant_llamacpp.py" "$LIB" "$DLM_BUILD/test_imatrix" "$T"
