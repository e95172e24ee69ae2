"""Reference for dlm's Qwen2-VL vision tower (r1302).

Builds transformers' Qwen2VisionTransformerPretrainedModel from a small
random config (no download), with every parameter drawn at random (LayerNorm
scales and biases too), runs it on two real images preprocessed by
Qwen2VLImageProcessorPil (different grids, so the per-image attention
blocks and the 2-D rotary positions are exercised), and writes into DIR:

  vit.safetensors   the tower's state dict (f32)
  pixels.f32        pixel_values [N][1176]
  grid.txt          "t h w" per image, then the config line
  out.f32           pooler_output, the merger's output [N/4][hidden_size]
"""
import os, sys

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file
from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLVisionConfig
from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VisionTransformerPretrainedModel
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

out = sys.argv[1]
torch.manual_seed(1302)
cfg = Qwen2VLVisionConfig(depth=2, embed_dim=64, hidden_size=48, num_heads=4, mlp_ratio=2, in_channels=3,
                          patch_size=14, spatial_merge_size=2, temporal_patch_size=2)
cfg._attn_implementation = "eager"
model = Qwen2VisionTransformerPretrainedModel(cfg).eval()
with torch.no_grad():
    for name, p in model.named_parameters():
        p.copy_(torch.randn_like(p) * (0.5 if p.ndim == 1 else 0.05) + (1.0 if name.endswith("norm1.weight") or name.endswith("norm2.weight") or name.endswith("ln_q.weight") else 0.0))
save_file({k: v.contiguous() for k, v in model.state_dict().items()}, os.path.join(out, "vit.safetensors"))

proc = Qwen2VLImageProcessorPil(min_pixels=3136, max_pixels=28 * 28 * 12)
photos = "/usr/share/matplotlib/mpl-data/sample_data"
ims = [Image.open(os.path.join(photos, "grace_hopper.jpg")).convert("RGB"),
       Image.open(os.path.join(photos, "logo2.png")).convert("RGB")]
r = proc(ims, return_tensors="pt")
pv, grid = r["pixel_values"].float(), r["image_grid_thw"]
with torch.no_grad():
    o = model(pv, grid_thw=grid).pooler_output
pv.numpy().astype(np.float32).tofile(os.path.join(out, "pixels.f32"))
o.numpy().astype(np.float32).tofile(os.path.join(out, "out.f32"))
with open(os.path.join(out, "grid.txt"), "w") as f:
    for t, h, w in grid.tolist():
        f.write(f"{t} {h} {w}\n")
print(f"vit_hf: grids {grid.tolist()}, out {tuple(o.shape)}, max|out| {o.abs().max():.3g}")
