"""PEFT reference for LoRA on Qwen2-Audio's language model (r1702):
transformers 5.23's Qwen2AudioForConditionalGeneration from DIR/base (float32,
eager) wrapped by PEFT 0.21's LoRA (rank 4, alpha 8, no dropout) on the
language model's q_proj, k_proj, v_proj, o_proj only (a regex: the audio
tower's attention also has q/k/v_proj, and the brief is LoRA on the Qwen2
language model), lora_B random so every gradient is nonzero. One training
row as dlm makes it (the original's "<|AUDIO|>\\n<transcript>", the
processor's expansion, the loss on the transcript's tokens only):

  DIR/a.wav, transcript "A tone."

Writes into DIR: batch.json (input_ids, targets: next-token ids, -1 = no
loss), lora.init.safetensors and lora.grads.safetensors (dlm's PEFT names,
base_model.model.model.layers.L.self_attn.M.lora_{A,B}.weight), lora.json
(loss, 5 AdamW steps' losses as dlm's trainer runs them: linear warmup,
cosine, clipping, weight decay; the final loss)."""
import json, math, os, sys, wave

import numpy as np
import torch
from peft import LoraConfig, get_peft_model
from safetensors.torch import save_file
from transformers import AutoTokenizer, Qwen2AudioForConditionalGeneration, Qwen2AudioProcessor, WhisperFeatureExtractor

torch.set_num_threads(1)
torch.manual_seed(1702)   # PEFT draws lora_A from torch's global generator
d = sys.argv[1]
base = os.path.join(d, "base")
w = wave.open(os.path.join(d, "a.wav"))
audio = np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768
model = Qwen2AudioForConditionalGeneration.from_pretrained(base, dtype=torch.float32, attn_implementation="eager")
tok = AutoTokenizer.from_pretrained(base)
proc = Qwen2AudioProcessor(WhisperFeatureExtractor.from_pretrained(base), tok)
transcript = "A tone."
inp = proc(text=["<|AUDIO|>\n" + transcript], audio=[audio], sampling_rate=16000, return_tensors="pt")
ids = inp["input_ids"][0].tolist()
tokid = model.config.audio_token_id
n_audio = sum(1 for t in ids if t == tokid)
n_nl = len(tok("\n")["input_ids"])
# labels: the transcript's tokens (after the placeholders and "\n")
labels = torch.full_like(inp["input_ids"], -100)
labels[0, n_audio + n_nl:] = inp["input_ids"][0, n_audio + n_nl:]
targets = [int(labels[0, i + 1]) if int(labels[0, i + 1]) >= 0 else -1 for i in range(len(ids) - 1)]
json.dump({"input_ids": ids[:-1], "targets": targets, "n_audio": n_audio}, open(os.path.join(d, "batch.json"), "w"))

r, alpha = 4, 8
cfg = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=0.0,
                 target_modules=r".*language_model.*\.self_attn\.(q_proj|k_proj|v_proj|o_proj)")
pm = get_peft_model(model, cfg)
g = torch.Generator().manual_seed(1702)
with torch.no_grad():
    for n, p in pm.named_parameters():
        if "lora_B" in n:
            p.copy_(torch.randn(p.shape, generator=g) * 0.05)


def dlm_name(n):
    # base_model.model.model.language_model.layers.0.self_attn.q_proj.lora_A.default.weight
    n = n.replace("model.language_model.", "model.").replace(".default", "")
    return n


lp = {n: p for n, p in pm.named_parameters() if p.requires_grad}
assert all("language_model" in n for n in lp), [n for n in lp if "language_model" not in n]
save_file({dlm_name(n): p.detach().clone().contiguous() for n, p in lp.items()},
          os.path.join(d, "lora.init.safetensors"))


def loss_fn():
    out = pm(**inp)
    lg = out.logits[0, :-1].float()
    t = torch.tensor([max(x, 0) for x in targets])
    m = torch.tensor([x >= 0 for x in targets])
    nll = torch.nn.functional.cross_entropy(lg, t, reduction="none")
    return (nll * m).sum() / m.sum()


pm.train()   # no dropout anywhere (lora_dropout 0; the configs' dropouts are 0)
loss = loss_fn()
loss.backward()
save_file({dlm_name(n): p.grad.detach().clone().contiguous() for n, p in lp.items()},
          os.path.join(d, "lora.grads.safetensors"))
hp = dict(lr=2e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, max_grad_norm=0.5, warmup_ratio=0.2, steps=5,
          rank=r, alpha=alpha)
names = sorted(lp)
opt = torch.optim.AdamW([lp[k] for k in names], lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"],
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
    torch.nn.utils.clip_grad_norm_([lp[k] for k in names], hp["max_grad_norm"])
    opt.step()
    sch.step()
    losses.append(float(lo))
with torch.no_grad():
    final = float(loss_fn())
save_file({dlm_name(n): p.detach().clone().contiguous() for n, p in lp.items()},
          os.path.join(d, "lora.final.safetensors"))
hp.update(loss=float(loss), step_losses=losses, final_loss=final)
json.dump(hp, open(os.path.join(d, "lora.json"), "w"), indent=1)
print("qwen2audio_peft: %d ids (%d audio), loss %.6f, 5 steps -> %.6f, %d LoRA tensors" % (
    len(ids), n_audio, float(loss), final, len(lp)))
