"""Reference waveforms and Whisper log-mel features for r1501.

For every clip in DIR (espeak-ng speech at 8/16/22.05/44.1 kHz, stereo,
FLAC, OGG, and synthetic signals written here), what the original's
dlm/data/audio_preprocessor.py does: soundfile.read(dtype="float32"), the
channel mean, soxr.resample(x, sr, 16000, quality="HQ") when the rate
differs (auto_resample), truncation to 30 s; then transformers 5.23's
WhisperFeatureExtractor (no torch in this venv: its numpy path) with 80 and
128 mel bins. Writes <name>.wave.f32, <name>.mel80.f32, <name>.mel128.f32,
filters80.f64 / filters128.f64 and cases.txt ("name file").
"""
import math, os, sys

import numpy as np
import soundfile as sf
import soxr
import transformers
from transformers import WhisperFeatureExtractor
from transformers.utils import is_torch_available

assert not is_torch_available(), "the numpy path needs a venv without torch"
d = sys.argv[1]
rate = 16000

def write(name, x, sr, subtype="PCM_16"):
    p = os.path.join(d, name)
    sf.write(p, x, sr, subtype=subtype)
    return p

t = lambda sec, sr: np.arange(int(sec * sr)) / sr
synth = {
    "silence": write("silence.wav", np.zeros(rate), rate),
    "tone440": write("tone440.wav", 0.5 * np.sin(2 * math.pi * 440 * t(2, rate)), rate),
    # a tone at 3x full scale, clipped by the 16-bit encoder's range
    "clipped": write("clipped.wav", np.clip(3 * np.sin(2 * math.pi * 300 * t(1.5, rate)), -1, 1), rate),
    "tone8k": write("tone8k.wav", 0.3 * np.sin(2 * math.pi * 440 * t(1, 8000)), 8000),
    "tone44k_stereo": write("tone44k.wav", np.stack([0.4 * np.sin(2 * math.pi * 440 * t(1.2, 44100)),
                                                     0.2 * np.sin(2 * math.pi * 660 * t(1.2, 44100))], 1), 44100),
    "float32": write("float32.wav", 0.7 * np.sin(2 * math.pi * 1000 * t(0.5, rate)), rate, "FLOAT"),
    # 5 channels of float noise at different levels: numpy's mean over axis 1
    # (its pairwise summation order) against dlm's channel sum
    "noise5ch": write("noise5ch.wav", np.random.RandomState(5).uniform(-1, 1, (rate, 5)) * [0.9, 0.5, 0.3, 0.7, 0.1], rate, "FLOAT"),
    # 45 s at 44.1 kHz: the 30 s cut after resampling, and dlm reads only 31 s
    "long44k": write("long44k.wav", 0.3 * np.sin(2 * math.pi * 220 * t(45, 44100)) * np.sin(2 * math.pi * 0.5 * t(45, 44100)), 44100),
    # 29.99 s: the clip reaches the last half frame, which the reflect padding mirrors
    "edge16k": write("edge16k.wav", 0.2 * np.sin(2 * math.pi * 523 * t(29.99, rate)), rate),
    # 40 s at 16 kHz: truncated to exactly 480000 samples
    "long16k": write("long16k.wav", 0.2 * np.sin(2 * math.pi * 523 * t(40, rate)), rate),
}
speech = {n: os.path.join(d, f) for n, f in [("speech22k", "speech22k.wav"), ("speech16k", "speech16k.wav"),
         ("speech8k", "speech8k.wav"), ("speech44k_stereo", "speech44k.wav"), ("speech_flac", "speech.flac"),
         ("speech_ogg", "speech.ogg")]}
for p in speech.values():
    assert os.path.exists(p), p
# MP3 (libsndfile >= 1.1 reads and, with LAME, writes it): the speech re-encoded
x16, _ = sf.read(speech["speech16k"], dtype="float32")
sf.write(os.path.join(d, "speech.mp3"), x16, rate, format="MP3", subtype="MPEG_LAYER_III")
speech["speech_mp3"] = os.path.join(d, "speech.mp3")

fes = {m: WhisperFeatureExtractor(feature_size=m) for m in (80, 128)}
for m, fe in fes.items():
    fe.mel_filters.astype("<f8").tofile(os.path.join(d, "filters%d.f64" % m))
with open(os.path.join(d, "cases.txt"), "w") as cases:
    for name, p in {**synth, **speech}.items():
        x, sr = sf.read(p, dtype="float32", always_2d=False)
        if x.ndim > 1:
            x = x.mean(axis=1).astype(np.float32, copy=False)
        x = np.ascontiguousarray(x, dtype=np.float32)
        if sr != rate:
            x = np.ascontiguousarray(soxr.resample(x, sr, rate, quality="HQ"), dtype=np.float32)
        x = x[: 30 * rate]
        x.astype("<f4").tofile(os.path.join(d, name + ".wave.f32"))
        for m, fe in fes.items():
            f = fe(x, sampling_rate=rate, return_tensors="np")["input_features"][0]
            assert f.shape == (m, 3000) and f.dtype == np.float32, f.shape
            f.astype("<f4").tofile(os.path.join(d, "%s.mel%d.f32" % (name, m)))
        cases.write("%s %s\n" % (name, p))
print("audio_hf: %d cases (transformers %s, soxr %s, soundfile %s, libsndfile %s)" % (
    len(synth) + len(speech), transformers.__version__, soxr.__version__, sf.__version__, sf.__libsndfile_version__))
