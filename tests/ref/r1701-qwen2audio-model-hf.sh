#!/bin/bash
# r1701: a whole Qwen2-Audio model (audio + text) vs transformers 5.23's
# Qwen2AudioForConditionalGeneration (eager, float32) on a small random
# checkpoint in the hub layout (tests/ref/media/make_qwen2audio.py): the
# processor's input_ids for two clips (2.95 s and 31 s, cut to 30 s) in one
# prompt, dlm's placeholder counts equal to the processor's (74 and 750),
# and the logits of every position within 1e-4 with dlm's encoder rows
# spliced at the <|AUDIO|> runs (test_audio_base --ref).
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
venv=$("$DLM_SRC/scripts/ref-venv.sh" torch2) || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: the torch2 reference venv is unavailable"; exit 77; fi
    exit 1
}
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r1701.XXXXXX")
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 "$DLM_SRC/tests/ref/make_model.py" --out "$dir/base" --arch qwen2 --untied --vocab 400 --d-model 64 \
    --ff 96 --layers 2 --heads 4 --kv-heads 2 --seed 1701 >/dev/null
/usr/bin/python3 "$DLM_SRC/tests/ref/media/make_qwen2audio.py" "$dir/base" >/dev/null
/usr/bin/python3 - "$dir" <<'PY'
import math, struct, sys, wave
def wav(f, sec, hz):
    w = wave.open(f, "wb"); w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
    w.writeframes(b"".join(struct.pack("<h", int(9000 * math.sin(2 * math.pi * hz * i / 16000) *
                                                   math.sin(2 * math.pi * 0.7 * i / 16000))) for i in range(int(16000 * sec))))
    w.close()
wav(sys.argv[1] + "/a.wav", 2.95, 440)
wav(sys.argv[1] + "/b.wav", 31, 220)
PY
"$venv/bin/python" "$DLM_SRC/tests/ref/media/qwen2audio_model_hf.py" "$dir" 2>/dev/null
"$DLM_BUILD/test_audio_base" --ref "$dir"
