#!/usr/bin/python3
"""PyTorch reference for training.cpt.embed_warmup_steps (docs/cpt.md),
written from the formulas, not from dlm's code.

On the model and batch torch_ref.py wrote into DIR (model/, batch.safetensors,
lora.init.safetensors), runs S optimizer steps on the one batch where

  - the LoRA A/B of all seven projections train in every step;
  - in steps 1..N the input embedding and the LM head train too (a tied
    model: the one shared matrix, its gradient the sum of both uses);
    from step N+1 they get no gradient: torch.optim.AdamW skips a
    parameter whose .grad is None, so they keep their values and their
    own Adam step count stays N;
  - one torch.optim.AdamW (betas 0.9/0.999, eps 1e-8, weight decay 0.01 on
    every tensor, as transformers' Trainer decays embeddings), linear
    warmup + cosine (transformers' schedule), and
    clip_grad_norm_ over every parameter that has a gradient in the step.

Writes DIR/embed.json (hyper-parameters, step losses, pre-clip grad norms)
and DIR/embed.final.safetensors: the LoRA tensors under PEFT's names, and
"embed_tokens" and (untied) "lm_head" after the run.

Usage: torch_embed.py DIR [N] [S]"""
import json, math, os, struct, sys
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import torch_ref as R        # noqa: E402
import torch_infer as I      # noqa: E402

torch.set_num_threads(1)


def read_i32(path):
    raw = open(path, 'rb').read()
    n = struct.unpack('<Q', raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    return {k: torch.tensor(np.frombuffer(raw[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]],
                                          dtype='<i4').reshape(v['shape']).copy())
            for k, v in h.items() if k != '__metadata__'}


def main():
    d = sys.argv[1]
    N = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    S = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    c, W = I.load(os.path.join(d, 'model'))
    b = read_i32(os.path.join(d, 'batch.safetensors'))
    tokens, targets, pos, seg = (b[k].to(torch.int32) for k in ('tokens', 'targets', 'pos', 'seg'))
    P0 = I.st_read(os.path.join(d, 'lora.init.safetensors'))
    r, alpha = 4, 8.0
    hp = dict(lr=5e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, max_grad_norm=0.5,
              warmup_ratio=0.2, steps=S, warm=N, rank=r, alpha=alpha, tied=bool(c.tied))
    P = {k: v.clone().requires_grad_(True) for k, v in P0.items()}
    E = W['model.embed_tokens.weight'].clone().requires_grad_(True)
    H = None if c.tied else W['lm_head.weight'].clone().requires_grad_(True)
    names = sorted(P)
    every = [P[k] for k in names] + [E] + ([H] if H is not None else [])
    opt = torch.optim.AdamW(every, lr=hp['lr'], betas=(hp['beta1'], hp['beta2']), eps=hp['eps'],
                            weight_decay=hp['weight_decay'])
    warm_steps = math.ceil(S * hp['warmup_ratio'])

    def lam(k):
        if k < warm_steps:
            return k / max(1, warm_steps)
        return max(0.0, 0.5 * (1 + math.cos(math.pi * (k - warm_steps) / max(1, S - warm_steps))))
    sch = torch.optim.lr_scheduler.LambdaLR(opt, lam)
    losses, norms = [], []
    for k in range(S):
        opt.zero_grad(set_to_none=True)
        train_emb = k < N
        Wk = dict(W)
        Wk['model.embed_tokens.weight'] = E if train_emb else E.detach()
        if H is not None:
            Wk['lm_head.weight'] = H if train_emb else H.detach()
        lo = R.loss_fn(R.forward(c, Wk, P, 'lora', alpha / r, tokens, pos, seg), targets)
        lo.backward()
        with_grad = [p for p in every if p.grad is not None]
        norms.append(float(torch.nn.utils.clip_grad_norm_(with_grad, hp['max_grad_norm'])))
        opt.step()
        sch.step()
        losses.append(float(lo))
    out = {k: P[k].detach() for k in names}
    out['embed_tokens'] = E.detach()
    if H is not None:
        out['lm_head'] = H.detach()
    R.st_write(os.path.join(d, 'embed.final.safetensors'), out)
    with open(os.path.join(d, 'embed.json'), 'w') as f:
        json.dump(dict(hp, step_losses=losses, grad_norms=norms), f, indent=1)
    moved = float((E.detach() - W['model.embed_tokens.weight']).abs().max())
    print(f'torch_embed: {c.arch} {S} steps ({N} with the embeddings), loss {losses[0]:.5f} -> {losses[-1]:.5f},'
          f' embedding moved {moved:.3g}')


if __name__ == '__main__':
    main()
