#!/bin/bash
# r2101: the whole PaliGemma model (SigLIP + projector features spliced at
# the image tokens, the Gemma decoder, the prefix-LM mask over image +
# prompt, positions from 1) vs transformers 5.23's
# PaliGemmaForConditionalGeneration (eager attention) on a small random
# config and a real photo: the logits of the training forward
# (token_type_ids as the processor returns them) and of a KV-cache session
# (prefix prefill, then the suffix token by token, as generate's masks)
# within 1e-4 of the largest logit; LoRA gradients and 5 AdamW steps vs
# PEFT 0.21.2 + torch.optim.AdamW within 1e-4 (tests/unit/test_pali.c
# --ref). The orig venv: torch2's pins plus PEFT (tests/ref/venv/orig.txt).
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
if [ ! -f /usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg ]; then
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: python-matplotlib-data not installed"; exit 77; fi
    echo "r2101: the photo comes from Debian's python-matplotlib-data (scripts/deps.sh installs it)" >&2
    exit 1
fi
venv=$("$DLM_SRC/scripts/ref-venv.sh" orig) || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: the orig reference venv is unavailable"; exit 77; fi
    exit 1
}
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r2101.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$venv/bin/python" "$DLM_SRC/tests/ref/media/paligemma_hf.py" "$dir" 2>/dev/null
"$DLM_BUILD/test_pali" --ref "$dir"
