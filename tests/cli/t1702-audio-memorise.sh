#!/usr/bin/env bash
# Issue 29's memorisation check: a small random Qwen2-Audio base (the
# qwen2-audio-7b-instruct row's snapshot in an offline HF cache, t1701)
# trained on 6 short clips (tones of 220..1660 Hz, 0.75 s: 19 <|AUDIO|>
# tokens each) with distinct transcripts; `dlm prompt --audio CLIP
# '<|AUDIO|>\n'` (the training rows' prefix) greedily continues each clip
# with its own transcript, while the base alone (--no-adapter) does not for
# any; the repl's /audio FILE and dlm api's input_audio parts likewise. Bad prompt input: a missing file, a non-audio file, a text base, a
# wrong placeholder count, each a clear error.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
PY=/usr/bin/python3
"$PY" -c 'import numpy' 2>/dev/null || { echo "t1702: skipped: $PY has no numpy"; exit 77; }
export HF_HUB_CACHE="$T/hub" HF_HUB_OFFLINE=1
"$DLM_SRC/tests/ref/media/q2a-hub.sh" "$HF_HUB_CACHE" >/dev/null
mkdir clips
"$PY" - <<'PY'
import math, struct, wave
for k, hz in enumerate([220, 330, 495, 740, 1110, 1660]):
    w = wave.open("clips/c%d.wav" % k, "wb"); w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
    w.writeframes(b"".join(struct.pack("<h", int(9000 * math.sin(2 * math.pi * hz * i / 16000))) for i in range(12000)))
    w.close()
PY
T0=("the quick brown fox" "the lazy dog" "hello world" "the model reads the document" "the end of the line" "return zero")
{
    printf -- '---\ndlm_id: 01JD0000000000000000000177\ndlm_version: 15\nbase_model: qwen2-audio-7b-instruct\n'
    printf 'training:\n  num_epochs: 60\n  learning_rate: 0.01\n  micro_batch_size: 2\n  grad_accum: 1\n  seed: 7\n---\n'
    for k in 0 1 2 3 4 5; do printf '::audio path="clips/c%d.wav" transcript="%s"::\n' $k "${T0[$k]}"; done
} > doc.dlm
"$DLM" train doc.dlm -q > train.txt 2>&1 || fail "train: $(cat train.txt)"
hits=0 base_hits=0
for k in 0 1 2 3 4 5; do
    got=$("$DLM" prompt doc.dlm --audio clips/c$k.wav $'<|AUDIO|>\n' --temp 0 -n 8 2>/dev/null)
    base=$("$DLM" prompt doc.dlm --no-adapter --audio clips/c$k.wav $'<|AUDIO|>\n' --temp 0 -n 8 2>/dev/null)
    echo "c$k: adapter '$got' | base '$base'"
    case "$got" in "${T0[$k]}"*) hits=$((hits + 1)) ;; esac
    case "$base" in "${T0[$k]}"*) base_hits=$((base_hits + 1)) ;; esac
done
[ $hits = 6 ] || fail "the adapter transcribed $hits of 6 training clips"
[ $base_hits = 0 ] || fail "the base alone transcribed $base_hits clips"
# the query after the clip, as the original formats it: "<|AUDIO|>\n" + QUERY
"$DLM" prompt doc.dlm --audio clips/c1.wav --audio clips/c2.wav "two clips" --temp 0 -n 4 --json > two.json
"$PY" - two.json <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
p = j["prompt_tokens"]
assert p[:38] == [400] * 38 and p[38] == 10 and len(p) > 39 and 400 not in p[38:], p
PY

# the repl: /audio FILE, then a line asked about the clip as prompt --audio asks it
printf '/audio clips/c3.wav\nthe model\n/history\n/audio nope.wav\n' | "$DLM" repl doc.dlm --temp 0 -n 6 > repl.txt 2>&1
grep -aq "audio clips/c3.wav queued (1)" repl.txt || fail "repl: $(cat repl.txt)"
grep -aq "^ reads the document" repl.txt || fail "repl answer: $(cat repl.txt)"
grep -aq "^user: \[audio clips/c3.wav\] the model" repl.txt || fail "repl history: $(cat repl.txt)"
grep -aq "audio 'nope.wav': cannot open" repl.txt || fail "repl missing file: $(cat repl.txt)"
printf '/audio clips/c3.wav\n' | "$DLM" repl --base tiny > repl2.txt 2>&1
grep -q "/audio needs an audio-language base; tiny is not one" repl2.txt || fail "repl text base: $(cat repl2.txt)"

# dlm api: OpenAI input_audio parts (base64 WAV) answered as prompt --audio answers them
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$T"' EXIT
serve() {   # serve ARGS...: start the server, URL in $url
    : > url.txt
    "$DLM" api --port 0 "$@" > url.txt 2> serve.err &
    pid=$!
    for _ in $(seq 600); do [ -s url.txt ] && break; sleep 0.1; done
    url=$(cat url.txt); url=${url%/}
    [ -n "$url" ] || fail "server did not start: $(cat serve.err)"
}
stop() { kill -TERM $pid; wait $pid || fail "server exit status $?"; pid=; }
post() { curl -s -o body.json -w '%{http_code}' "$url/v1/chat/completions" -H 'Content-Type: application/json' --data-binary @"$1"; }
req() { # req OUT CLIP TEXT [FORMAT]: a chat request with one audio part then a text part
    "$PY" - "$@" <<'PY'
import base64, json, sys
out, clip, text = sys.argv[1:4]
fmt = sys.argv[4] if len(sys.argv) > 4 else "wav"
parts = [{"type": "input_audio", "input_audio": {"data": base64.b64encode(open(clip, "rb").read()).decode(), "format": fmt}}]
if text:
    parts.append({"type": "text", "text": text})
json.dump({"messages": [{"role": "user", "content": parts}], "max_tokens": 6, "temperature": 0}, open(out, "w"))
PY
}
serve doc.dlm
for k in 0 4; do
    req r$k.json clips/c$k.wav $'<|AUDIO|>\n'
    st=$(post r$k.json)
    [ "$st" = 200 ] || fail "api c$k: $st $(cat body.json)"
    "$PY" - body.json "${T0[$k]}" <<'PY' || fail "api c$k answer: $(cat body.json)"
import json, sys
c = json.load(open(sys.argv[1]))["choices"][0]["message"]["content"]
assert c.startswith(sys.argv[2][:len(c)]) and len(c) >= 8, (c, sys.argv[2])
PY
done
# the same request twice (the second from a slot whose cache holds the first's clip) answers the same
req r4b.json clips/c4.wav $'<|AUDIO|>\n'
post r4b.json > /dev/null; cp body.json b1.json
req r1.json clips/c1.wav $'<|AUDIO|>\n'
[ "$(post r1.json)" = 200 ] || fail "api c1: $(cat body.json)"
"$PY" -c 'import json,sys; c=json.load(open(sys.argv[1]))["choices"][0]["message"]["content"]; assert c.startswith("the lazy"), c' body.json ||
    fail "api c1 after c4 (a cached clip's rows reused?): $(cat body.json)"
# bad parts: 400 with the reason
printf 'not audio at all' > junk.wav
req bad.json junk.wav "x"
st=$(post bad.json); [ "$st" = 400 ] && grep -q 'input_audio 1 (wav): .*not an audio file' body.json || fail "junk audio: $st $(cat body.json)"
req bad2.json clips/c0.wav "x" flac
st=$(post bad2.json); [ "$st" = 400 ] && grep -q "format 'flac' is not one of wav, mp3" body.json || fail "format: $st $(cat body.json)"
printf '{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"@@@","format":"wav"}}]}]}' > bad3.json
st=$(post bad3.json); [ "$st" = 400 ] && grep -q "is not base64 audio" body.json || fail "base64: $st $(cat body.json)"
"$PY" - <<'PY'
import json
a = json.load(open("r0.json"))["messages"][0]
json.dump({"messages": [a, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "again"}]}, open("bad4.json", "w"))
PY
st=$(post bad4.json); [ "$st" = 400 ] && grep -q "accepted in the last user message only" body.json || fail "early audio: $st $(cat body.json)"
stop
# a text base refuses an audio part
serve --base tiny
st=$(post r0.json); [ "$st" = 400 ] && grep -q "input_audio parts need an audio-language base; tiny is not one" body.json ||
    fail "text base: $st $(cat body.json)"
stop

# bad input: each a clear error, exit 1
expect_fail() { local pat=$1; shift; set +e; out=$("$@" 2>&1); rc=$?; set -e
    [ $rc -ne 0 ] || fail "'$*' succeeded: $out"; grep <<<"$out" -q -- "$pat" || fail "'$*' lacks '$pat': $out"; }
expect_fail "audio 'nope.wav': cannot open" "$DLM" prompt doc.dlm --audio nope.wav "x"
echo "not audio" > junk.wav
expect_fail "audio 'junk.wav': .*not an audio file" "$DLM" prompt doc.dlm --audio junk.wav "x"
expect_fail "\-\-audio needs an audio-language base; tiny is not one" "$DLM" prompt --base tiny --audio clips/c0.wav "x"
expect_fail "the prompt holds 1 <|AUDIO|> placeholder(s) for 2 audio clip(s)" \
    "$DLM" prompt doc.dlm --audio clips/c0.wav --audio clips/c1.wav "<|AUDIO|> x"
expect_fail "\-\-audio and \-\-image are mutually exclusive" "$DLM" prompt doc.dlm --audio clips/c0.wav --image a.png "x"
echo ok
