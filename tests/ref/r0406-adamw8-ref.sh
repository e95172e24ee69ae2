#!/bin/bash
# r0406: the 8-bit block-wise AdamW (training.optimizer adamw_bnb_8bit /
# paged_adamw_8bit) against an independent numpy implementation written from
# Dettmers et al., "8-bit Optimizers via Block-wise Quantization"
# (tests/ref/adamw8/adamw8_ref.py): the signed and unsigned dynamic maps
# equal, block-wise quantize/dequantize of random tensors gives equal codes,
# absmax and values, and 10 optimizer steps give params within 1e-6 relative
# (bit-identical today) with identical codes at every step. The script also
# checks that bitsandbytes' own f32 construction of the maps (torch) is
# within two ulps of the paper's values.
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
PY=/usr/bin/python3
if ! "$PY" -c 'import numpy' 2>/dev/null; then
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: $PY with numpy not found"; exit 77; fi
    echo "r0406: $PY with numpy is required (scripts/deps.sh installs python3-torch and python3-numpy)" >&2
    exit 1
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r0406.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$PY" "$DLM_SRC/tests/ref/adamw8/adamw8_ref.py" "$dir"
"$DLM_BUILD/test_adamw8" --ref "$dir"
