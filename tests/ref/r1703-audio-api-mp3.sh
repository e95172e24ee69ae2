#!/bin/bash
# r1703: an MP3 clip (written by soundfile 0.14's libsndfile + LAME, the
# `audio` reference venv) through `dlm prompt --audio` and through `dlm
# api` as an OpenAI input_audio part with "format": "mp3", on the small
# Qwen2-Audio base of t1702 trained on 6 tones (WAV): the MP3 of a trained
# tone is answered with that tone's transcript both ways.
set -eu
: "${DLM_SRC:?}" "${DLM:?}"
venv=$("$DLM_SRC/scripts/ref-venv.sh" audio) || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: the audio reference venv is unavailable"; exit 77; fi
    exit 1
}
T=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r1703.XXXXXX")
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$T"' EXIT
cd "$T"
fail() { echo "FAIL: $*" >&2; exit 1; }
export DLM_HOME="$T/home" HF_HUB_CACHE="$T/hub" HF_HUB_OFFLINE=1
"$DLM_SRC/tests/ref/media/q2a-hub.sh" "$HF_HUB_CACHE" >/dev/null
mkdir clips
"$venv/bin/python" - <<'PY'
import math, numpy as np, soundfile as sf
for k, hz in enumerate([220, 330, 495, 740, 1110, 1660]):
    x = (9000 * np.sin(2 * math.pi * hz * np.arange(12000) / 16000)).astype(np.int16)
    sf.write("clips/c%d.wav" % k, x, 16000, subtype="PCM_16")
    if k == 3:
        sf.write("c3.mp3", x.astype(np.float32) / 32768, 16000, format="MP3")
PY
T0=("the quick brown fox" "the lazy dog" "hello world" "the model reads the document" "the end of the line" "return zero")
{
    printf -- '---\ndlm_id: 01JD0000000000000000000178\ndlm_version: 15\nbase_model: qwen2-audio-7b-instruct\n'
    printf 'training:\n  num_epochs: 60\n  learning_rate: 0.01\n  micro_batch_size: 2\n  grad_accum: 1\n  seed: 7\n---\n'
    for k in 0 1 2 3 4 5; do printf '::audio path="clips/c%d.wav" transcript="%s"::\n' $k "${T0[$k]}"; done
} > doc.dlm
"$DLM" train doc.dlm -q > /dev/null
got=$("$DLM" prompt doc.dlm --audio c3.mp3 $'<|AUDIO|>\n' --temp 0 -n 6 2>/dev/null)
case "$got" in "the model reads"*) ;; *) fail "prompt --audio c3.mp3: '$got'" ;; esac
"$DLM" api doc.dlm --port 0 > url.txt 2> serve.err &
pid=$!
for _ in $(seq 600); do [ -s url.txt ] && break; sleep 0.1; done
url=$(cat url.txt); url=${url%/}
[ -n "$url" ] || fail "server did not start: $(cat serve.err)"
/usr/bin/python3 - <<'PY'
import base64, json
part = {"type": "input_audio", "input_audio": {"data": base64.b64encode(open("c3.mp3", "rb").read()).decode(), "format": "mp3"}}
json.dump({"messages": [{"role": "user", "content": [part, {"type": "text", "text": "<|AUDIO|>\n"}]}],
           "max_tokens": 6, "temperature": 0}, open("req.json", "w"))
PY
st=$(curl -s -o body.json -w '%{http_code}' "$url/v1/chat/completions" -H 'Content-Type: application/json' --data-binary @req.json)
[ "$st" = 200 ] || fail "api mp3: $st $(cat body.json)"
/usr/bin/python3 -c 'import json,sys; c=json.load(open("body.json"))["choices"][0]["message"]["content"]; assert c.startswith("the model reads"), c' ||
    fail "api mp3 answer: $(cat body.json)"
kill -TERM $pid; wait $pid; pid=
echo "ok: prompt '$got', api $(cat body.json | head -c 300)"
