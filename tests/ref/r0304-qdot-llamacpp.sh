#!/bin/bash
# r0304: the integer decode dots (src/kern/qdot.c) vs llama.cpp itself: the
# int8 rounding of x must be byte-identical to quantize_row_q8_K_ref /
# quantize_row_q8_0_ref, and every dot within float rounding of
# ggml_vec_dot_*_generic, from the libraries the npm package
# @node-llama-cpp/linux-x64 ships (pinned in tests/ref/package.json).
# Needs an AVX512-VNNI CPU (the path dlm takes there); elsewhere it skips.
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
PY=/usr/bin/python3
LIBDIR="$DLM_SRC/tests/ref/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
skip_or_fail() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: $1"; exit 77; fi
    echo "r0304: $1" >&2
    exit 1
}
"$PY" -c 'import numpy' 2>/dev/null || skip_or_fail "$PY with numpy is required"
[ -f "$LIBDIR/libggml-cpu-x64.so" ] || skip_or_fail "$LIBDIR missing: run scripts/ref-deps.sh"
if ! grep -qw avx512_vnni /proc/cpuinfo || [ -n "${DLM_CPU_LEVEL:-}" ]; then
    echo "skip: no AVX512-VNNI here, dlm decodes on the float path"; exit 77
fi
exec "$PY" "$DLM_SRC/tests/ref/kern/qdot_llamacpp.py" "$LIBDIR" "$DLM_BUILD/test_qdot"
