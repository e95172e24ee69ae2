#!/bin/bash
# r1602: LoRA on a Qwen2-VL base vs PEFT 0.21.2 (the `orig` reference venv:
# transformers 5.23, torch 2.15): a small random Qwen2VLForConditionalGeneration,
# LoRA r 4 on the language model's q/k/v/o (the tower frozen), two image
# rows `<image tokens>\n<caption><eos>` with the loss on the caption; the
# loss and all 16 gradient tensors, then 5 AdamW steps (warmup + cosine +
# clipping) and the weights after them, within 1e-4.
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
if [ ! -f /usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg ]; then
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: python-matplotlib-data not installed"; exit 77; fi
    echo "r1602: the photos come from Debian's python-matplotlib-data (scripts/deps.sh installs it)" >&2
    exit 1
fi
venv=$("$DLM_SRC/scripts/ref-venv.sh" orig) || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: the orig reference venv is unavailable"; exit 77; fi
    exit 1
}
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r1602.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$venv/bin/python" "$DLM_SRC/tests/ref/vl/qwen2vl_peft.py" "$dir"
"$DLM_BUILD/test_vl_model" --peft "$dir"
