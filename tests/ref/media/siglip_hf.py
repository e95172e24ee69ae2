"""Reference for dlm's PaliGemma image encoder (r1304): transformers'
PaliGemmaForConditionalGeneration.get_image_features (SigLIP tower +
multi-modal projector) on a small random config (no download), every
parameter random, on two real photos preprocessed by SiglipImageProcessorPil
at 56x56. Writes into DIR: siglip.safetensors (the tower's and projector's
tensors under their model names), pixels.f32 [2][3][56][56], out.f32
[2][16][proj]."""
import os, sys

import numpy as np
import torch
from PIL import Image
from safetensors.torch import save_file
from transformers import PaliGemmaConfig
from transformers.models.paligemma.modeling_paligemma import PaliGemmaForConditionalGeneration
from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

out = sys.argv[1]
torch.manual_seed(1304)
cfg = PaliGemmaConfig(
    vision_config=dict(hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                       image_size=56, patch_size=14, projection_dim=48, vision_use_head=False),
    text_config=dict(hidden_size=48, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                     num_key_value_heads=1, head_dim=24, vocab_size=300),
    projection_dim=48, image_token_id=299)
cfg._attn_implementation = "eager"
cfg.vision_config._attn_implementation = "eager"
model = PaliGemmaForConditionalGeneration(cfg).eval()
sd = {}
with torch.no_grad():
    for name, p in model.named_parameters():
        if "vision_tower" in name or "multi_modal_projector" in name:
            ln = "norm" in name and name.endswith("weight")
            p.copy_(torch.randn_like(p) * (0.5 if p.ndim == 1 else 0.05) + (1.0 if ln else 0.0))
            sd[name] = p.detach().contiguous().clone()
save_file(sd, os.path.join(out, "siglip.safetensors"))
proc = SiglipImageProcessorPil(image_mean=[0.5] * 3, image_std=[0.5] * 3, resample=3, size={"height": 56, "width": 56})
photos = "/usr/share/matplotlib/mpl-data/sample_data"
ims = [Image.open(os.path.join(photos, f)).convert("RGB") for f in ("grace_hopper.jpg", "Minduka_Present_Blue_Pack.png")]
pv = proc(ims, return_tensors="pt")["pixel_values"].float()
with torch.no_grad():
    feats = model.get_image_features(pv).pooler_output
pv.numpy().tofile(os.path.join(out, "pixels.f32"))
feats.numpy().astype(np.float32).tofile(os.path.join(out, "out.f32"))
open(os.path.join(out, "names.txt"), "w").write("\n".join(sorted(sd)) + "\n")
print(f"siglip_hf: out {tuple(feats.shape)}, max|out| {feats.abs().max():.3g}, e.g. {sorted(sd)[0]}")
