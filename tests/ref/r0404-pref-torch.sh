#!/usr/bin/env bash
# Preference losses vs PyTorch written from TRL's formulas: per-pair
# completion log-probs, reference log-probs (a second LoRA or the base), the
# loss, every LoRA gradient and five AdamW steps for DPO sigmoid / hinge / ipo
# (both references) and ORPO, on a random llama and qwen2.
set -euo pipefail
py=${DLM_PYTHON:-/usr/bin/python3}
if ! "$py" -c 'import torch' 2>/dev/null; then
    [ "${DLM_REF_SKIP:-}" = 1 ] && exit 77
    echo "r0404: $py has no torch (scripts/deps.sh installs python3-torch)" >&2; exit 1
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for arch in llama qwen2; do
    "$py" "$DLM_SRC/tests/ref/engine/torch_pref.py" --arch $arch --out "$out/$arch"
    DLM_PREF_REF="$out/$arch" "$DLM_BUILD/test_pref"
done
