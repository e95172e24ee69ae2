#!/bin/bash
# r0301: dlm's quantizers and dequantizers vs an independent numpy
# implementation of llama.cpp's reference algorithms (tests/ref/kern/
# quant_ref.py), byte for byte on many input patterns (random normal, small
# weights, zeros, constants, one outlier, tiny and subnormal scales, mixed
# signs, ties, ...) for Q8_0 Q4_0 Q5_0 Q4_K Q5_K Q6_K F16 BF16.
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
PY=/usr/bin/python3
if ! "$PY" -c 'import numpy' 2>/dev/null; then
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: $PY with numpy not found"; exit 77; fi
    echo "r0301: $PY with numpy is required (scripts/deps.sh installs python3-numpy)" >&2
    exit 1
fi
exec "$PY" "$DLM_SRC/tests/ref/kern/quant_ref.py" check "$DLM_BUILD/test_quant"
