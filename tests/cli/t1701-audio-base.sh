#!/usr/bin/env bash
# A Qwen2-Audio-shaped base (docs/audio.md): a small random one as the
# registry row qwen2-audio-7b-instruct's snapshot in an offline HF cache,
# in the hub checkpoints' layout and in transformers 5's; the row resolves,
# loads (a text prompt runs), and doctor plans it with its encoder (and a
# document's clips: tokens, caches, encoder); dlm
# train on an audio document stores the clips, computes each clip's
# encoder rows into <store>/audio-cache/ and trains (1 and 2 threads, and
# killed then resumed: the same adapter bytes) (as many rows as transformers'
# Qwen2AudioProcessor puts <|AUDIO|> placeholders: ceil(n/160) mel frames,
# then ((f-1)//2+1-2)//2+1), reused on the next run; a base missing its
# preprocessor_config.json is refused by name and writes no feature; a clip
# too short for one audio token (under 3 mel frames) is refused at its line.
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
PY=/usr/bin/python3
"$PY" -c 'import numpy' 2>/dev/null || { echo "t1701: skipped: $PY has no numpy"; exit 77; }
expect_fail() { # expect_fail PATTERN cmd...
    local pat=$1; shift
    set +e; out=$("$@" 2>&1); rc=$?; set -e
    [ $rc -ne 0 ] || fail "'$*' succeeded: $out"
    grep <<<"$out" -q -- "$pat" || fail "'$*' output lacks '$pat': $out"
}
wav() { # wav FILE RATE SECONDS HZ
    "$PY" - "$@" <<'PY'
import math, struct, sys, wave
f, rate, sec, hz = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
w = wave.open(f, "wb"); w.setnchannels(1); w.setsampwidth(2); w.setframerate(rate)
w.writeframes(b"".join(struct.pack("<h", int(9000 * math.sin(2 * math.pi * hz * i / rate))) for i in range(int(rate * sec))))
w.close()
PY
}
export HF_HUB_CACHE="$T/hub" HF_HUB_OFFLINE=1
snap=$("$DLM_SRC/tests/ref/media/q2a-hub.sh" "$HF_HUB_CACHE" hub)

# 1. the row loads: a text prompt on the base alone; doctor plans it from the files
"$DLM" prompt --base qwen2-audio-7b-instruct --raw --temp 0 -n 4 "Hello" > p.txt || fail "prompt: $(cat p.txt)"
"$DLM" doctor --json > d.json
"$PY" - d.json <<'PY'
import json, sys
r = next(b for b in json.load(open(sys.argv[1]))["bases"] if b["key"] == "qwen2-audio-7b-instruct")
assert r["trainable"] and r["note"] == "planned from the downloaded files", r
a = r["audio"]
assert a["tokens_per_30s_clip"] == 750, a
# the small encoder (d 32, 2 layers, ffn 48, 128 mels, 1500 positions, text width 64) as f32
D, F, M, P, L, H = 32, 48, 128, 1500, 2, 64
w = 4 * (D * M * 3 + D + D * D * 3 + D + P * D + L * (4 * D * D + 2 * F * D + 8 * D + F) + 2 * D + H * D + H)
assert a["encoder_bytes"] == w, (a, w)
assert a["feature_cache_bytes_per_clip"] == 16 + 750 * H * 4, a
PY

# 2. an audio document: clips stored, features computed and cached
"$DLM" init --audio doc.dlm >/dev/null
id=$(sed -n 's/^dlm_id: //p' doc.dlm)
S="$DLM_HOME/store/$id"
mkdir clips
wav clips/your-clip.wav 16000 2.95 440     # 47200 samples: 295 mel frames, 74 tokens
wav clips/b.wav 16000 31 220               # cut to 30 s: 3000 frames, 750 tokens
printf '\n::audio path="clips/b.wav" transcript="A long low tone."::\n' >> doc.dlm
"$DLM" train doc.dlm --threads 1 > t1.txt 2>&1 || fail "train: $(cat t1.txt)"
grep -q "2 audio clip(s): 2 new in the blob store, 824 encoder rows (0 clip(s) from the feature cache)" t1.txt || fail "$(cat t1.txt)"
[ "$(find "$S/audio-cache" -name '*.emb' | wc -l)" = 2 ] || fail "feature entries: $(find "$S" -type f)"
"$PY" - "$S" clips/your-clip.wav clips/b.wav <<'PY'
import glob, hashlib, os, struct, sys
S = sys.argv[1]
for f, want in ((sys.argv[2], 74), (sys.argv[3], 750)):
    sha = hashlib.sha256(open(f, "rb").read()).hexdigest()
    e = glob.glob(os.path.join(S, "audio-cache", sha[:2], sha + ".*.16000.30000.emb"))
    assert len(e) == 1, e
    b = open(e[0], "rb").read()
    assert b[:8] == b"DLMAEMB1", b[:8]
    n, w = struct.unpack("<II", b[8:16])
    assert (n, w) == (want, 64) and len(b) == 16 + n * w * 4, (f, n, w, len(b))
    # the waveform cache of the 30 s clip has the size doctor plans
    if want == 750:
        wc = os.path.join(S, "audio-waveform-cache", sha[:2], sha + ".16000.30000.wav.npz")
        assert os.path.getsize(wc) == 16000 * 30 * 4 + 250, os.path.getsize(wc)
PY
# doctor plans the document's clips: their tokens, the caches, the encoder
"$DLM" doctor doc.dlm --json > dd.json
"$PY" - dd.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
a = d["document"]["audio"]
assert (a["clips"], a["tokens"], a["max_tokens_per_clip"]) == (2, 824, 750), a
assert a["feature_cache_bytes"] == 2 * 16 + 824 * 64 * 4, a
assert a["waveform_cache_bytes"] == (47200 + 480000) * 4 + 2 * 250, a
names = {i["name"]: i["bytes"] for i in d["plan"]["items"]}
assert names["audio features (projected rows of every clip)"] == 824 * 64 * 4, names
assert names["audio encoder (frozen, f32)"] == a["encoder_bytes"] > 0 and a["encoder_scratch_bytes"] > 0, names
PY
"$DLM" doctor doc.dlm | grep -q "audio: 2 clip(s), 824 <|AUDIO|> tokens (at most 750 a clip)" || fail "doctor text"
stamp() { find "$S/audio-cache" -name '*.emb' -printf '%T@ %s %p\n' | sort; }
stamp > before.txt
# determinism: the same document with 2 threads, from the cache, gives the same adapter bytes
ad="$S/adapter/versions"
cp "$ad/v0001/adapter_model.safetensors" a1.st
"$DLM" train doc.dlm --fresh --threads 2 > t2.txt 2>&1 || fail "train 2: $(cat t2.txt)"
grep -q "(2 clip(s) from the feature cache)" t2.txt || fail "$(cat t2.txt)"
cmp a1.st "$ad/v0002/adapter_model.safetensors" || fail "2 threads trained other bytes than 1"
stamp > after.txt
cmp before.txt after.txt || fail "cache entries rewritten"
# killed after a checkpoint, then --resume: the uninterrupted run's bytes
"$DLM" train doc.dlm --fresh --max-steps 6 -q > /dev/null 2>&1 || fail "6 steps"
cp "$ad/v0003/adapter_model.safetensors" a6.st
set +e
DLM_TEST_CRASH_AFTER_STEP=3 "$DLM" train doc.dlm --fresh --max-steps 6 -q >/dev/null 2>&1
rc=$?
set -e
[ $rc -ne 0 ] || fail "the crash hook did not kill the run"
"$DLM" train doc.dlm --max-steps 6 --resume -q > /dev/null 2>&1 || fail "resume"
cmp a6.st "$ad/v0004/adapter_model.safetensors" || fail "the resumed audio run differs from the uninterrupted one"

# a clip of 15 ms (240 samples: 2 mel frames) gives no audio token: refused at its line, nothing cached
wav clips/c.wav 16000 0.015 440
printf '\n::audio path="clips/c.wav" transcript="Too short."::\n' >> doc.dlm
line=$(grep -n 'clips/c.wav' doc.dlm | cut -d: -f1)
nb=$(find "$S/blobs" -type f | wc -l)
expect_fail "doc.dlm:$line:1: audio 'clips/c.wav' (.*): 240 samples at 16000 Hz give no audio token (at least 321" "$DLM" train doc.dlm
[ "$(find "$S/audio-cache" -name '*.emb' | wc -l)" = 2 ] || fail "a feature entry for the short clip"
[ "$(find "$S/blobs" -type f | wc -l)" = "$nb" ] || fail "the short clip was stored"
sed -i '/clips\/c.wav/d' doc.dlm

# 3. transformers 5's layout: the same clips, another fingerprint (another base's entries)
rm -rf "$HF_HUB_CACHE"
"$DLM_SRC/tests/ref/media/q2a-hub.sh" "$HF_HUB_CACHE" v5 >/dev/null
"$DLM" prompt --base qwen2-audio-7b-instruct --raw --temp 0 -n 4 "Hello" > p5.txt || fail "prompt v5: $(cat p5.txt)"
"$DLM" train doc.dlm --fresh --update-lock > t5.txt 2>&1 || fail "train v5: $(cat t5.txt)"
grep -q "(0 clip(s) from the feature cache)" t5.txt || fail "$(cat t5.txt)"
[ "$(find "$S/audio-cache" -name '*.emb' | wc -l)" = 4 ] || fail "v5 entries: $(find "$S/audio-cache" -type f)"

# 3b. the same snapshot as a model folder, and as hf:org/name: init --audio
#     takes the folder, and both train on a clip (the base's config.json says
#     it is Qwen2-Audio, as the registry row does)
snapv5=$(ls -d "$HF_HUB_CACHE"/models--*/snapshots/*)
"$DLM" init --audio fold.dlm --base "$snapv5" > /dev/null || fail "init --audio on a folder"
grep -q "^base_model: $snapv5\$" fold.dlm || fail "folder base: $(cat fold.dlm)"
mkdir -p clips && cp clips/your-clip.wav clips/f.wav
printf '\n::audio path="clips/f.wav" transcript="A short tone."::\n' >> fold.dlm
"$DLM" train fold.dlm --max-steps 1 > tf.txt 2>&1 || fail "train on the folder: $(cat tf.txt)"
grep -q "audio clip(s)" tf.txt || fail "folder: no clips trained: $(cat tf.txt)"
sed "s|^base_model: .*|base_model: hf:Qwen/Qwen2-Audio-7B-Instruct|; s|^dlm_id: .*|dlm_id: 01JD0000000000000000000018|" fold.dlm > hfa.dlm
"$DLM" train hfa.dlm --max-steps 1 > th.txt 2>&1 || fail "train on hf: $(cat th.txt)"
grep -q "audio clip(s)" th.txt || fail "hf: no clips trained: $(cat th.txt)"

# 4. a base without its feature extractor's config: named, no feature written
rm "$snap/preprocessor_config.json"
rm -rf "$S/audio-cache"
expect_fail "the audio base has no preprocessor_config.json" "$DLM" train doc.dlm
[ ! -e "$S/audio-cache" ] || fail "features written for a broken base"
echo ok
