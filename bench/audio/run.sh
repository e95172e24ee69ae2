#!/bin/bash
# bench/audio/run.sh — audio decoding + resampling and Whisper log-mel
# features: dlm (bench_audio.c, against build/libdlmcore.a) vs the
# original's pipeline (soundfile + soxr HQ, then transformers'
# WhisperFeatureExtractor numpy path, feature_size 128) on the same file,
# best of 10 runs, one thread. Files: espeak-ng speech at 22.05 kHz, and a
# 30 s 44.1 kHz stereo file made by sox from it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$root/bench/out"
mkdir -p "$out"
[ -f "$root/build/libdlmcore.a" ] || { cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null; cmake --build "$root/build" -j2 --target dlmcore >/dev/null; }
gcc -O2 -std=c11 -D_GNU_SOURCE -I"$root/src" -I"$root/build/gen" "$here/bench_audio.c" "$root/build/libdlmcore.a" \
    $(pkg-config --libs sndfile soxr jansson yaml-0.1 libsodium libzstd) -lm -lpthread -o "$out/bench_audio"
venv=$("$root/scripts/ref-venv.sh" audio)
cpu=$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "CPU: $cpu"
espeak-ng -w "$out/speech22k.wav" "The quick brown fox jumps over the lazy dog, and a second sentence follows it."
sox "$out/speech22k.wav" -r 44100 -c 2 "$out/long44k.wav" repeat 6 trim 0 30
for f in "$out/speech22k.wav" "$out/long44k.wav"; do
    echo "$(basename "$f"):"
    echo "  dlm:      $("$out/bench_audio" "$f" 10)"
    OMP_NUM_THREADS=1 "$venv/bin/python" - "$f" 2>/dev/null <<'PY'
import sys, time
import numpy as np, soundfile as sf, soxr
from transformers import WhisperFeatureExtractor
fe = WhisperFeatureExtractor(feature_size=128)
bd = bm = 1e9
for _ in range(10):
    t0 = time.perf_counter()
    x, sr = sf.read(sys.argv[1], dtype="float32")
    if x.ndim > 1: x = x.mean(axis=1).astype(np.float32)
    if sr != 16000: x = soxr.resample(x, sr, 16000, quality="HQ")
    x = x[:480000]; t1 = time.perf_counter()
    fe(x, sampling_rate=16000, return_tensors="np"); t2 = time.perf_counter()
    bd, bm = min(bd, t1 - t0), min(bm, t2 - t1)
print(f"  original: {len(x)} samples: decode+resample {bd*1e3:.2f} ms, log-mel-128 {bm*1e3:.2f} ms")
PY
done
