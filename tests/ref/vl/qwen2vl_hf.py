"""Reference for dlm's whole Qwen2-VL model (r1601).

Builds transformers' Qwen2VLForConditionalGeneration from a small random
config (no download; every parameter random, norm scales around 1), runs a
prompt with two real images (Qwen2VLImageProcessorPil, small max_pixels, so
two different grids) and writes into DIR:

  v5/        save_pretrained's folder: a config with text_config; transformers
             5.23 writes the tensors back under the hub checkpoints' names
             (visual.*, model.layers.*, lm_head)
  hub/       the same weights under the names transformers 5 holds in memory
             (model.visual.*, model.language_model.*, lm_head) with a
             hub-style config.json (top-level text fields, rope_scaling type
             mrope, in_chans)
  ids.txt    the expanded input ids
  images.txt the two image paths
  pix.txt    min_pixels max_pixels
  logits.f32 [L][V]
  gen.txt    8 greedy tokens of model.generate after the prompt
  scores.f32 their logits [8][V] (output_scores; no logits processor)
"""
import json, os, sys

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file
from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

out = sys.argv[1]
torch.manual_seed(1601)
V, IMG, VS, VE = 400, 397, 395, 396
text = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128,
            vocab_size=V, rms_norm_eps=1e-6, max_position_embeddings=4096,
            rope_parameters=dict(rope_type="default", mrope_section=[2, 3, 3], rope_theta=10000.0))
vision = dict(depth=2, embed_dim=32, hidden_size=64, num_heads=4, mlp_ratio=2, in_channels=3, patch_size=14,
              spatial_merge_size=2, temporal_patch_size=2)
cfg = Qwen2VLConfig(text_config=text, vision_config=vision, image_token_id=IMG, vision_start_token_id=VS,
                    vision_end_token_id=VE, video_token_id=398, tie_word_embeddings=False)
cfg.text_config.bos_token_id = 1
cfg.text_config.eos_token_id = 2
cfg._attn_implementation = "eager"
model = Qwen2VLForConditionalGeneration(cfg).eval()
with torch.no_grad():
    for name, p in model.named_parameters():
        one = name.endswith("norm.weight") or name.endswith("norm1.weight") or name.endswith("norm2.weight") \
            or name.endswith("layernorm.weight") or name.endswith("ln_q.weight")
        p.copy_(torch.randn_like(p) * (0.5 if p.ndim == 1 else 0.05) + (1.0 if one else 0.0))
model.save_pretrained(os.path.join(out, "v5"))

# the other tensor layout, with the hub's config style
hub = os.path.join(out, "hub")
os.makedirs(hub, exist_ok=True)
sd = {k: v.contiguous() for k, v in model.state_dict().items()}
assert any(k.startswith("model.language_model.") for k in sd) and any(k.startswith("model.visual.") for k in sd)
save_file(sd, os.path.join(hub, "model.safetensors"), metadata={"format": "pt"})
hc = dict(architectures=["Qwen2VLForConditionalGeneration"], model_type="qwen2_vl", hidden_size=64,
          intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=V,
          rms_norm_eps=1e-6, rope_theta=10000.0, max_position_embeddings=4096, hidden_act="silu",
          rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]}, tie_word_embeddings=False,
          torch_dtype="float32", bos_token_id=1, eos_token_id=2, image_token_id=IMG, vision_start_token_id=VS,
          vision_end_token_id=VE, video_token_id=398, use_sliding_window=False, sliding_window=4096,
          vision_config=dict(depth=2, embed_dim=32, hidden_size=64, num_heads=4, mlp_ratio=2, in_chans=3,
                             spatial_patch_size=14, patch_size=14, spatial_merge_size=2, temporal_patch_size=2))
with open(os.path.join(hub, "config.json"), "w") as f:
    json.dump(hc, f, indent=2)

photos = "/usr/share/matplotlib/mpl-data/sample_data"
paths = [os.path.join(photos, "grace_hopper.jpg"), os.path.join(photos, "logo2.png")]
mn, mx = 3136, 28 * 28 * 12
proc = Qwen2VLImageProcessorPil(min_pixels=mn, max_pixels=mx)
r = proc([Image.open(p).convert("RGB") for p in paths], return_tensors="pt")
pv, grid = r["pixel_values"].float(), r["image_grid_thw"]
k = [int(g.prod()) // 4 for g in grid]
ids = [5, 17, VS] + [IMG] * k[0] + [VE, 33, 44, VS] + [IMG] * k[1] + [VE, 60, 71, 88]
with torch.no_grad():
    t = torch.tensor([ids])
    o = model(input_ids=t, pixel_values=pv, image_grid_thw=grid, mm_token_type_ids=(t == IMG).long()).logits[0]
o.numpy().astype(np.float32).tofile(os.path.join(out, "logits.f32"))
with torch.no_grad():
    t = torch.tensor([ids])
    g = model.generate(input_ids=t, pixel_values=pv, image_grid_thw=grid, mm_token_type_ids=(t == IMG).long(),
                       max_new_tokens=8, min_new_tokens=8, do_sample=False, output_scores=True,
                       return_dict_in_generate=True, eos_token_id=None, pad_token_id=0)
torch.stack([sc[0] for sc in g.scores]).numpy().astype(np.float32).tofile(os.path.join(out, "scores.f32"))
with open(os.path.join(out, "gen.txt"), "w") as f:
    f.write(" ".join(map(str, g.sequences[0, len(ids):].tolist())) + "\n")
with open(os.path.join(out, "ids.txt"), "w") as f:
    f.write(" ".join(map(str, ids)) + "\n")
with open(os.path.join(out, "images.txt"), "w") as f:
    f.write("\n".join(paths) + "\n")
with open(os.path.join(out, "pix.txt"), "w") as f:
    f.write(f"{mn} {mx}\n")
print(f"qwen2vl_hf: grids {grid.tolist()}, {len(ids)} tokens, max|logit| {o.abs().max():.3g}")
