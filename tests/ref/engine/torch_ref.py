#!/usr/bin/python3
"""PyTorch reference for dlm's training engine (independent of dlm's code).

Builds a small random llama, qwen2 or qwen3 model in Hugging Face's
conventions (rotate-half RoPE with HF's float32 angles, repeat_kv GQA,
RMSNorm, SwiGLU, optional QKV bias, tied or untied LM head, llama3 rope
scaling; qwen3: Qwen3Attention's q_norm / k_norm, an RMSNorm over head_dim
applied to each head of q and k before RoPE; olmo2: Olmo2Attention's q_norm
/ k_norm over the whole projection, and Olmo2DecoderLayer's norms on the
attention and MLP outputs instead of their inputs; mistral: the llama layer
with MistralAttention's sliding window, key j visible to query i only if
i - j < sliding_window; smollm3: SmolLM3Attention's use_rope =
no_rope_layers[layer], no RoPE on every fourth layer; mixtral:
MixtralSparseMoeBlock in place of the MLP, 4 experts, top 2, LoRA on the
attention only), writes it as
an HF folder (config.json + model.safetensors), then computes with autograd:

  logits, the mean token cross-entropy over unmasked targets, and the
  gradient of every trainable tensor, for three modes:
    lora  - LoRA A/B on all seven projections (PEFT semantics, B != 0)
    dora  - DoRA (PEFT: magnitude / ||W + s B A||_row, norm detached)
    full  - every weight trainable

  and the losses of 10 AdamW steps (warmup + cosine + grad clipping).

Outputs (in OUT): model/ (HF folder), batch.safetensors, and per mode
<mode>.init.safetensors (trainable tensors at init, PEFT / HF names),
<mode>.grads.safetensors (same names), <mode>.json (loss, step losses,
hyper-parameters). Usage: torch_ref.py --arch llama|qwen2|qwen3|olmo2|mistral|smollm3 --out DIR
"""
import argparse, json, math, os, struct
import numpy as np
import torch

torch.set_num_threads(1)


def st_write(path, tensors):
    """Minimal safetensors writer (F32 / I32)."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        a = tensors[name]
        if isinstance(a, torch.Tensor):
            a = a.detach().cpu().numpy()
        a = np.ascontiguousarray(a)
        dt = {np.dtype('float32'): 'F32', np.dtype('int32'): 'I32'}[a.dtype]
        b = a.tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(',', ':')).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


class Cfg:
    pass


def make_cfg(arch):
    c = Cfg()
    c.arch = arch
    c.L, c.C, c.NH, c.KVH, c.HS, c.F, c.V = 2, 64, 4, 2, 16, 96, 300
    c.eps = 1e-5 if arch == 'llama' else 1e-6
    c.theta = 500000.0 if arch == 'llama' else 1000000.0
    c.tied = arch == 'qwen2'
    c.bias = arch == 'qwen2'
    c.llama3 = arch == 'llama'
    c.factor, c.lo, c.hi, c.orig = 8.0, 1.0, 4.0, 64
    c.qk_norm = {'qwen3': 'head', 'olmo2': 'full'}.get(arch)
    c.post_norm = arch == 'olmo2'
    c.window = 0
    c.no_rope = None
    if arch == 'smollm3':   # 4 layers, so that the last one (index 3) has no RoPE
        c.L, c.llama3, c.tied, c.theta, c.eps = 4, False, True, 2000000.0, 1e-6
        c.no_rope = [int((i + 1) % 4 != 0) for i in range(c.L)]
    if arch == 'mistral':   # a window shorter than the batch rows, so it masks
        c.window, c.llama3, c.tied, c.theta, c.eps = 5, False, False, 1000000.0, 1e-5
    if arch == 'olmo2':   # Olmo2Config: eps 1e-6 in the released models, theta 500000, untied
        c.tied, c.bias, c.theta = False, False, 500000.0
    c.E = 0
    if arch == 'mixtral':   # MistralAttention (no window here) + a sparse MoE block of 4 experts, top 2
        c.llama3, c.tied, c.theta, c.eps, c.E, c.K = False, False, 1000000.0, 1e-5, 4, 2
    if arch == 'qwen3':
        # as the real Qwen3 checkpoints: NH*HS != hidden, untied (Qwen3-8B)
        c.HS, c.tied, c.bias = 32, False, False
    return c


def inv_freq_hf(c):
    dim = c.HS
    inv = 1.0 / (c.theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    if not c.llama3:
        return inv
    lo_w = c.orig / c.lo
    hi_w = c.orig / c.hi
    wavelen = 2 * math.pi / inv
    inv_l = torch.where(wavelen > lo_w, inv / c.factor, inv)
    smooth = (c.orig / wavelen - c.lo) / (c.hi - c.lo)
    smoothed = (1 - smooth) * inv_l / c.factor + smooth * inv_l
    med = ~(wavelen < hi_w) * ~(wavelen > lo_w)
    return torch.where(med, smoothed, inv_l)


def weights_init(c, g):
    W = {}
    def n(*s):
        return torch.randn(*s, generator=g) * 0.08
    W['model.embed_tokens.weight'] = torch.randn(c.V, c.C, generator=g) * 0.5
    for l in range(c.L):
        p = f'model.layers.{l}.'
        if not getattr(c, 'post_norm', False):
            W[p + 'input_layernorm.weight'] = 1 + 0.1 * torch.randn(c.C, generator=g)
        W[p + 'self_attn.q_proj.weight'] = n(c.NH * c.HS, c.C)
        W[p + 'self_attn.k_proj.weight'] = n(c.KVH * c.HS, c.C)
        W[p + 'self_attn.v_proj.weight'] = n(c.KVH * c.HS, c.C)
        if c.bias:
            W[p + 'self_attn.q_proj.bias'] = n(c.NH * c.HS)
            W[p + 'self_attn.k_proj.bias'] = n(c.KVH * c.HS)
            W[p + 'self_attn.v_proj.bias'] = n(c.KVH * c.HS)
        W[p + 'self_attn.o_proj.weight'] = n(c.C, c.NH * c.HS)
        qn = getattr(c, 'qk_norm', None)
        if qn:
            nq, nk = (c.HS, c.HS) if qn == 'head' else (c.NH * c.HS, c.KVH * c.HS)
            W[p + 'self_attn.q_norm.weight'] = 1 + 0.2 * torch.randn(nq, generator=g)
            W[p + 'self_attn.k_norm.weight'] = 1 + 0.2 * torch.randn(nk, generator=g)
        W[p + 'post_attention_layernorm.weight'] = 1 + 0.1 * torch.randn(c.C, generator=g)
        if c.E:   # MixtralSparseMoeBlock: gate (router, [E, C]), experts.X.w1 / w3 [F, C], w2 [C, F]
            W[p + 'block_sparse_moe.gate.weight'] = torch.randn(c.E, c.C, generator=g) * 0.5
            for x in range(c.E):
                W[p + f'block_sparse_moe.experts.{x}.w1.weight'] = n(c.F, c.C)
                W[p + f'block_sparse_moe.experts.{x}.w3.weight'] = n(c.F, c.C)
                W[p + f'block_sparse_moe.experts.{x}.w2.weight'] = n(c.C, c.F)
        else:
            W[p + 'mlp.gate_proj.weight'] = n(c.F, c.C)
            W[p + 'mlp.up_proj.weight'] = n(c.F, c.C)
            W[p + 'mlp.down_proj.weight'] = n(c.C, c.F)
        if getattr(c, 'post_norm', False):
            W[p + 'post_feedforward_layernorm.weight'] = 1 + 0.1 * torch.randn(c.C, generator=g)
    W['model.norm.weight'] = 1 + 0.1 * torch.randn(c.C, generator=g)
    if not c.tied:
        W['lm_head.weight'] = n(c.V, c.C)
    return W


MODS = [('self_attn', 'q_proj'), ('self_attn', 'k_proj'), ('self_attn', 'v_proj'), ('self_attn', 'o_proj'),
        ('mlp', 'gate_proj'), ('mlp', 'up_proj'), ('mlp', 'down_proj')]


def lora_init(c, W, g, r, dora):
    P = {}
    for l in range(c.L):
        for blk, m in (MODS[:4] if getattr(c, 'E', 0) else MODS):   # mixtral: LoRA on the attention only
            w = W[f'model.layers.{l}.{blk}.{m}.weight']
            out, inn = w.shape
            pre = f'base_model.model.model.layers.{l}.{blk}.{m}.'
            bound = 1.0 / math.sqrt(inn)
            P[pre + 'lora_A.weight'] = (torch.rand(r, inn, generator=g) * 2 - 1) * bound
            P[pre + 'lora_B.weight'] = torch.randn(out, r, generator=g) * 0.05
            if dora:
                # PEFT starts the magnitude at ||W + s B A||; perturb it so the
                # test is not at a special point.
                P[pre + 'lora_magnitude_vector'] = torch.linalg.norm(w, dim=1) * (1 + 0.1 * torch.randn(out, generator=g))
    return P


def rmsnorm(x, w, eps):
    v = x.pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(v + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def forward(c, W, P, mode, s, tokens, pos, seg):
    B, T = tokens.shape
    inv = inv_freq_hf(c)
    freqs = pos.float()[..., None] * inv[None, None, :]          # [B,T,HS/2] float32 as HF
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]            # [B,1,T,HS]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    mask = causal[None] & (seg[:, :, None] == seg[:, None, :])   # [B,T,T]
    if getattr(c, 'window', 0):   # sliding_window_overlay: kv_idx > q_idx - sliding_window
        idx = torch.arange(T)
        mask = mask & (idx[None, :, None] - idx[None, None, :] < c.window)

    def lin(x, l, blk, m):
        w = W[f'model.layers.{l}.{blk}.{m}.weight']
        b = W.get(f'model.layers.{l}.{blk}.{m}.bias')
        y = x @ w.T
        if b is not None:
            y = y + b
        if mode in ('lora', 'dora'):
            pre = f'base_model.model.model.layers.{l}.{blk}.{m}.'
            A, Bm = P[pre + 'lora_A.weight'], P[pre + 'lora_B.weight']
            lora_res = (x @ A.T) @ Bm.T
            if mode == 'lora':
                y = y + lora_res * s
            else:   # PEFT DoraLinearLayer.forward (no dropout)
                lora_w = (Bm @ A)
                wn = torch.linalg.norm(w + s * lora_w.detach(), dim=1).detach()
                g = (P[pre + 'lora_magnitude_vector'] / wn).view(1, -1)
                base = y - b if b is not None else y
                y = y + ((g - 1) * base + g * lora_res * s)
        return y

    h = W['model.embed_tokens.weight'][tokens.long()]
    for l in range(c.L):
        p = f'model.layers.{l}.'
        post = getattr(c, 'post_norm', False)
        qn = getattr(c, 'qk_norm', None)
        x = h if post else rmsnorm(h, W[p + 'input_layernorm.weight'], c.eps)
        q = lin(x, l, 'self_attn', 'q_proj')
        k = lin(x, l, 'self_attn', 'k_proj')
        if qn == 'full':   # Olmo2Attention: q_norm(q_proj(x)) over the whole projection
            q = rmsnorm(q, W[p + 'self_attn.q_norm.weight'], c.eps)
            k = rmsnorm(k, W[p + 'self_attn.k_norm.weight'], c.eps)
        q = q.view(B, T, c.NH, c.HS)
        k = k.view(B, T, c.KVH, c.HS)
        if qn == 'head':   # Qwen3Attention: q_norm(q_proj(x).view(...)) before RoPE
            q = rmsnorm(q, W[p + 'self_attn.q_norm.weight'], c.eps)
            k = rmsnorm(k, W[p + 'self_attn.k_norm.weight'], c.eps)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = lin(x, l, 'self_attn', 'v_proj').view(B, T, c.KVH, c.HS).transpose(1, 2)
        if not getattr(c, 'no_rope', None) or c.no_rope[l]:
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
        rep = c.NH // c.KVH
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(c.HS)
        att = att.masked_fill(~mask[:, None], float('-inf')).softmax(-1)
        o = (att @ v).transpose(1, 2).reshape(B, T, c.NH * c.HS)
        if post:   # Olmo2DecoderLayer: residual + norm(block(h))
            h = h + rmsnorm(lin(o, l, 'self_attn', 'o_proj'), W[p + 'post_attention_layernorm.weight'], c.eps)
            a = torch.nn.functional.silu(lin(h, l, 'mlp', 'gate_proj')) * lin(h, l, 'mlp', 'up_proj')
            h = h + rmsnorm(lin(a, l, 'mlp', 'down_proj'), W[p + 'post_feedforward_layernorm.weight'], c.eps)
            continue
        h = h + lin(o, l, 'self_attn', 'o_proj')
        x = rmsnorm(h, W[p + 'post_attention_layernorm.weight'], c.eps)
        if c.E:
            h = h + moe_block(c, W, p, x)
            continue
        a = torch.nn.functional.silu(lin(x, l, 'mlp', 'gate_proj')) * lin(x, l, 'mlp', 'up_proj')
        h = h + lin(a, l, 'mlp', 'down_proj')
    x = rmsnorm(h, W['model.norm.weight'], c.eps)
    head = W['model.embed_tokens.weight'] if c.tied else W['lm_head.weight']
    return x @ head.T


def moe_block(c, W, p, x):
    """MixtralSparseMoeBlock.forward as transformers writes it
    (models/mixtral/modeling_mixtral.py): router logits, softmax in float,
    top-k, the chosen weights renormalised to sum 1, each expert's
    w2(silu(w1(x)) * w3(x)) scaled by its weight and index_add-ed into the
    output expert by expert."""
    B, T, C = x.shape
    hs = x.reshape(-1, C)
    router_logits = hs @ W[p + 'block_sparse_moe.gate.weight'].T
    routing_weights = torch.softmax(router_logits, dim=1, dtype=torch.float)
    routing_weights, selected_experts = torch.topk(routing_weights, c.K, dim=-1)
    routing_weights = routing_weights / routing_weights.sum(dim=-1, keepdim=True)
    final = torch.zeros_like(hs)
    expert_mask = torch.nn.functional.one_hot(selected_experts, num_classes=c.E).permute(2, 1, 0)
    for x_ in range(c.E):
        idx, top_x = torch.where(expert_mask[x_])
        if top_x.numel() == 0:
            continue
        cur = hs[None, top_x].reshape(-1, C)
        q = p + f'block_sparse_moe.experts.{x_}.'
        y = (torch.nn.functional.silu(cur @ W[q + 'w1.weight'].T) * (cur @ W[q + 'w3.weight'].T)) @ W[q + 'w2.weight'].T
        y = y * routing_weights[top_x, idx, None]
        final = final.index_add(0, top_x, y.to(hs.dtype))
    return final.reshape(B, T, C)


def loss_fn(logits, targets):
    V = logits.shape[-1]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, V), targets.reshape(-1).long(),
                                             ignore_index=-1, reduction='mean')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--arch', choices=['llama', 'qwen2', 'qwen3', 'olmo2', 'mistral', 'smollm3', 'mixtral'],
                    required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--seed', type=int, default=7)
    ap.add_argument('--modes', default='lora,dora,full', help='the modes to compute (torch_embed.py needs lora)')
    a = ap.parse_args()
    c = make_cfg(a.arch)
    g = torch.Generator().manual_seed(a.seed)
    W = weights_init(c, g)
    os.makedirs(os.path.join(a.out, 'model'), exist_ok=True)
    cfg = {
        "architectures": [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                           "qwen3": "Qwen3ForCausalLM", "olmo2": "Olmo2ForCausalLM",
                           "mistral": "MistralForCausalLM", "smollm3": "SmolLM3ForCausalLM",
                           "mixtral": "MixtralForCausalLM"}[c.arch]],
        "model_type": c.arch, "hidden_size": c.C, "intermediate_size": c.F,
        "num_hidden_layers": c.L, "num_attention_heads": c.NH, "num_key_value_heads": c.KVH,
        "head_dim": c.HS, "vocab_size": c.V, "rms_norm_eps": c.eps, "rope_theta": c.theta,
        "tie_word_embeddings": c.tied, "max_position_embeddings": 128, "hidden_act": "silu",
        "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2,
    }
    if c.window:
        cfg["sliding_window"] = c.window
    if c.E:
        cfg.update({"num_local_experts": c.E, "num_experts_per_tok": c.K, "sliding_window": None})
    if c.no_rope:
        cfg.update({"no_rope_layers": c.no_rope, "no_rope_layer_interval": 4, "use_sliding_window": False})
    if c.llama3:
        cfg["rope_scaling"] = {"rope_type": "llama3", "factor": c.factor, "low_freq_factor": c.lo,
                               "high_freq_factor": c.hi, "original_max_position_embeddings": c.orig}
    with open(os.path.join(a.out, 'model', 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=2)
    st_write(os.path.join(a.out, 'model', 'model.safetensors'), W)

    # Batch: B=2 rows of T=12. Row 0 packs two segments (positions restart),
    # row 1 is one sequence. Some targets are masked (-1).
    B, T = 2, 12
    tokens = torch.randint(0, c.V, (B, T), generator=g, dtype=torch.int32)
    targets = torch.randint(0, c.V, (B, T), generator=g, dtype=torch.int32)
    targets[0, 5] = -1; targets[0, 11] = -1; targets[1, 0:3] = -1; targets[1, 11] = -1
    pos = torch.tensor([[0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5], list(range(T))], dtype=torch.int32)
    seg = torch.tensor([[0] * 6 + [1] * 6, [0] * T], dtype=torch.int32)
    st_write(os.path.join(a.out, 'batch.safetensors'),
             {'tokens': tokens, 'targets': targets, 'pos': pos, 'seg': seg})

    r, alpha = 4, 8.0
    s = alpha / r
    hp = dict(lr=2e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, max_grad_norm=0.5,
              warmup_ratio=0.2, steps=10, sched='cosine', rank=r, alpha=alpha)
    # mixtral: LoRA / DoRA on the attention; full-parameter training is refused
    for mode in [m for m in (('lora', 'dora') if c.E else ('lora', 'dora', 'full')) if m in a.modes.split(',')]:
        gl = torch.Generator().manual_seed(a.seed + 1)
        if mode == 'full':
            P = {k: v.clone() for k, v in W.items()}
            Wm = P
        else:
            P = lora_init(c, W, gl, r, mode == 'dora')
            Wm = W
        st_write(os.path.join(a.out, f'{mode}.init.safetensors'), P)
        params = {k: v.clone().requires_grad_(True) for k, v in P.items()}
        Wuse = params if mode == 'full' else Wm
        logits = forward(c, Wuse, params, mode, s, tokens, pos, seg)
        loss = loss_fn(logits, targets)
        loss.backward()
        grads = {k: v.grad for k, v in params.items()}
        st_write(os.path.join(a.out, f'{mode}.grads.safetensors'), grads)
        if mode == 'lora':
            st_write(os.path.join(a.out, 'logits.safetensors'), {'logits': logits.detach()})
        # 10 AdamW steps on the same batch, warmup + cosine, clipping.
        losses, norms, final = adamw_steps(
            P, hp, lambda params: loss_fn(forward(c, params if mode == 'full' else Wm, params, mode, s, tokens, pos, seg),
                                          targets))
        with open(os.path.join(a.out, f'{mode}.json'), 'w') as f:
            json.dump(dict(hp, mode=mode, loss=float(loss), step_losses=losses, final_loss=final,
                           grad_norms=norms, scale=s, arch=c.arch), f, indent=1)
    print(f'torch_ref: wrote {a.out} ({c.arch})')


def adamw_steps(P, hp, loss_of):
    """hp['steps'] AdamW steps from a copy of P on one batch, as dlm's trainer:
    linear warmup then cosine (transformers' schedule), gradient clipping.
    loss_of(params) gives the loss. Returns (step losses, pre-clip grad
    norms, final loss)."""
    params = {k: v.clone().requires_grad_(True) for k, v in P.items()}
    names = sorted(params)
    opt = torch.optim.AdamW([params[k] for k in names], lr=hp['lr'], betas=(hp['beta1'], hp['beta2']),
                            eps=hp['eps'], weight_decay=hp['weight_decay'])
    total, warm = hp['steps'], math.ceil(hp['steps'] * hp['warmup_ratio'])

    def lam(k):
        if k < warm:
            return k / max(1, warm)
        prog = (k - warm) / max(1, total - warm)
        return max(0.0, 0.5 * (1 + math.cos(math.pi * prog)))
    sch = torch.optim.lr_scheduler.LambdaLR(opt, lam)
    losses, norms = [], []
    for _ in range(total):
        opt.zero_grad()
        lo = loss_of(params)
        lo.backward()
        norms.append(float(torch.nn.utils.clip_grad_norm_([params[k] for k in names], hp['max_grad_norm'])))
        opt.step()
        sch.step()
        losses.append(float(lo))
    with torch.no_grad():
        final = float(loss_of(params))
    return losses, norms, final


if __name__ == '__main__':
    main()
