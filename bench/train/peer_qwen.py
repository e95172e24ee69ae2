#!/usr/bin/python3
"""Run ../shared/bench/torch_lora_peer.py with one extra shape, qwen2.5-0.5b
(Qwen2.5-0.5B's dimensions; the peer has no QKV bias, a rounding error in the
cost). The peer is imported by path, not copied: it parses sys.argv when
imported, so the shape is swapped in after the import."""
import os
import sys

peer_dir = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'shared', 'bench'))
sys.path.insert(0, peer_dir)
argv = sys.argv[1:]
want = None
if '--shape' in argv:
    i = argv.index('--shape')
    want = argv[i + 1]
    argv[i + 1] = 'tiny'
sys.argv = [sys.argv[0]] + argv
import torch_lora_peer as P  # noqa: E402

P.SHAPES['qwen2.5-0.5b'] = dict(n_layers=24, d_model=896, d_ff=4864, n_heads=14, n_kv_heads=2,
                                vocab=151936, rope_theta=1000000.0, eps=1e-6, tie=True)
if want:
    P.ARGS.shape = want
P.torch.manual_seed(P.ARGS.seed)
{"train": P.run_train, "infer": P.run_infer, "gen": P.run_gen}[P.ARGS.mode](P.ARGS)
