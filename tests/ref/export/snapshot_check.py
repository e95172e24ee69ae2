"""Check dlm's HF snapshot (r1901, r1902) the way a recipient uses it.

  snapshot_check.py FIXTURE SNAPSHOT qwen2vl|paligemma|qwen2audio

- the layout and snapshot_manifest.json: exactly the original's keys
  (vl_snapshot.py VlSnapshotManifest / audio_snapshot.py
  AudioSnapshotManifest), every artifact's sha256 and size;
- adapter/ loads with PEFT onto the base built by vl_fixture.py (no missing
  or unexpected keys) and gives the logits of the adapter it was trained as
  (FIXTURE/adapter), bit for bit;
- processor/ loads with transformers (tokenizer, and the image processor or
  feature extractor) and encodes like the base's own files.
"""
import hashlib, json, os, sys

import numpy as np
import torch

fix, snap, kind = sys.argv[1], sys.argv[2], sys.argv[3]
m = json.load(open(os.path.join(snap, "snapshot_manifest.json")))
common = {"export_target", "created_at", "created_by", "base_model_hf_id", "base_model_revision",
          "base_model_architecture", "modality", "adapter_version", "adapter_name", "rationale", "artifacts"}
extra = {"audio_token", "num_audio_tokens", "sample_rate", "max_length_seconds"} if kind == "qwen2audio" else \
        {"image_token", "num_image_tokens", "target_size"}
assert set(m) == common | extra, sorted(set(m) ^ (common | extra))
assert m["export_target"] == "hf_snapshot"
assert m["modality"] == ("audio-language" if kind == "qwen2audio" else "vision-language")
assert m["created_by"].startswith("dlm-") and m["adapter_version"] == 1
for a in m["artifacts"]:
    data = open(os.path.join(snap, a["path"]), "rb").read()
    assert hashlib.sha256(data).hexdigest() == a["sha256"] and len(data) == a["size_bytes"], a["path"]
listed = {a["path"] for a in m["artifacts"]}
for sub in ("adapter", "processor"):
    for f in os.listdir(os.path.join(snap, sub)):
        assert f"{sub}/{f}" in listed, f
assert sorted(os.listdir(snap)) == ["README.md", "adapter", "processor", "snapshot_manifest.json"], os.listdir(snap)
for f in ("adapter_config.json", "adapter_model.safetensors"):
    assert open(os.path.join(snap, "adapter", f), "rb").read() == open(os.path.join(fix, "adapter", f), "rb").read()

from peft import PeftModel
import transformers as tf
cls = {"qwen2vl": "Qwen2VLForConditionalGeneration", "paligemma": "PaliGemmaForConditionalGeneration",
       "qwen2audio": "Qwen2AudioForConditionalGeneration"}[kind]
assert m["base_model_architecture"] == cls


def logits(adapter):
    base = getattr(tf, cls).from_pretrained(os.path.join(fix, "base")).eval()
    model = PeftModel.from_pretrained(base, adapter).eval()
    ids = torch.tensor([[5, 17, 42, 99, 3, 250, 11]])
    with torch.no_grad():
        return model(input_ids=ids).logits


a, b = logits(os.path.join(snap, "adapter")), logits(os.path.join(fix, "adapter"))
assert torch.equal(a, b)
# the adapter does something (the check above is not base == base)
base = getattr(tf, cls).from_pretrained(os.path.join(fix, "base")).eval()
with torch.no_grad():
    assert not torch.equal(base(input_ids=torch.tensor([[5, 17, 42, 99, 3, 250, 11]])).logits, a)

proc, orig = os.path.join(snap, "processor"), os.path.join(fix, "base")
t1, t2 = tf.AutoTokenizer.from_pretrained(proc), tf.AutoTokenizer.from_pretrained(orig)
text = "<|im_start|>user\nDescribe it, 42 times.<|im_end|>\n"
assert t1(text)["input_ids"] == t2(text)["input_ids"] and len(t1) == len(t2)
if kind == "qwen2audio":
    f1, f2 = tf.AutoFeatureExtractor.from_pretrained(proc), tf.AutoFeatureExtractor.from_pretrained(orig)
    x = np.sin(np.arange(16000) / 7.0).astype(np.float32)
    assert np.array_equal(f1(x, sampling_rate=16000)["input_features"], f2(x, sampling_rate=16000)["input_features"])
else:
    from PIL import Image
    i1, i2 = tf.AutoImageProcessor.from_pretrained(proc), tf.AutoImageProcessor.from_pretrained(orig)
    img = Image.fromarray(np.random.default_rng(3).integers(0, 256, (60, 90, 3), dtype=np.uint8))
    assert torch.equal(i1(img, return_tensors="pt")["pixel_values"], i2(img, return_tensors="pt")["pixel_values"])
print(f"snapshot_check {kind}: manifest keys and {len(m['artifacts'])} artifacts ok, adapter logits equal, processor equal")
