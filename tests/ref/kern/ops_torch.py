#!/usr/bin/python3
"""PyTorch reference for dlm's row ops, forward and backward (autograd):
RMSNorm, rotate-half RoPE (angles in float64, as the bench peer), causal GQA
attention (q_off > 0, packed segments), SwiGLU, cross-entropy with masked
rows, and torch.optim.AdamW. Writes inputs and results as raw little-endian
float32 / int32 files DIR/<name>.bin plus DIR/meta.txt ("key value" lines);
`test_kern_ops --torch DIR` recomputes everything with dlm's kernels and
compares.

usage: /usr/bin/python3 ops_torch.py DIR
"""
import os
import sys

import torch
import torch.nn.functional as F

torch.manual_seed(1234)
torch.set_num_threads(1)
OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
meta = []


def save(name, t):
    t = t.detach().contiguous()
    if t.dtype == torch.float64:
        t = t.float()
    t.numpy().tofile(os.path.join(OUT, name + ".bin"))


def put(key, val):
    meta.append(f"{key} {val}")


# ---- RMSNorm -----------------------------------------------------------------------------
N, C, eps = 33, 96, 1e-5
x = torch.randn(N, C) * 2
w = (1 + 0.1 * torch.randn(C)).requires_grad_(True)
x.requires_grad_(True)
y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
dy = torch.randn(N, C)
y.backward(dy)
put("rms_N", N); put("rms_C", C); put("rms_eps", repr(eps))
for n, t in [("rms_x", x), ("rms_w", w), ("rms_dy", dy), ("rms_y", y), ("rms_dx", x.grad), ("rms_dw", w.grad)]:
    save(n, t)

# ---- RoPE (HF rotate_half; angles in float64, cos/sin cast to float32) --------------------
N, H, HS, theta = 20, 3, 64, 100000.0
pos = torch.tensor([0, 1, 2, 3, 7, 31, 64, 100, 255, 511, 512, 1000, 2047, 4095, 8191, 5, 6, 9, 300, 30000],
                   dtype=torch.int32)
inv = 1.0 / (theta ** (torch.arange(0, HS, 2, dtype=torch.float64) / HS))
fr = torch.outer(pos.double(), inv)
emb = torch.cat([fr, fr], dim=-1)
cos, sin = emb.cos().float()[:, None, :], emb.sin().float()[:, None, :]


def rotate_half(t):
    h = t.shape[-1] // 2
    return torch.cat([-t[..., h:], t[..., :h]], dim=-1)


x = torch.randn(N, H, HS, requires_grad=True)
y = x * cos + rotate_half(x) * sin
dy = torch.randn(N, H, HS)
y.backward(dy)
put("rope_N", N); put("rope_H", H); put("rope_HS", HS); put("rope_theta", repr(theta))
save("rope_pos", pos)
for n, t in [("rope_x", x), ("rope_dy", dy), ("rope_y", y), ("rope_dx", x.grad)]:
    save(n, t)

# ---- attention ------------------------------------------------------------------------------
ATTN = [  # B, Tq, Tk, NH, KVH, HS, q_off, segments
    (2, 40, 40, 6, 2, 32, 0, False),
    (1, 24, 64, 4, 1, 64, 40, True),
    (1, 70, 70, 4, 4, 16, 0, True),
]
put("attn_cases", len(ATTN))
for ci, (B, Tq, Tk, NH, KVH, HS, q_off, use_seg) in enumerate(ATTN):
    q = torch.randn(B, Tq, NH, HS, requires_grad=True)
    k = torch.randn(B, Tk, KVH, HS, requires_grad=True)
    v = torch.randn(B, Tk, KVH, HS, requires_grad=True)
    if use_seg:
        seg = torch.cumsum((torch.rand(B, Tk) < 0.1).int(), dim=1).int()
    else:
        seg = torch.zeros(B, Tk, dtype=torch.int32)
    qh = q.transpose(1, 2)                                     # [B, NH, Tq, HS]
    kh = k.transpose(1, 2).repeat_interleave(NH // KVH, dim=1)  # [B, NH, Tk, HS]
    vh = v.transpose(1, 2).repeat_interleave(NH // KVH, dim=1)
    s = qh @ kh.transpose(-1, -2) / (HS ** 0.5)
    qpos = torch.arange(Tq) + q_off
    vis = torch.arange(Tk)[None, :] <= qpos[:, None]            # [Tq, Tk]
    vis = vis[None, :, :] & (seg[:, None, :] == seg[:, qpos][:, :, None])  # [B, Tq, Tk]
    s = s.masked_fill(~vis[:, None, :, :], float("-inf"))
    lse = torch.logsumexp(s, dim=-1)                            # [B, NH, Tq]
    o = (torch.softmax(s, dim=-1) @ vh).transpose(1, 2)         # [B, Tq, NH, HS]
    do = torch.randn_like(o)
    o.backward(do)
    p = f"attn{ci}_"
    for key, val in [("B", B), ("Tq", Tq), ("Tk", Tk), ("NH", NH), ("KVH", KVH), ("HS", HS), ("q_off", q_off),
                     ("seg", int(use_seg))]:
        put(p + key, val)
    save(p + "segids", seg)
    for n, t in [("q", q), ("k", k), ("v", v), ("dout", do), ("out", o), ("lse", lse), ("dq", q.grad),
                 ("dk", k.grad), ("dv", v.grad)]:
        save(p + n, t)

# ---- SwiGLU ----------------------------------------------------------------------------------
n = 4097
g = (torch.randn(n) * 4).requires_grad_(True)
u = torch.randn(n, requires_grad=True)
h = F.silu(g) * u
dh = torch.randn(n)
h.backward(dh)
put("swiglu_n", n)
for nm, t in [("swiglu_g", g), ("swiglu_u", u), ("swiglu_dh", dh), ("swiglu_h", h), ("swiglu_dg", g.grad),
              ("swiglu_du", u.grad)]:
    save(nm, t)

# ---- cross-entropy -------------------------------------------------------------------------------
N, V, scale = 17, 5003, 1.0 / 13
logits = (torch.randn(N, V) * 3).requires_grad_(True)
tg = torch.randint(0, V, (N,), dtype=torch.int64)
tg[3] = -1
tg[11] = -1
nll = F.cross_entropy(logits, tg, reduction="none", ignore_index=-1)
(nll.sum() * scale).backward()
put("xent_N", N); put("xent_V", V); put("xent_scale", repr(scale))
put("xent_sum", repr(float(nll.double().sum())))
save("xent_logits", logits)
save("xent_targets", tg.int())
save("xent_nll", nll)
save("xent_dlogits", logits.grad)

# ---- AdamW -----------------------------------------------------------------------------------------
n = 1000
p0 = torch.randn(n)
par = torch.nn.Parameter(p0.clone())
opt = torch.optim.AdamW([par], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
grads = torch.randn(3, n) * 0.1
for st in range(3):
    par.grad = grads[st].clone()
    opt.step()
state = opt.state[par]
put("adamw_n", n); put("adamw_steps", 3)
save("adamw_p0", p0)
save("adamw_grads", grads)
save("adamw_p", par)
save("adamw_m", state["exp_avg"])
save("adamw_v", state["exp_avg_sq"])

with open(os.path.join(OUT, "meta.txt"), "w") as f:
    f.write("\n".join(meta) + "\n")
print(f"ops_torch: wrote {len(meta)} meta keys to {OUT} (torch {torch.__version__})")
