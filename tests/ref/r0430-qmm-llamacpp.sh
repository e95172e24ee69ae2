#!/bin/bash
# r0430: the int8 prefill (src/kern/qmm.c, kern_matmul_infer) vs llama.cpp
# itself: every output within r0304's tolerance of ggml_vec_dot_*_generic
# on x rounded by llama.cpp's quantize_row_q8_*_ref, from the libraries the
# npm package @node-llama-cpp/linux-x64 ships. Runs the back end this CPU
# picks (AVX512-VNNI, or AVX-VNNI under DLM_CPU_LEVEL=avx2); with neither
# it skips. The bitwise checks of every back end against the plain-loop
# model are unit/test_qmm.
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
PY=/usr/bin/python3
LIBDIR="$DLM_SRC/tests/ref/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
skip_or_fail() {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: $1"; exit 77; fi
    echo "r0430: $1" >&2
    exit 1
}
"$PY" -c 'import numpy' 2>/dev/null || skip_or_fail "$PY with numpy is required"
[ -f "$LIBDIR/libggml-cpu-x64.so" ] || skip_or_fail "$LIBDIR missing: run scripts/ref-deps.sh"
if ! grep -qwE 'avx512_vnni|avx_vnni' /proc/cpuinfo; then
    echo "skip: no VNNI here, dlm prefills on the float path"; exit 77
fi
"$PY" "$DLM_SRC/tests/ref/kern/qmm_llamacpp.py" "$LIBDIR" "$DLM_BUILD/test_qmm"
# the AVX-VNNI back end too, where the CPU has it beside AVX-512
if grep -qw avx_vnni /proc/cpuinfo && [ -z "${DLM_CPU_LEVEL:-}" ]; then
    DLM_CPU_LEVEL=avx2 "$PY" "$DLM_SRC/tests/ref/kern/qmm_llamacpp.py" "$LIBDIR" "$DLM_BUILD/test_qmm"
fi
