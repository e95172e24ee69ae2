#!/bin/bash
# r1302: Qwen2-VL's vision tower (patch embedding, 2-D rotary, per-image full
# attention, patch merger) vs transformers' Qwen2VisionTransformerPretrainedModel
# on a small random config and two real images (different grids); the
# merger's output within 1e-4 (max |diff| / max |ref|).
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
if [ ! -f /usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg ]; then
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: python-matplotlib-data not installed"; exit 77; fi
    echo "r1302: the photos come from Debian's python-matplotlib-data (scripts/deps.sh installs it)" >&2
    exit 1
fi
venv=$("$DLM_SRC/scripts/ref-venv.sh" torch2) || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: the torch2 reference venv is unavailable"; exit 77; fi
    exit 1
}
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r1302.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$venv/bin/python" "$DLM_SRC/tests/ref/media/vit_hf.py" "$dir"
"$DLM_BUILD/test_vision" --ref "$dir"
