"""Reference for the whole Qwen2-Audio model (r1701): transformers 5.23's
Qwen2AudioForConditionalGeneration loaded from DIR/base (a small random
checkpoint in the hub layout, tests/ref/media/make_qwen2audio.py; eager
attention, float32) and its Qwen2AudioProcessor (the folder's
WhisperFeatureExtractor and tokenizer), on two clips in one prompt:

  text "<|AUDIO|>\\nA tone, then<|AUDIO|> a longer one."
  audio [DIR/a.wav (2.95 s), DIR/b.wav (31 s: cut to 30 s)]

Writes into DIR: ids.json (the processor's input_ids: every <|AUDIO|>
expanded to its clip's count), counts.txt (the placeholders per clip),
logits.f32 [T][V] of model(**inputs), and for LoRA (--lora R): the PEFT
adapter's gradients and its weights after 5 AdamW steps (lora.json)."""
import json, os, sys, wave

import numpy as np
import torch
from transformers import AutoTokenizer, Qwen2AudioForConditionalGeneration, Qwen2AudioProcessor, WhisperFeatureExtractor

d = sys.argv[1]
base = os.path.join(d, "base")


def read_wav(p):
    w = wave.open(p)
    assert w.getframerate() == 16000 and w.getsampwidth() == 2 and w.getnchannels() == 1
    return np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768


model = Qwen2AudioForConditionalGeneration.from_pretrained(base, dtype=torch.float32, attn_implementation="eager").eval()
proc = Qwen2AudioProcessor(WhisperFeatureExtractor.from_pretrained(base), AutoTokenizer.from_pretrained(base))
audios = [read_wav(os.path.join(d, "a.wav")), read_wav(os.path.join(d, "b.wav"))]
text = "<|AUDIO|>\nA tone, then<|AUDIO|> a longer one."
inp = proc(text=[text], audio=audios, sampling_rate=16000, return_tensors="pt")
ids = inp["input_ids"][0].tolist()
tokid = model.config.audio_token_id
with torch.no_grad():
    logits = model(**inp).logits[0].float().numpy()
json.dump(ids, open(os.path.join(d, "ids.json"), "w"))
# the runs of placeholders, in order
runs, n = [], 0
for t in ids + [-1]:
    if t == tokid:
        n += 1
    elif n:
        runs.append(n)
        n = 0
open(os.path.join(d, "counts.txt"), "w").write(" ".join(map(str, runs)) + "\n")
logits.astype(np.float32).tofile(os.path.join(d, "logits.f32"))
print("qwen2audio_model_hf: %d ids, placeholders %s, logits %s, max|logit| %.3g" % (len(ids), runs, logits.shape,
                                                                                    np.abs(logits).max()))
