#!/bin/bash
# r1601: the whole Qwen2-VL model (image decoding, processor, vision tower,
# splice, M-RoPE qwen2 decoder) vs transformers' Qwen2VLForConditionalGeneration
# on a small random config and a prompt with two real images (different
# grids), in both tensor layouts (the hub's visual.* / model.layers.* and
# transformers 5's model.visual.* / model.language_model.*) and both config
# styles: logits within 1e-4; then the KV-cache session's 8 greedy tokens
# after the prompt (the M-RoPE delta) equal model.generate's, their logits
# its scores within 1e-4.
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
if [ ! -f /usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg ]; then
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: python-matplotlib-data not installed"; exit 77; fi
    echo "r1601: the photos come from Debian's python-matplotlib-data (scripts/deps.sh installs it)" >&2
    exit 1
fi
venv=$("$DLM_SRC/scripts/ref-venv.sh" torch2) || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: the torch2 reference venv is unavailable"; exit 77; fi
    exit 1
}
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r1601.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$venv/bin/python" "$DLM_SRC/tests/ref/vl/qwen2vl_hf.py" "$dir"
"$DLM_BUILD/test_vl_model" --ref "$dir"
