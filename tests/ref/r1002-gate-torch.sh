#!/usr/bin/env bash
# r1002: the adapter gate vs PyTorch (tests/ref/adapters/torch_gate.py,
# written from the original's gate module and trainer: nn.Sequential(Linear,
# GELU, Linear), cross-entropy − λ·entropy, torch.optim.AdamW): the softmax,
# the loss with its entropy term and the gradient of one batch within 1e-4
# relative, and the parameters after 20 AdamW steps on torch's batches.
set -euo pipefail
py=${DLM_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch' 2>/dev/null; then
    [ "${DLM_REF_SKIP:-}" = 1 ] && exit 77
    echo "r1002: $py has no torch" >&2; exit 1
fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
"$py" "$DLM_SRC/tests/ref/adapters/torch_gate.py" "$T/ref" 20
DLM_GATE_REF="$T/ref" "$DLM_BUILD/test_gate"
echo ok
