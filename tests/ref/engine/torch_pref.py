#!/usr/bin/python3
"""PyTorch reference for dlm's preference losses (independent of dlm's code).

The model is torch_ref.py's random llama / qwen2 in Hugging Face's
conventions, with a LoRA policy on all seven projections (PEFT semantics).
The losses are written from TRL's documentation of DPOTrainer (loss_type
sigmoid, hinge, ipo; rewards = beta * (policy - reference) log-prob) and
ORPOTrainer (odds-ratio term with TRL's beta, plus the NLL of the chosen
completion), in HF conventions: logits[:, t] predict labels[:, t] (here
targets are already shifted), log-probs gathered with log_softmax and summed
over completion tokens (averaged for ipo and orpo).

Batch: P pairs, rows 2i (chosen) and 2i+1 (rejected) of a [2P, T] batch,
each a prompt followed by a completion, padded at the end. References:
  pre  - a second, frozen LoRA (the "pre_adapter": base + an earlier adapter)
  base - the base alone
Outputs in OUT: model/, pref_batch.safetensors, policy.init.safetensors,
ref_pre.safetensors, and per case <case>.grads.safetensors + <case>.json
(loss, per-pair log-probs, reference log-probs, rewards, 5 AdamW step
losses with TRL's defaults: linear decay, no warmup, no weight decay,
max_grad_norm 1).
Usage: torch_pref.py --arch llama|qwen2 --out DIR
"""
import argparse, json, math, os, sys
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ref as R  # noqa: E402  (the model in HF conventions, written independently of dlm)

torch.set_num_threads(1)


def completion_logps(logits, targets):
    """Sum of log p(target) over positions with a target, per row; and counts."""
    mask = targets >= 0
    lp = torch.log_softmax(logits, dim=-1)
    idx = targets.clamp(min=0).long()
    per = torch.gather(lp, 2, idx[..., None]).squeeze(-1) * mask
    return per.sum(-1), mask.sum(-1)


def losses(kind, beta, pol, cnt, ref, logits, targets):
    pc, pr = pol[0::2], pol[1::2]
    nc, nr = cnt[0::2].float(), cnt[1::2].float()
    if kind == 'orpo':
        # TRL ORPOTrainer: average log-probs; log odds ratio; loss = nll - mean(beta * logsigmoid(log_odds))
        ac, ar = pc / nc, pr / nr
        log_odds = (ac - ar) - (torch.log1p(-torch.exp(ac)) - torch.log1p(-torch.exp(ar)))
        ratio = F.logsigmoid(log_odds)
        V = logits.shape[-1]
        ch_logits, ch_targets = logits[0::2], targets[0::2]
        nll = F.cross_entropy(ch_logits.reshape(-1, V), ch_targets.reshape(-1).long(), ignore_index=-1)
        loss = nll - (beta * ratio).mean()
        return loss, beta * ac.detach(), beta * ar.detach()
    rc, rr = ref[0::2], ref[1::2]
    if kind == 'ipo':  # TRL: ipo compares per-token averages
        pc, pr, rc, rr = pc / nc, pr / nr, rc / nc, rr / nr
    logits_ = (pc - pr) - (rc - rr)
    if kind == 'sigmoid':
        l = -F.logsigmoid(beta * logits_)
    elif kind == 'hinge':
        l = torch.relu(1 - beta * logits_)
    else:
        l = (logits_ - 1 / (2 * beta)) ** 2
    return l.mean(), beta * (pc - rc).detach(), beta * (pr - rr).detach()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--arch', choices=['llama', 'qwen2'], required=True)
    ap.add_argument('--out', required=True)
    ap.add_argument('--seed', type=int, default=11)
    a = ap.parse_args()
    c = R.make_cfg(a.arch)
    g = torch.Generator().manual_seed(a.seed)
    W = R.weights_init(c, g)
    os.makedirs(os.path.join(a.out, 'model'), exist_ok=True)
    cfg = {
        "architectures": ["LlamaForCausalLM" if c.arch == 'llama' else "Qwen2ForCausalLM"],
        "model_type": c.arch, "hidden_size": c.C, "intermediate_size": c.F,
        "num_hidden_layers": c.L, "num_attention_heads": c.NH, "num_key_value_heads": c.KVH,
        "head_dim": c.HS, "vocab_size": c.V, "rms_norm_eps": c.eps, "rope_theta": c.theta,
        "tie_word_embeddings": c.tied, "max_position_embeddings": 128, "hidden_act": "silu",
        "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2,
    }
    if c.llama3:
        cfg["rope_scaling"] = {"rope_type": "llama3", "factor": c.factor, "low_freq_factor": c.lo,
                               "high_freq_factor": c.hi, "original_max_position_embeddings": c.orig}
    with open(os.path.join(a.out, 'model', 'config.json'), 'w') as f:
        json.dump(cfg, f, indent=2)
    R.st_write(os.path.join(a.out, 'model', 'model.safetensors'), W)

    # 3 pairs; (prompt length, chosen length, rejected length), T = 14
    shapes = [(4, 5, 3), (6, 2, 7), (3, 9, 6)]
    P, T = len(shapes), 14
    tokens = torch.zeros(2 * P, T, dtype=torch.int32)
    targets = torch.full((2 * P, T), -1, dtype=torch.int32)
    for i, (lp, lc, lr) in enumerate(shapes):
        prompt = torch.randint(3, c.V, (lp,), generator=g, dtype=torch.int32)
        for k, lcomp in ((0, lc), (1, lr)):
            comp = torch.randint(3, c.V, (lcomp,), generator=g, dtype=torch.int32)
            seq = torch.cat([prompt, comp])           # inputs and labels share the sequence
            n = len(seq) - 1                         # inputs 0..n-1 predict 1..n
            row = 2 * i + k
            tokens[row, :n] = seq[:n]
            # HF labels: -100 on the prompt; only completion tokens are predicted
            for t in range(n):
                if t + 1 >= lp:
                    targets[row, t] = seq[t + 1]
    pos = torch.arange(T, dtype=torch.int32).repeat(2 * P, 1)
    seg = torch.zeros(2 * P, T, dtype=torch.int32)
    R.st_write(os.path.join(a.out, 'pref_batch.safetensors'),
               {'tokens': tokens, 'targets': targets, 'pos': pos, 'seg': seg})

    r, alpha = 4, 8.0
    s = alpha / r
    P0 = R.lora_init(c, W, torch.Generator().manual_seed(a.seed + 1), r, False)
    Pref = R.lora_init(c, W, torch.Generator().manual_seed(a.seed + 2), r, False)
    R.st_write(os.path.join(a.out, 'policy.init.safetensors'), P0)
    R.st_write(os.path.join(a.out, 'ref_pre.safetensors'), Pref)
    with torch.no_grad():
        ref_lp = {
            'pre': completion_logps(R.forward(c, W, Pref, 'lora', s, tokens, pos, seg), targets)[0],
            'base': completion_logps(R.forward(c, W, {}, 'none', s, tokens, pos, seg), targets)[0],
        }
    cases = [('sigmoid', 'pre', 0.3), ('sigmoid', 'base', 0.3), ('hinge', 'pre', 0.3), ('hinge', 'base', 0.3),
             ('ipo', 'pre', 0.3), ('ipo', 'base', 0.3), ('orpo', None, 0.25)]
    lr0, steps = 1e-3, 5
    for kind, refname, beta in cases:
        name = kind + ('_' + refname if refname else '')
        ref = ref_lp[refname] if refname else None
        params = {k: v.clone().requires_grad_(True) for k, v in P0.items()}
        logits = R.forward(c, W, params, 'lora', s, tokens, pos, seg)
        pol, cnt = completion_logps(logits, targets)
        loss, rch, rrj = losses(kind, beta, pol, cnt, ref, logits, targets)
        loss.backward()
        R.st_write(os.path.join(a.out, f'{name}.grads.safetensors'), {k: v.grad for k, v in params.items()})
        # five AdamW steps, TRL/TrainingArguments defaults: linear decay, no warmup, no weight decay
        params = {k: v.clone().requires_grad_(True) for k, v in P0.items()}
        names = sorted(params)
        opt = torch.optim.AdamW([params[k] for k in names], lr=lr0, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
        sch = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: max(0.0, (steps - k) / steps))
        step_losses = []
        for _ in range(steps):
            opt.zero_grad()
            lg = R.forward(c, W, params, 'lora', s, tokens, pos, seg)
            pl, ct = completion_logps(lg, targets)
            l, _, _ = losses(kind, beta, pl, ct, ref, lg, targets)
            l.backward()
            torch.nn.utils.clip_grad_norm_([params[k] for k in names], 1.0)
            opt.step()
            sch.step()
            step_losses.append(float(l))
        with open(os.path.join(a.out, f'{name}.json'), 'w') as f:
            json.dump(dict(kind=kind, reference=refname, beta=beta, rank=r, alpha=alpha, lr=lr0, steps=steps,
                           loss=float(loss), policy_logps=pol.detach().tolist(),
                           ref_logps=ref.tolist() if ref is not None else None,
                           rewards_chosen=rch.tolist(), rewards_rejected=rrj.tolist(),
                           step_losses=step_losses), f, indent=1)
    print(f'torch_pref: wrote {a.out} ({c.arch}, {len(cases)} cases)')


if __name__ == '__main__':
    main()
