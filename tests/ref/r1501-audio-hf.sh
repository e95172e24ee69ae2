#!/bin/bash
# r1501: audio decoding, resampling and Whisper log-mel features vs the
# original's own pipeline (soundfile + soxr HQ, tests/ref/venv/audio.txt)
# and transformers 5.23's WhisperFeatureExtractor (numpy path), on real
# speech (espeak-ng, re-encoded by sox at 8/16/22.05/44.1 kHz, stereo, FLAC,
# OGG/Vorbis) and synthetic signals (silence, a 440 Hz tone, clipping, a
# float WAV, 8 and 44.1 kHz tones, 40 and 45 s files cut to 30 s).
# Waveforms within 1e-6, features within 1e-4 (80 and 128 mel bins), the
# mel filter banks within 1e-12.
set -eu
: "${DLM_SRC:?}" "${DLM_BUILD:?}"
for t in espeak-ng sox; do
    command -v $t >/dev/null || {
        if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: $t not installed"; exit 77; fi
        echo "r1501: $t is needed (scripts/deps.sh installs it)" >&2; exit 1
    }
done
venv=$("$DLM_SRC/scripts/ref-venv.sh" audio) || {
    if [ "${DLM_REF_SKIP:-}" = "1" ]; then echo "skip: the audio reference venv is unavailable"; exit 77; fi
    exit 1
}
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlm-r1501.XXXXXX")
trap 'rm -rf "$dir"' EXIT
espeak-ng -w "$dir/speech22k.wav" "The quick brown fox jumps over the lazy dog, and a second sentence follows it."
sox "$dir/speech22k.wav" -r 16000 "$dir/speech16k.wav"
sox "$dir/speech22k.wav" -r 8000 "$dir/speech8k.wav"
sox "$dir/speech22k.wav" -r 44100 -c 2 "$dir/speech44k.wav" remix 1v0.9 1v0.4
sox "$dir/speech16k.wav" "$dir/speech.flac"
sox "$dir/speech16k.wav" "$dir/speech.ogg"
"$venv/bin/python" "$DLM_SRC/tests/ref/media/audio_hf.py" "$dir"
"$DLM_BUILD/test_audio" --ref "$dir"
