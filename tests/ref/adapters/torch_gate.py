#!/usr/bin/python3
"""The gate in PyTorch, written from the original's gate/module.py and
gate/trainer.py (nn.Sequential(Linear, GELU, Linear), F.cross_entropy minus
entropy_lambda · mean(−Σ p log(p + 1e-9)), torch.optim.AdamW(lr) with its
defaults). Writes, into OUT: cfg.json (shapes, hyper-parameters, the loss,
CE and entropy of the first batch), x.f32 [N, in], y.i32 [N], w0.f32 (the
initial parameters: 0.weight, 0.bias, 2.weight, 2.bias flattened in that
order), batches.i32 [steps, B] (the rows of each step), probs.f32 (softmax
of the first batch), grad.f32 (the first batch's gradient, same layout) and
w_final.f32 (after the AdamW steps).

Usage: torch_gate.py OUT [STEPS]"""
import json, os, sys
import torch
import torch.nn.functional as F

out = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 20
torch.manual_seed(5)
IN, HID, N_AD, N, B, LAM, LR = 48, 16, 3, 40, 16, 0.05, 3e-3
os.makedirs(out, exist_ok=True)
x = torch.randn(N, IN)
y = torch.randint(0, N_AD, (N,))
mlp = torch.nn.Sequential(torch.nn.Linear(IN, HID), torch.nn.GELU(), torch.nn.Linear(HID, N_AD))
with torch.no_grad():        # larger weights than the default init so the entropy term matters
    for p in mlp.parameters():
        p.mul_(3.0)
flat = lambda ts: torch.cat([t.detach().reshape(-1) for t in ts])
params = list(mlp.parameters())   # 0.weight, 0.bias, 2.weight, 2.bias
w0 = flat(params)
batches = torch.stack([torch.randperm(N)[:B] for _ in range(steps)])


def loss_of(idx):
    logits = mlp(x[idx])
    probs = F.softmax(logits, dim=-1)
    ce = F.cross_entropy(logits, y[idx])
    ent = -(probs * torch.log(probs + 1e-9)).sum(dim=-1).mean()
    return ce - LAM * ent, ce, ent, probs


loss, ce, ent, probs = loss_of(batches[0])
mlp.zero_grad()
loss.backward()
grad = flat([p.grad for p in params])
opt = torch.optim.AdamW(mlp.parameters(), lr=LR)
for s in range(steps):
    opt.zero_grad()
    l, _, _, _ = loss_of(batches[s])
    l.backward()
    opt.step()
wf = flat(params)


def save(name, t, dt='<f4'):
    with open(os.path.join(out, name), 'wb') as f:
        f.write(t.detach().numpy().astype(dt).tobytes())


save('x.f32', x); save('y.i32', y, '<i4'); save('w0.f32', w0); save('batches.i32', batches, '<i4')
save('probs.f32', probs); save('grad.f32', grad); save('w_final.f32', wf)
json.dump({'in': IN, 'hid': HID, 'n': N_AD, 'rows': N, 'batch': B, 'lambda': LAM, 'lr': LR, 'steps': steps,
           'loss': loss.item(), 'ce': ce.item(), 'entropy': ent.item()}, open(os.path.join(out, 'cfg.json'), 'w'))
print(f'torch_gate: in {IN}, hidden {HID}, {N_AD} adapters, loss {loss.item():.6f} (ce {ce.item():.6f}, '
      f'entropy {ent.item():.6f}), {steps} AdamW steps')
