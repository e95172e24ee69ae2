#!/bin/bash
# r1702: LoRA on a Qwen2-Audio language model (rank 4, alpha 8, q/k/v/o)
# trained on one audio row ("<|AUDIO|>\n<transcript>", the clip's 74
# encoder rows spliced, the loss on the transcript) vs PEFT 0.21 over
# transformers 5.23's Qwen2AudioForConditionalGeneration (the `orig`
# reference venv): the loss, all 16 LoRA gradients, 5 AdamW steps (step
# losses, final loss and weights) within 1e-4; the row packed twice gives
# the same gradient and 2 threads give 1 thread's bits; dlm's dataset row
# of the same ::audio:: section is the processor's ids and labels
# (test_audio_base --lora).
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
venv=$("$DLM_SRC/scripts/ref-venv.sh" orig) || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: the orig reference venv (peft) is unavailable"; exit 77; fi
    exit 1
}
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r1702.XXXXXX")
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 "$DLM_SRC/tests/ref/make_model.py" --out "$dir/base" --arch qwen2 --untied --vocab 400 --d-model 64 \
    --ff 96 --layers 2 --heads 4 --kv-heads 2 --seed 1702 >/dev/null
/usr/bin/python3 "$DLM_SRC/tests/ref/media/make_qwen2audio.py" "$dir/base" >/dev/null
/usr/bin/python3 - "$dir" <<'PY'
import math, struct, sys, wave
w = wave.open(sys.argv[1] + "/a.wav", "wb"); w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
w.writeframes(b"".join(struct.pack("<h", int(9000 * math.sin(2 * math.pi * 440 * i / 16000) *
                                               math.sin(2 * math.pi * 0.7 * i / 16000))) for i in range(47200)))
w.close()
PY
printf -- '---\ndlm_id: 01JD0000000000000000000170\ndlm_version: 15\nbase_model: qwen2-audio-7b-instruct\n---\n::audio path="a.wav" transcript="A tone."::\n' > "$dir/doc.dlm"
"$venv/bin/python" "$DLM_SRC/tests/ref/media/qwen2audio_peft.py" "$dir" 2>/dev/null | grep '^qwen2audio_peft'
"$DLM_BUILD/test_audio_base" --lora "$dir"
