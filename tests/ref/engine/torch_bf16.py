#!/usr/bin/python3
"""bf16 training reference for dlm's training.precision: bf16 (independent of
dlm's code; the model, batch, LoRA init and AdamW loop are torch_ref.py's).

The random llama / qwen2 model and batch of torch_ref.py, LoRA r=4 on all
seven projections, computed with the GEMMs in bf16 at these rounding points
(docs/training.md, "Precision"):

  every linear product  y = x·Wᵀ (frozen base), u = x·Aᵀ, s·u·Bᵀ (LoRA):
      both inputs rounded to bf16 (round-to-nearest-even), f32 accumulation;
  their backward        dx = dy·W, dU = dy·B, dA = dUᵀ·x, dB = dyᵀ·u:
      dy (the gradient flowing in) and the other factor rounded to bf16;
  the LM head           logits = x·Wᵀ from bf16 x and W; dx = dlogits·W
      with W in bf16 and dlogits in f32;
  attention (docs/kernels.md, "bf16 attention"): S = q̃·kᵀ with q̃ = q/√HS
      and k rounded, softmax in f32, P·v with v and P = exp(S − max)
      rounded (then divided by the row sum, as the online softmax); backward
      dP = dO·vᵀ (dO, v rounded), dS = P∘(dP − Σ dO·O) in f32, then
      dQ = dS·k/√HS, dK = dSᵀ·q̃, dV = Pᵀ·dO with every factor rounded;
      f32 sums throughout;
  norms, RoPE, SwiGLU, softmax, the loss: f32;
  LoRA master weights, gradients, AdamW moments: f32.

Two variants, each written to OUT/<variant>.json (loss, 10 step losses,
final loss) and OUT/<variant>.grads.safetensors (PEFT names):

  autocast  the products run under torch.autocast("cpu", dtype=torch.bfloat16)
            (oneDNN's bf16 GEMMs), each product's output cast back to f32
            right away so the rest stays f32 as above; autocast also rounds
            each product's output to bf16 (dlm keeps it f32), and rounds the
            head's dlogits, so this is the peer's real bf16 arithmetic.
            Its attention stays f32 (torch 1.13 has no SDPA to autocast;
            the peer's SDPA takes bf16 q/k/v with f32 accumulation, which
            is what match writes out).
  match     the same rounding points written out with .to(torch.bfloat16)
            casts and f32 matmuls, the outputs f32: dlm's rounding exactly,
            so dlm should sit much closer to it than to autocast.

plus OUT/model/ (HF folder), OUT/batch.safetensors, OUT/lora.init.safetensors
and, with --fp32, OUT/fp32.json and .grads (the f32 reference, to show how
far bf16 moves it). Several --arch write OUT/<arch>/ each (one start of torch).
Usage: torch_bf16.py --arch llama|qwen2 [--arch ...] --out DIR [--fp32]
"""
import argparse, json, math, os, sys
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ref as R  # noqa: E402

torch.set_num_threads(1)
BF = torch.bfloat16


def rb(t):
    """The bf16 value of each element, as f32 (round-to-nearest-even)."""
    return t.to(BF).to(torch.float32)


class MatchMM(torch.autograd.Function):
    """a @ b with a, b rounded to bf16, f32 product; backward rounds the
    incoming gradient and the other factor."""
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return rb(a) @ rb(b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        gr = rb(g)
        ga = gr @ rb(b).T
        gb = rb(a).reshape(-1, a.shape[-1]).T @ gr.reshape(-1, g.shape[-1])
        return ga, gb


class MatchHead(torch.autograd.Function):
    """logits = x @ w.T from bf16 x and w; dx = dlogits (f32) @ bf16 w."""
    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(w)
        return rb(x) @ rb(w).T

    @staticmethod
    def backward(ctx, g):
        (w,) = ctx.saved_tensors
        return g @ rb(w), None


class MatchAttn(torch.autograd.Function):
    """Softmax attention at dlm's bf16 rounding points (module docstring);
    q, k, v [B, NH, T, HS] (kv heads already repeated), mask [B, 1, T, T]."""
    @staticmethod
    def forward(ctx, q, k, v, mask, scale):
        qs, kb, vb = rb(q * scale), rb(k), rb(v)
        sc = (qs @ kb.transpose(-1, -2)).masked_fill(~mask, float('-inf'))
        # P rounded before the division by the row sum (online softmax)
        pu = (sc - sc.amax(-1, keepdim=True)).exp()
        l = pu.sum(-1, keepdim=True)
        o = (rb(pu) @ vb) / l
        p = pu / l
        ctx.save_for_backward(qs, kb, vb, p, o)
        ctx.scale = scale
        return o

    @staticmethod
    def backward(ctx, do):
        qs, kb, vb, p, o = ctx.saved_tensors
        D = (do * o).sum(-1, keepdim=True)
        ds = p * (rb(do) @ vb.transpose(-1, -2) - D)
        dq = (rb(ds) @ kb) * ctx.scale
        dk = rb(ds).transpose(-1, -2) @ qs
        dv = rb(p).transpose(-1, -2) @ rb(do)
        return dq, dk, dv, None, None


def attn_match(q, k, v, mask, HS):
    return MatchAttn.apply(q, k, v, mask, 1.0 / math.sqrt(HS))


def attn_f32(q, k, v, mask, HS):
    att = (q @ k.transpose(-1, -2)) / math.sqrt(HS)
    return att.masked_fill(~mask, float('-inf')).softmax(-1) @ v


def mm_match(a, b):
    return MatchMM.apply(a, b)


def head_match(x, w):
    return MatchHead.apply(x, w)


def mm_autocast(a, b):
    with torch.autocast("cpu", dtype=BF):
        y = a @ b
    return y.float()


def head_autocast(x, w):
    return mm_autocast(x, w.T)


def mm_f32(a, b):
    return a @ b


def head_f32(x, w):
    return x @ w.T


def forward(c, W, P, s, tokens, pos, seg, mm, head_mm, attn):
    """torch_ref.forward's llama / qwen2 path (mode lora) with every linear
    product through mm(a, b), the LM head through head_mm(x, w) and the
    attention through attn(q, k, v, mask, HS)."""
    B, T = tokens.shape
    inv = R.inv_freq_hf(c)
    freqs = pos.float()[..., None] * inv[None, None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    mask = causal[None] & (seg[:, :, None] == seg[:, None, :])

    def lin(x, l, blk, m):
        w = W[f'model.layers.{l}.{blk}.{m}.weight']
        b = W.get(f'model.layers.{l}.{blk}.{m}.bias')
        y = mm(x, w.T)
        if b is not None:
            y = y + b
        pre = f'base_model.model.model.layers.{l}.{blk}.{m}.'
        A, Bm = P[pre + 'lora_A.weight'], P[pre + 'lora_B.weight']
        return y + mm(mm(x, A.T), Bm.T) * s

    h = W['model.embed_tokens.weight'][tokens.long()]
    for l in range(c.L):
        p = f'model.layers.{l}.'
        x = R.rmsnorm(h, W[p + 'input_layernorm.weight'], c.eps)
        q = lin(x, l, 'self_attn', 'q_proj').view(B, T, c.NH, c.HS).transpose(1, 2)
        k = lin(x, l, 'self_attn', 'k_proj').view(B, T, c.KVH, c.HS).transpose(1, 2)
        v = lin(x, l, 'self_attn', 'v_proj').view(B, T, c.KVH, c.HS).transpose(1, 2)
        q = q * cos + R.rotate_half(q) * sin
        k = k * cos + R.rotate_half(k) * sin
        rep = c.NH // c.KVH
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        o = attn(q, k, v, mask[:, None], c.HS).transpose(1, 2).reshape(B, T, c.NH * c.HS)
        h = h + lin(o, l, 'self_attn', 'o_proj')
        x = R.rmsnorm(h, W[p + 'post_attention_layernorm.weight'], c.eps)
        a = torch.nn.functional.silu(lin(x, l, 'mlp', 'gate_proj')) * lin(x, l, 'mlp', 'up_proj')
        h = h + lin(a, l, 'mlp', 'down_proj')
    x = R.rmsnorm(h, W['model.norm.weight'], c.eps)
    head = W['model.embed_tokens.weight'] if c.tied else W['lm_head.weight']
    return head_mm(x, head)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--arch', choices=['llama', 'qwen2'], action='append', required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--seed', type=int, default=7)
    ap.add_argument('--fp32', action='store_true')
    a = ap.parse_args()
    for arch in a.arch:
        one(arch, a.out if len(a.arch) == 1 else os.path.join(a.out, arch), a.seed, a.fp32)


def one(arch, out, seed, fp32):
    c = R.make_cfg(arch)
    g = torch.Generator().manual_seed(seed)
    W = R.weights_init(c, g)
    os.makedirs(os.path.join(out, 'model'), exist_ok=True)
    cfg = {
        "architectures": [{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}[c.arch]],
        "model_type": c.arch, "hidden_size": c.C, "intermediate_size": c.F,
        "num_hidden_layers": c.L, "num_attention_heads": c.NH, "num_key_value_heads": c.KVH,
        "head_dim": c.HS, "vocab_size": c.V, "rms_norm_eps": c.eps, "rope_theta": c.theta,
        "tie_word_embeddings": c.tied, "max_position_embeddings": 128, "hidden_act": "silu",
        "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2,
    }
    if c.llama3:
        cfg["rope_scaling"] = {"rope_type": "llama3", "factor": c.factor, "low_freq_factor": c.lo,
                               "high_freq_factor": c.hi, "original_max_position_embeddings": c.orig}
    with open(os.path.join(out, 'model', 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=2)
    R.st_write(os.path.join(out, 'model', 'model.safetensors'), W)

    # torch_ref.py's batch: B=2 rows of T=12, row 0 packs two segments, masked targets
    B, T = 2, 12
    tokens = torch.randint(0, c.V, (B, T), generator=g, dtype=torch.int32)
    targets = torch.randint(0, c.V, (B, T), generator=g, dtype=torch.int32)
    targets[0, 5] = -1; targets[0, 11] = -1; targets[1, 0:3] = -1; targets[1, 11] = -1
    pos = torch.tensor([[0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5], list(range(T))], dtype=torch.int32)
    seg = torch.tensor([[0] * 6 + [1] * 6, [0] * T], dtype=torch.int32)
    R.st_write(os.path.join(out, 'batch.safetensors'),
               {'tokens': tokens, 'targets': targets, 'pos': pos, 'seg': seg})

    r, alpha = 4, 8.0
    s = alpha / r
    hp = dict(lr=2e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, max_grad_norm=0.5,
              warmup_ratio=0.2, steps=10, sched='cosine', rank=r, alpha=alpha)
    gl = torch.Generator().manual_seed(seed + 1)
    P = R.lora_init(c, W, gl, r, False)
    R.st_write(os.path.join(out, 'lora.init.safetensors'), P)
    variants = [('autocast', mm_autocast, head_autocast, attn_f32), ('match', mm_match, head_match, attn_match)]
    for variant, mm, head_mm, attn in variants + ([('fp32', mm_f32, head_f32, attn_f32)] if fp32 else []):
        params = {k: v.clone().requires_grad_(True) for k, v in P.items()}
        loss = R.loss_fn(forward(c, W, params, s, tokens, pos, seg, mm, head_mm, attn), targets)
        loss.backward()
        R.st_write(os.path.join(out, f'{variant}.grads.safetensors'), {k: v.grad for k, v in params.items()})
        losses, norms, final = R.adamw_steps(
            P, hp, lambda pp: R.loss_fn(forward(c, W, pp, s, tokens, pos, seg, mm, head_mm, attn), targets))
        with open(os.path.join(out, f'{variant}.json'), 'w') as f:
            json.dump(dict(hp, variant=variant, loss=float(loss), step_losses=losses, final_loss=final,
                           grad_norms=norms, scale=s, arch=c.arch), f, indent=1)
        print(f'torch_bf16: {c.arch} {variant}: loss {float(loss):.6f}, 10 steps -> {final:.6f}')


if __name__ == '__main__':
    main()
