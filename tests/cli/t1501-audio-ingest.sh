#!/usr/bin/env bash
# Audio in a document (docs/audio.md): dlm init --audio, and at train time
# ::audio:: fences and .wav/.flac/.ogg files from training.sources (with a
# <stem>.txt transcript sidecar) are decoded at the base's 16 kHz (another
# rate refused unless training.audio.auto_resample), bad files refused
# naming the document line and the file with nothing stored; good ones are
# streamed into <store>/blobs/ and their 30 s waveform cached in
# <store>/audio-waveform-cache/ (an .npz, as the original's); training
# and each clip's encoder rows computed into the feature cache; the
# document then trains (t1701 checks what).
set -euo pipefail
. "$DLM_SRC/tests/cli/lib.sh"
expect_ok() { # expect_ok PATTERN cmd...: succeeds and says PATTERN
    local pat=$1; shift
    set +e; out=$("$@" 2>&1); rc=$?; set -e
    [ $rc -eq 0 ] || fail "'$*' failed: $out"
    grep <<<"$out" -q -- "$pat" || fail "'$*' output lacks '$pat': $out"
}
expect_fail() { # expect_fail PATTERN cmd...
    local pat=$1; shift
    set +e; out=$("$@" 2>&1); rc=$?; set -e
    [ $rc -ne 0 ] || fail "'$*' succeeded: $out"
    grep <<<"$out" -q -- "$pat" || fail "'$*' output lacks '$pat': $out"
}
# wav FILE RATE SECONDS [CHANNELS] [WIDTH]: a tone, Python's wave module
wav() {
    /usr/bin/python3 - "$@" <<'PY'
import math, struct, sys, wave
f, rate, sec = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
ch = int(sys.argv[4]) if len(sys.argv) > 4 else 1
width = int(sys.argv[5]) if len(sys.argv) > 5 else 2
n = int(rate * sec)
w = wave.open(f, "wb"); w.setnchannels(ch); w.setsampwidth(width); w.setframerate(rate)
if width == 1:   # long files: one second of a tone, repeated
    sec1 = bytes(int(128 + 100 * math.sin(2 * math.pi * 440 * i / rate)) for i in range(rate)) * ch
    for _ in range(n // rate): w.writeframes(sec1)
else:
    w.writeframes(b"".join(struct.pack("<" + "h" * ch, *[int(8000 * math.sin(2 * math.pi * (440 + 100 * c) * i / rate)) for c in range(ch)]) for i in range(n)))
w.close()
PY
}
nfiles() { find "$1/$2" -type f 2>/dev/null | wc -l; }
# the registry row as a small random Qwen2-Audio in an offline HF cache (t1701)
export HF_HUB_CACHE="$T/hub" HF_HUB_OFFLINE=1
"$DLM_SRC/tests/ref/media/q2a-hub.sh" "$HF_HUB_CACHE" >/dev/null

# 1. init --audio: the original's scaffold on qwen2-audio-7b-instruct
expect_fail "requires an audio-language base" "$DLM" init --audio x.dlm --base qwen2.5-1.5b
expect_fail "mutually exclusive" "$DLM" init --audio x.dlm --template default
expect_fail "mutually exclusive" "$DLM" init --audio x.dlm --multimodal
[ ! -e x.dlm ] || fail "a refused init wrote the document"
"$DLM" init --audio doc.dlm >/dev/null
grep -q '^base_model: qwen2-audio-7b-instruct$' doc.dlm || fail "default base: $(cat doc.dlm)"
grep -q '^::audio path="clips/your-clip.wav" transcript="Transcript of the audio clip."::$' doc.dlm || fail "no audio fence"
id=$(sed -n 's/^dlm_id: //p' doc.dlm)
S="$DLM_HOME/store/$id"
fence=$(grep -n '^::audio' doc.dlm | cut -d: -f1)

# 2. bad input: each names the line and the file, nothing is stored
expect_fail "doc.dlm:$fence:1: audio 'clips/your-clip.wav' not found" "$DLM" train doc.dlm
mkdir clips
wav full.wav 16000 1
head -c 20000 full.wav > clips/your-clip.wav
expect_fail "doc.dlm:$fence:1: audio 'clips/your-clip.wav' (.*clips/your-clip.wav): truncated WAV" "$DLM" train doc.dlm
printf 'RIFF....WAVEjunk, not audio at all' > clips/your-clip.wav
expect_fail "doc.dlm:$fence:1: audio .*not an audio file" "$DLM" train doc.dlm
sox full.wav full.flac && head -c 3000 full.flac > clips/your-clip.wav   # a FLAC named .wav, cut short
expect_fail "doc.dlm:$fence:1: audio .*truncated or corrupt: .* of the 16000 frames the header promises" "$DLM" train doc.dlm
echo "plain text named .wav" > clips/your-clip.wav
expect_fail "not an audio file libsndfile reads" "$DLM" train doc.dlm
wav clips/your-clip.wav 44100 1
expect_fail "doc.dlm:$fence:1: audio 'clips/your-clip.wav' (.*): native sample_rate=44100 Hz does not match the base's 16000 Hz" "$DLM" train doc.dlm
grep <<<"$out" -q "hint: set training.audio.auto_resample: true" || fail "no hint: $out"
cp full.wav clips/your-clip.wav
sed -i 's/transcript="Transcript of the audio clip."/transcript="  "/' doc.dlm
expect_fail "doc.dlm:$fence:1: audio 'clips/your-clip.wav' has an empty transcript" "$DLM" train doc.dlm
[ "$(nfiles "$S" blobs)" = 0 ] || fail "blobs written for bad input"
[ "$(nfiles "$S" audio-waveform-cache)" = 0 ] || fail "cache written for bad input"

# 3. a good clip: stored byte for byte under its sha256, its waveform cached
sed -i 's/transcript="  "/transcript="A tone."/' doc.dlm
expect_ok "1 audio clip(s): 1 new in the blob store, 25 encoder rows (0 clip(s) from the feature cache)" "$DLM" train doc.dlm
sha=$(sha256sum clips/your-clip.wav | cut -c1-64)
cmp clips/your-clip.wav "$S/blobs/${sha:0:2}/$sha.wav" || fail "blob bytes differ"
npz="$S/audio-waveform-cache/${sha:0:2}/$sha.16000.30000.wav.npz"
[ -f "$npz" ] || fail "no waveform cache entry: $(find "$S" -name '*.npz')"
/usr/bin/python3 - "$npz" clips/your-clip.wav <<'PY' || fail "cache entry"
import numpy as np, sys, wave
w = np.load(sys.argv[1])["waveform"]
r = wave.open(sys.argv[2]); x = np.frombuffer(r.readframes(r.getnframes()), "<i2").astype(np.float32) / 32768
assert w.dtype == np.float32 and w.shape == x.shape and (w == x).all(), (w.shape, x.shape)
PY
expect_ok "1 audio clip(s): 0 new" "$DLM" train doc.dlm
[ "$(nfiles "$S" blobs)" = 1 ] || fail "idempotence"

# 4. auto_resample acts: the 44.1 kHz stereo clip is resampled, a second cache entry (.rs)
wav clips/your-clip.wav 44100 1.5 2
sed -i 's/^base_model: qwen2-audio-7b-instruct$/&\ntraining:\n  audio:\n    auto_resample: true/' doc.dlm
expect_ok "1 audio clip(s): 1 new" "$DLM" train doc.dlm
sha=$(sha256sum clips/your-clip.wav | cut -c1-64)
n=$(/usr/bin/python3 -c "import numpy as np,sys; print(np.load(sys.argv[1])['waveform'].shape[0])" "$S/audio-waveform-cache/${sha:0:2}/$sha.16000.30000.rs.wav.npz")
[ "$n" = 24000 ] || fail "resampled length $n, expected 24000"

# 5. a two-hour recording is bounded: 30 s decoded, the file streamed, never
#    loaded whole: its peak memory is that of a 40 s file of the same kind
#    (compared, so that a sanitizer's overhead cancels), far below its size
wav clips/your-clip.wav 8000 40 1 1
/usr/bin/time -f '%M' -o rss0.txt "$DLM" train doc.dlm > out.txt 2>&1 || true
grep -q "1 audio clip(s): " out.txt || fail "40 s file: $(cat out.txt)"
wav clips/your-clip.wav 8000 7200 1 1
size=$(stat -c %s clips/your-clip.wav)
/usr/bin/time -f '%M' -o rss.txt "$DLM" train doc.dlm > out.txt 2>&1 || true
grep -q "1 audio clip(s): " out.txt || fail "2-hour file: $(cat out.txt)"
rss0=$(tail -1 rss0.txt) rss=$(tail -1 rss.txt)
[ $((rss - rss0)) -lt $((size / 1024 / 4)) ] || fail "peak RSS ${rss} KiB for a $size-byte file (${rss0} KiB for 40 s): loaded whole?"
echo "peak RSS: 40 s file ${rss0} KiB, two-hour file (${size} bytes) ${rss} KiB"
sha=$(sha256sum clips/your-clip.wav | cut -c1-64)
cmp clips/your-clip.wav "$S/blobs/${sha:0:2}/$sha.wav" || fail "2-hour blob differs"
n=$(/usr/bin/python3 -c "import numpy as np,sys; print(np.load(sys.argv[1])['waveform'].shape[0])" "$S/audio-waveform-cache/${sha:0:2}/$sha.16000.30000.rs.wav.npz")
[ "$n" = 480000 ] || fail "truncation: $n samples, expected 480000 (30 s)"

# 6. training.sources: clips with a <stem>.txt sidecar become audio sections;
#    one without a sidecar is skipped; FLAC and OGG decode
mkdir -p corpus/sub
wav corpus/a.wav 16000 0.5; echo "  first clip  " > corpus/a.txt
wav corpus/b.wav 16000 0.5                       # no sidecar: skipped
cp corpus/a.wav corpus/sub/same.wav; echo "same bytes" > corpus/sub/same.txt
sox corpus/a.wav corpus/c.flac && echo "flac clip" > corpus/c.txt
sox corpus/a.wav corpus/d.ogg && echo "ogg clip" > corpus/d.txt
cat > src.dlm <<DOC
---
dlm_id: 01JD0000000000000000000001
dlm_version: 15
base_model: qwen2-audio-7b-instruct
training:
  sources:
    - path: corpus
---
Some prose.
DOC
"$DLM" show src.dlm --sources > list.txt
grep -E '^ *kept .*a\.wav' list.txt >/dev/null || fail "show --sources: a.wav not kept: $(cat list.txt)"
grep -E 'media .*b\.wav .*without its transcript sidecar b\.txt' list.txt >/dev/null || fail "show --sources: b.wav: $(cat list.txt)"
expect_ok "4 audio clip(s): 3 new in the blob store" "$DLM" train src.dlm
S2="$DLM_HOME/store/01JD0000000000000000000001"
[ "$(find "$S2/blobs" -name '*.flac' | wc -l)" = 1 ] && [ "$(find "$S2/blobs" -name '*.ogg' | wc -l)" = 1 ] || fail "flac/ogg blobs"
echo "   " > corpus/d.txt
expect_fail "src.dlm:7:1: audio 'd.ogg' has an empty transcript" "$DLM" train src.dlm

# 7. a text base: sources' clips and images are listed as media skips (this
#    listing crashed on an image or clip before: NULL walker options)
sed 's/^base_model: qwen2-audio-7b-instruct$/base_model: tiny/' src.dlm > srctext.dlm
printf 'P' > corpus/pic.png
"$DLM" show srctext.dlm --sources > list2.txt || fail "show --sources on a text base: $(cat list2.txt)"
grep -E 'media .*a\.wav .*not audio-language' list2.txt >/dev/null || fail "text base listing: $(cat list2.txt)"
grep -E 'media .*pic\.png' list2.txt >/dev/null || fail "text base listing: $(cat list2.txt)"

# 8. a text base: an audio fence is refused before anything is written
write_doc text.dlm 1
printf '\n::audio path="clips/your-clip.wav" transcript="x"::\n' >> text.dlm
line=$(grep -n '^::audio' text.dlm | cut -d: -f1)
expect_fail "text.dlm:$line:1: audio section 'clips/your-clip.wav' needs an audio-language base" "$DLM" train text.dlm
[ ! -d "$DLM_HOME/store/$ID/blobs" ] || [ "$(nfiles "$DLM_HOME/store/$ID" blobs)" = 0 ] || fail "text base stored blobs"
echo "ok"
