"""Reference for LoRA training on a Qwen2-VL base (r1602).

The same small random Qwen2VLForConditionalGeneration as qwen2vl_hf.py,
PEFT LoRA (r 4, alpha 8, q/k/v/o: the language model's attention only, the
tower frozen) with random A and B, and two training rows as dlm's dataset
makes them: `<image tokens>\\n<caption><eos>` with the loss on the caption
(from the newline on). Writes into DIR:

  model/            save_pretrained's folder
  images.txt pix.txt rows.txt (each row's ids; the first n are the image's)
  init.safetensors  the LoRA weights under dlm's (PEFT's saved) names
  grads.safetensors their gradient of the mean caption NLL over both rows
  final.safetensors the weights after 5 AdamW steps on the same batch
                    (warmup + cosine, clipping, as dlm's trainer)
  hp.json           the hyperparameters, the loss and the 5 step losses
"""
import json, math, os, re, sys

import torch
from PIL import Image
from peft import LoraConfig, get_peft_model
from safetensors.torch import save_file
from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

out = sys.argv[1]
torch.manual_seed(1602)
V, IMG, VS, VE, EOS = 400, 397, 395, 396, 2
text = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128,
            vocab_size=V, rms_norm_eps=1e-6, max_position_embeddings=4096,
            rope_parameters=dict(rope_type="default", mrope_section=[2, 3, 3], rope_theta=10000.0))
vision = dict(depth=2, embed_dim=32, hidden_size=64, num_heads=4, mlp_ratio=2, in_channels=3, patch_size=14,
              spatial_merge_size=2, temporal_patch_size=2)
cfg = Qwen2VLConfig(text_config=text, vision_config=vision, image_token_id=IMG, vision_start_token_id=VS,
                    vision_end_token_id=VE, video_token_id=398, tie_word_embeddings=False)
cfg.text_config.bos_token_id = 1
cfg.text_config.eos_token_id = EOS
cfg._attn_implementation = "eager"
base = Qwen2VLForConditionalGeneration(cfg).eval()
with torch.no_grad():
    for name, p in base.named_parameters():
        one = name.endswith("norm.weight") or name.endswith("norm1.weight") or name.endswith("norm2.weight") \
            or name.endswith("layernorm.weight") or name.endswith("ln_q.weight")
        p.copy_(torch.randn_like(p) * (0.5 if p.ndim == 1 else 0.05) + (1.0 if one else 0.0))
base.save_pretrained(os.path.join(out, "model"))

R, ALPHA = 4, 8.0
model = get_peft_model(base, LoraConfig(r=R, lora_alpha=ALPHA, lora_dropout=0.0,
                                        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
pat = re.compile(r"layers\.(\d+)\.self_attn\.([qkvo]_proj)\.(lora_[AB])\.default\.weight$")
P = {}
with torch.no_grad():
    for name, p in model.named_parameters():
        m = pat.search(name)
        if not m:
            assert not p.requires_grad or "lora" not in name, name
            continue
        assert "visual" not in name
        p.copy_(torch.randn_like(p) * 0.1)
        P[f"base_model.model.model.layers.{m[1]}.self_attn.{m[2]}.{m[3]}.weight"] = p
assert len(P) == 2 * 4 * 2, sorted(P)

photos = "/usr/share/matplotlib/mpl-data/sample_data"
paths = [os.path.join(photos, "grace_hopper.jpg"), os.path.join(photos, "logo2.png")]
mn, mx = 3136, 28 * 28 * 12
proc = Qwen2VLImageProcessorPil(min_pixels=mn, max_pixels=mx)
ims = [Image.open(p).convert("RGB") for p in paths]
rows = []
captions = [[13, 40, 41, 42, 43], [13, 77, 78, 79]]   # "\n" then a caption, dlm's rows end with EOS
for i, im in enumerate(ims):
    r = proc([im], return_tensors="pt")
    k = int(r["image_grid_thw"][0].prod()) // 4
    rows.append((k, [IMG] * k + captions[i] + [EOS], r["pixel_values"].float(), r["image_grid_thw"]))
n_loss = sum(len(ids) - k for k, ids, _, _ in rows)


def loss_fn():
    tot = 0.0
    for k, ids, pv, grid in rows:
        t = torch.tensor([ids])
        lg = model(input_ids=t, pixel_values=pv, image_grid_thw=grid, mm_token_type_ids=(t == IMG).long()).logits[0]
        lab = t[0, 1:].clone()
        lab[: k - 1] = -100   # targets of the image rows: none (the loss is on the caption, from "\n" on)
        tot = tot + torch.nn.functional.cross_entropy(lg[:-1], lab, reduction="sum", ignore_index=-100)
    return tot / n_loss


save_file({k: v.detach().clone().contiguous() for k, v in P.items()}, os.path.join(out, "init.safetensors"))
model.train()
lo = loss_fn()
lo.backward()
save_file({k: v.grad.detach().clone().contiguous() for k, v in P.items()}, os.path.join(out, "grads.safetensors"))
hp = dict(lr=2e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, max_grad_norm=0.5, warmup_ratio=0.2,
          steps=5, rank=R, alpha=ALPHA, loss=float(lo))
names = sorted(P)
opt = torch.optim.AdamW([P[k] for k in names], lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"],
                        weight_decay=hp["weight_decay"])
total, warm = hp["steps"], math.ceil(hp["steps"] * hp["warmup_ratio"])


def lam(k):
    if k < warm:
        return k / max(1, warm)
    return max(0.0, 0.5 * (1 + math.cos(math.pi * (k - warm) / max(1, total - warm))))


sch = torch.optim.lr_scheduler.LambdaLR(opt, lam)
losses = []
for _ in range(total):
    opt.zero_grad()
    lo = loss_fn()
    lo.backward()
    torch.nn.utils.clip_grad_norm_([P[k] for k in names], hp["max_grad_norm"])
    opt.step()
    sch.step()
    losses.append(float(lo))
hp["step_losses"] = losses
save_file({k: v.detach().clone().contiguous() for k, v in P.items()}, os.path.join(out, "final.safetensors"))
with open(os.path.join(out, "hp.json"), "w") as f:
    json.dump(hp, f)
with open(os.path.join(out, "rows.txt"), "w") as f:
    for k, ids, _, _ in rows:
        f.write(" ".join(map(str, ids)) + "\n")
with open(os.path.join(out, "images.txt"), "w") as f:
    f.write("\n".join(paths) + "\n")
with open(os.path.join(out, "pix.txt"), "w") as f:
    f.write(f"{mn} {mx}\n")
print(f"qwen2vl_peft: rows {[len(r[1]) for r in rows]}, loss {hp['loss']:.6f}, steps {losses}")
