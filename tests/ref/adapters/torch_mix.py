#!/usr/bin/python3
"""Reference for a weighted mix of LoRA adapters, written from HF + PEFT
conventions (not from dlm's code): each adapter folder is read as PEFT reads
it (adapter_config.json r, lora_alpha, target_modules; tensors
base_model.model.model.layers.{i}.{self_attn|mlp}.{m}.lora_A.weight [r, in]
and lora_B.weight [out, r]) and merged into the HF base's weights as
    W' = W + Σ wᵢ · (lora_alphaᵢ / rᵢ) · Bᵢ Aᵢ
(PEFT's merge_and_unload of each adapter scaled by its weight). The merged
model's logits of IDS_JSON go to OUT/logits.f32 and its greedy 32-token
continuation (full recompute each step) to OUT/greedy.json.

Usage: torch_mix.py MODEL_DIR IDS_JSON OUT_DIR W1:ADAPTER1 W2:ADAPTER2 ..."""
import json, os, sys
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'engine'))
import torch_ref as R        # noqa: E402
import torch_infer as I      # noqa: E402


def main():
    model, ids_path, out = sys.argv[1:4]
    c, W = I.load(model)
    merged = 0
    for spec in sys.argv[4:]:
        w, adir = spec.split(':', 1)
        w = float(w)
        cfg = json.load(open(os.path.join(adir, 'adapter_config.json')))
        assert cfg['peft_type'] == 'LORA' and not cfg.get('use_dora'), cfg
        P = I.st_read(os.path.join(adir, 'adapter_model.safetensors'))
        s = cfg['lora_alpha'] / cfg['r']
        for l in range(c.L):
            for blk, m in R.MODS:
                if m not in cfg['target_modules']:
                    continue
                pre = f'base_model.model.model.layers.{l}.{blk}.{m}.'
                A, B = P.pop(pre + 'lora_A.weight'), P.pop(pre + 'lora_B.weight')
                assert A.shape[0] == cfg['r'] and B.shape[1] == cfg['r']
                k = f'model.layers.{l}.{blk}.{m}.weight'
                W[k] = W[k] + w * s * (B.double() @ A.double()).float()
                merged += 1
        assert not P, sorted(P)[:4]   # nothing PEFT would not read
    ids = json.load(open(ids_path))
    os.makedirs(out, exist_ok=True)
    with torch.no_grad():
        T = len(ids)
        logits = R.forward(c, W, {}, 'base', 1.0, torch.tensor([ids], dtype=torch.int32),
                           torch.arange(T, dtype=torch.int32)[None], torch.zeros(1, T, dtype=torch.int32))[0]
        with open(os.path.join(out, 'logits.f32'), 'wb') as f:
            f.write(logits.numpy().astype('<f4').tobytes())
        seq = list(ids)
        for _ in range(32):
            n = len(seq)
            lg = R.forward(c, W, {}, 'base', 1.0, torch.tensor([seq], dtype=torch.int32),
                           torch.arange(n, dtype=torch.int32)[None], torch.zeros(1, n, dtype=torch.int32))[0, -1]
            seq.append(int(torch.argmax(lg)))
        json.dump(seq[len(ids):], open(os.path.join(out, 'greedy.json'), 'w'))
    print(f'torch_mix: {merged} projections merged, logits [{T}, {c.V}]')


if __name__ == '__main__':
    main()
