#!/usr/bin/python3
"""PyTorch reference for Phi-3 / Phi-3.5-mini / Phi-4-mini in dlm's tests,
written from transformers' modeling_phi3.py and configuration_phi3.py
(Phi3RMSNorm, Phi3MLP, Phi3Attention, apply_rotary_pos_emb,
Phi3DecoderLayer, Phi3Model, Phi3ForCausalLM) and modeling_rope_utils.py's
longrope, independent of dlm:

  per layer l:
    x = input_layernorm(h)                         RMSNorm(x) * w
    qkv = qkv_proj(x); q = qkv[:, :NH*HS]; k = next KVH*HS; v = the last KVH*HS
    rotary_dim D = int(HS * partial_rotary_factor): q[..., :D], k[..., :D]
      rotate (rotate-half within D), the rest passes
    inv_freq = 1 / (ext * theta^(arange(0, D, 2) / D)), ext = long_factor when
      max(position_ids) + 1 > original_max_position_embeddings, else short_factor
    cos, sin = cos(emb) * a, sin(emb) * a with the attention factor
      a = sqrt(1 + ln(max_pos / orig) / ln(orig)) (1 when max_pos <= orig)
    att = softmax(q kᵀ / sqrt(HS) + causal mask) v; h = h + o_proj(att)
    y = gate_up_proj(post_attention_layernorm(h)); gate, up = y.chunk(2)
    h = h + down_proj(up * silu(gate))
  logits = norm(h) @ lm_headᵀ (tied: the embedding)

LoRA as PEFT on the fused modules: qkv_proj's A [r, C], B [NH*HS + 2*KVH*HS, r];
gate_up_proj's B [2F, r]; DoRA's magnitude over the fused rows.

Usage:
  torch_phi3.py train --out DIR [--seed N]
      as torch_ref.py, twice: DIR/phi35 and DIR/phi4 each hold model (HF
      folder), batch.safetensors, and per mode (lora, dora) the init
      tensors, gradients, loss and 10 AdamW steps. phi35: a
      Phi-3.5-mini-like model (MHA, untied, LongRoPE whose original context
      8 is shorter than the rows: the long factors); phi4: Phi-4-mini-like
      (GQA, tied, partial_rotary_factor 0.75, original context 64: the
      short factors)
  torch_phi3.py infer MODEL_DIR IDS_JSON OUT_DIR [ADAPTER_DIR]
      as torch_infer.py: OUT_DIR/logits.f32 and greedy.json (32 tokens);
      with a PEFT adapter folder (adapter_config.json: r, lora_alpha,
      use_dora; adapter_model.safetensors by PEFT's names) applied as PEFT
      applies it
  torch_phi3.py infer-many JOBS_JSON
      the same for each [MODEL_DIR, IDS_JSON, OUT_DIR, ADAPTER_DIR or null]
      of the list, in one process
"""
import json, math, os, sys
import torch

sys.path.insert(0, os.path.dirname(__file__))
import torch_ref as R  # noqa: E402  (safetensors writer, rotate_half, loss, AdamW loop)
import torch_infer as I  # noqa: E402  (safetensors reader)

torch.set_num_threads(1)

MODS = [('self_attn', 'qkv_proj'), ('self_attn', 'o_proj'), ('mlp', 'gate_up_proj'), ('mlp', 'down_proj')]


def rmsnorm(x, w, eps):
    """Phi3RMSNorm: in float32, times weight."""
    x = x.float()
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rope_cos_sin(c, pos):
    """Phi3RotaryEmbedding with rope_type longrope (dynamic: the factors by
    the largest position), or default."""
    D = c.D
    shape = torch.arange(0, D, 2, dtype=torch.int64).float() / D
    a = 1.0
    if c.short is not None:
        seq_len = int(pos.max()) + 1
        ext = torch.tensor(c.long if seq_len > c.orig else c.short, dtype=torch.float32)
        inv = 1.0 / (ext * c.theta ** shape)
        s = c.max_pos / c.orig
        a = 1.0 if s <= 1.0 else math.sqrt(1 + math.log(s) / math.log(c.orig))
    else:
        inv = 1.0 / (c.theta ** shape)
    freqs = pos.float()[..., None] * inv[None, None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return (emb.cos() * a)[:, None], (emb.sin() * a)[:, None]


def apply_rope(x, cos, sin):
    """modeling_phi3.apply_rotary_pos_emb: rotate the first rotary_dim dims."""
    D = cos.shape[-1]
    xr, xp = x[..., :D], x[..., D:]
    return torch.cat([xr * cos + R.rotate_half(xr) * sin, xp], dim=-1)


def forward(c, W, P, mode, s, tokens, pos, seg):
    B, T = tokens.shape
    cos, sin = rope_cos_sin(c, pos)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    mask = causal[None] & (seg[:, :, None] == seg[:, None, :])

    def lin(x, l, blk, m):
        w = W[f'model.layers.{l}.{blk}.{m}.weight']
        y = x @ w.T
        pre = f'base_model.model.model.layers.{l}.{blk}.{m}.'
        if mode in ('lora', 'dora') and pre + 'lora_A.weight' in P:
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
    Q, K = c.NH * c.HS, c.KVH * c.HS
    for l in range(c.L):
        p = f'model.layers.{l}.'
        x = rmsnorm(h, W[p + 'input_layernorm.weight'], c.eps)
        qkv = lin(x, l, 'self_attn', 'qkv_proj')
        q = qkv[..., :Q].view(B, T, c.NH, c.HS).transpose(1, 2)
        k = qkv[..., Q:Q + K].view(B, T, c.KVH, c.HS).transpose(1, 2)
        v = qkv[..., Q + K:].view(B, T, c.KVH, c.HS).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        rep = c.NH // c.KVH
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-1, -2)) * c.HS ** -0.5
        att = att.masked_fill(~mask[:, None], float('-inf')).softmax(-1)
        o = (att @ v).transpose(1, 2).reshape(B, T, Q)
        h = h + lin(o, l, 'self_attn', 'o_proj')
        x = rmsnorm(h, W[p + 'post_attention_layernorm.weight'], c.eps)
        gate, up = lin(x, l, 'mlp', 'gate_up_proj').chunk(2, dim=-1)
        h = h + lin(up * torch.nn.functional.silu(gate), l, 'mlp', 'down_proj')
    x = rmsnorm(h, W['model.norm.weight'], c.eps)
    head = W['model.embed_tokens.weight'] if c.tied else W['lm_head.weight']
    return x @ head.T


def config_json(c):
    cfg = {
        "architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "hidden_size": c.C,
        "intermediate_size": c.F, "num_hidden_layers": c.L, "num_attention_heads": c.NH,
        "num_key_value_heads": c.KVH, "vocab_size": c.V, "rms_norm_eps": c.eps, "rope_theta": c.theta,
        "tie_word_embeddings": c.tied, "max_position_embeddings": c.max_pos,
        "original_max_position_embeddings": c.orig, "partial_rotary_factor": c.prf, "hidden_act": "silu",
        "sliding_window": None, "attention_bias": False, "attention_dropout": 0.0, "resid_pdrop": 0.0,
        "embd_pdrop": 0.0, "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2,
        "rope_scaling": None,
    }
    if c.short is not None:
        cfg["rope_scaling"] = {"type": "longrope", "short_factor": c.short, "long_factor": c.long}
    return cfg


def load_cfg(d):
    cfg = json.load(open(os.path.join(d, 'config.json')))
    c = R.Cfg()
    c.L, c.C, c.NH = cfg['num_hidden_layers'], cfg['hidden_size'], cfg['num_attention_heads']
    c.KVH = cfg.get('num_key_value_heads') or c.NH
    c.HS = c.C // c.NH
    c.F, c.V = cfg['intermediate_size'], cfg['vocab_size']
    c.eps = cfg.get('rms_norm_eps', 1e-5)
    c.theta = cfg.get('rope_theta', 10000.0)
    c.tied = cfg.get('tie_word_embeddings', False)
    c.prf = cfg.get('partial_rotary_factor', 1.0)
    c.D = int(c.HS * c.prf)
    c.max_pos = cfg.get('max_position_embeddings', 4096)
    c.orig = cfg.get('original_max_position_embeddings', 4096)
    rs = cfg.get('rope_scaling') or {}
    c.short = rs.get('short_factor')
    c.long = rs.get('long_factor')
    return c


def train(out, seed, phi4):
    c = R.Cfg()
    c.L, c.C, c.F, c.V = 2, 64, 96, 300
    c.eps, c.theta = 1e-5, 10000.0
    if phi4:   # Phi-4-mini: GQA 24/8, tied, 3/4 of each head rotates
        c.NH, c.KVH, c.tied, c.prf, c.orig, c.max_pos = 4, 2, True, 0.75, 64, 512
    else:      # Phi-3.5-mini: MHA, untied, all of each head rotates
        c.NH, c.KVH, c.tied, c.prf, c.orig, c.max_pos = 4, 4, False, 1.0, 8, 128
    c.HS = c.C // c.NH
    c.D = int(c.HS * c.prf)
    g = torch.Generator().manual_seed(seed)
    c.short = [round(1.0 + 0.5 * float(x), 4) for x in torch.rand(c.D // 2, generator=g)]
    c.long = [round(1.0 + 6.0 * float(x), 4) for x in torch.rand(c.D // 2, generator=g)]
    W = {'model.embed_tokens.weight': torch.randn(c.V, c.C, generator=g) * 0.5}

    def n(*sh):
        return torch.randn(*sh, generator=g) * 0.08
    Q, K = c.NH * c.HS, c.KVH * c.HS
    for l in range(c.L):
        p = f'model.layers.{l}.'
        W[p + 'input_layernorm.weight'] = 1 + 0.1 * torch.randn(c.C, generator=g)
        W[p + 'self_attn.qkv_proj.weight'] = n(Q + 2 * K, c.C) * 3
        W[p + 'self_attn.o_proj.weight'] = n(c.C, Q)
        W[p + 'post_attention_layernorm.weight'] = 1 + 0.1 * torch.randn(c.C, generator=g)
        W[p + 'mlp.gate_up_proj.weight'] = n(2 * c.F, c.C)
        W[p + 'mlp.down_proj.weight'] = n(c.C, c.F)
    W['model.norm.weight'] = 1 + 0.1 * torch.randn(c.C, generator=g)
    if not c.tied:
        W['lm_head.weight'] = n(c.V, c.C)
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
    for mode in ('lora', 'dora'):
        hp = dict(lr=2e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, max_grad_norm=0.5,
                  warmup_ratio=0.2, steps=10, sched='cosine', rank=r, alpha=alpha)
        gl = torch.Generator().manual_seed(seed + 1)
        P = {}
        for l in range(c.L):
            for blk, m in MODS:
                w = W[f'model.layers.{l}.{blk}.{m}.weight']
                outf, inn = w.shape
                pre = f'base_model.model.model.layers.{l}.{blk}.{m}.'
                bound = 1.0 / math.sqrt(inn)
                P[pre + 'lora_A.weight'] = (torch.rand(r, inn, generator=gl) * 2 - 1) * bound
                P[pre + 'lora_B.weight'] = torch.randn(outf, r, generator=gl) * 0.05
                if mode == 'dora':
                    wn = torch.linalg.norm(w + s * P[pre + 'lora_B.weight'] @ P[pre + 'lora_A.weight'], dim=1)
                    P[pre + 'lora_magnitude_vector'] = wn * (1 + 0.1 * torch.randn(outf, generator=gl))
        R.st_write(os.path.join(out, f'{mode}.init.safetensors'), P)
        params = {k: v.clone().requires_grad_(True) for k, v in P.items()}
        logits = forward(c, W, params, mode, s, tokens, pos, seg)
        loss = R.loss_fn(logits, targets)
        loss.backward()
        R.st_write(os.path.join(out, f'{mode}.grads.safetensors'), {k: v.grad for k, v in params.items()})
        if mode == 'lora':
            R.st_write(os.path.join(out, 'logits.safetensors'), {'logits': logits.detach()})
        losses, _, final = R.adamw_steps(
            P, hp, lambda params: R.loss_fn(forward(c, W, params, mode, s, tokens, pos, seg), targets))
        with open(os.path.join(out, f'{mode}.json'), 'w') as f:
            json.dump(dict(hp, mode=mode, loss=float(loss), step_losses=losses, final_loss=final, scale=s,
                           arch='phi3'), f, indent=1)
    print(f'torch_phi3: wrote {out}')


def infer(d, ids_path, out, adapter=None):
    c = load_cfg(d)
    W = {}
    for f in sorted(os.listdir(d)):
        if f.endswith('.safetensors'):
            W.update(I.st_read(os.path.join(d, f)))
    ids = json.load(open(ids_path))
    os.makedirs(out, exist_ok=True)
    P, mode, s = {}, 'base', 1.0
    if adapter:
        ac = json.load(open(os.path.join(adapter, 'adapter_config.json')))
        assert ac['peft_type'] == 'LORA' and not ac.get('use_rslora')
        P = I.st_read(os.path.join(adapter, 'adapter_model.safetensors'))
        for k in list(P):   # PEFT saves the magnitude without its ".weight"
            if k.endswith('lora_magnitude_vector.weight'):
                P[k[:-len('.weight')]] = P.pop(k)
        mode, s = ('dora' if ac.get('use_dora') else 'lora'), ac['lora_alpha'] / ac['r']
        mods = {m for _, m in MODS}
        assert set(ac['target_modules']) <= mods, ac['target_modules']
        assert all(k.split('.')[-3] in mods or k.split('.')[-2] in mods for k in P), sorted(P)[:4]

    I.write_logits_greedy(I.seq_runner(forward, c, W, P, mode, s), ids, out)
    print(f'torch_phi3: {d}: logits [{len(ids)}, {c.V}], greedy 32')


if __name__ == '__main__':
    if len(sys.argv) >= 3 and sys.argv[1] == 'train':
        args = sys.argv[2:]
        out = args[args.index('--out') + 1]
        seed = int(args[args.index('--seed') + 1]) if '--seed' in args else 7
        train(os.path.join(out, 'phi35'), seed, False)
        train(os.path.join(out, 'phi4'), seed, True)
    elif len(sys.argv) == 3 and sys.argv[1] == 'infer-many':
        for job in json.load(open(sys.argv[2])):
            infer(*job)
    elif len(sys.argv) in (5, 6) and sys.argv[1] == 'infer':
        infer(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] if len(sys.argv) == 6 else None)
    else:
        raise SystemExit(__doc__)
