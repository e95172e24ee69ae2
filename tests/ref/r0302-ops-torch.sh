#!/bin/bash
# r0302: RMSNorm, RoPE, causal GQA attention (q_off, segments), SwiGLU,
# cross-entropy (masked rows) and AdamW, forward and backward, vs PyTorch
# autograd / torch.optim.AdamW on fixed random inputs
# (tests/ref/kern/ops_torch.py writes them, test_kern_ops --torch compares;
# max|diff|/max|ref| <= 1e-5 in fp32, AdamW 1e-6).
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
PY=/usr/bin/python3
if ! "$PY" -c 'import torch' 2>/dev/null; then
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: $PY with torch not found"; exit 77; fi
    echo "r0302: $PY with torch is required (scripts/deps.sh installs python3-torch)" >&2
    exit 1
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r0302.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$PY" "$DLM_SRC/tests/ref/kern/ops_torch.py" "$dir"
"$DLM_BUILD/test_kern_ops" --torch "$dir"
