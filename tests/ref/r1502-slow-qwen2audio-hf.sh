#!/bin/bash
# r1502: Qwen2-Audio's audio encoder + projector (vision/qwen2audio.c) vs
# transformers 5.23's Qwen2AudioForConditionalGeneration (eager attention)
# on a small random config (d_model 32, 2 layers, 4 heads, 128 mel bins,
# 1500 positions, text width 40): espeak-ng speech (its own length, the key
# mask) and a full 30 s signal (750 tokens), within 1e-4.
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
command -v espeak-ng >/dev/null && command -v sox >/dev/null || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: espeak-ng/sox not installed"; exit 77; fi
    echo "r1502: espeak-ng and sox are needed (scripts/deps.sh installs them)" >&2; exit 1
}
venv=$("$DLM_SRC/scripts/ref-venv.sh" torch2) || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: the torch2 reference venv is unavailable"; exit 77; fi
    exit 1
}
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r1502.XXXXXX")
trap 'rm -rf "$dir"' EXIT
espeak-ng -w "$dir/speech22k.wav" "Seven short clips, each with its own words."
sox "$dir/speech22k.wav" -r 16000 "$dir/speech16k.wav"
"$venv/bin/python" "$DLM_SRC/tests/ref/media/qwen2audio_hf.py" "$dir" 2>/dev/null
"$DLM_BUILD/test_audio" --qwen2audio "$dir"
