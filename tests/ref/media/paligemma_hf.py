"""Reference for dlm's PaliGemma (r2101): transformers'
PaliGemmaForConditionalGeneration (eager attention) on a small random
config (no download): SigLIP 2 layers at 28x28 (4 image tokens), Gemma 2
layers (hidden 48, 2 heads, 1 kv head, head_dim 24), every parameter random
(norm weights too). One sequence laid out as PaliGemmaProcessor does:
<image>x4 <bos> prompt "\\n" | suffix <eos>, token_type_ids 0 on the prefix
and 1 on the suffix, so the prefix attends both ways.

Writes into DIR: model/ (save_pretrained: config.json + transformers 5
names), pixels.f32 [3][28][28] (a real photo through SiglipImageProcessorPil),
ids.json, prefix.txt (prefix length), logits.f32 [T][V] (the training
forward: token_type_ids given, as the processor returns them),
gen_logits.f32 [T][V] (generate's masks: prefix forward over the prompt, then
the suffix token by token through the KV cache).

LoRA (PEFT's get_peft_model: rank 4, alpha 8, on q/k/v/o of every
language-model layer, A and B random) on the training forward
with the processor's labels (loss on the suffix, mean as transformers'):
lora_init.f32 (per layer, per module q k v o: A [r][in] then B [out][r]),
lora_grad.f32 (the same layout: d mean-loss), lora_adamw5.f32 (the adapter
after 5 torch.optim.AdamW steps on that batch: lr 1e-2, weight_decay 0.01)."""
import json, os, sys

import numpy as np
import torch
from PIL import Image
from transformers import PaliGemmaConfig
from transformers.models.paligemma.modeling_paligemma import PaliGemmaForConditionalGeneration
from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

out = sys.argv[1]
torch.manual_seed(2101)
V = 300
cfg = PaliGemmaConfig(
    vision_config=dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
                       image_size=28, patch_size=14, vision_use_head=False),
    text_config=dict(hidden_size=48, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                     num_key_value_heads=1, head_dim=24, vocab_size=V, rope_theta=10000.0),
    projection_dim=48, image_token_index=V - 1)
cfg._attn_implementation = "eager"
cfg.text_config._attn_implementation = "eager"
cfg.vision_config._attn_implementation = "eager"
model = PaliGemmaForConditionalGeneration(cfg).eval()
with torch.no_grad():
    for name, p in model.named_parameters():
        ln = "norm" in name and name.endswith("weight") and "vision" in name
        p.copy_(torch.randn_like(p) * (0.3 if p.ndim == 1 else 0.08) + (1.0 if ln else 0.0))
    model.lm_head.weight = model.model.language_model.embed_tokens.weight
model.save_pretrained(os.path.join(out, "model"), safe_serialization=True)

proc = SiglipImageProcessorPil(image_mean=[0.5] * 3, image_std=[0.5] * 3, resample=3, size={"height": 28, "width": 28})
im = Image.open("/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg").convert("RGB")
pv = proc([im], return_tensors="pt")["pixel_values"].float()
pv.numpy().astype(np.float32).tofile(os.path.join(out, "pixels.f32"))

g = torch.Generator().manual_seed(7)
prompt = torch.randint(3, V - 1, (5,), generator=g).tolist()
suffix = torch.randint(3, V - 1, (6,), generator=g).tolist()
ids = [V - 1] * 4 + [2] + prompt + [10] + suffix + [1]
P = 4 + 1 + len(prompt) + 1
tt = [0] * P + [1] * (len(ids) - P)
x = torch.tensor([ids])
with torch.no_grad():
    lg = model(input_ids=x, pixel_values=pv, token_type_ids=torch.tensor([tt]),
               attention_mask=torch.ones_like(x)).logits[0]
    # generate's path: the prompt with its token_type_ids (all 0), then each
    # suffix token through the cache with token type 1
    o = model(input_ids=x[:, :P], pixel_values=pv, token_type_ids=torch.zeros(1, P, dtype=torch.long),
              attention_mask=torch.ones(1, P, dtype=torch.long), use_cache=True)
    gl = [o.logits[0]]
    pkv = o.past_key_values
    for i in range(P, len(ids)):
        o = model(input_ids=x[:, i:i + 1], token_type_ids=torch.ones(1, 1, dtype=torch.long),
                  attention_mask=torch.ones(1, i + 1, dtype=torch.long), past_key_values=pkv, use_cache=True,
                  position_ids=torch.tensor([[i + 1]]))
        pkv = o.past_key_values
        gl.append(o.logits[0])
    gl = torch.cat(gl)
lg.numpy().astype(np.float32).tofile(os.path.join(out, "logits.f32"))
gl.numpy().astype(np.float32).tofile(os.path.join(out, "gen_logits.f32"))
json.dump(ids, open(os.path.join(out, "ids.json"), "w"))
open(os.path.join(out, "prefix.txt"), "w").write(f"{P}\n")
causal = None
with torch.no_grad():
    causal = model(input_ids=x, pixel_values=pv, attention_mask=torch.ones_like(x)).logits[0]
# LoRA through PEFT on the language model's attention (SigLIP has q_proj
# too: the regex keeps to language_model), A and B random
from peft import LoraConfig, get_peft_model
r, alpha = 4, 8.0
pm = get_peft_model(model, LoraConfig(r=r, lora_alpha=alpha, lora_dropout=0.0,
                                      target_modules=r".*language_model.*\.(q_proj|k_proj|v_proj|o_proj)"))
params = []
with torch.no_grad():
    for layer in model.model.language_model.layers:
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            lin = getattr(layer.self_attn, name)
            A, B = lin.lora_A["default"].weight, lin.lora_B["default"].weight
            A.copy_(torch.randn(A.shape, generator=g) * 0.2)
            B.copy_(torch.randn(B.shape, generator=g) * 0.2)
            params += [A, B]
assert sum(p_.numel() for p_ in pm.parameters() if p_.requires_grad) == sum(p_.numel() for p_ in params)
def flat(ts):
    return torch.cat([t.detach().reshape(-1) for t in ts]).numpy().astype(np.float32)
flat(params).tofile(os.path.join(out, "lora_init.f32"))
labels = torch.tensor([[t if i >= P else -100 for i, t in enumerate(ids)]])
tt_t = torch.tensor([tt])
def loss_fn():
    return pm(input_ids=x, pixel_values=pv, token_type_ids=tt_t, attention_mask=torch.ones_like(x),
                 labels=labels).loss
loss = loss_fn()
loss.backward()
flat([p_.grad for p_ in params]).tofile(os.path.join(out, "lora_grad.f32"))
opt = torch.optim.AdamW(params, lr=1e-2, weight_decay=0.01)
for p_ in params:
    p_.grad = None
for step in range(5):
    opt.zero_grad()
    loss_fn().backward()
    opt.step()
flat(params).tofile(os.path.join(out, "lora_adamw5.f32"))
print(f"paligemma_hf: LoRA loss {loss.item():.4f}")
print(f"paligemma_hf: T {len(ids)}, prefix {P}, max|logits| {lg.abs().max():.3g}, "
      f"prefix vs causal max|diff| {(lg - causal).abs().max():.3g}, train vs generate {(lg - gl).abs().max():.3g}")
