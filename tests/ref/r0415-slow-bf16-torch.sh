#!/usr/bin/env bash
# training.precision: bf16 vs PyTorch (tests/ref/engine/torch_bf16.py) on the
# random llama (untied, llama3 RoPE) and qwen2 (tied, QKV bias) models of
# torch_ref.py: loss, every LoRA gradient and 10 AdamW steps against
# PyTorch with dlm's rounding points written out, and against
# torch.autocast("cpu", dtype=torch.bfloat16) (tests/unit/test_bf16_ref.c
# has the bounds and prints how close each is).
set -euo pipefail
py=${DLM_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch' 2>/dev/null; then
    [ "${DLM_REF_SKIP:-}" = 1 ] && exit 77
    echo "r0415: $py has no torch (scripts/deps.sh installs python3-torch)" >&2; exit 1
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$py" "$DLM_SRC/tests/ref/engine/torch_bf16.py" --arch llama --arch qwen2 --out "$out"
for arch in llama qwen2; do
    DLM_BF16_REF="$out/$arch" "$DLM_BUILD/test_bf16_ref"
done
