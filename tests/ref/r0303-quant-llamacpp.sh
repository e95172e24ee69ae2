#!/bin/bash
# r0303: dlm's quantizers and dequantizers vs llama.cpp itself: the
# quantize_row_*_ref / dequantize_row_* functions of the libggml-base.so
# shipped by the npm package @node-llama-cpp/linux-x64 (pinned in
# tests/ref/package.json, installed by scripts/ref-deps.sh), called through
# ctypes. Bytes and float bits must be identical.
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
PY=/usr/bin/python3
LIB="$DLM_SRC/tests/ref/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so"
skip_or_fail() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: $1"; exit 77; fi
    echo "r0303: $1" >&2
    exit 1
}
"$PY" -c 'import numpy' 2>/dev/null || skip_or_fail "$PY with numpy is required"
[ -f "$LIB" ] || skip_or_fail "$LIB missing: run scripts/ref-deps.sh"
exec "$PY" "$DLM_SRC/tests/ref/kern/quant_llamacpp.py" "$LIB" "$DLM_BUILD/test_quant"
