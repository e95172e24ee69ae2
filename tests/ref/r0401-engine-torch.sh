#!/usr/bin/env bash
# Training engine vs PyTorch: logits, loss, every LoRA / DoRA / full-weight
# gradient and 10 AdamW steps (warmup, cosine, clipping, weight decay) for a
# small random llama (untied, llama3 RoPE), qwen2 (tied, QKV bias) and qwen3
# (untied, per-head q/k RMSNorm, NH·HS != hidden) and olmo2 (untied, q/k
# RMSNorm over the whole projection, norms after attention and MLP) and
# mistral (a sliding window of 5 over rows of 12) and smollm3 (4 layers, the
# last without RoPE) model.
set -euo pipefail
py=${DLM_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch' 2>/dev/null; then
    [ "${DLM_REF_SKIP:-}" = 1 ] && exit 77
    echo "r0401: $py has no torch (scripts/deps.sh installs python3-torch)" >&2; exit 1
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for arch in llama qwen2 qwen3 olmo2 mistral smollm3; do
    "$py" "$DLM_SRC/tests/ref/engine/torch_ref.py" --arch $arch --out "$out/$arch"
    DLM_ENGINE_REF="$out/$arch" "$DLM_BUILD/test_engine"
done
