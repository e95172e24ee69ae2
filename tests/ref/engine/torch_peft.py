#!/usr/bin/python3
"""Load a dlm adapter the way PEFT does — adapter_config.json (r, lora_alpha,
target_modules, use_dora) and adapter_model.safetensors with PEFT's tensor
names (base_model.model.model.layers.{i}.{self_attn|mlp}.{m}.lora_A.weight
[r, in], lora_B.weight [out, r], lora_magnitude_vector [out]; with
modules_to_save, base_model.model.model.embed_tokens.weight and
base_model.model.lm_head.weight replace those modules) — apply it to
the HF base in torch, and write the logits of IDS_JSON.

Usage: torch_peft.py MODEL_DIR ADAPTER_DIR IDS_JSON OUT_DIR"""
import json, os, sys
import torch

sys.path.insert(0, os.path.dirname(__file__))
import torch_ref as R        # noqa: E402
import torch_infer as I      # noqa: E402


def main():
    model, adir, ids_path, out = sys.argv[1:5]
    c, W = I.load(model)
    cfg = json.load(open(os.path.join(adir, 'adapter_config.json')))
    assert cfg['peft_type'] == 'LORA' and cfg['task_type'] == 'CAUSAL_LM', cfg
    P = I.st_read(os.path.join(adir, 'adapter_model.safetensors'))
    # modules_to_save: get_peft_model_state_dict's names for the wrapped
    # modules' weights; each replaces its module (PEFT's
    # ModulesToSaveWrapper), so a tied base's head becomes its own matrix
    mts = cfg.get('modules_to_save') or []
    assert set(mts) <= {'embed_tokens', 'lm_head'}, mts
    if mts:
        head = W['model.embed_tokens.weight'] if c.tied else W['lm_head.weight']
        if 'embed_tokens' in mts:
            W['model.embed_tokens.weight'] = P.pop('base_model.model.model.embed_tokens.weight')
        W['lm_head.weight'] = P.pop('base_model.model.lm_head.weight') if 'lm_head' in mts else head
        c.tied = False
    r, alpha = cfg['r'], cfg['lora_alpha']
    targets = set(cfg['target_modules'])
    # every name PEFT would look for must be there, and nothing else
    want = set()
    for l in range(c.L):
        for blk, m in R.MODS:
            if m in targets:
                pre = f'base_model.model.model.layers.{l}.{blk}.{m}.'
                want |= {pre + 'lora_A.weight', pre + 'lora_B.weight'}
                if cfg.get('use_dora'):
                    want.add(pre + 'lora_magnitude_vector')
    assert set(P) == want, (sorted(set(P) ^ want))[:5]
    # untargeted modules get B = 0 so the reference forward can treat all alike
    for l in range(c.L):
        for blk, m in R.MODS:
            pre = f'base_model.model.model.layers.{l}.{blk}.{m}.'
            if m not in targets:
                w = W[f'model.layers.{l}.{blk}.{m}.weight']
                P[pre + 'lora_A.weight'] = torch.zeros(r, w.shape[1])
                P[pre + 'lora_B.weight'] = torch.zeros(w.shape[0], r)
                if cfg.get('use_dora'):
                    P[pre + 'lora_magnitude_vector'] = torch.linalg.norm(w, dim=1)
    ids = json.load(open(ids_path))
    T = len(ids)
    with torch.no_grad():
        logits = R.forward(c, W, P, 'dora' if cfg.get('use_dora') else 'lora', alpha / r,
                           torch.tensor([ids], dtype=torch.int32), torch.arange(T, dtype=torch.int32)[None],
                           torch.zeros(1, T, dtype=torch.int32))[0]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, 'logits.f32'), 'wb') as f:
        f.write(logits.numpy().astype('<f4').tobytes())
    print(f'torch_peft: {len(P)} tensors, r={r} alpha={alpha} targets={sorted(targets)} modules_to_save={mts}')


if __name__ == '__main__':
    main()
