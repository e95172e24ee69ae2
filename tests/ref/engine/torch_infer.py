#!/usr/bin/python3
"""PyTorch reference for dlm's inference path: load an HF model folder
(config.json + safetensors, as written by tests/ref/make_model.py), compute
the logits of a token sequence and a 32-token greedy continuation, with the
HF-convention forward of torch_ref.py (independent of dlm's code).

Usage: torch_infer.py MODEL_DIR IDS_JSON OUT_DIR [--round-f16]
Writes OUT_DIR/logits.f32 ([T, V] little-endian float32) and
OUT_DIR/greedy.json ([ids...])."""
import json, os, struct, sys
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(__file__))
import torch_ref as R  # noqa: E402


def st_read(path):
    out = {}
    with open(path, 'rb') as f:
        n = struct.unpack('<Q', f.read(8))[0]
        h = json.loads(f.read(n))
        base = 8 + n
        data = open(path, 'rb').read()
    for k, v in h.items():
        if k == '__metadata__':
            continue
        b, e = v['data_offsets']
        raw = data[base + b:base + e]
        shape = v['shape']
        if v['dtype'] == 'F32':
            a = np.frombuffer(raw, dtype='<f4').reshape(shape)
        elif v['dtype'] == 'F16':
            a = np.frombuffer(raw, dtype='<f2').astype(np.float32).reshape(shape)
        elif v['dtype'] == 'BF16':
            u = np.frombuffer(raw, dtype='<u2').astype(np.uint32) << 16
            a = u.view(np.float32).reshape(shape)
        else:
            raise SystemExit('unsupported dtype ' + v['dtype'])
        out[k] = torch.tensor(np.array(a, dtype=np.float32))
    return out


def load(d):
    cfg = json.load(open(os.path.join(d, 'config.json')))
    W = {}
    for f in sorted(os.listdir(d)):
        if f.endswith('.safetensors'):
            W.update(st_read(os.path.join(d, f)))
    c = R.Cfg()
    a0 = cfg['architectures'][0]
    c.arch = 'smollm3' if 'SmolLM3' in a0 else 'mixtral' if 'Mixtral' in a0 else 'mistral' if 'Mistral' in a0 else 'olmo2' if 'Olmo2' in a0 else 'qwen3' if 'Qwen3' in a0 else 'qwen2' if 'Qwen2' in a0 else 'llama'
    c.L, c.C, c.NH = cfg['num_hidden_layers'], cfg['hidden_size'], cfg['num_attention_heads']
    c.KVH = cfg.get('num_key_value_heads', c.NH)
    c.HS = cfg.get('head_dim') or c.C // c.NH
    c.F, c.V = cfg['intermediate_size'], cfg['vocab_size']
    c.eps = cfg.get('rms_norm_eps', 1e-6)
    rp = cfg.get('rope_parameters') or {}
    c.theta = cfg.get('rope_theta', rp.get('rope_theta', 10000.0))
    sc = cfg.get('rope_scaling') or rp
    c.llama3 = (sc.get('rope_type') or sc.get('type')) == 'llama3'
    if c.llama3:
        c.factor, c.lo, c.hi, c.orig = sc['factor'], sc['low_freq_factor'], sc['high_freq_factor'], \
            sc['original_max_position_embeddings']
    c.tied = cfg.get('tie_word_embeddings', False) or 'lm_head.weight' not in W
    c.bias = c.arch == 'qwen2'
    c.qk_norm = {'qwen3': 'head', 'olmo2': 'full'}.get(c.arch)
    c.post_norm = c.arch == 'olmo2'
    c.window = (cfg.get('sliding_window', 4096) or 0) if c.arch == 'mistral' else 0   # MistralConfig's default
    c.E, c.K = 0, 0
    if c.arch == 'mixtral':   # MixtralConfig: no window by default, 8 experts, top 2
        c.window = cfg.get('sliding_window') or 0
        c.E, c.K = cfg.get('num_local_experts', 8), cfg.get('num_experts_per_tok', 2)
    c.no_rope = None
    if c.arch == 'smollm3':   # SmolLM3Config's default pattern when the list is absent
        iv = cfg.get('no_rope_layer_interval', 4)
        c.no_rope = cfg.get('no_rope_layers') or [int((i + 1) % iv != 0) for i in range(c.L)]
    return c, W



def seq_runner(forward, c, W, P=None, mode='base', s=1.0):
    """run(seq) -> logits [len(seq), V] of one unpacked sequence through a
    reference forward(c, W, P, mode, s, ids, pos, seg) (torch_ref's shape)."""
    def run(seq):
        n = len(seq)
        return forward(c, W, P or {}, mode, s, torch.tensor([seq], dtype=torch.int32),
                       torch.arange(n, dtype=torch.int32)[None], torch.zeros(1, n, dtype=torch.int32))[0]
    return run


def write_logits_greedy(run, ids, out, steps=32):
    """OUT/logits.f32 ([T, V] little-endian float32 of the prompt) and
    OUT/greedy.json (steps argmax tokens, each a full recompute)."""
    with torch.no_grad():
        with open(os.path.join(out, 'logits.f32'), 'wb') as f:
            f.write(run(ids).numpy().astype('<f4').tobytes())
        seq = list(ids)
        for _ in range(steps):
            seq.append(int(torch.argmax(run(seq)[-1])))
        json.dump(seq[len(ids):], open(os.path.join(out, 'greedy.json'), 'w'))


def main():
    d, ids_path, out = sys.argv[1], sys.argv[2], sys.argv[3]
    c, W = load(d)
    if len(sys.argv) > 4 and sys.argv[4] == '--round-f16':
        # emulate a GGUF that stores matrices as F16 (vectors stay F32)
        W = {k: (v.half().float() if v.dim() == 2 else v) for k, v in W.items()}
    ids = json.load(open(ids_path))
    os.makedirs(out, exist_ok=True)
    write_logits_greedy(seq_runner(R.forward, c, W), ids, out)
    print(f'torch_infer: {d}: logits [{len(ids)}, {c.V}], greedy 32')


if __name__ == '__main__':
    main()
