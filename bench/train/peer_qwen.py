#!/usr/bin/python3
"""Run ../shared/bench/torch_lora_peer.py with one extra shape, qwen2.5-0.5b
(Qwen2.5-0.5B's dimensions; the peer has no QKV bias, a rounding error in the
cost), and one extra option, --attn-std S: the q,k,v,o weights drawn with
std S instead of --init-std (bench/train/cmd.sh's extreme-attention case).
The peer is imported by path, not copied: it parses sys.argv when imported,
so the shape and option are swapped in after the import. $DLM_BENCH_SHARED
names the shared folder when it is not ../shared next to the repository
(a worktree)."""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
shared = os.environ.get('DLM_BENCH_SHARED') or os.path.join(here, '..', '..', '..', 'shared')
peer_dir = os.path.normpath(os.path.join(shared, 'bench'))
sys.path.insert(0, peer_dir)
argv = sys.argv[1:]
want = None
if '--shape' in argv:
    i = argv.index('--shape')
    want = argv[i + 1]
    argv[i + 1] = 'tiny'
attn_std = None
if '--attn-std' in argv:
    i = argv.index('--attn-std')
    attn_std = float(argv[i + 1])
    del argv[i:i + 2]
sys.argv = [sys.argv[0]] + argv
import torch_lora_peer as P  # noqa: E402

P.SHAPES['qwen2.5-0.5b'] = dict(n_layers=24, d_model=896, d_ff=4864, n_heads=14, n_kv_heads=2,
                                vocab=151936, rope_theta=1000000.0, eps=1e-6, tie=True)
if want:
    P.ARGS.shape = want
if attn_std is not None:
    build = P.build_model

    def build_attn(cfg, seed, init_std, *rest):
        W, LA = build(cfg, seed, init_std, *rest)
        for k in W:
            if any(k.endswith('self_attn.%s_proj.weight' % m) for m in 'qkvo'):
                W[k] = W[k] * (attn_std / init_std)
        return W, LA
    P.build_model = build_attn
P.torch.manual_seed(P.ARGS.seed)
{"train": P.run_train, "infer": P.run_infer, "gen": P.run_gen}[P.ARGS.mode](P.ARGS)
