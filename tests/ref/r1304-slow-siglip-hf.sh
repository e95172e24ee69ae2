#!/bin/bash
# r1304: PaliGemma's image encoder (SigLIP: Conv2d patches + learned
# positions, pre-norm layers with gelu-tanh, post_layernorm; the
# multi-modal projector) vs transformers' PaliGemmaForConditionalGeneration
# .get_image_features on a small random config and two real photos; within
# 1e-4 (max |diff| / max |ref|).
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
if [ ! -f /usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg ]; then
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: python-matplotlib-data not installed"; exit 77; fi
    echo "r1304: the photos come from Debian's python-matplotlib-data (scripts/deps.sh installs it)" >&2
    exit 1
fi
venv=$("$DLM_SRC/scripts/ref-venv.sh" torch2) || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: the torch2 reference venv is unavailable"; exit 77; fi
    exit 1
}
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r1304.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$venv/bin/python" "$DLM_SRC/tests/ref/media/siglip_hf.py" "$dir" 2>/dev/null
"$DLM_BUILD/test_vision" --siglip "$dir"
