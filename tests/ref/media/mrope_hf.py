"""Reference for dlm's M-RoPE (r1303): transformers' Qwen2VLModel.get_rope_index
and Qwen2VLRotaryEmbedding + apply_rotary_pos_emb on a small random config.

A sequence of text, a 6x6-patch image (9 tokens), text, a 2x14-patch image
(7 tokens) and text. Writes into DIR: ids.i32, pos.i32 [3][N], delta.txt,
cos.f32 / sin.f32 [N][HS] (transformers' full tables), q.f32 and
q_rot.f32 [N][H][HS] (q rotated by apply_rotary_pos_emb), cfg.txt
("H HS theta s0 s1 s2 image_token_id").
"""
import os, sys

import numpy as np
import torch
from transformers import Qwen2VLConfig
from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel, apply_rotary_pos_emb

out = sys.argv[1]
torch.manual_seed(1303)
H, HS, sec, theta = 4, 16, [2, 3, 3], 10000.0
cfg = Qwen2VLConfig(
    text_config=dict(hidden_size=H * HS, num_attention_heads=H, num_key_value_heads=2, intermediate_size=64,
                     num_hidden_layers=1, vocab_size=300, rope_parameters={"rope_type": "default", "rope_theta": theta,
                                                                           "mrope_section": sec}),
    vision_config=dict(depth=1, embed_dim=32, hidden_size=H * HS, num_heads=2),
    image_token_id=299, vision_start_token_id=297, vision_end_token_id=298)
model = Qwen2VLModel(cfg).eval()
img = cfg.image_token_id
ids = [5, 6, 7, 297] + [img] * 9 + [298, 8, 9, 10, 297] + [img] * 7 + [298, 11, 12]
ids_t = torch.tensor([ids])
tt = (ids_t == img).int()
grid = torch.tensor([[1, 6, 6], [1, 2, 14]])
pos, delta = model.get_rope_index(ids_t, tt, image_grid_thw=grid)
N = len(ids)
q = torch.randn(1, H, N, HS)
with torch.no_grad():
    cos, sin = model.language_model.rotary_emb(q, pos)
    q_rot, _ = apply_rotary_pos_emb(q, q, cos, sin)
np.array(ids, dtype=np.int32).tofile(os.path.join(out, "ids.i32"))
pos[:, 0, :].numpy().astype(np.int32).tofile(os.path.join(out, "pos.i32"))
cos[0].numpy().astype(np.float32).tofile(os.path.join(out, "cos.f32"))
sin[0].numpy().astype(np.float32).tofile(os.path.join(out, "sin.f32"))
q[0].transpose(0, 1).contiguous().numpy().astype(np.float32).tofile(os.path.join(out, "q.f32"))
q_rot[0].transpose(0, 1).contiguous().numpy().astype(np.float32).tofile(os.path.join(out, "q_rot.f32"))
open(os.path.join(out, "delta.txt"), "w").write(f"{int(delta.reshape(-1)[0])}\n")
open(os.path.join(out, "cfg.txt"), "w").write(f"{H} {HS} {theta} {sec[0]} {sec[1]} {sec[2]} {img}\n")
print(f"mrope_hf: N={N}, delta={int(delta.reshape(-1)[0])}, pos[:, -3:]={pos[:, 0, -3:].tolist()}")
