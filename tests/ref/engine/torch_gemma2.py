#!/usr/bin/python3
"""PyTorch reference for Gemma 2 in dlm's tests, written from transformers'
modeling_gemma2.py (Gemma2RMSNorm, Gemma2MLP, Gemma2Attention,
Gemma2DecoderLayer, Gemma2Model, Gemma2ForCausalLM), independent of dlm:

  h = embed(tokens) * sqrt(hidden)                  (normalizer in the hidden dtype)
  per layer l:
    x = input_layernorm(h)                          RMSNorm(x) * (1 + w)
    q, k, v = proj(x); rotate-half RoPE on q, k
    scores = q kᵀ * query_pre_attn_scalar^-0.5
    scores = tanh(scores / attn_cap) * attn_cap     (attn_logit_softcapping)
    causal mask; sliding_window on layers with l % 2 == 0 (key j visible
    to query i only if i - j < window); softmax; o_proj
    h = h + post_attention_layernorm(attn)
    h = h + post_feedforward_layernorm(down(gelu_tanh(gate(x2)) * up(x2))),
        x2 = pre_feedforward_layernorm(h)
  logits = final_norm(h) @ embedᵀ, then tanh(logits / cap) * cap (final_logit_softcapping)

Usage:
  torch_gemma2.py train --out DIR [--seed N]
      as torch_ref.py: DIR/model (HF folder), batch.safetensors, and per mode
      (lora, dora, full) the init tensors, gradients, loss and 10 AdamW steps
  torch_gemma2.py infer MODEL_DIR IDS_JSON OUT_DIR
      as torch_infer.py: OUT_DIR/logits.f32 and greedy.json (32 tokens)
"""
import json, os, sys
import torch

sys.path.insert(0, os.path.dirname(__file__))
import torch_ref as R  # noqa: E402  (safetensors writer, PEFT LoRA init, rotate_half, loss)
import torch_infer as I  # noqa: E402  (safetensors reader)

torch.set_num_threads(1)


def rmsnorm1(x, w, eps):
    """Gemma2RMSNorm: computed in float32, scaled by (1 + weight)."""
    x = x.float()
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)) * (1.0 + w.float())


def gelu_tanh(x):
    return torch.nn.functional.gelu(x, approximate='tanh')   # ACT2FN['gelu_pytorch_tanh']


def softcap(x, cap):
    return torch.tanh(x / cap) * cap if cap else x


def forward(c, W, P, mode, s, tokens, pos, seg):
    B, T = tokens.shape
    inv = 1.0 / (c.theta ** (torch.arange(0, c.HS, 2, dtype=torch.int64).float() / c.HS))
    freqs = pos.float()[..., None] * inv[None, None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    base_mask = causal[None] & (seg[:, :, None] == seg[:, None, :])
    idx = torch.arange(T)
    swa_mask = base_mask & (idx[None, :, None] - idx[None, None, :] < c.window) if c.window else base_mask

    def lin(x, l, blk, m):
        w = W[f'model.layers.{l}.{blk}.{m}.weight']
        y = x @ w.T
        if mode in ('lora', 'dora'):
            pre = f'base_model.model.model.layers.{l}.{blk}.{m}.'
            A, Bm = P[pre + 'lora_A.weight'], P[pre + 'lora_B.weight']
            lora_res = (x @ A.T) @ Bm.T
            if mode == 'lora':
                y = y + lora_res * s
            else:   # PEFT DoraLinearLayer.forward (no dropout, no bias)
                wn = torch.linalg.norm(w + s * (Bm @ A).detach(), dim=1).detach()
                g = (P[pre + 'lora_magnitude_vector'] / wn).view(1, -1)
                y = y + ((g - 1) * y + g * lora_res * s)
        return y

    h = W['model.embed_tokens.weight'][tokens.long()]
    h = h * torch.tensor(c.C ** 0.5, dtype=h.dtype)
    for l in range(c.L):
        p = f'model.layers.{l}.'
        x = rmsnorm1(h, W[p + 'input_layernorm.weight'], c.eps)
        q = lin(x, l, 'self_attn', 'q_proj').view(B, T, c.NH, c.HS).transpose(1, 2)
        k = lin(x, l, 'self_attn', 'k_proj').view(B, T, c.KVH, c.HS).transpose(1, 2)
        v = lin(x, l, 'self_attn', 'v_proj').view(B, T, c.KVH, c.HS).transpose(1, 2)
        q = q * cos + R.rotate_half(q) * sin
        k = k * cos + R.rotate_half(k) * sin
        rep = c.NH // c.KVH
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-1, -2)) * c.qpas ** -0.5
        att = softcap(att, c.attn_cap)
        mask = swa_mask if l % 2 == 0 else base_mask   # Gemma2Attention: sliding on even layers
        att = att.masked_fill(~mask[:, None], float('-inf')).softmax(-1)
        o = (att @ v).transpose(1, 2).reshape(B, T, c.NH * c.HS)
        h = h + rmsnorm1(lin(o, l, 'self_attn', 'o_proj'), W[p + 'post_attention_layernorm.weight'], c.eps)
        x = rmsnorm1(h, W[p + 'pre_feedforward_layernorm.weight'], c.eps)
        a = gelu_tanh(lin(x, l, 'mlp', 'gate_proj')) * lin(x, l, 'mlp', 'up_proj')
        h = h + rmsnorm1(lin(a, l, 'mlp', 'down_proj'), W[p + 'post_feedforward_layernorm.weight'], c.eps)
    x = rmsnorm1(h, W['model.norm.weight'], c.eps)
    return softcap(x @ W['model.embed_tokens.weight'].T, c.final_cap)


def config_json(c):
    return {
        "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "hidden_size": c.C,
        "intermediate_size": c.F, "num_hidden_layers": c.L, "num_attention_heads": c.NH,
        "num_key_value_heads": c.KVH, "head_dim": c.HS, "vocab_size": c.V, "rms_norm_eps": c.eps,
        "rope_theta": c.theta, "tie_word_embeddings": True, "max_position_embeddings": 128,
        "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
        "query_pre_attn_scalar": c.qpas, "attn_logit_softcapping": c.attn_cap,
        "final_logit_softcapping": c.final_cap, "sliding_window": c.window, "attention_bias": False,
        "torch_dtype": "float32", "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
    }


def load_cfg(d):
    cfg = json.load(open(os.path.join(d, 'config.json')))
    c = R.Cfg()
    c.L, c.C, c.NH = cfg['num_hidden_layers'], cfg['hidden_size'], cfg['num_attention_heads']
    c.KVH = cfg.get('num_key_value_heads', c.NH)
    c.HS = cfg.get('head_dim', 256)
    c.F, c.V = cfg['intermediate_size'], cfg['vocab_size']
    c.eps = cfg.get('rms_norm_eps', 1e-6)
    c.theta = cfg.get('rope_theta', 10000.0)
    c.qpas = cfg.get('query_pre_attn_scalar', 256)
    c.attn_cap = cfg.get('attn_logit_softcapping', 50.0)
    c.final_cap = cfg.get('final_logit_softcapping', 30.0)
    c.window = cfg.get('sliding_window', 4096) or 0
    return c


def train(out, seed):
    c = R.Cfg()
    c.L, c.C, c.NH, c.KVH, c.HS, c.F, c.V = 2, 64, 4, 2, 16, 96, 300
    c.eps, c.theta = 1e-6, 10000.0
    # a query scale other than 1/sqrt(head_dim), caps that bite on these
    # small random weights, a window shorter than the rows
    c.qpas, c.attn_cap, c.final_cap, c.window = 24.0, 3.0, 4.0, 5
    g = torch.Generator().manual_seed(seed)
    W = {'model.embed_tokens.weight': torch.randn(c.V, c.C, generator=g) * 0.5}

    def n(*sh):
        return torch.randn(*sh, generator=g) * 0.08
    for l in range(c.L):
        p = f'model.layers.{l}.'
        W[p + 'input_layernorm.weight'] = 0.1 * torch.randn(c.C, generator=g)
        W[p + 'self_attn.q_proj.weight'] = n(c.NH * c.HS, c.C)
        W[p + 'self_attn.k_proj.weight'] = n(c.KVH * c.HS, c.C)
        W[p + 'self_attn.v_proj.weight'] = n(c.KVH * c.HS, c.C)
        W[p + 'self_attn.o_proj.weight'] = n(c.C, c.NH * c.HS) * 4
        W[p + 'post_attention_layernorm.weight'] = 0.1 * torch.randn(c.C, generator=g)
        W[p + 'pre_feedforward_layernorm.weight'] = 0.1 * torch.randn(c.C, generator=g)
        W[p + 'mlp.gate_proj.weight'] = n(c.F, c.C) * 4
        W[p + 'mlp.up_proj.weight'] = n(c.F, c.C) * 4
        W[p + 'mlp.down_proj.weight'] = n(c.C, c.F)
        W[p + 'post_feedforward_layernorm.weight'] = 0.1 * torch.randn(c.C, generator=g)
    W['model.norm.weight'] = 0.1 * torch.randn(c.C, generator=g)
    os.makedirs(os.path.join(out, 'model'), exist_ok=True)
    with open(os.path.join(out, 'model', 'config.json'), 'w') as f:
        json.dump(config_json(c), f, indent=2)
    R.st_write(os.path.join(out, 'model', 'model.safetensors'), W)

    B, T = 2, 12
    tokens = torch.randint(0, c.V, (B, T), generator=g, dtype=torch.int32)
    targets = torch.randint(0, c.V, (B, T), generator=g, dtype=torch.int32)
    targets[0, 5] = -1; targets[0, 11] = -1; targets[1, 0:3] = -1; targets[1, 11] = -1
    pos = torch.tensor([[0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5], list(range(T))], dtype=torch.int32)
    seg = torch.tensor([[0] * 6 + [1] * 6, [0] * T], dtype=torch.int32)
    R.st_write(os.path.join(out, 'batch.safetensors'), {'tokens': tokens, 'targets': targets, 'pos': pos, 'seg': seg})

    r, alpha = 4, 8.0
    s = alpha / r
    for mode in ('lora', 'dora', 'full'):
        # full: no weight decay. dlm holds the norm weights as llama.cpp
        # stores them, (1 + w), and AdamW's decay of (1 + w) is not HF's
        # decay of w (docs/models.md); the gradients are the same.
        hp = dict(lr=2e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0 if mode == 'full' else 0.01,
                  max_grad_norm=0.5, warmup_ratio=0.2, steps=10, sched='cosine', rank=r, alpha=alpha)
        gl = torch.Generator().manual_seed(seed + 1)
        if mode == 'full':
            P = {k: v.clone() for k, v in W.items()}
        else:
            P = R.lora_init(c, W, gl, r, mode == 'dora')
        R.st_write(os.path.join(out, f'{mode}.init.safetensors'), P)
        params = {k: v.clone().requires_grad_(True) for k, v in P.items()}
        logits = forward(c, params if mode == 'full' else W, params, mode, s, tokens, pos, seg)
        loss = R.loss_fn(logits, targets)
        loss.backward()
        R.st_write(os.path.join(out, f'{mode}.grads.safetensors'), {k: v.grad for k, v in params.items()})
        if mode == 'lora':
            R.st_write(os.path.join(out, 'logits.safetensors'), {'logits': logits.detach()})
        losses, _, final = R.adamw_steps(
            P, hp, lambda params: R.loss_fn(forward(c, params if mode == 'full' else W, params, mode, s, tokens, pos,
                                                    seg), targets))
        with open(os.path.join(out, f'{mode}.json'), 'w') as f:
            json.dump(dict(hp, mode=mode, loss=float(loss), step_losses=losses, final_loss=final, scale=s,
                           arch='gemma2'), f, indent=1)
    print(f'torch_gemma2: wrote {out}')


def infer(d, ids_path, out):
    c = load_cfg(d)
    W = {}
    for f in sorted(os.listdir(d)):
        if f.endswith('.safetensors'):
            W.update(I.st_read(os.path.join(d, f)))
    ids = json.load(open(ids_path))
    os.makedirs(out, exist_ok=True)

    I.write_logits_greedy(I.seq_runner(forward, c, W, {}, 'base', 1.0), ids, out)
    print(f'torch_gemma2: {d}: logits [{len(ids)}, {c.V}], greedy 32')


if __name__ == '__main__':
    if len(sys.argv) >= 3 and sys.argv[1] == 'train':
        args = sys.argv[2:]
        out = args[args.index('--out') + 1]
        seed = int(args[args.index('--seed') + 1]) if '--seed' in args else 7
        train(out, seed)
    elif len(sys.argv) == 5 and sys.argv[1] == 'infer':
        infer(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(__doc__)
